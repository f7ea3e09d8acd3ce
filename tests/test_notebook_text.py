"""The notebooks' markdown is for a student: short cells about the idea, no maintainers' notes.

A markdown cell may hold at most ``MAX_WORDS`` words (whitespace-separated tokens, formulas and
code spans included: a long formula is as much to read as a long sentence). It may not name the
library's internals or the history of a measurement: a module path (``flkit.x``, ``flkit/x``, a
``.py`` or ``.toml`` file, or a backticked ``module.name`` whose first part is one of flkit's
modules), a commit hash, an ISO date, or the load of the machine a measurement ran on. Those
belong in the paper's README (decisions, settings), which a cell may link, or in ``benchmarks/``
(measurements).

Each notebook also has one glossary cell (preset, seed, the four verdicts, regime indicator), an
introduction that lists the graded exercises with their points and links to them, and a closing
references cell whose BibTeX is the one in the paper's README.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS = 150


def _module_names() -> dict[str, set[str]]:
    """{module: the names it defines at top level}, for every module of the library: so
    `regime.late_rise` names an internal, while `state.model` (an attribute the exercise
    uses) or `torch.topk` does not."""
    names: dict[str, set[str]] = {}
    for path in (ROOT / "flkit").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = names.setdefault(
            path.parent.name if path.stem == "__init__" else path.stem, set()
        )
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


MODULES = _module_names()
INTERNAL = {
    "module path": re.compile(r"\bflkit[./][\w./-]*\w"),
    "source file": re.compile(r"\b[\w/-]+\.(?:py|toml)\b"),
    "commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "machine load": re.compile(
        r"\bshared with other\b|\bother jobs\b|\bload average\b|\bunder (?:heavy )?load\b"
        r"|\b(?:was|were|heavily) loaded\b|\bbusy machine\b|\bidle machine\b",
        re.IGNORECASE,
    ),
}
DOTTED = re.compile(r"`(\w+)\.(\w+)")  # `module.function`, as a backticked code span starts
GLOSSARY = ("preset", "seed", "holds", "does not hold", "outside regime", "inconclusive")


def _markdown(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        (i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
    ]


def words(text: str) -> int:
    return len(text.split())


def internal_names(text: str) -> list[str]:
    """What in ``text`` names an internal or a measurement's history, as 'kind: match'."""
    found = [
        f"{kind}: {m.group(0)}"
        for kind, rx in INTERNAL.items()
        for m in rx.finditer(text)
        if not m.group(0).endswith(".md")  # a link to a paper's README is where details live
    ]
    found += [
        f"module: {m.group(0)}`"
        for m in DOTTED.finditer(text)
        if m.group(2) in MODULES.get(m.group(1), ())
    ]
    return found


def offending_cells(path: Path) -> list[str]:
    """One line per markdown cell over the word limit or naming an internal."""
    bad = []
    for i, text in _markdown(path):
        why = []
        if words(text) > MAX_WORDS:
            why.append(f"{words(text)} words")
        why += internal_names(text)
        if why:
            bad.append(f"{path.name} cell {i}: {'; '.join(why)}")
    return bad


def test_there_are_notebooks():
    assert len(NOTEBOOKS) == 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_is_short_and_names_no_internal(path):
    bad = offending_cells(path)
    assert not bad, (
        f"markdown cells over {MAX_WORDS} words or naming an internal (move the detail to the "
        "paper's README, the measurement to benchmarks/):\n" + "\n".join(bad)
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_glossary_cell(path):
    glossaries = [
        i
        for i, text in _markdown(path)
        if all(w in text.lower() for w in GLOSSARY + ("regime indicator",))
    ]
    assert len(glossaries) == 1, f"{path.name}: glossary cells {glossaries}; want exactly one"
    first_regime = min(i for i, text in _markdown(path) if "regime indicator" in text.lower())
    assert first_regime == glossaries[0], (
        f"{path.name}: cell {first_regime} uses 'regime indicator' before the glossary explains it"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_intro_links_every_graded_exercise(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    intro = "\n".join("".join(c["source"]) for c in cells[:first_code])
    anchor = re.search(r"\]\(#([\w-]+)\)", intro)
    assert anchor, f"{path.name}: the introduction links to no exercise section"
    target = f'<a id="{anchor.group(1)}"></a>'
    assert any(target in "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"), (
        f"{path.name}: no markdown cell holds the anchor {target}"
    )
    graded = [
        c["metadata"]["nbgrader"] for c in cells if c["metadata"].get("nbgrader", {}).get("grade")
    ]
    assert len(graded) >= 3
    for g in graded:
        points = g["points"]
        assert f"{points} point" in intro, f"{path.name}: the intro does not give {points} point(s)"
    total = sum(g["points"] for g in graded)
    assert f"{total} points" in intro, f"{path.name}: the intro does not give the total, {total}"
    assert "`smoke`" in intro, f"{path.name}: the intro does not say how to reach them at smoke"


def test_the_check_catches_what_it_should():
    for text in (
        "see `decisions.decide`",
        "applied in `settings.py`",
        "`flkit/papers/stc_projection/regime.py`",
        "compares with `flkit.compress.stc`",
        "the code before the change (commit 9f44685)",
        "measured 2026-11-23 on 2 CPU cores shared with other jobs",
        "while the machine was loaded about tenfold",
    ):
        assert internal_names(text), text
    for text in (
        "`torch.topk` keeps exactly k entries",
        "`x.abs().flatten()`",
        "arXiv:2309.06805",
        "[its README](../flkit/papers/feddip/README.md)",
        "`cpu`: 13.4 min on a 2-core CPU",
        "the preset's `mnist_target`",
        "a face value of 0.80",
    ):
        assert not internal_names(text), (text, internal_names(text))
    assert words("one two three") == 3


def _bibtex(text: str) -> list[str]:
    return re.findall(r"```bibtex\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_references_cell_cites_the_readme_bibtex(path):
    readme = ROOT / "flkit" / "papers" / path.stem[3:] / "README.md"
    want = _bibtex(readme.read_text(encoding="utf-8"))
    assert len(want) == 1 and "@" in want[0], f"{readme.relative_to(ROOT)}: one ```bibtex block"
    last = _markdown(path)[-1][1]
    assert last.startswith("## References"), f"{path.name}: the last cell is not the references"
    assert _bibtex(last) == want, f"{path.name}: the references' BibTeX differs from the README's"
