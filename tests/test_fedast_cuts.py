"""Notebook 03 (FedAST) at a reduced budget: the parameters and rules that cut its training cost
without touching its timing (the seed rule, the binomial standard error beside accuracy claims,
the narrower Shakespeare LSTM, Fig. 5 on Fig. 2's pool, every run in one batch, the claims'
regime readings, version 0 in ``describe``). Expected values are computed by hand in comments."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pandas as pd
import pytest

from flkit import asyncfl
from flkit.papers.fedast import claim_readings, claims, configs, record, regime, study
from flkit.utils import FlkitError
from flkit.workbook import presets
from flkit.workbook.report import Report


@pytest.fixture(scope="module")
def cpu():
    return presets.load("03_fedast", "cpu")


def _report(tmp_path) -> Report:
    return Report("fixture", "cpu", 0, out_dir=tmp_path, autosave=False)


# ------------------------------------------------------------------------------ seed rule
def test_seed_rule_by_hand():
    assert claims.seed_rule(True, [0, 1]) == (True, "")
    assert claims.seed_rule(False, [0, 1, 2]) == (False, "")
    holds, reason = claims.seed_rule(False, [3, 3])  # one distinct seed
    assert holds is None
    assert reason.startswith("1 seed(s) [3], fewer than 2: the spread over seeds is not measured")
    assert reason.endswith("at face value it does not hold")
    assert claims.seed_rule(True, [5], min_seeds=1) == (True, "")
    assert claims.seed_rule(None, [0])[1].endswith("it cannot be judged either")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_seed_rule_rejects_bad_min_seeds(bad):
    with pytest.raises(FlkitError, match=rf"min_seeds={bad!r}; accepted: an integer >= 1"):
        claims.seed_rule(True, [0, 1], min_seeds=bad)


def test_one_seed_claim_is_inconclusive_in_the_report(tmp_path):
    """The face value holds (FedAST 50 < Sync-ST 80 and so on), yet one seed cannot tell it from
    seed noise: the verdict is inconclusive, the reason keeps 'it holds'."""
    df = pd.DataFrame(
        {
            "method": ["fedast_s", "sync_st", "sync_st_nomit", "sync_ucb", "sync_bayes"],
            "seed": [0] * 5,
            "all_done": [50.0, 80.0, 200.0, 85.0, 75.0],
        }
    )
    v = claims.sync_variants(df, [0])
    assert all(h for h, _ in v.values())
    r = _report(tmp_path)
    for text, (holds, ev) in v.items():
        record._claim(r, text, holds, [0], ev, "Fig. 2")
    assert {c["verdict"] for c in r.claims.values()} == {"inconclusive"}
    assert all(c["reason"].endswith("at face value it holds") for c in r.claims.values())


# ------------------------------------------------------------------------------ binomial SE
def test_binomial_se_by_hand():
    assert claims.binomial_se(0.8, 10_000) == pytest.approx(0.004)  # sqrt(0.16 / 1e4)
    assert claims.binomial_se(0.5, 2000) == pytest.approx(0.0111803, rel=1e-5)  # 0.5 / sqrt(2000)
    assert claims.binomial_se(1.0, 7) == 0.0


@pytest.mark.parametrize(
    ("p", "n", "match"),
    [
        (1.2, 100, r"accuracy=1.2; accepted: a number in \[0, 1\]"),
        (-0.1, 100, r"accuracy=-0.1; accepted"),
        (0.5, 0, r"n=0 test items; accepted: an integer >= 1"),
        (0.5, 2.5, r"n=2.5 test items; accepted"),
    ],
)
def test_binomial_se_rejects_bad_input(p, n, match):
    with pytest.raises(FlkitError, match=match):
        claims.binomial_se(p, n)


def test_fig3_evidence_gives_the_standard_error(tmp_path):
    """Final accuracies 0.80 / 0.78 / 0.82 / 0.76 (mean 0.79) on 10,000 test items: SE
    sqrt(0.79 * 0.21 / 1e4) = 0.00407 per accuracy, x sqrt(2) = 0.00576 per gap."""
    act = pd.DataFrame(
        {
            "requests": [4, 4, 96, 96],
            "method": ["fedast_d", "nobuffer"] * 2,
            "seed": [0, 0, 0, 0],
            "final_accuracy": [0.80, 0.78, 0.82, 0.76],
        }
    )
    r = _report(tmp_path)
    record.record_active(r, act, 0.85, n_test=10_000)
    (claim,) = r.claims.values()
    assert (
        "full test set (10000 items): binomial SE 0.0041 per accuracy at 0.79"
        in (claim["evidence"])
    )
    assert "about 0.0058 per gap" in claim["evidence"]


def test_fig4_evidence_gives_the_subset_standard_error(tmp_path, monkeypatch):
    """Periodic tests on 2,000 items: SE at most 0.5 / sqrt(2000) = 0.0112 per point."""
    monkeypatch.setattr(
        record.claims, "nobuffer_noisier", lambda fedast, nobuffer: (True, "noise ok")
    )
    monkeypatch.setattr(record.run_evidence, "of_runs", lambda fedast, sync: {})
    r = _report(tmp_path)
    record.record_nobuffer(r, {("fedast_d", 0): None}, {0: None}, [0], {}, eval_items=2000)
    (claim,) = r.claims.values()
    assert "curves tested on 2000 items: binomial SE at most 0.011 per point" in claim["evidence"]


# ------------------------------------------------------------------------------ LSTM width
def test_lstm_width(cpu):
    assert configs.lstm_width(cpu) == 32
    assert configs.lstm_width({}) == 0  # absent: the paper's 100
    task = configs.task_dict(cpu, "shakespeare", "shakespeare", 0.32, 32)
    assert task["model_flags"] == {"hidden_size": 32}
    assert "model_flags" not in configs.task_dict(cpu, "mnist", "mnist", 0.83, 32)
    paper_width = {**cpu, "shakespeare_width": 0}
    assert "model_flags" not in configs.task_dict(
        paper_width, "shakespeare", "shakespeare", 0.42, 32
    )


@pytest.mark.parametrize("bad", [-1, 2.5, True, "32"])
def test_lstm_width_rejects_bad_values(bad):
    with pytest.raises(FlkitError, match=rf"shakespeare_width={bad!r}; accepted: an integer >= 1"):
        configs.lstm_width({"shakespeare_width": bad})


def test_model_flags_build_the_narrow_lstm():
    """Embedding(80, 8) 640 + LSTM(8 -> 32) 4 * 32 * (8 + 32) + 2 * 4 * 32 = 5,376 + Linear(32,
    80) 2,640 = 8,656 parameters (the paper's width 100: 52,720)."""
    t = asyncfl.TaskConfig(
        "s",
        dataset="shakespeare",
        target=0.5,
        requests=1,
        buffer=1,
        model_flags={"hidden_size": 32},
    )
    tr = asyncfl.EngineTrainer(asyncfl.FedASTRun("fedast_s", (t,), num_clients=10), device="cpu")
    assert sum(p.numel() for p in tr.tasks["s"].model.parameters()) == 8656


def test_model_flags_bad_input():
    t = asyncfl.TaskConfig("s", dataset="shakespeare", model_flags={"width": 32})
    with pytest.raises(FlkitError, match=r"unknown flag 'width' for model 'lstm_shakespeare'"):
        t.validate()
    with pytest.raises(FlkitError, match=r"accepted: .*hidden_size"):
        t.validate()
    with pytest.raises(FlkitError, match=r"model_flags of task 's'=32; accepted: a mapping"):
        asyncfl.TaskConfig("s", dataset="shakespeare", model_flags=32).validate()


def test_model_flags_leave_earlier_cache_keys_alone():
    """A task without flags serialises as before the field existed (its cached runs stay
    valid); one with flags carries them."""
    plain = asyncfl.FedASTRun("fedast_s", (asyncfl.TaskConfig("a", dataset="mnist"),))
    assert "model_flags" not in plain.to_dict()["tasks"][0]
    flagged = asyncfl.FedASTRun(
        "fedast_s",
        (asyncfl.TaskConfig("a", dataset="shakespeare", model_flags={"hidden_size": 32}),),
    )
    d = flagged.to_dict()
    assert d["tasks"][0]["model_flags"] == {"hidden_size": 32}
    assert asyncfl.FedASTRun.from_dict(d).tasks[0].model_flags == {"hidden_size": 32}


# ------------------------------------------------------------------------------ Fig. 5, batch
def test_fig5_runs_on_fig2_pool(cpu):
    """Fig. 2's pool: N = 500, sum R = 192, first-15, timed as CIFAR-10: M = 2 gives R = 96 per
    task (b = ceil(96 / 32) = 3); M = 6 is Fig. 2's own run."""
    two = configs.fig2_config(cpu, "fedast_s", n_tasks=2)
    assert (two["num_clients"], two["k"]) == (500, 15)
    assert [t["requests"] for t in two["tasks"]] == [96, 96]
    assert {t["delay_ratio"] for t in two["tasks"]} == {0.228}
    assert configs.fig2_config(cpu, "fedast_s", n_tasks=6) == configs.fig2_config(cpu, "fedast_s")


def test_notebook_runs_count_by_hand(cpu):
    """cpu, one seed: the mix 4 (FedAST(D), FedAST(S), NoBuffer to fig4_time, Sync-ST; the
    ablation's regime_* keys equal the preset's, so its 2 runs are the same), Fig. 2 5, the
    buffer sweep 3, Fig. 5 2 (M = 6 is Fig. 2's), Fig. 3 3 x 2 = 6, the k sweep 3: 23; two seeds
    46. The four-task FedAST(D) run, the dearest, goes first."""
    runs = study.notebook_runs(cpu, [0])
    assert len(runs) == 23
    assert len(study.notebook_runs(cpu, [0, 1])) == 46
    first, seed = runs[0]
    assert first == configs.heterogeneous(cpu, "fedast_d") and seed == 0
    keys = {repr(asyncfl.FedASTRun.from_dict(c).validate().to_dict()) for c, _ in runs}
    for n_tasks in cpu["Ms"]:  # every section's configs are in the batch
        cfg = configs.fig2_config(cpu, "sync_st", n_tasks=n_tasks)
        assert repr(asyncfl.FedASTRun.from_dict(cfg).validate().to_dict()) in keys
    for b in cpu["buffers"]:
        cfg = study.buffer_config(cpu, b)
        assert repr(asyncfl.FedASTRun.from_dict(cfg).validate().to_dict()) in keys


# ------------------------------------------------------------------------------ readings
def _timing(ours_round: float) -> pd.DataFrame:
    keys = ("sync_round_length", "updates_per_sync_round", "staleness_mean")
    return pd.DataFrame(
        {
            "experiment": ["identical"] * 3,
            "key": list(keys),
            "paper": [10.0, 28.0, 30.0],
            "ours": [ours_round, 29.0, 30.0],
        }
    )


def test_timing_readings_by_hand():
    """Round length 11.9 is 19 % above 10: inside; 12.1 is 21 % above: outside."""
    inside = claim_readings.timing_readings(_timing(11.9), "fig2")
    assert [r.inside for r in inside] == [True, True, True]
    assert inside[0].indicator.key == "identical_sync_round_length"
    outside = claim_readings.timing_readings(_timing(12.1), "fig5")
    assert [r.inside for r in outside] == [False, True, True]
    assert claim_readings.timing_readings(None, "fig2") == []


_MEASURED_KEYS = """
import pandas as pd
from flkit.papers.fedast.regime import TIMING_CLAIMS, measure
rows = {(e, k) for e, keys in TIMING_CLAIMS.values() for k in keys}
timing = pd.DataFrame(
    [{"experiment": e, "key": k, "ours": 1.0, "paper": 1.0} for e, k in sorted(rows)]
)
print(list(measure(timing=timing)))
"""


def test_measured_keys_keep_one_order_whatever_the_string_hash():
    """A recorded claim's measurements come out in one order in every run: Python's string hash
    (and with it a set's order) changes from process to process, so three hash seeds must give
    one key order."""
    orders = {
        subprocess.run(
            [sys.executable, "-c", _MEASURED_KEYS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(3)
    }
    assert len(orders) == 1 and orders.pop().count("@paper") > 5


def test_timing_readings_bad_input():
    with pytest.raises(FlkitError, match=r"claim.*'fig9'.*fig2"):
        claim_readings.timing_readings(_timing(10.0), "fig9")
    with pytest.raises(FlkitError, match=r"'realloc_room' of experiment 'heterogeneous'"):
        claim_readings.timing_readings(_timing(10.0).assign(experiment="heterogeneous"), "dynamic")


def test_k_readings_by_hand(cpu):
    """ks 2 / 10 / 60 of N_avail = 100: 0.02 <= 0.1 and 0.6 >= 0.1 bracket the paper's 30/300;
    ks 20 / 60 start above it."""
    assert [r.inside for r in claim_readings.k_readings(cpu)] == [True, True]
    assert [r.ours for r in claim_readings.k_readings(cpu)] == [0.02, 0.6]
    assert [r.inside for r in claim_readings.k_readings(dict(cpu, ks=[20, 60]))] == [False, True]


def test_every_claim_of_the_cpu_run_carries_readings(cpu):
    """Each claim family of notebook 03 has its regime readings: the timing claims from the
    timing table, the buffer and k sweeps from the preset, the heterogeneous claims from the
    mix's timing row (regime.TIMING_CLAIMS, all in regime.REGIME)."""
    timing = {"fig2", "fig5", "fig3", "fig4", "dynamic", "heterogeneous"}
    assert set(regime.TIMING_CLAIMS) == timing
    assert set(regime.REGIME.claims) == timing | {"buffer", "k"}
    assert regime.TIMING_CLAIMS["heterogeneous"] == ("heterogeneous", ("updates_per_sync_round",))
    for experiment, keys in regime.TIMING_CLAIMS.values():
        assert experiment in regime.TIMING_EXPERIMENTS
        assert set(keys) <= set(regime.TIMING_INDICATORS)
    assert claim_readings.buffer_readings(cpu)[0].inside is True  # 1.16 vs 1.167


# ------------------------------------------------------------------------------ describe
def test_describe_shows_version0_and_the_evaluation(cpu):
    text = study.describe(cpu)
    assert "Version 0: `paper` (the paper's description" in text
    assert "LSTM hidden size 32 (paper 100)" in text
    # 0.5 / sqrt(2000) = 0.0112
    assert "subset of 2000 test items, binomial SE at most 0.011" in text
    official = study.describe(presets.load("03_fedast", "cpu", version0="official"))
    assert "Version 0: `official` (the official code: version 0 aliases the live model" in official
    full = study.evaluation_line(dict(cpu, eval_subset=0))
    assert full == "Every test runs on the full test set."
    assert math.isclose(0.5 / 2000**0.5, 0.01118, rel_tol=1e-3)
