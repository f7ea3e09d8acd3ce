"""Notebook 05's claim logic on hand-built tables, the Time column, and the exercise checker."""

import math

import pandas as pd
import pytest
import torch

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
    sw = pd.DataFrame({"err_gi_l1": [0.5] * 4, "err_stale_l1": [0.9, 0.45, 0.4, 0.3]})
    assert claims.e2_falls_below_e1(sw)[0]  # last 3: E2 0.383 < E1 0.5
    sw2 = pd.DataFrame({"err_gi_l1": [0.3] * 4, "err_stale_l1": [0.9, 0.8, 0.6, 0.4]})
    assert not claims.e2_falls_below_e1(sw2)[0]
    # one noisy round below E1 is not the crossing: E2 shrinks (0.733 -> 0.633) and dips to 0.4
    # once, but its mean over the last 3 rounds (0.633) stays above E1 (0.5)
    dip = pd.DataFrame({"err_gi_l1": [0.5] * 6, "err_stale_l1": [0.9, 0.9, 0.4, 0.7, 0.6, 0.6]})
    assert not claims.e2_falls_below_e1(dip)[0]


def test_efficiency_claims_judge_topk_and_warm_start_apart():
    eff = pd.DataFrame(
        [
            {
                "device": "top-5 %",
                "target_error": 0.33,
                "reference_iterations": 200.0,
                "device_iterations": 60.0,
                "reached": 2,
                "clients": 2,
                "saved": 0.7,
            },
            {
                "device": "warm start",
                "target_error": 0.3,
                "reference_iterations": 300.0,
                "device_iterations": float("nan"),
                "reached": 1,
                "clients": 2,
                "saved": float("nan"),
            },
        ]
    )
    holds, ev = claims.topk_saves_iterations(eff)
    assert holds and "60 iterations vs 200" in ev and "70 % saved" in ev
    holds, ev = claims.warm_start_saves_iterations(eff)
    assert holds is False and "1 of 2 clients" in ev  # a client never reached the error
    eff.loc[1, ["device_iterations", "reached", "saved"]] = [300.0, 2, 0.0]
    assert claims.warm_start_saves_iterations(eff)[0] is False  # as many iterations: no saving


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


def test_w_pred_runs_at_the_presets_damping_under_its_old_key():
    """W-Pred's damping is the preset's ``w_pred_damping``; at the method's default (0.5, every
    preset's value) the run config is the one it was before the preset held it, so the run cache
    keeps serving those runs."""
    from flkit.methods.staleness import WPred

    pre = dict(presets.load("05_staleness", "cpu"))
    cfg = study.config(pre, "w_pred", 0)
    assert pre["w_pred_damping"] == WPred.Params().damping == 0.5
    assert cfg.method_params == {"tau": 40, "affected_class": 5, "num_stale": 5}
    damped = study.config({**pre, "w_pred_damping": 0.25}, "w_pred", 0)
    assert damped.method_params["damping"] == 0.25
    assert (
        "damping"
        not in study.config({**pre, "w_pred_damping": 0.25}, "unweighted", 0).method_params
    )


def test_iterations_to_a_target_error_by_hand():
    from flkit.papers.staleness.estimation import iterations_to

    its = [0, 10, 20, 30]
    err = torch.tensor([[0.9, 0.9], [0.5, 0.8], [0.3, 0.7], [0.35, 0.6]])
    got = iterations_to(its, err, torch.tensor([0.4, 0.5]))
    assert got[0] == 20 and math.isnan(got[1])  # client 1 never gets to 0.5
    assert iterations_to(its, err, torch.tensor([0.9, 0.6])).tolist() == [0.0, 30.0]


def test_efficiency_study_at_smoke():
    """End to end on the smoke preset: the unmasked cold start reaches its own final error (the
    reference) by construction, every row measures the same clients."""
    from flkit.papers.staleness import estimation

    pre = presets.load("05_staleness", "smoke")
    eff = estimation.efficiency(pre, estimation.Trajectory(pre, 0))
    assert eff["device"].tolist() == ["top-5 %", "warm start"]
    assert (eff["clients"] == pre["est_clients"]).all()
    assert (eff["reference_iterations"] <= pre["stop_iters"]).all()
    assert eff.loc[0, "target_error"] == pytest.approx(eff.loc[1, "target_error"] + 0.03)


def test_one_class_partition_config_and_bad_partition():
    from flkit.utils import FlkitError

    pre = dict(presets.load("05_staleness", "cpu"))
    cfg = study.config({**pre, "partition": "one_class"}, "unweighted", 0)
    assert (cfg.partition, cfg.partition_kwargs) == ("shards", {"shards_per_client": 1})
    cfg = study.config({**pre, "partition": "dirichlet"}, "unweighted", 0)
    assert cfg.partition == "dirichlet" and cfg.partition_kwargs["alpha"] == pre["alpha"]
    with pytest.raises(FlkitError, match="'iid'.*dirichlet.*one_class"):
        study.config({**pre, "partition": "iid"}, "unweighted", 0)


def test_dropout_floor_is_measured_beside_the_estimators():
    """Two trainings of the same clients from the same model differ only by their dropout draws:
    a positive error that is the same at every tau (the model has dropout)."""
    from flkit.papers.staleness import estimation

    pre = presets.load("05_staleness", "smoke")
    err = estimation.estimation_error(pre, estimation.Trajectory(pre, 0))
    floor = err[err.estimator == "dropout floor"]
    assert sorted(floor["tau"]) == sorted(pre["est_taus"])
    assert (floor["cos"] > 0).all() and floor["cos"].nunique() == 1


def test_gi_gain_is_read_per_seed():
    acc = pd.DataFrame(
        {"acc": [70.0, 60.0], "time": [100.0, 130.0]}, index=["gi_staleness", "unweighted"]
    )
    rows = []
    for m, finals in {"gi_staleness": [0.8, 0.6], "unweighted": [0.5, 0.7]}.items():
        for s, a in enumerate(finals):
            rows.append({"method": m, "seed": s, "round": 1, "affected_accuracy": a})
    hist = pd.DataFrame(rows)
    assert claims.per_seed_gain(hist, "gi_staleness", "unweighted") == pytest.approx([30, -10])
    assert claims.gi_beats_unweighted(acc)[0]  # the mean alone: +10 points
    holds, ev = claims.gi_beats_unweighted(acc, hist=hist)
    assert not holds and "per seed +30.0, -10.0 points" in ev  # one seed loses


def test_with_paper_by_method_and_by_setting():
    acc = _acc(unweighted=(60.04, 130.0), gi_staleness=(66.0, 100.0), w_pred=(59.0, 101.0))
    out = study.with_paper(acc, {"unweighted": (39.2, 150.0), "gi_staleness": 57.6})
    assert out.index.tolist() == ["Unweighted", "Ours (GI)", "W-Pred"]
    assert out["acc"].tolist() == [60.0, 66.0, 59.0]
    assert out["paper acc"].tolist()[:2] == [39.2, 57.6]
    assert math.isnan(out["paper acc"].iloc[2])
    assert out["paper time"].iloc[0] == 150.0 and out["paper time"].iloc[1:].isna().all()
    # by a setting column: keys compared to 2 decimals, the index kept
    sparse = pd.DataFrame({"sparsification": [0.9000001, 0.5], "error": [0.12345, 0.2]})
    table4 = {0.9: (0.68, 0.29), 0.95: (0.80, 0.31)}
    out = study.with_paper(sparse, table4, "sparsification", ("reduction", "err"), digits=3)
    assert out.index.tolist() == [0, 1]
    assert out["error"].tolist() == [0.123, 0.2]
    assert out.loc[0, ["reduction", "err"]].tolist() == [0.68, 0.29]
    assert out.loc[1, ["reduction", "err"]].isna().all()


def test_config_takes_the_device():
    """The device reaches the config; naming the device "auto" picks leaves the run's key as it
    is (finished runs stay found)."""
    from flkit.utils import FlkitError, resolve_device

    pre = presets.load("05_staleness", "smoke")
    assert study.config(pre, "unstale", 0, device="cpu").device == "cpu"
    picked = str(resolve_device("auto"))
    named = study.config(pre, "unstale", 0, device=picked)
    assert study.config(pre, "unstale", 0).key() == named.key()
    with pytest.raises(FlkitError, match="'tpu'.*accepted"):
        study.config(pre, "unstale", 0, device="tpu")


def test_describe_says_the_smoke_setting_by_hand():
    from flkit.workbook import presets

    # [smoke] of flkit/papers/staleness/preset.toml: MNIST, 10 clients, 5 per round, 5 rounds,
    # tau 2, inversions of 4 samples in 6 iterations
    assert study.describe(presets.load("05_staleness", "smoke")) == (
        "**Preset `smoke`**: mnist, 10 clients, 5 per round, 5 rounds, staleness τ = 2 rounds; "
        "each inversion fits 4 surrogate samples in 6 iterations."
    )
