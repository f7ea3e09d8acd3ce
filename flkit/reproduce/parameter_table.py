"""What ``flkit reproduce --list-parameters NOTEBOOK`` prints: the notebook's parameters cell as
a table of name, type, default and comment, as papermill's ``--help-notebook`` reads them, with
the preset's value beside each parameter that overrides a preset key."""

from __future__ import annotations

import ast
import io
import tokenize

from ..utils import FlkitError
from ..workbook import presets
from .plan import (
    RESERVED_PARAMETERS,
    cell_source,
    default_notebooks_dir,
    discover,
    match_notebook,
    parameters_cell,
)

__all__ = ["parameter_table"]


def _comments(text: str) -> dict[int, str]:
    """{line number: the comment on it} of a cell's source."""
    out = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def parameter_table(notebook: str, notebooks_dir=None, preset: str = "cpu") -> str:
    """The parameters cell of ``notebook`` as a table: name, type, default (as written) and the
    comment beside it, as papermill's --help-notebook; a parameter that overrides a preset key
    (its default None keeps the preset's value) shows that key's type and value at ``preset``."""
    found = discover(notebooks_dir)
    if not found:
        raise FlkitError(
            f"no notebooks with a preset file in {notebooks_dir or default_notebooks_dir()}"
        )
    name = match_notebook(notebook, sorted(found))
    cell = parameters_cell(found[name])
    if cell is None:
        raise FlkitError(f"notebook {found[name]} has no code cell tagged 'parameters'")
    text = cell_source(cell)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise FlkitError(f"the parameters cell of {found[name]} does not parse: {e}") from None
    values = dict(presets.load(name, preset))  # an unknown preset: the error lists the known
    comments = _comments(text)
    rows = [("name", "type", "default", "comment")]
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        key = target.id
        default = ast.get_source_segment(text, node.value)
        try:
            kind = type(ast.literal_eval(node.value)).__name__
        except ValueError:
            kind = "expression"
        note = next(
            (comments[i] for i in range(node.lineno, node.end_lineno + 1) if i in comments), ""
        )
        if key == "preset":
            kind = "str or None"
            note += f" [set with --preset: {', '.join(presets.available(name))}]"
        elif key in RESERVED_PARAMETERS:
            note += f" [set with --{key}s]"
        elif kind == "NoneType" and key in values:
            kind = f"{type(values[key]).__name__} or None"
            note += f" [{preset}: {values[key]!r}]"
        rows.append((key, kind.replace("NoneType", "None"), default, note.strip()))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    head = (
        f"parameters of {name} ({found[name]}): set one with --set NAME=VALUE; in [brackets] "
        f"the value at preset {preset} that None keeps"
    )
    lines = ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    return "\n".join([head, *(line.rstrip() for line in lines)])
