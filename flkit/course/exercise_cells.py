"""Which cells of a submitted notebook the grading has to run.

Grades come only from the graded check cells, so ``grade(..., run="exercises")`` runs a
submission with the workbook's own library cells skipped when nothing the exercises run needs
them: those cells re-compute the notebook's figures and tables (the smoke training), the answers
never use them (``tests/test_course.py`` checks that no non-graded cell uses an answer), and the
checkers take their inputs from the library, not from the notebook's results.

What always runs: every cell with nbgrader metadata (answers, check cells, locked cells), and every
code cell that is not, character for character, one of the instructor's non-graded code cells (a
cell the student wrote or changed). An instructor cell runs when it defines a name that a cell
running after it uses (the names a graded check uses are read from the instructor's version, its
hidden tests included), and then its own names are needed in turn. A notebook with a cell that
does not parse (an IPython magic: what it reads is unknown) runs in full. The check is by names: a
cell whose only effect is a side effect (a plot, a report entry) is skipped; the grades are those
of the full run (``tests/test_course.py`` compares the two on the workbook's notebooks).
"""

from __future__ import annotations

import ast

SKIPPED = (
    "# skipped by the autograder: no exercise uses what this cell computes\n"
    "# (flkit course grade --run all runs every cell)\n"
)


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _outer(node):
    """``node`` and what lies below it in the same scope (a nested scope's node, not its body)."""
    yield node
    if isinstance(node, _SCOPES):
        return
    for child in ast.iter_child_nodes(node):
        yield from _outer(child)


def _bound(nodes) -> set[str]:
    """Names the nodes bind or change (``P["x"] = 1`` and ``obj.attr += 1`` change P, obj)."""
    out = set()
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {m.id for t in targets for m in ast.walk(t) if isinstance(m, ast.Name)}
    return out


def _read(n: ast.Name) -> bool:
    return isinstance(n.ctx, ast.Load)


def _local(node) -> set[str]:
    """Names local to the functions, classes, lambdas and comprehensions inside ``node``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, _SCOPES):
            out |= {a.arg for a in ast.walk(n) if isinstance(a, ast.arg)}
            out |= _bound(m for m in ast.walk(n) if m is not n)
    return out


def names(src: str) -> tuple[set[str], set[str]] | None:
    """(names the code binds or changes, names it reads before binding them); None when it does
    not parse."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    defined, free = set(), set()
    for stmt in tree.body:
        loads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and _read(n)}
        free |= loads - defined - _local(stmt)
        defined |= _bound(_outer(stmt))
    return defined, free


def skip_unneeded(nb: dict, instructor: dict) -> int:
    """Replace, in ``nb`` (a submitted notebook), the source of every instructor cell that no
    graded cell needs with a comment saying so; return how many cells were skipped."""
    library = {
        _src(c)
        for c in instructor.get("cells", [])
        if c.get("cell_type") == "code" and not _nbgrader(c)
    }
    # the instructor's graded cells, hidden tests included: what the autograder will run
    reference = {
        _nbgrader(c)["grade_id"]: _src(c)
        for c in instructor.get("cells", [])
        if _nbgrader(c).get("grade_id")
    }
    code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    if any(names(_src(c)) is None for c in code):
        return 0
    needed: set[str] = set()
    skipped = []
    for cell in reversed(code):
        src = _src(cell)
        found = names(src)
        optional = not _nbgrader(cell) and src in library
        if optional and not found[0] & needed:
            skipped.append(cell)
            continue
        for text in (src, reference.get(_nbgrader(cell).get("grade_id") or "", "")):
            got = names(text)
            needed |= got[1] if got else set()
    for cell in skipped:
        cell["source"] = SKIPPED
        cell["outputs"] = []
        cell["execution_count"] = None
    return len(skipped)
