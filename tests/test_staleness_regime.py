"""Regime indicators of notebook 05 on hand-built inputs: the staleness gap, accuracy still
rising, the stale clients' share of the affected class, the GI runs' share of inversion rounds
with E1 < E2, the inversions' Disparity ratio (a diagnostic), and the verdicts they force through
report.claim."""

import math

import pandas as pd
import pytest
import torch

from flkit.papers.staleness import record, regime
from flkit.utils import FlkitError
from flkit.workbook import verdict
from flkit.workbook.report import Report

R = regime.REGIME


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


def _acc(unstale=60.0, unweighted=55.0, gi=70.0):
    return pd.DataFrame(
        {"acc": [unstale, unweighted, 40.0, gi], "time": [90.0, 130.0, 170.0, 100.0]},
        index=["unstale", "unweighted", "weighted", "gi_staleness"],
    )


def _errors(hist, e1_e2, seed=0):
    """``hist`` with GI rows of seed ``seed`` carrying (E1, E2) pairs (relative L1)."""
    rows = [
        {"method": "gi_staleness", "seed": seed, "round": 40 + i, "err_gi_l1": a, "err_stale_l1": b}
        for i, (a, b) in enumerate(e1_e2)
    ]
    return pd.concat([hist, pd.DataFrame(rows)], ignore_index=True)


def test_e1_below_e2_by_hand():
    h = _hist({("unweighted", 0): [0.5] * 8})
    assert regime.e1_below_e2(h) is None  # no GI errors recorded: not measured
    # seed 0: 0.1 < 0.4, 0.3 = 0.3 (a tie is not below), 0.5 > 0.2; seed 1: 0.1 < 0.9
    h = _errors(_errors(h, [(0.1, 0.4), (0.3, 0.3), (0.5, 0.2)]), [(0.1, 0.9)], seed=1)
    h.loc[len(h)] = {"method": "gi_staleness", "seed": 1, "round": 60, "err_gi_l1": float("nan")}
    h.loc[len(h)] = {"method": "unweighted", "seed": 0, "round": 9, "err_gi_l1": 9.0}
    h.loc[len(h) - 1, "err_stale_l1"] = 0.0  # another method's errors are not GI's
    assert regime.e1_below_e2(h) == pytest.approx(2 / 4)  # every seed, rounds with both errors
    assert regime.e1_below_e2(h, "cos") is None  # no cosine errors in this history
    with pytest.raises(FlkitError, match="metric='L2'.*'l1', 'cos'"):
        regime.e1_below_e2(h, "L2")


def test_measure_gives_every_indicator_each_claim_reads():
    h = _errors(
        _hist({("unweighted", 0): [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}),
        [(0.08, 0.44), (0.1, 0.5), (0.2, 0.3), (0.4, 0.3)],
    )
    h["gi_loss_ratio"] = float("nan")
    h.loc[h.index[h.method == "gi_staleness"][:2], "gi_loss_ratio"] = [0.6, 0.8]
    ours = regime.measure(_acc(), h, share=0.9)
    assert ours == {
        "staleness_gap": pytest.approx(5.0),
        "still_rising": pytest.approx(20.0),  # 75 % (rounds 7-8) - 55 % (rounds 5-6)
        "affected_share": 0.9,
        "e1_below_e2": pytest.approx(0.75),  # 3 of 4 inversion rounds
        "disparity_ratio": pytest.approx(0.7),
    }
    for claim in R.claims:  # every claim reads what measure gives, nothing missing
        assert len(R.readings(ours, claim)) == len(R.rule(claim).indicators)
    with pytest.raises(FlkitError, match="unstale"):
        regime.measure(_acc().drop(index="unstale"), h)


def test_every_threshold_names_its_source_and_disparity_is_a_diagnostic():
    kinds = {k: i.source_kind for k, i in R.all.items()}
    assert kinds == {
        "staleness_gap": "paper",
        "still_rising": "ours",
        "affected_share": "computed",
        "e1_below_e2": "computed",
        "disparity_ratio": "ours",
    }
    assert list(R.diagnostics) == ["disparity_ratio"]
    gap = R.indicators["staleness_gap"]
    assert gap.rule.text() == "≥ 3.8" and "Table 10" in gap.source  # 61.2 - 57.4, not 4
    assert R.indicators["e1_below_e2"].rule.text() == "> 0.5"
    assert regime.PAPER_E1_BELOW_E2 == pytest.approx(115 / 155, abs=5e-3)  # rounds 40-155 of 195
    assert R.rule("gi_beats_unweighted").indicators == (
        "staleness_gap",
        "e1_below_e2",
        "disparity_ratio",
    )
    assert "staleness_gap" not in R.rule("staleness_hurts").indicators  # its own outcome


FIT = {
    "staleness_gap": 30.3,
    "still_rising": 25.0,
    "affected_share": 0.996,
    "e1_below_e2": 1.0,
    "disparity_ratio": 0.699,
}  # the published `cpu` run's readings, E1 < E2 in 64 of 64 inversion rounds


def _verdict(ours, claim, holds=True):
    return verdict.decide(holds, "cpu", R.readings(ours, claim))[0]


def test_the_gi_claim_is_judged_where_staleness_costs_and_the_estimate_beats_the_stale_update():
    """The bug: a Disparity ratio above 0.5, which no warm-started inversion could avoid (the
    true data's own Disparity is above the inversions'), set the GI claim outside the regime."""
    assert _verdict(FIT, "gi_beats_unweighted") == verdict.HOLDS
    assert _verdict(FIT, "gi_beats_unweighted", False) == verdict.DOES_NOT_HOLD
    row = {r.indicator.key: r for r in R.readings(FIT, "gi_beats_unweighted")}
    assert row["disparity_ratio"].inside is False and row["disparity_ratio"].diagnostic
    # the paper's own two conditions do gate it
    assert _verdict({**FIT, "e1_below_e2": 0.5}, "gi_beats_unweighted") == verdict.OUTSIDE_REGIME
    assert _verdict({**FIT, "staleness_gap": 3.7}, "gi_beats_unweighted") == verdict.OUTSIDE_REGIME
    assert _verdict({**FIT, "staleness_gap": 3.9}, "gi_beats_unweighted") == verdict.HOLDS
    assert _verdict({**FIT, "e1_below_e2": None}, "gi_beats_unweighted") == verdict.INCONCLUSIVE


def test_an_indicator_a_claim_does_not_read_changes_nothing():
    for claim in ("staleness_hurts", "weighted_worst", "compensations_track_unweighted"):
        off = {**FIT, "e1_below_e2": 0.0, "disparity_ratio": 5.0}  # GI's own conditions broken
        assert _verdict(off, claim) == verdict.HOLDS
    # staleness hurting is its own outcome: a small gap sets it aside for no claim of its own
    assert _verdict({**FIT, "staleness_gap": 0.5}, "staleness_hurts") == verdict.HOLDS
    assert _verdict({**FIT, "staleness_gap": 0.5}, "weighted_worst") == verdict.OUTSIDE_REGIME
    assert _verdict({**FIT, "affected_share": 0.3}, "compensations_track_unweighted") == (
        verdict.OUTSIDE_REGIME
    )
    # GI reads neither the rise nor the share: E1 < E2 measures for it what they stand for
    settled = {**FIT, "still_rising": -1.0, "affected_share": 0.3}
    assert _verdict(settled, "gi_beats_unweighted") == verdict.HOLDS


def _tables():
    """Hand-made inputs of record.record_claims: two seeds of every accuracy method, the GI runs'
    errors and Disparity, and one row or two of each estimation study."""
    curves = {(m, s): [0.2, 0.4, 0.5, 0.6] for m in ("unstale", "unweighted") for s in (0, 1)}
    curves.update({("gi_staleness", s): [0.3, 0.6, 0.8, 0.85] for s in (0, 1)})  # +25 points
    hist = _hist(curves)
    for s in (0, 1):
        hist = _errors(hist, [(0.1, 0.5), (0.2, 0.6)], seed=s)
    hist["gi_loss_ratio"] = 0.7
    acc = pd.DataFrame(
        {
            "acc": [85.8, 55.5, 0.0, 58.7, 64.4, 56.0, 83.8],
            "time": [90, 144, 200, 130, 120, 140, 100],
        },
        index=[
            "unstale",
            "unweighted",
            "weighted",
            "first_order",
            "w_pred",
            "asyn_tiers",
            "gi_staleness",
        ],
    )
    err = pd.DataFrame(
        {
            "tau": [5, 5, 5, 40, 40, 40],
            "estimator": ["stale", "1st-Order", "GI"] * 2,
            "cos": [0.288, 0.29, 0.06, 0.442, 0.443, 0.081],
        }
    )
    sw = pd.DataFrame({"err_gi_l1": [0.5, 0.5, 0.5, 0.5], "err_stale_l1": [1.2, 1.0, 0.6, 0.55]})
    eff = pd.DataFrame(
        {
            "device": ["top-5 %", "warm start"],
            "device_iterations": [30.0, 0.0],
            "reference_iterations": [60.0, 180.0],
            "target_error": [0.1, 0.08],
            "reached": [2, 2],
            "clients": [2, 2],
            "saved": [0.5, 1.0],
        }
    )
    priv = pd.DataFrame({"sparsification": [0.0, 0.95], "mse": [0.1, 0.3]})
    det = pd.DataFrame({"round": [15, 30, 45], "accuracy": [0.7, 0.9, 1.0]})
    return acc, hist, err, sw, eff, priv, det


def test_record_claims_keeps_each_claims_test_seeds_and_measurements(tmp_path):
    report = Report("05_staleness", "cpu", 0, out_dir=tmp_path)
    df = record.record_claims(report, *_tables(), share=0.996)
    got = dict(zip(df.claim, df.verdict))
    gi = "GI beats Unweighted on the affected class, in fewer rounds"
    assert got[gi] == verdict.HOLDS  # 28.3 points, E1 < E2 in 4 of 4, Disparity 0.7 shown only
    rec = report.claims[gi]
    assert rec["key"] == "gi_beats_unweighted" and rec["seeds"] == [0, 1]
    assert rec["measured"]["e1_below_e2"] == 1.0
    assert rec["measured"]["disparity_ratio"] == pytest.approx(0.7)
    shown = {r["key"]: (r["inside"], r["diagnostic"]) for r in rec["regime"]}
    assert shown == {
        "staleness_gap": (True, False),
        "e1_below_e2": (True, False),
        "disparity_ratio": (False, True),
    }
    assert rec["test"].startswith("Ours − Unweighted ≥ 2 points")
    track = report.claims["1st-Order and W-Pred track Unweighted"]
    assert track["verdict"] == verdict.DOES_NOT_HOLD  # W-Pred +8.9 points
    assert track["reason"] == "missed: 1st-Order and W-Pred within ±2 points of Unweighted"
    e2 = report.claims["E2 shrinks and falls below E1 late in training"]
    assert e2["seeds"] == [0] and "key" not in e2  # the report seed's trajectory; no regime
    assert all(c["test"] for c in report.claims.values())


def test_record_claims_refuses_histories_without_the_accuracy_methods(tmp_path):
    report = Report("05_staleness", "cpu", 0, out_dir=tmp_path)
    acc, *rest = _tables()
    with pytest.raises(FlkitError, match="unstale"):
        record.record_claims(report, acc.drop(index="unstale"), *rest)
    assert report.claims == {}
