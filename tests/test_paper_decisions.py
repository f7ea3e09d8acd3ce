"""Every decided preset value of every paper is what its decision's rule gives on its recorded
table (flkit.workbook.decisions), and every README quotes its decisions as they are recorded.
A value edited by hand in a preset.toml fails here."""

from __future__ import annotations

import pytest

from flkit.workbook import decisions

PAPERS = sorted(
    p for p in decisions.PAPERS_DIR.iterdir() if p.is_dir() and (p / "preset.toml").is_file()
)
DECISIONS = [(p.name, name) for p in PAPERS for name in decisions.load(p)]


@pytest.mark.parametrize(("paper", "name"), DECISIONS, ids=[f"{p}:{n}" for p, n in DECISIONS])
def test_preset_values_are_the_rules_choice(paper, name):
    d = decisions.load(paper)[name]
    assert decisions.check(d) == [], f"{paper}/preset.toml differs from decision {name!r}"


@pytest.mark.parametrize("folder", PAPERS, ids=lambda p: p.name)
def test_readme_quotes_its_decisions_as_recorded(folder):
    stale = decisions.quote_readme(folder)
    assert not stale, (
        f"flkit/papers/{folder.name}/README.md quotes {stale} out of date; rewrite with "
        f"flkit.workbook.decisions.quote_readme({folder.name!r}, write=True)"
    )
