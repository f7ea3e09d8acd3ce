"""Regime indicators of notebook 05 on hand-built inputs: the staleness gap, accuracy still
rising, the stale clients' share of the affected class, the inversions' Disparity ratio, and the
verdict they force through report.claim."""

import math

import pandas as pd
import pytest
import torch

from flkit.papers.staleness import regime
from flkit.workbook import presets, verdict


def _hist(curves: dict, ratios=None) -> pd.DataFrame:
    rows = []
    for (m, s), curve in curves.items():
        for r, a in enumerate(curve):
            rows.append({"method": m, "seed": s, "round": r + 1, "affected_accuracy": a})
    h = pd.DataFrame(rows)
    if ratios is not None:
        h["gi_loss_ratio"] = float("nan")
        gi = h.index[h.method == "gi_staleness"]
        h.loc[gi[: len(ratios)], "gi_loss_ratio"] = ratios
    return h


def test_affected_share_by_hand():
    y = torch.tensor([5, 5, 5, 1, 5, 2, 5, 5])
    parts = [torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4, 5]), torch.tensor([6, 7])]
    # class 5 counts per client: 2, 1, 1, 2 (6 in all); stale {0, 3} hold 4 of 6
    assert regime.affected_share(parts, y, [0, 3], 5) == pytest.approx(4 / 6)
    assert regime.affected_share(parts, y, [1], 5) == pytest.approx(1 / 6)
    assert math.isnan(regime.affected_share(parts, y, [0], 7))


def test_late_rise_and_disparity_ratio_by_hand():
    # 8 rounds, quarters of 2: seed 0 last quarter (0.7, 0.8) vs before (0.5, 0.6): +20 points;
    # seed 1 flat: 0 -> mean +10
    h = _hist(
        {
            ("unweighted", 0): [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
            ("unweighted", 1): [0.5] * 8,
            ("gi_staleness", 0): [0.5] * 8,
        },
        ratios=[0.2, 0.4, 0.9],
    )
    assert regime.late_rise(h) == pytest.approx(10.0)
    assert regime.disparity_ratio(h) == pytest.approx(0.5)
    assert regime.disparity_ratio(h.drop(columns="gi_loss_ratio")) is None


def test_measure_and_the_verdicts_it_forces():
    acc = pd.DataFrame({"acc": [60.0, 55.0, 40.0]}, index=["unstale", "unweighted", "weighted"])
    h = _hist({("unweighted", 0): [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}, ratios=None)
    ours = regime.measure(acc, h, share=0.9)
    assert ours["staleness_gap"] == pytest.approx(5.0)
    assert ours["still_rising"] == pytest.approx(20.0)
    assert ours["disparity_ratio"] is None  # no inversion ran: not measured
    keys = regime.CLAIMS["weighted_worst"]
    assert regime.in_regime({k: ours[k] for k in keys})
    small = regime.measure(acc.assign(acc=[56.0, 55.0, 40.0]), h, share=0.9)  # gap 1 < 4
    reg = regime.readings(small, keys)
    assert [r.inside for r in reg] == [False, True, True]
    assert verdict.decide(True, "cpu", reg)[0] == verdict.OUTSIDE_REGIME
    low_share = regime.readings({**ours, "affected_share": 0.3}, keys)
    assert verdict.decide(True, "cpu", low_share)[0] == verdict.OUTSIDE_REGIME
    fit = regime.readings({**ours, "disparity_ratio": 0.7}, regime.CLAIMS["gi_beats_unweighted"])
    assert (
        verdict.decide(True, "cpu", fit)[0] == verdict.OUTSIDE_REGIME
    )  # the inversion did not fit


def test_search_table_applies_the_rule():
    rows = [
        {"setting": "a", "gap": 5.0, "still_rising": 1.0, "notebook_min": 25},
        {"setting": "b", "gap": 6.0, "still_rising": -0.5, "notebook_min": 20},
        {"setting": "c", "gap": 4.5, "still_rising": 2.0, "notebook_min": 45},
        {"setting": "d", "gap": 3.9, "still_rising": 2.0, "notebook_min": 10},
    ]
    orig = regime.SEARCH
    try:
        regime.SEARCH = rows
        t = regime.search_table()
    finally:
        regime.SEARCH = orig
    assert t["meets rule"].tolist() == [True, False, False, False]


def test_wpred_default_damping_is_the_one_the_recorded_rule_picks():
    from flkit.methods.staleness import W_PRED_DAMPING, WPred

    assert regime.w_pred_damping() == W_PRED_DAMPING == WPred.Params().damping == 0.5
    # the undamped drift is recorded as worse than no prediction at all
    row = {r["damping"]: r for r in regime.W_PRED_DAMPING_SEARCH}
    assert row[1.0]["error_from_tau"] > row[0.0]["error_from_tau"] == 1.0


def test_long_rule_picks_the_smallest_qualifying_iterations():
    probe = [
        {"R": 64, "T_GI": 150, "mean_ratio": 0.41},
        {"R": 64, "T_GI": 300, "mean_ratio": 0.36},
        {"R": 64, "T_GI": 600, "mean_ratio": 0.30},
    ]
    assert regime.choose_long_iters(probe) == 300  # 0.41 > 0.38: 150 fails
    assert regime.choose_long_iters(probe, limit=0.45) == 150
    assert regime.choose_long_iters(probe, limit=0.2) is None


def test_no_long_preset_because_the_recorded_probe_meets_no_rule():
    """The recorded probe (0.516 at 150, 0.497 at 300) has no T_GI at or below 0.38, so notebook
    05 has no `long` preset; should a new probe qualify, the preset must come back."""
    assert regime.choose_long_iters() is None
    assert ("long" in presets.available("05_staleness")) == (regime.choose_long_iters() is not None)
