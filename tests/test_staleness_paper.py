"""Notebook 05's claim logic on hand-built tables, the Time column, and the exercise checker."""

import math

import pandas as pd
import pytest

from flkit.methods.staleness import first_order, weighted_factor
from flkit.papers.staleness import claims, exercise, study
from flkit.workbook import presets


def _acc(**vals):
    return pd.DataFrame(
        [{"method": m, "acc": a, "time": t} for m, (a, t) in vals.items()]
    ).set_index("method")


def test_claims_on_hand_built_tables():
    acc = _acc(
        unstale=(80, 90),
        unweighted=(60, 130),
        weighted=(40, 170),
        first_order=(60.5, 128),
        w_pred=(59, 131),
        asyn_tiers=(61, 125),
        gi_staleness=(66, 100),
    )
    assert claims.staleness_hurts(acc)[0]
    assert claims.weighted_worst(acc)[0]
    assert claims.compensations_track_unweighted(acc)[0]
    assert claims.gi_beats_unweighted(acc)[0]
    worse = acc.copy()
    worse.loc["gi_staleness", "acc"] = 61
    assert not claims.gi_beats_unweighted(worse)[0]
    diverged = acc.copy()
    diverged.loc["w_pred", "acc"] = 0.0  # W-Pred at cpu: Weighted is still the worst of the rest
    holds, evidence = claims.weighted_worst(diverged)
    assert holds and "w_pred diverged" in evidence and "minimum 60.0 %" in evidence
    diverged.loc["weighted", "acc"] = 60.0  # not 2 points below Asyn-Tiers' 61 or 1st-Order
    assert not claims.weighted_worst(diverged)[0]
    assert not claims.compensations_track_unweighted(diverged)[0]


def test_estimation_and_switch_claims():
    err = pd.DataFrame(
        [
            {"tau": t, "estimator": e, "cos": c, "l1": c}
            for t, e, c in [
                (5, "stale", 0.1),
                (5, "1st-Order", 0.1),
                (5, "GI", 0.3),
                (40, "stale", 0.6),
                (40, "1st-Order", 0.6),
                (40, "GI", 0.4),
            ]
        ]
    )
    assert claims.gi_error_lower_at_large_tau(err)[0]
    sw = pd.DataFrame({"err_gi_l1": [0.5, 0.5, 0.5, 0.5], "err_stale_l1": [0.9, 0.8, 0.6, 0.4]})
    assert claims.e2_falls_below_e1(sw)[0]
    sw2 = pd.DataFrame({"err_gi_l1": [0.3, 0.3, 0.3, 0.3], "err_stale_l1": [0.9, 0.8, 0.6, 0.4]})
    assert not claims.e2_falls_below_e1(sw2)[0]


def test_time_column_by_hand():
    """Target = lowest final accuracy among the compared methods (here Unweighted's 0.5);
    Ours first reaches it at round 2, Unweighted at round 4 -> Time 200 vs 100."""
    rows = []
    for m, curve in {
        "gi_staleness": [0.3, 0.6, 0.7, 0.7],
        "unweighted": [0.1, 0.2, 0.3, 0.5],
        "unstale": [0.9, 0.9, 0.9, 0.9],
    }.items():
        rows += [
            {"method": m, "seed": 0, "round": r + 1, "affected_accuracy": a}
            for r, a in enumerate(curve)
        ]
    t = study.accuracy_table(pd.DataFrame(rows), last=1, smooth=1)
    assert t.loc["unweighted", "time"] == pytest.approx(200)
    assert t.loc["gi_staleness", "time"] == pytest.approx(100)
    assert t.loc["unweighted", "acc"] == pytest.approx(50)
    # a method that diverged (ends at 2 %, below chance) neither sets the target nor gets a Time
    rows += [
        {"method": "w_pred", "seed": 0, "round": r + 1, "affected_accuracy": a}
        for r, a in enumerate([0.6, 0.0, 0.0, 0.02])
    ]
    t = study.accuracy_table(pd.DataFrame(rows), last=1, smooth=1)
    assert t.loc["unweighted", "time"] == pytest.approx(200)
    assert math.isnan(t.loc["w_pred", "time"])
    assert t.loc["w_pred", "acc"] == pytest.approx(2)


def test_exercise_checker(capsys):
    def stub(delta, w_now, w_then, lam=4.0):
        raise NotImplementedError

    assert not exercise.check_first_order(stub)
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "right" not in out
    assert exercise.check_first_order(first_order)
    wrong = lambda d, wn, wt, lam=4.0: d + lam * d * d * (wn - wt)  # noqa: E731
    assert not exercise.check_first_order(wrong)
    assert "subtracted" in capsys.readouterr().out
    assert exercise.check_weighted(weighted_factor)


def test_presets_share_keys_and_configs_validate():
    tables = {p: presets.load("05_staleness", p) for p in ("smoke", "cpu", "paper")}
    keys = {p: set(t) for p, t in tables.items()}
    assert keys["smoke"] == keys["cpu"] == keys["paper"]
    for _p, preset in tables.items():
        for m in preset["methods"]:
            cfg = study.config(preset, m, 0)
            assert cfg.method_params["tau"] == preset["tau"]
            assert cfg.batch_size >= preset["samples_per_client"]  # full-batch local GD
