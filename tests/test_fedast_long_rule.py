"""The `long` cut rule of notebook 03 (README, "The `long` cut rule", as amended): both probes'
readings on hand-made curves and their input checks, the recorded first reading against the
README, the probes' runs (a fake simulator), the cost estimate on a hand-computed example, the
counts of the timing simulation against the simulator's own tallies, and the cuts applied in the
README's order to a fake estimate. No model is trained here."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from flkit import asyncfl
from flkit.papers.fedast import configs, cost, long_build, long_rule, regime, study
from flkit.utils import FlkitError
from flkit.workbook import presets

README = Path(study.__file__).with_name("README.md")
#: the paper's main targets (Table 1)
PAPER = {"mnist": 0.93, "fmnist": 0.82, "cifar10": 0.63, "shakespeare": 0.42}
#: a first probe's completion times: MNIST and FMNIST reached, T = 55 (FMNIST's)
TIMES = {"mnist": 40.0, "fmnist": 55.0, "cifar10": None, "shakespeare": None}


@pytest.fixture(scope="module")
def long():
    return long_build.uncut(presets.load("03_fedast", "long"))


def _rows(task, points):
    return [{"task": task, "sim_time": t, "accuracy": a} for t, a in points]


def _history(cifar_points, shakespeare_points=((30, 0.2), (50, 0.37), (80, 0.41))):
    """A first probe's history: MNIST and FMNIST at their targets at 40 and 55 (``TIMES``),
    CIFAR-10's and Shakespeare's curves."""
    return (
        _rows("mnist", [(10, 0.5), (20, None), (40, 0.931)])
        + _rows("fmnist", [(15, 0.6), (30, math.nan), (55, 0.82)])
        + _rows("shakespeare", shakespeare_points)
        + _rows("cifar10", cifar_points)
    )


# ------------------------------------------------------------------------------ the first reading
def test_main_targets_by_hand():
    """T = 55, FMNIST's time; by then CIFAR-10's best is 0.31 (its 0.40 at t = 80 comes after T)
    and Shakespeare's 0.37: both 0.30 (0.35 for Shakespeare), highs 0.03 above; MNIST and FMNIST
    keep the paper's targets, highs 0.96 and 0.85."""
    got = long_rule.long_main_targets(
        _history([(20, 0.12), (50, 0.31), (55, 0.29), (80, 0.40)]), TIMES, PAPER
    )
    assert got["T"] == 55 and got["set_by"] == "fmnist"
    assert got["times"] == {"mnist": 40, "fmnist": 55}
    assert got["best"] == {"cifar10": 0.31, "shakespeare": 0.37}
    assert got["main"] == {
        "mnist": 0.93,
        "fmnist": 0.82,
        "cifar10": pytest.approx(0.30),
        "shakespeare": pytest.approx(0.35),
    }
    assert got["high"] == {
        "mnist": pytest.approx(0.96),
        "fmnist": pytest.approx(0.85),
        "cifar10": pytest.approx(0.33),
        "shakespeare": pytest.approx(0.38),
    }


def test_main_targets_step_edges_and_cap():
    # an evaluation at T itself counts; 0.30 exactly is 6 steps of 0.05 (5.999... in floating point)
    got = long_rule.long_main_targets(_history([(55, 0.30)]), TIMES, PAPER)
    assert got["main"]["cifar10"] == pytest.approx(0.30)
    # a best above the paper's target (a history the completion times disagree with): the target
    got = long_rule.long_main_targets(_history([(50, 0.66)]), TIMES, {**PAPER, "cifar10": 0.63})
    assert got["main"]["cifar10"] == pytest.approx(0.63)
    assert got["high"]["cifar10"] == pytest.approx(0.66)
    # another step and another distance to the high level
    got = long_rule.long_main_targets(_history([(50, 0.27)]), TIMES, PAPER, step=0.1, high_above=0)
    assert (got["main"]["cifar10"], got["high"]["cifar10"]) == (pytest.approx(0.2),) * 2


def test_main_targets_read_a_frame():
    import pandas as pd

    got = long_rule.long_main_targets(pd.DataFrame(_history([(50, 0.27)])), TIMES, PAPER)
    assert got["main"]["cifar10"] == pytest.approx(0.25)


def test_main_targets_when_every_task_reached():
    got = long_rule.long_main_targets(
        _history([(60, 0.64)], [(70, 0.43)]),
        {"mnist": 40.0, "fmnist": 55.0, "cifar10": 60.0, "shakespeare": 70.0},
        PAPER,
    )
    assert (got["T"], got["set_by"], got["best"]) == (70, "shakespeare", {})
    assert got["main"] == PAPER


def test_no_task_at_target_says_the_horizon_was_too_short():
    with pytest.raises(FlkitError, match=r"no task reached its target.*horizon was too short"):
        long_rule.long_main_targets(_history([(50, 0.31)]), dict.fromkeys(TIMES), PAPER)


def test_a_missed_task_below_the_first_step_gives_no_target():
    # CIFAR-10 at 0.04 by T = 55 (its 0.5 at t = 90 comes after T)
    with pytest.raises(FlkitError, match=r"'cifar10' reached no multiple of 0.05 by T = 55 .*0.04"):
        long_rule.long_main_targets(_history([(20, 0.04), (90, 0.5)]), TIMES, PAPER)
    # no evaluation at all by T
    with pytest.raises(FlkitError, match=r"'shakespeare' reached no multiple"):
        long_rule.long_main_targets(_history([(50, 0.3)], [(60, 0.4)]), TIMES, PAPER)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"completion": {}}, r"completion=\{\}; accepted: the run's SimResult.completion_time"),
        (
            {"paper_targets": {**PAPER, "emnist": 0.9}},
            r"paper_targets names unknown task 'emnist'; accepted: the run's tasks \['mnist'",
        ),
        (
            {"paper_targets": {"mnist": 0.93, "fmnist": 0.82}},
            r"gives no level for \['cifar10', 'shakespeare'\]; accepted: one level per task",
        ),
        (
            {"paper_targets": {**PAPER, "cifar10": 63}},
            r"paper_targets\['cifar10'\]=63; accepted: a finite real number in \(0, 1\]",
        ),
        ({"paper_targets": {**PAPER, "mnist": 0}}, r"paper_targets\['mnist'\]=0; accepted"),
        (
            {
                "completion": {"mnist": 40.0, "fmnist": 55.0, "cifar10": None},
                "paper_targets": {"mnist": 0.93, "fmnist": 0.82, "cifar10": 0.63},
            },
            r"the history has task 'shakespeare', which completion does not",
        ),
        (
            {"completion": {**TIMES, "mnist": -1.0}},
            r"completion time of 'mnist'=-1.0; accepted: a finite real number in \[0, inf\)",
        ),
        ({"completion": {**TIMES, "mnist": "40"}}, r"completion time of 'mnist'='40'"),
        ({"step": 0}, r"step=0; accepted: a finite real number in \(0, inf\)"),
        ({"step": -0.05}, r"step=-0.05"),
        ({"high_above": -0.03}, r"high_above=-0.03; accepted: a finite real number in \[0, inf\)"),
    ],
)
def test_main_targets_bad_input(kw, match):
    args = {"completion": TIMES, "paper_targets": PAPER, **kw}
    with pytest.raises(FlkitError, match=match):
        long_rule.long_main_targets(_history([(50, 0.31)]), **args)


def test_first_probe_record_is_the_rules_reading():
    """The recorded first reading is what the rule gives on a curve with the recorded numbers:
    MNIST and FMNIST at their times, Shakespeare's and CIFAR-10's bests by T, and higher
    accuracies after T that must not count (the probe's 0.409 and 0.511)."""
    rec = long_rule.FIRST_PROBE
    t = rec["T"]
    history = (
        _rows("mnist", [(rec["times"]["mnist"], 0.93)])
        + _rows("fmnist", [(t / 2, 0.7), (rec["times"]["fmnist"], 0.82)])
        + _rows("shakespeare", [(t - 10, rec["best"]["shakespeare"]), (t + 1, 0.409)])
        + _rows("cifar10", [(t, rec["best"]["cifar10"]), (t + 20, 0.511)])
    )
    completion = {**rec["times"], "cifar10": None, "shakespeare": None}
    got = long_rule.long_main_targets(history, completion, PAPER)
    for key in ("T", "set_by", "times", "best"):
        assert got[key] == rec[key]
    assert got["main"] == pytest.approx(rec["main"]) and got["high"] == pytest.approx(rec["high"])


def test_readme_states_the_recorded_first_reading():
    """The README's "first reading" gives FIRST_PROBE: T and the task that sets it, MNIST's time
    (rounded to a whole unit there), then Shakespeare's and CIFAR-10's best, main and high."""
    text = README.read_text()
    start = text.index("**The amended rule's first reading:**")
    para = " ".join(text[start : text.index("\n\n", start)].split())
    rec = long_rule.FIRST_PROBE
    assert re.search(rf"T = {rec['T']:g}, set by FMNIST", para) and rec["set_by"] == "fmnist"
    numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", para.replace("CIFAR-10", "CIFAR"))]
    missed = ("shakespeare", "cifar10")
    assert para.index("Shakespeare") < para.index("CIFAR-10")
    expected = [rec["T"], round(rec["times"]["mnist"])]
    for task in missed:
        expected += [rec["best"][task], rec["main"][task], rec["high"][task]]
    assert numbers == expected
    # the tasks that reached keep the paper's targets
    assert rec["main"] == {**PAPER, **{t: rec["main"][t] for t in missed}}


# ------------------------------------------------------------------------------ the second reading
#: a second probe at the high targets of FIRST_PROBE's kind: main 0.93 / 0.82 / 0.35 / 0.35
MAIN = {"mnist": 0.93, "fmnist": 0.82, "cifar10": 0.35, "shakespeare": 0.35}
HIGH = {"mnist": 0.96, "fmnist": 0.85, "cifar10": 0.38, "shakespeare": 0.38}


def _second(cifar_points, shakespeare_points):
    return (
        _rows("mnist", [(30, 0.9), (90, 0.962)])
        + _rows("fmnist", [(50, 0.8), (120, 0.851)])
        + _rows("cifar10", cifar_points)
        + _rows("shakespeare", shakespeare_points)
    )


def test_high_targets_all_reached():
    completion = {"mnist": 90.0, "fmnist": 120.0, "cifar10": 150.0, "shakespeare": 200.0}
    got = long_rule.long_high_targets(
        _second([(150, 0.381)], [(200, 0.38)]), completion, MAIN, HIGH
    )
    assert (got["T_high"], got["set_by"]) == (200, "shakespeare")
    assert got["high"] == HIGH and got["times"] == completion
    assert (got["best"], got["lowered"], got["one_level"]) == ({}, [], [])


def test_high_targets_lowered_and_one_level():
    """CIFAR-10 misses 0.38, its best 0.374 (after an earlier 0.371, then a dip): 0.37, first
    reached at t = 140; Shakespeare's best 0.359 has no multiple of 0.01 above its main 0.35 (0.35
    itself is not above): one level. T_high = 140, CIFAR-10's, above FMNIST's 120."""
    completion = {"mnist": 90.0, "fmnist": 120.0, "cifar10": None, "shakespeare": None}
    got = long_rule.long_high_targets(
        _second(
            [(100, 0.36), (140, 0.371), (160, None), (180, 0.366), (400, 0.374)],
            [(100, 0.35), (300, 0.359)],
        ),
        completion,
        MAIN,
        HIGH,
    )
    assert got["high"] == {
        "mnist": 0.96,
        "fmnist": 0.85,
        "cifar10": pytest.approx(0.37),
        "shakespeare": None,
    }
    assert got["times"] == {"mnist": 90, "fmnist": 120, "cifar10": 140}
    assert (got["T_high"], got["set_by"]) == (140, "cifar10")
    assert got["best"] == {"cifar10": 0.374, "shakespeare": 0.359}
    assert (got["lowered"], got["one_level"]) == (["cifar10"], ["shakespeare"])


def test_high_targets_exact_multiples_and_late_crossing():
    # 0.37 exactly is 37 steps of 0.01 (0.37 / 0.01 is 36.999... in floating point); a lowered
    # level reached late sets T_high; 0.36 exactly is above the main 0.35
    completion = {"mnist": 90.0, "fmnist": 120.0, "cifar10": None, "shakespeare": None}
    got = long_rule.long_high_targets(
        _second([(100, 0.3), (500, 0.37)], [(50, 0.36)]), completion, MAIN, HIGH
    )
    assert got["high"]["cifar10"] == pytest.approx(0.37)
    assert got["high"]["shakespeare"] == pytest.approx(0.36)
    assert got["times"]["shakespeare"] == 50
    assert (got["T_high"], got["set_by"]) == (500, "cifar10")


def test_high_targets_no_high_level_at_all():
    completion = dict.fromkeys(MAIN)
    got = long_rule.long_high_targets(
        _second([(10, 0.2)], [(10, 0.1)]), completion, MAIN, {**HIGH, "mnist": 0.99}
    )
    # MNIST (0.962 > its main 0.93) and FMNIST (0.851 > 0.82) are lowered; the others have none
    assert got["high"] == {
        "mnist": pytest.approx(0.96),
        "fmnist": pytest.approx(0.85),
        "cifar10": None,
        "shakespeare": None,
    }
    got = long_rule.long_high_targets(
        _rows("mnist", [(10, 0.5)]), {"mnist": None}, {"mnist": 0.93}, {"mnist": 0.96}
    )
    assert (got["T_high"], got["set_by"], got["high"]) == (None, None, {"mnist": None})


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"completion": {}}, r"completion=\{\}; accepted"),
        (
            {"main_targets": {**MAIN, "emnist": 0.9}},
            r"main_targets names unknown task 'emnist'; accepted: the run's tasks",
        ),
        (
            {"high_targets": {"mnist": 0.96}},
            r"high_targets=.* gives no level for \['fmnist', 'cifar10', 'shakespeare'\]",
        ),
        ({"high_targets": {**HIGH, "cifar10": 1.2}}, r"high_targets\['cifar10'\]=1.2; accepted"),
        (
            {"high_targets": {**HIGH, "cifar10": 0.35}},
            r"high_targets\['cifar10'\]=0.35; accepted: a level above its main target 0.35",
        ),
        (
            {"completion": {**dict.fromkeys(MAIN), "mnist": math.inf}},
            r"completion time of 'mnist'=inf; accepted",
        ),
        ({"step": 0.0}, r"step=0.0; accepted: a finite real number in \(0, inf\)"),
    ],
)
def test_high_targets_bad_input(kw, match):
    args = {
        "completion": dict.fromkeys(MAIN),
        "main_targets": MAIN,
        "high_targets": HIGH,
        **kw,
    }
    with pytest.raises(FlkitError, match=match):
        long_rule.long_high_targets(_second([(10, 0.3)], [(10, 0.3)]), **args)


# ------------------------------------------------------------------------------ the probes
def _never(*a, **k):
    raise AssertionError("the probe ran")


@pytest.mark.parametrize("horizon", [0, -5.0, math.inf, math.nan, "300", True, None])
def test_probes_refuse_a_bad_horizon_before_any_work(long, monkeypatch, horizon):
    monkeypatch.setattr(asyncfl, "run", _never)
    monkeypatch.setattr(long_build, "use_threads", _never)
    match = r"horizon=.*; accepted: a finite real number in \(0, inf\)"
    with pytest.raises(FlkitError, match=match):
        long_build.long_main_probe(long, horizon=horizon)
    with pytest.raises(FlkitError, match=match):
        long_build.long_high_probe(long, long_rule.FIRST_PROBE, horizon=horizon)


def test_probes_refuse_a_dataset_without_the_papers_targets(long, monkeypatch):
    monkeypatch.setattr(asyncfl, "run", _never)
    mix = {**long, "het_datasets": ["mnist", "fmnist", "cifar10", "synthetic"]}
    match = r"het_datasets=.*accepted: a mix of datasets with the paper's targets.*'synthetic'"
    with pytest.raises(FlkitError, match=match):
        long_build.long_main_probe(mix)
    with pytest.raises(FlkitError, match=match):
        long_build.long_high_probe(mix, long_rule.FIRST_PROBE)


@pytest.mark.parametrize(
    ("reading", "match"),
    [
        (None, r"first_reading\['main'\]=None; accepted: the first probe's reading"),
        ({"main": {}, "high": {}}, r"first_reading\['times'\]=None; accepted"),
        (
            {**long_rule.FIRST_PROBE, "times": {"emnist": 3.0}},
            r"first_reading\['times'\]=\{'emnist': 3.0\}; accepted: .*\['mnist', 'fmnist'",
        ),
        (
            {**long_rule.FIRST_PROBE, "high": {"mnist": 0.96}},
            r"first_reading\['high'\] names \['mnist'\]; accepted: every task of the mix",
        ),
        (
            {**long_rule.FIRST_PROBE, "high": {**long_rule.FIRST_PROBE["high"], "cifar10": 0.3}},
            r"high target of 'cifar10'=0.3; accepted: a level above its main target 0.35",
        ),
    ],
)
def test_high_probe_refuses_a_bad_first_reading(long, monkeypatch, reading, match):
    monkeypatch.setattr(asyncfl, "run", _never)
    monkeypatch.setattr(long_build, "use_threads", _never)
    with pytest.raises(FlkitError, match=match):
        long_build.long_high_probe(long, reading)


def _fake_run(seen, history, completion):
    def fake(cfg, seed=0, **kw):
        seen.update(cfg=cfg, seed=seed, **kw)
        names = [t["name"] for t in cfg["tasks"]]
        return asyncfl.SimResult("FedAST(D)", names, [], history, completion, cfg["max_time"])

    return fake


def test_main_probe_runs_the_mix_at_the_papers_targets(long, monkeypatch):
    """The run the first probe hands the simulator: `long`'s FedAST(D) mix with every task at the
    paper's main target even when the preset's were cut, max_time the horizon; the reading takes
    T from the simulator's completion times and the missed tasks' curves from the history."""
    seen = {}
    fake = _fake_run(seen, _history([(50, 0.36)]), TIMES)
    monkeypatch.setattr(asyncfl, "run", fake)
    monkeypatch.setattr(long_build, "use_threads", lambda p: 1)
    cut = {**long, "het_targets_main": [0.83, 0.72, 0.25, 0.32]}
    got = long_build.long_main_probe(cut, seed=0, horizon=250.0, out_dir="/tmp/nowhere")
    cfg = seen["cfg"]
    assert cfg["method"] == "fedast_d" and cfg["max_time"] == 250.0 and seen["seed"] == 0
    assert seen["root"] == "/tmp/nowhere"
    assert {t["name"]: t["target"] for t in cfg["tasks"]} == PAPER
    assert cfg == configs.heterogeneous(
        {**long, "het_targets_main": [0.93, 0.82, 0.63, 0.42]}, "fedast_d", max_time=250.0
    )
    assert got["T"] == 55 and got["horizon"] == 250.0
    assert got["main"]["cifar10"] == pytest.approx(0.35)
    assert got["main"]["shakespeare"] == pytest.approx(0.35)
    assert got["result"].total_time == 250.0


def test_high_probe_runs_the_mix_at_the_high_targets(long, monkeypatch):
    """The second probe on the recorded first reading: MNIST and FMNIST at the preset's high
    targets (0.96, 0.85), Shakespeare and CIFAR-10 at the first reading's (0.38), max_time the
    horizon; its reading lowers CIFAR-10 to 0.37 and leaves Shakespeare one level."""
    seen = {}
    history = _second([(140, 0.371), (400, 0.374)], [(300, 0.359)])
    completion = {"mnist": 90.0, "fmnist": 120.0, "cifar10": None, "shakespeare": None}
    monkeypatch.setattr(asyncfl, "run", _fake_run(seen, history, completion))
    monkeypatch.setattr(long_build, "use_threads", lambda p: 1)
    got = long_build.long_high_probe(long, long_rule.FIRST_PROBE, seed=0, out_dir="/tmp/nowhere")
    cfg = seen["cfg"]
    assert cfg["method"] == "fedast_d" and cfg["max_time"] == 600.0 and seen["seed"] == 0
    assert seen["root"] == "/tmp/nowhere"
    targets = {"mnist": 0.96, "fmnist": 0.85, "cifar10": 0.38, "shakespeare": 0.38}
    assert {t["name"]: t["target"] for t in cfg["tasks"]} == targets
    assert cfg == configs.heterogeneous(
        {**long, "het_targets_high": [0.96, 0.85, 0.38, 0.38]}, "fedast_d", "high", max_time=600.0
    )
    assert got["targets"] == targets and got["main"] == long_rule.FIRST_PROBE["main"]
    assert got["high"]["cifar10"] == pytest.approx(0.37) and got["high"]["shakespeare"] is None
    assert (got["T_high"], got["horizon"]) == (140, 600.0)


# ------------------------------------------------------------------------------ the estimate
def test_estimate_by_hand():
    """a, one seed: 100 x 0.08 + 10 x 0.023 + 50 x 0.28 + 4 x 0.155 = 22.85, + 2 runs x 3 s =
    28.85, x 3 seeds = 86.55; b: 20 x 1.1 + 2 x 0.37 = 22.74, + 3 = 25.74, x 3 = 77.22; the sum
    163.77 over 2 jobs: 81.885 s."""
    counts = {
        "a": {"mnist_mlp": (100, 10), "cifar10_lenet5": (50, 4)},
        "b": {"shakespeare_lstm100": (20, 2)},
    }
    got = cost.estimate(counts, {"a": 2, "b": 1}, seeds=3, jobs=2)
    assert got["core_seconds"] == {"a": pytest.approx(86.55), "b": pytest.approx(77.22)}
    assert got["total_core_seconds"] == pytest.approx(163.77)
    assert got["wall_seconds"] == pytest.approx(81.885)
    assert got["wall_minutes"] == pytest.approx(81.885 / 60)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"seeds": 0}, r"seeds=0; accepted: an integer >= 1"),
        ({"jobs": 1.5}, r"jobs=1.5; accepted: an integer >= 1"),
        (
            {"prices": {**cost.PRICES, "mnist_mlp": {"request": -0.08, "test": 0.023}}},
            r"request price of 'mnist_mlp'=-0.08; accepted: a finite real number in \[0, inf\)",
        ),
        ({"counts": {"a": {"emnist_cnn": (1, 1)}}}, r"unknown learner 'emnist_cnn'; accepted:"),
        ({"counts": {"a": {"mnist_mlp": (-1, 0)}}}, r"trainings of 'mnist_mlp' in 'a'=-1"),
        ({"counts": {"c": {"mnist_mlp": (1, 0)}}}, r"experiment 'c' has no run count"),
    ],
)
def test_estimate_bad_input(kw, match):
    args = {"counts": {"a": {"mnist_mlp": (1, 1)}}, "runs": {"a": 1}, "seeds": 3, "jobs": 2, **kw}
    with pytest.raises(FlkitError, match=match):
        cost.estimate(**args)


def test_price_keys(long):
    keys = {t["name"]: cost.price_key(t) for t in configs.heterogeneous(long, "fedast_d")["tasks"]}
    assert keys == {
        "mnist": "mnist_mlp",
        "fmnist": "fmnist_mlp",
        "cifar10": "cifar10_lenet5",
        "shakespeare": "shakespeare_lstm100",
    }
    cut = configs.heterogeneous({**long, "shakespeare_width": 32}, "fedast_d")["tasks"][3]
    assert cost.price_key(cut) == "shakespeare_lstm32"
    with pytest.raises(
        FlkitError, match=r"no price for dataset 'cifar10' with model 'cnn_cifar10'"
    ):
        cost.price_key({"dataset": "cifar10"})


def test_counting_trainer_matches_the_simulators_tallies(long):
    """What the counting trainer is asked for equals what the simulator says it trained, and one
    test per history row with an accuracy."""
    for method in ("fedast_s", "sync_st"):
        cfg = configs.heterogeneous(long, method)
        run = regime.timing_config(cfg, 8.0, None).validate()
        trainer = cost.CountingTrainer()
        runner = asyncfl.run_sync if run.is_sync else asyncfl.run_fedast
        res = runner(run, trainer, seed=0)
        assert sum(trainer.trainings.values()) == res.stats["trained_requests"] > 0
        tested = sum(r["accuracy"] is not None for r in res.history)
        assert sum(trainer.tests.values()) == tested > 0


def test_count_runs_covers_the_notebooks_runs(long):
    """Every trained run of the notebook counted once, plus the centralised reference (3,000 steps
    priced as 3000 / 27 requests). The mix: FedAST(D) and (S) at both levels and Sync-ST; at
    `long` the ablation's preset is `long` itself, so its two runs are those (5, not 7); Fig. 5's
    M = 6 is Fig. 2's run (4 of its 6)."""
    horizons = dict.fromkeys(("mix", "fig2", "buffer", "fig5", "k", "fig3"), 2.0)
    counts, runs = cost.count_runs({**long, "active_arrivals": 20}, horizons)
    assert runs == {
        "mix": 5,
        "fig4": 1,
        "fig2": 5,
        "buffer": 3,
        "fig5": 4,
        "fig3": 6,
        "k": 3,
        "central": 1,
    }
    assert sum(runs.values()) - 1 == len(configs.notebook_runs(long, [0]))
    assert set(counts["mix"]) == set(cost.PRICES) - {"shakespeare_lstm32"}
    assert counts["central"] == {"mnist_mlp": (pytest.approx(3000 / 27), 1)}
    with pytest.raises(FlkitError, match=r"unknown experiment 'fig9'"):
        cost.count_runs(long, {"fig9": 10.0})
    with pytest.raises(FlkitError, match=r"horizon of 'mix'=-1"):
        cost.count_runs(long, {"mix": -1})


# ------------------------------------------------------------------------------ the cuts
SAVES = {  # minutes each cut's change removes in the fake estimate
    "shakespeare_width": 20,
    "fig4_time": 10,
    "active_arrivals": 15,
    "buffers": 5,
    "ks": 5,
    "Ms": 3,
    "central_steps": 2,
}


def _fake(base):
    after = {c.key: c.after for c in long_rule.LONG_CUTS}
    return lambda p: base - sum(m for k, m in SAVES.items() if p[k] == after[k])


def test_cuts_stop_at_the_first_estimate_within_the_aim(long):
    # 150 -> 130 (2) -> 120 (3) -> 105 (4) -> 95 (5: both sweeps): at most 100, stop
    got = long_rule.long_cuts(_fake(150), long)
    assert got["steps"] == [(1, 150), (2, 130), (3, 120), (4, 105), (5, 95)]
    assert got["overrides"] == {
        "shakespeare_width": 32,
        "fig4_time": 100.0,
        "active_arrivals": 200,
        "buffers": [1, 2, 8],
        "ks": [2, 10, 60],
    }
    assert got["minutes"] == 95 and got["offered"] is True
    assert got["preset"]["Ms"] == [2, 4, 6] and long["shakespeare_width"] == 0  # a copy


def test_cuts_all_made(long):
    # every cut removes 60 minutes in all: 300 -> 240, above 2 hours: not offered
    got = long_rule.long_cuts(_fake(300), long)
    assert [n for n, _ in got["steps"]] == [1, 2, 3, 4, 5, 6, 7]
    assert got["minutes"] == 240 and got["offered"] is False
    # 170 -> 110: every cut made, above the aim, within 2 hours: offered
    got = long_rule.long_cuts(_fake(170), long)
    assert len(got["steps"]) == 7 and got["minutes"] == 110 and got["offered"] is True
    # within the aim uncut: nothing cut
    got = long_rule.long_cuts(_fake(90), long)
    assert got["steps"] == [(1, 90)] and got["overrides"] == {}


def test_cuts_refuse_a_preset_not_uncut(long):
    with pytest.raises(FlkitError, match=r"cut 3: fig4_time=50.0; accepted: the uncut `long`"):
        long_rule.long_cuts(_fake(150), {**long, "fig4_time": 50.0})
    with pytest.raises(FlkitError, match=r"aim=0; accepted"):
        long_rule.long_cuts(_fake(150), long, aim=0)


def _numbers(text):
    """The values a cut's words give (names in backquotes, such as `fig4_time`, left out)."""
    text = re.sub(r"`[^`]*`", "", text)
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def _flat(v):
    return [float(x) for x in (v if isinstance(v, list) else [v])]


def test_readme_lists_the_same_cuts_in_order():
    """The README's rule names every cut of LONG_CUTS, in order, with its values (the preset's
    shakespeare_width 0 is the paper's 100); the cut values of the sweeps and Fig. 5 are `cpu`'s."""
    text = README.read_text()
    part = text[text.index("### The `long` cut rule") :]
    part = " ".join(part[: part.index("\n## ")].split())
    at = 0
    for cut in long_rule.LONG_CUTS:
        words = " ".join(cut.words.split())
        found = part.find(words, at)
        assert found >= 0, f"cut {cut.number} ({cut.key}): {words!r} not in order in the README"
        assert part.rfind(f"{cut.number}. ", 0, found) > part.rfind(f"{cut.number + 1}. ", 0, found)
        at = found + len(words)
        before = [100.0] if cut.key == "shakespeare_width" else _flat(cut.before)
        assert _numbers(words) == before + _flat(cut.after)
    cpu = presets.load("03_fedast", "cpu")
    for cut in long_rule.LONG_CUTS:
        if cut.key in ("shakespeare_width", "buffers", "ks", "Ms"):
            assert cpu[cut.key] == cut.after
