"""Claim verdicts of notebook 03 and the shared metrics, on hand-built inputs."""

from types import SimpleNamespace

import pandas as pd
import pytest

from flkit import metrics
from flkit.papers.fedast import claims
from flkit.utils import FlkitError


def test_metrics_by_hand():
    h = pd.DataFrame({"round": [1, 2, 3, 4], "acc": [0.5, 0.91, 0.89, 0.95]})
    assert metrics.rounds_to(h, 0.9, "acc") == 2 and metrics.rounds_to(h, 0.96, "acc") is None
    with pytest.raises(FlkitError, match="target"):
        metrics.rounds_to(h, 90, "acc")
    # |0.41| + |-0.02| + |0.06| = 0.49 over 3 steps
    assert metrics.mean_abs_change(h.acc) == pytest.approx(0.49 / 3)
    assert metrics.mean_abs_change([0.3]) != metrics.mean_abs_change([0.3])  # NaN
    assert metrics.time_gain(100, 60) == pytest.approx(40.0) and metrics.time_gain(None, 60) is None


def _fig2(fedast_1=60.0):
    rows = []
    for m, times in {
        "fedast_s": (50.0, fedast_1),
        "sync_st": (70.0, 80.0),
        "sync_st_nomit": (100.0, None),
        "sync_ucb": (75.0, 85.0),
        "sync_bayes": (65.0, 90.0),
    }.items():
        rows += [{"method": m, "seed": s, "all_done": t, "M": 2} for s, t in zip((0, 1), times)]
    return pd.DataFrame(rows)


def test_sync_variant_claims():
    v = claims.sync_variants(_fig2(), [0, 1])
    # FedAST 50 < 70 and 60 < 80; NoMit 100 > 1.2 * 70, and never finishing counts as slower;
    # UCB 75 vs 70 and 85 vs 80, Bayes 65 vs 70 and 90 vs 80: all within 30 %
    assert v["fedast_first"][0] and v["nomit_slower"][0] and v["ucb_bayes_near"][0]
    assert "not reached" in v["fedast_first"][1]
    v = claims.sync_variants(_fig2(fedast_1=None), [0, 1])
    assert not v["fedast_first"][0]  # seed 1 never finished
    assert not claims.sync_variants(_fig2(), [0, 1], near_rel=0.05)["ucb_bayes_near"][0]


def test_gain_grows():
    def table(g1):
        rows = [
            {"M": 2, "seed": 0, "gain_pct": -10.0},
            {"M": 6, "seed": 0, "gain_pct": 20.0},
            {"M": 2, "seed": 1, "gain_pct": 5.0},
            {"M": 6, "seed": 1, "gain_pct": g1},
            {"M": 2, "seed": "mean", "gain_pct": -2.5},
            {"M": 6, "seed": "mean", "gain_pct": (20 + g1) / 2},
        ]
        return pd.DataFrame(rows)

    assert claims.gain_grows(table(30.0), [0, 1])[0]
    holds, ev = claims.gain_grows(table(3.0), [0, 1])  # seed 1: 3 < 5
    assert not holds and "M=2: -2.5%" in ev


def _res(acc_by_task, completion=None, requests=None):
    hist = [
        {"task": t, "round": i + 1, "sim_time": float(i + 1), "accuracy": a, "requests": 4}
        for t, accs in acc_by_task.items()
        for i, a in enumerate(accs)
    ]
    hist += requests or []
    return SimpleNamespace(history=hist, tasks=list(acc_by_task), completion_time=completion or {})


def test_curve_noise_and_nobuffer_claim():
    calm = _res({"A": [0.1, 0.2, 0.3], "B": [0.5, 0.5, 0.6]})
    noisy = _res({"A": [0.1, 0.4, 0.2], "B": [0.5, 0.3, 0.6]})
    # calm: A 0.1, B 0.05 -> 0.075; noisy: A (0.3+0.2)/2 = 0.25, B (0.2+0.3)/2 = 0.25 -> 0.25
    assert claims.curve_noise(calm) == pytest.approx(0.075) and claims.curve_noise(
        noisy
    ) == pytest.approx(0.25)
    assert claims.nobuffer_noisier({0: calm}, {0: noisy})[0]
    assert not claims.nobuffer_noisier({0: noisy}, {0: calm})[0]


def _timed(points):
    """A one-task result with tests at the given (time, accuracy) points."""
    hist = [
        {"task": "A", "round": i + 1, "sim_time": t, "accuracy": a, "requests": 4}
        for i, (t, a) in enumerate(points)
    ]
    return SimpleNamespace(history=hist, tasks=["A"], completion_time={})


def test_noise_is_compared_at_one_time_resolution():
    # FedAST tests every 4 time units and moves 0.1 per test; NoBuffer tests every unit (a server
    # step per arrival) on a curve swinging 0.5 -> 0.8 -> 0.5 every 8 units: 0.075 per test, so
    # per test it looks calmer, but read every 4 units it moves 0.3 per point
    fedast = _timed([(4.0 * i, 0.5 + 0.1 * (i % 2)) for i in range(5)])
    swing = [0.5, 0.575, 0.65, 0.725, 0.8, 0.725, 0.65, 0.575]
    nobuffer = _timed([(float(i), swing[i % 8]) for i in range(17)])
    assert claims.mean_test_interval(fedast) == pytest.approx(4.0)
    assert claims.mean_test_interval(nobuffer) == pytest.approx(1.0)
    assert claims.curve_noise(nobuffer) == pytest.approx(0.075)
    assert claims.curve_noise(nobuffer, step=4.0) == pytest.approx(0.3)
    assert claims.curve_noise(fedast, step=4.0) == pytest.approx(0.1)
    holds, ev = claims.nobuffer_noisier({0: fedast}, {0: nobuffer})
    assert holds and "FedAST 0.1000, NoBuffer 0.3000" in ev and "per 4 time units" in ev
    # the grid reads the last test at or before each grid time: 0.2 (t = 0), 0.4 (t = 1 for the
    # grid time 2), 0.3 (t = 4); the 0.1 at t = 3.5 falls between grid times
    uneven = _timed([(0.0, 0.2), (1.0, 0.4), (3.5, 0.1), (4.0, 0.3)])
    assert claims.curve_noise(uneven, step=2.0) == pytest.approx((0.2 + 0.1) / 2)


def _het(extra_rows=()):
    """A FedAST result where mnist finishes at 10 and fmnist's requests go 5 -> 9 after it, and
    the all-done times of seed 0: FedAST 20, Sync-ST 30 (plus ``extra_rows``)."""
    reqs = [
        {"task": "fmnist", "round": 0, "sim_time": 8.0, "accuracy": None, "requests": 5},
        {"task": "fmnist", "round": 0, "sim_time": 12.0, "accuracy": None, "requests": 9},
    ]
    res = _res({"mnist": [0.5, 0.9], "fmnist": [0.3, 0.7]}, {"mnist": 10.0, "fmnist": 20.0}, reqs)
    rows = [
        ("fedast_d", 0, "mnist", 10.0),
        ("fedast_d", 0, "fmnist", 20.0),
        ("sync_st", 0, "mnist", 12.0),
        ("sync_st", 0, "fmnist", 30.0),
        *extra_rows,
    ]
    return res, pd.DataFrame(rows, columns=["method", "seed", "task", "time"])


def test_heterogeneous_claim():
    res, het_df = _het()
    out = claims.heterogeneous(het_df, {0: res}, easy_task="mnist")
    # all done: FedAST 20, Sync-ST 30 -> gain (30 - 20) / 30 = 33.3 %;
    # fmnist requests 5 -> 9 after t=10
    assert (
        out["holds"] and out["gain_pct"] == pytest.approx(100 / 3) and out["first_task"] == "mnist"
    )
    assert not claims.heterogeneous(het_df, {0: res}, easy_task="fmnist")["holds"]


def test_heterogeneous_gain_is_over_the_same_seeds_for_both_methods():
    """Issue 13 item 6: seed 1's Sync-ST run did not finish. The means (and their gain) use seed 0
    only for both methods: FedAST 20, Sync-ST 30, gain 33.3 %; averaging FedAST over both seeds
    (20 and 100 -> 60) against Sync-ST's seed 0 alone would give -100 %. Seed 1 is named."""
    res, het_df = _het(
        [
            ("fedast_d", 1, "mnist", 10.0),
            ("fedast_d", 1, "fmnist", 100.0),
            ("sync_st", 1, "mnist", 12.0),
            ("sync_st", 1, "fmnist", float("nan")),
        ]
    )
    out = claims.heterogeneous(het_df, {0: res, 1: res}, easy_task="mnist")
    assert out["all_done_fedast"] == 20.0 and out["all_done_sync"] == 30.0
    assert out["gain_pct"] == pytest.approx(100 / 3) and out["seeds_compared"] == [0]
    assert out["unfinished"] == {1: ["Sync-ST"]} and "seed 1: Sync-ST" in out["evidence"]
    assert not out["holds"]  # a seed without a gain cannot support "every seed"


def test_dynamic_vs_static_claim():
    def dvs(high_dyn):
        return pd.DataFrame(
            [
                {"level": "main", "method": "fedast_s", "seed": 0, "all_done": 100.0},
                {"level": "main", "method": "fedast_d", "seed": 0, "all_done": 95.0},
                {"level": "high", "method": "fedast_s", "seed": 0, "all_done": 200.0},
                {"level": "high", "method": "fedast_d", "seed": 0, "all_done": high_dyn},
            ]
        )

    tab, holds, ev = claims.dynamic_vs_static(dvs(180.0))  # 5 % then 10 %: small and growing
    assert holds and list(tab.gain_pct.round(6)) == [5.0, 10.0] and "high: 10.0%" in ev
    assert not claims.dynamic_vs_static(dvs(140.0))[1]  # 30 % is not a small margin
    assert not claims.dynamic_vs_static(dvs(198.0))[1]  # 1 % < 5 %: does not grow


def _act(gap_lo, gap_hi):
    rows = []
    for r, gap in ((2, gap_lo), (32, gap_hi)):
        for s in (0, 1):
            rows += [
                {"requests": r, "method": "fedast_d", "seed": s, "final_accuracy": 0.8},
                {"requests": r, "method": "nobuffer", "seed": s, "final_accuracy": 0.8 - gap},
            ]
    return pd.DataFrame(rows)


def test_few_vs_many_active_thresholds():
    holds, ev, lo, hi = claims.few_vs_many_active(_act(0.01, 0.05))
    assert holds and lo == pytest.approx(0.01) and hi == pytest.approx(0.05)
    assert "+0.010 at R=2" in ev and "+0.050 at R=32" in ev
    assert not claims.few_vs_many_active(_act(0.04, 0.05))[0]  # not equal when few
    assert claims.few_vs_many_active(_act(0.04, 0.05), equal_tol=0.05)[0]  # unless tolerated
    assert not claims.few_vs_many_active(_act(0.0, 0.005))[0]  # gap too small
    assert not claims.few_vs_many_active(_act(0.02, 0.015), min_gap=0.001)[0]  # gap shrinks


def _buf(time_by_b, horizon=100.0):
    """Sweep rows: task x at the given time (None: not reached by the horizon), task y 10 later."""
    return pd.DataFrame(
        [
            {
                "buffer": b,
                "task": t,
                "seed": 0,
                "reached": a is not None,
                "time_to_target": None if a is None else a + d,
                "horizon": horizon,
                "final_accuracy": 0.5,
            }
            for b, a in time_by_b.items()
            for t, d in (("x", 0.0), ("y", 10.0))
        ]
    )


def test_buffer_optimum_by_time_to_target_and_unreached_points():
    holds, ev, best = claims.buffer_optimum(_buf({1: 50.0, 2: 30.0, 4: 40.0}))
    assert holds and best == 2 and "2: 35" in ev  # mean of 30 and 40
    holds, _, best = claims.buffer_optimum(_buf({1: 50.0, 2: 40.0, 4: 30.0}))
    assert not holds and best == 4
    # b = 2 would be fastest but one task missed its target: it ranks last and says so
    rows = _buf({1: 50.0, 2: 20.0, 4: 40.0})
    rows.loc[(rows.buffer == 2) & (rows.task == "y"), ["reached", "time_to_target"]] = (False, None)
    holds, ev, best = claims.buffer_optimum(rows)
    assert best == 4 and not holds and "2: not reached (1 of 2 by t = 100)" in ev
    holds, ev, best = claims.buffer_optimum(_buf({1: None, 2: None}))
    assert best is None and not holds and ev.count("not reached") == 2


def test_buffer_sweep_keeps_the_presets_own_load():
    """Issue 13 item 5: the sweep runs on the preset's N and availability (no rescaling to a load
    of 1.28): paper 2 x 175 / 300 = 1.17; cpu keeps that ratio."""
    from flkit.papers.fedast import study
    from flkit.workbook import presets

    paper = presets.load("03_fedast", "paper")
    assert (paper["num_clients"], paper["availability"], paper["buffer_requests"]) == (
        1000,
        0.3,
        175,
    )
    assert study.buffer_load(paper) == pytest.approx(350 / 300)
    assert study.buffer_load(presets.load("03_fedast", "cpu")) == pytest.approx(350 / 300, rel=0.02)


def test_k_tradeoff_and_best_k():
    ksw = pd.DataFrame(
        {
            "k": [2, 2, 6, 6, 10, 10],
            "seed": [0, 1] * 3,
            "rounds": [20, 22, 10, 12, 8, 8],
            "round_length": [1.0, 1.2, 2.0, 2.0, 3.0, 3.5],
            "time_to_target": [21.0, 27.0, 20.0, 24.0, None, None],
        }
    )
    holds, ev = claims.k_tradeoff(ksw)
    assert holds and "rounds at k=2: 21.0 vs k=10: 8.0" in ev
    assert claims.best_k(ksw) == 6  # 22 < 24; k=10 never reached
    longer_not = ksw.assign(round_length=[3.0, 3.0, 2.0, 2.0, 3.0, 3.5])
    assert not claims.k_tradeoff(longer_not)[0]
    assert claims.best_k(ksw.assign(time_to_target=None)) is None
