"""Every decided preset value of every paper is what its decision's rule gives on its recorded
table (flkit.workbook.decisions), and every README quotes its decisions as they are recorded.
A value edited by hand in a preset.toml fails here."""

from __future__ import annotations

import shutil

import pytest

from flkit.workbook import decision_quotes, decisions

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
    stale = decision_quotes.quote_readme(folder)
    assert not stale, (
        f"flkit/papers/{folder.name}/README.md quotes {stale} out of date; rewrite with "
        f"flkit.workbook.decision_quotes.quote_readme({folder.name!r}, write=True)"
    )


def test_a_decided_value_edited_by_hand_fails(tmp_path):
    """notebook 05's preset with W-Pred's damping at cpu edited to 0.25 by hand: the check names
    the key, the value written and the rule's choice; the real file passes it."""
    src = decisions.PAPERS_DIR / "staleness"
    copy = tmp_path / "staleness"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    text = (copy / "preset.toml").read_text(encoding="utf-8")
    head, cpu, rest = text.partition("\n[cpu]")
    edited = rest.replace("\nw_pred_damping = 0.5", "\nw_pred_damping = 0.25", 1)
    assert edited != rest
    (copy / "preset.toml").write_text(head + cpu + edited, encoding="utf-8")
    d = decisions.load(src)["w_pred_damping"]
    assert decisions.check(d) == []
    assert decisions.check(decisions.load(copy)["w_pred_damping"]) == [
        "[cpu] w_pred_damping = 0.25; the rule chose 0.5"
    ]
