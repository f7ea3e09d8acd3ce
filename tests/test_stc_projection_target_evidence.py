"""What notebook 01 shows beside its MNIST regime (flkit.papers.stc_projection.target_evidence),
on hand-made histories whose rounds to each target and variances are known by construction."""

from __future__ import annotations

import pytest

from flkit.papers.stc_projection import regime, tables, target_evidence
from flkit.utils import FlkitError
from tests.test_stc_projection_regime import _results, _summary


def test_table_by_construction():
    ind = target_evidence.table(tables.summary(_results(seeds=(0, 1)), 0.95))
    ind = ind.set_index("indicator")
    assert ind.loc["FedAvg: rounds to 95%", "ours"] == 9
    assert ind.loc["FedAvg: rounds to 95%", "paper"] == 197  # Table 2
    assert ind.loc["STC-PA: rounds to 95%", "paper"] == 100
    assert ind.loc["STC: rounds to 95%", "ours"] is None  # never reached: not averaged away
    share = ind.loc["FedAvg: share of the 10 rounds spent reaching 95%"]
    assert share["ours"] == 0.9 and share["paper"] == 0.985  # 197 / 200
    var = ind.loc["FedAvg: across-client variance %², 2nd half"]
    assert var["ours"] == pytest.approx(200.0) and var["paper"] is None  # 0.02 x 1e4
    assert var["per seed"] == [pytest.approx(200.0)] * 2


def test_paper_values_only_at_the_papers_target():
    ind = target_evidence.table(tables.summary(_results(), 0.9)).set_index("indicator")
    assert ind.loc["FedAvg: rounds to 90%", "ours"] == 3
    assert ind.loc["FedAvg: rounds to 90%", "paper"] is None  # the paper has no 90 % figure


def test_stc_ratios_per_seed():
    tab = _summary(
        [("fedavg", 0, 180), ("stc", 0, 140), ("fedavg", 1, 190), ("stc", 1, None)]
    )  # 140 / 180 = 0.778; seed 1: STC never reaches the target
    assert target_evidence.stc_ratios(tab) == [pytest.approx(140 / 180), None]
    ind = target_evidence.table(tab).set_index("indicator").loc["STC / FedAvg: rounds to 95%"]
    assert ind["ours"] is None and ind["per seed"] == [pytest.approx(0.778), None]
    assert regime.measure(tab) == {"fedavg_share": pytest.approx(0.9)}  # no ratio measured


def test_the_stc_calibration_aims_at_the_papers_ratio():
    """The calibration decision (decisions.toml) aims STC at the ratio the claim reads."""
    from flkit.workbook import decisions

    aim = decisions.load("stc_projection")["stc_setting"].best["closest"]
    assert aim == target_evidence.PAPER_STC_RATIO == pytest.approx(157 / 197, abs=5e-4)


def test_ablation_judges_the_same_runs_at_two_targets():
    """FedAvg crosses 90 % at round 3 of 10 (share 0.3: outside the regime) and 95 % at round 9
    (0.9: inside); STC never reaches 95 %, so its ratio there is not measured."""
    t = target_evidence.ablation(_results(), [0.9, 0.95]).set_index("indicator")
    assert list(t.columns) == [
        "paper",
        "ours at 90%",
        "ours at 95%",
        "claim at 90% (face value)",
        "claim at 95% (face value)",
    ]
    assert (
        t.loc["FedAvg: rounds to target", "ours at 90%"],
        t.loc["FedAvg: rounds to target", "ours at 95%"],
    ) == (3, 9)
    share = t.loc["FedAvg: share of the 10 rounds spent reaching target"]
    assert (share["ours at 90%"], share["ours at 95%"], share["paper"]) == (0.3, 0.9, 0.985)
    ratio = t.loc["STC / FedAvg: rounds to target"]
    assert ratio["ours at 90%"] == pytest.approx(1.33) and ratio["ours at 95%"] is None
    # the regime's condition, in words: FedAvg's share 0.3 < 0.75 at 90 %, 0.9 at 95 %
    inside = t.loc["condition: FedAvg spends at least 75% of the run reaching the target"]
    assert (inside["paper"], inside["ours at 90%"], inside["ours at 95%"]) == (
        "met",
        "not met",
        "met",
    )
    assert inside["claim at 90% (face value)"] == inside["claim at 95% (face value)"] == ""
    # claims at face value in words, never bare booleans
    faces = set(t["claim at 90% (face value)"]) | set(t["claim at 95% (face value)"])
    assert faces <= {"holds", "does not hold", "unmeasured", ""} and len(faces) > 1
    with pytest.raises(FlkitError, match="two targets"):
        target_evidence.ablation(_results(), [0.9])
