"""A decision as a paper's README quotes it: the rule in words, the recorded table with whether
each row passes and which is chosen, and the outcome, kept up to date between
``<!-- decision: <name> -->`` and ``<!-- /decision -->`` (:mod:`flkit.workbook.decisions`
holds the decisions themselves)."""

from __future__ import annotations

import re

from ..utils import FlkitError
from .decisions import Decision, decide, load, missing_value, paper_folder

__all__ = ["markdown", "quote_readme"]


def _md(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(_md, v))
    return (
        "" if missing_value(v) else f"{v:g}" if isinstance(v, float) else str(v).replace("|", "\\|")
    )


def markdown(decision: Decision) -> str:
    """The decision as a README quotes it: its rule in words, its recorded table with whether
    each row passes and which is chosen, and the outcome."""
    out = decide(decision)
    cols = list(out.rows.columns)
    lines = [f"Rule: {decision.text}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md(r[c]) for c in cols) + " |" for _, r in out.rows.iterrows()]
    return "\n".join([*lines, "", out.text()])


_BLOCK = re.compile(r"^(<!-- decision: (\w+) -->\n)(.*?)(^<!-- /decision -->)", re.DOTALL | re.M)


def quote_readme(paper, write: bool = False) -> list[str]:
    """The decisions a paper's README quotes out of date: each block between
    ``<!-- decision: <name> -->`` and ``<!-- /decision -->`` must be :func:`markdown` of that
    decision; ``write=True`` rewrites them. FlkitError for a block naming no decision."""
    folder = paper_folder(paper)
    readme, known, stale = folder / "README.md", load(folder), []

    def fill(m):
        if m.group(2) not in known:
            raise FlkitError(
                f"{readme} quotes decision {m.group(2)!r}; accepted: {sorted(known) or 'none'}"
            )
        body = markdown(known[m.group(2)]) + "\n"
        if m.group(3) != body:
            stale.append(m.group(2))
        return m.group(1) + body + m.group(4)

    new = _BLOCK.sub(fill, readme.read_text(encoding="utf-8"))
    if write and stale:
        readme.write_text(new, encoding="utf-8")
    return stale
