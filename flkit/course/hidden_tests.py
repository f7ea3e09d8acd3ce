"""The grading copy of an instructor notebook: hidden tests that call the sealed ``require``.

The instructor's hidden tests read ``require(check_x, answer, ...)``, with ``check_x`` and
``require`` names a submission can rebind, or whose modules it can change, before they run.
:func:`seal_hidden_tests` rewrites each such call, in the copy nbgrader grades with, into
``<token>("flkit.papers.<slug>.exercise", "check_x", answer, ...)``: the graded ``require`` that
:func:`.seal.install` puts into the kernel's builtins under the grading's random ``token`` (a
name no submission can know in advance), which takes the checker from what was kept before the
submission ran. :func:`seal_cell` is the cell the grader runs first in every submission.
"""

from __future__ import annotations

import ast

from ..utils import FlkitError

__all__ = ["seal_hidden_tests", "seal_cell", "BEGIN", "END", "SEAL_CELL_ID"]

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SEAL_CELL_ID = "flkit-grader-seal"


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def _imports(nb: dict) -> dict[str, str]:
    """{name a code cell binds by an import: the dotted path it names}."""
    out = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(_src(cell))
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and not n.level:
                out.update({a.asname or a.name: f"{n.module}.{a.name}" for a in n.names})
            elif isinstance(n, ast.Import):  # import a.b as x binds a.b; import a.b binds a
                for a in n.names:
                    top = a.name.split(".")[0]
                    out[a.asname or top] = a.name if a.asname else top
    return out


def _dotted(node, imports: dict[str, str]) -> str | None:
    """The dotted path of a checker expression (``check_x`` or ``exercise.check_x``)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imports:
        return None
    return ".".join([imports[node.id], *reversed(parts)])


def _is_require(call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "require") or (
        isinstance(f, ast.Attribute) and f.attr == "require"
    )


def _rewrite(block: str, token: str, imports: dict[str, str], where: str) -> tuple[str, set]:
    tree = ast.parse(block)
    lines = block.splitlines()
    modules: set[str] = set()
    for stmt in reversed(tree.body):  # from the end: the line numbers before stay valid
        calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and _is_require(n) and n.args]
        if not calls:
            continue
        call = calls[0]
        path = _dotted(call.args[0], imports)
        simple = isinstance(stmt, ast.Expr) and stmt.value is call and len(calls) == 1
        if path is None or "." not in path or not simple:
            raise FlkitError(
                f"{where}: the hidden test {ast.unparse(stmt)!r} cannot be graded sealed; write "
                "it as require(<checker imported from its module>, <answers>) on a line of its own"
            )
        module, name = path.rsplit(".", 1)
        modules.add(module)
        rest = [ast.get_source_segment(block, a) for a in call.args[1:]]
        rest += [ast.get_source_segment(block, k) for k in call.keywords]
        indent = lines[stmt.lineno - 1][: stmt.col_offset]
        new = f"{indent}{token}({', '.join([repr(module), repr(name), *rest])})"
        lines[stmt.lineno - 1 : stmt.end_lineno] = [new]
    return "\n".join(lines), modules


def seal_hidden_tests(nb: dict, token: str, where: str = "notebook") -> list[str]:
    """Rewrite, in place, every ``require(checker, ...)`` of ``nb``'s hidden tests into a call
    of the sealed ``require`` named ``token``; the checker modules they use, sorted. FlkitError
    when a hidden test's checker cannot be traced to the module it was imported from."""
    imports = _imports(nb)
    modules: set[str] = set()
    for cell in nb.get("cells", []):
        src = _src(cell)
        if cell.get("cell_type") != "code" or BEGIN not in src:
            continue
        head, rest = src.split(BEGIN, 1)
        block, tail = rest.split(END, 1)
        label = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", cell.get("id"))
        new, used = _rewrite(block, token, imports, f"{where}, cell {label}")
        modules |= used
        cell["source"] = head + BEGIN + new + ("\n" if not new.endswith("\n") else "") + END + tail
    return sorted(modules)


def seal_cell(token: str, modules: list[str]) -> dict:
    """The code cell the grader runs before a submission's first cell."""
    source = (
        "# added by flkit course grade: keeps what the graded checks use before the submission "
        "runs\n# (docs/TEACHING.md, 'What the grader protects against')\n"
        f'__import__("flkit.course.seal", fromlist=["install"]).install({token!r}, {modules!r})\n'
    )
    return {
        "cell_type": "code",
        "id": SEAL_CELL_ID,
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": source,
    }
