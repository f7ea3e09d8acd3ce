"""What in a submission's own code reaches past its answers: read from the notebook's source by
the grader, before and outside the kernel, so nothing the submission runs can hide it.

The graded checks put back what a submission changed in the checkers' code (:mod:`.seal`), but a
submission runs in the same interpreter as the checks, so code that reaches the interpreter
itself (its builtins, the kernel's input and exception handlers, the objects the seal keeps) can
still change a grade. :func:`findings` names every use of the means to, in the cells a student
wrote or changed (the instructor's own cells are not read): the grader then withholds that
notebook's points, with the findings in grades.csv, for the instructor to read the cells. None of
them has a place in an answer to the workbook's exercises (``tests/test_course_tampering.py``
checks that the reference answers use none).
"""

from __future__ import annotations

import ast

__all__ = ["findings", "NAMES", "MODULES", "ATTRIBUTES", "DUNDERS_ALLOWED", "MAGICS_ALLOWED"]

#: names that run code from strings, reach a scope's namespace or set attributes by name
NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "globals",
        "locals",
        "vars",
        "setattr",
        "delattr",
        "get_ipython",
        "breakpoint",
        "__builtins__",
    }
)
#: modules that reach the interpreter, the kernel or memory
MODULES = frozenset({"builtins", "gc", "ctypes", "IPython", "ipykernel"})
#: attributes of the interpreter's machinery: loaded modules, frames, hooks, closure cells
ATTRIBUTES = frozenset(
    {
        "modules",
        "meta_path",
        "path_hooks",
        "settrace",
        "setprofile",
        "excepthook",
        "displayhook",
        "_getframe",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "cell_contents",
    }
)
#: double-underscore attributes an answer may use (every other one reaches an object's insides)
DUNDERS_ALLOWED = frozenset({"__init__", "__name__", "__doc__", "__qualname__", "__post_init__"})


#: IPython magics a student may use: they time code (read as that code) or set up plots
MAGICS_ALLOWED = ("%%timeit", "%%time", "%timeit", "%time", "%matplotlib")


def _python(src: str) -> str:
    """``src`` with the allowed magics replaced by the code they run (nothing for a plot's
    set-up); any other magic or shell command is left, so the cell does not parse."""
    out = []
    for line in src.splitlines():
        stripped = line.strip()
        magic = next((m for m in MAGICS_ALLOWED if stripped.split(" ")[0] == m), None)
        if magic is None:
            out.append(line)
        elif magic in ("%time", "%timeit"):
            out.append(stripped[len(magic) :].strip())
        else:
            out.append("")
    return "\n".join(out)


def _imported(trees) -> set[str]:
    """Names any cell binds by an import: modules and what was imported from them."""
    out = set()
    for tree in trees:
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


def _root(node) -> str | None:
    """The name an attribute or subscript chain starts from (``a`` of ``a.b[c].d``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return node.targets
    return []


def _dynamic_import(call: ast.Call) -> str | None:
    """What ``__import__(...)`` imports: the module it names, "" when named at run time, None
    when the call is not one."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "__import__"):
        return None
    arg = call.args[0] if call.args else None
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""


def _in_tree(tree, imported: set[str]) -> list[tuple[int, str]]:
    out = []
    for n in ast.walk(tree):
        line = getattr(n, "lineno", 0)
        module = _dynamic_import(n) if isinstance(n, ast.Call) else None
        if module == "":
            out.append((line, "imports a module it names at run time (__import__)"))
        elif module is not None and module.split(".")[0] in MODULES:
            out.append((line, f"imports {module}"))
        elif isinstance(n, ast.Name) and n.id in NAMES:
            out.append((line, f"uses {n.id}"))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            names += [a.name for a in n.names] if isinstance(n, ast.Import) else []
            for name in names:
                if name.split(".")[0] in MODULES:
                    out.append((line, f"imports {name}"))
        elif isinstance(n, ast.Attribute):
            dunder = n.attr.startswith("__") and n.attr.endswith("__")
            if n.attr in ATTRIBUTES or (dunder and n.attr not in DUNDERS_ALLOWED):
                out.append((line, f"uses the attribute .{n.attr}"))
        for target in _targets(n):
            for t in ast.walk(target):
                root = _root(t) if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                if root in imported:
                    out.append((line, f"changes {ast.unparse(t)}, part of what it imported"))
                    break
    return out


def findings(sources: list[tuple[str, str]], instructor: list[str]) -> list[str]:
    """``sources``: (cell label, code) of a submission's code cells, in order; ``instructor``:
    the instructor notebook's code cells. What the cells that are not the instructor's, word for
    word, do to reach past their answers: "cell <label>, line <n>: <what>" each, in order."""
    library = set(instructor)
    trees = []
    for _, src in sources:
        try:
            trees.append(ast.parse(_python(src)))
        except SyntaxError:
            trees.append(None)
    imported = _imported(t for t in trees if t is not None)
    for src in instructor:  # what the notebook's own cells import, whether or not they ran
        try:
            imported |= _imported([ast.parse(src)])
        except SyntaxError:
            continue
    out = []
    for (label, src), tree in zip(sources, trees):
        if src in library or not src.strip():
            continue
        if tree is None:
            out.append(
                f"cell {label}: does not parse as Python (an IPython magic or shell command runs "
                "code the grader cannot read)"
            )
            continue
        for line, what in sorted(set(_in_tree(tree, imported))):
            out.append(f"cell {label}, line {line}: {what}")
    return out
