"""The `long` cut rule of notebook 03 (README, "The `long` cut rule"): the CIFAR-10 probe's
reading on hand-made curves, the probe's input checks, the cost estimate on a hand-computed
example, the counts of the timing simulation against the simulator's own tallies, and the cuts
applied in the README's order to a fake estimate. No model is trained here."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from flkit import asyncfl
from flkit.papers.fedast import configs, cost, long_rule, regime, study
from flkit.utils import FlkitError
from flkit.workbook import presets

README = Path(study.__file__).with_name("README.md")
#: the simulator's completion times of the tasks that set T (MNIST, FMNIST, Shakespeare): T = 70
TIMES = {"mnist": 40.0, "fmnist": 55.0, "shakespeare": 70.0}


@pytest.fixture(scope="module")
def long():
    return presets.load("03_fedast", "long")


def _rows(task, points):
    return [{"task": task, "sim_time": t, "accuracy": a} for t, a in points]


def _history(cifar_points):
    """A probe's history: the three other tasks' evaluations (their completion times are
    ``TIMES``) and CIFAR-10's curve."""
    return (
        _rows("mnist", [(10, 0.5), (20, None), (40, 0.931)])
        + _rows("fmnist", [(15, 0.6), (55, 0.82)])
        + _rows("shakespeare", [(30, 0.2), (60, 0.419), (70, 0.425)])
        + _rows("cifar10", cifar_points)
    )


# ------------------------------------------------------------------------------ the probe's reading
def test_cifar_target_by_hand():
    # best by T = 70 is 0.31 (the 0.40 at t = 80 comes after T): 0.30, high 0.33
    got = long_rule.long_cifar_target(
        _history([(20, 0.12), (50, 0.31), (70, 0.29), (80, 0.40)]), TIMES
    )
    assert got["T"] == 70
    assert got["times"] == {"mnist": 40, "fmnist": 55, "shakespeare": 70}
    assert got["best"] == 0.31
    assert got["target"] == pytest.approx(0.30)
    assert got["high"] == pytest.approx(0.33)


def test_cifar_target_exact_multiple_and_cap():
    # 0.30 exactly is a multiple of 0.05 (0.30 / 0.05 is 5.999... in floating point)
    got = long_rule.long_cifar_target(_history([(70, 0.30)]), TIMES)
    assert got["target"] == pytest.approx(0.30)
    # above the paper's 0.63 by T: the paper's target itself, high 0.66
    got = long_rule.long_cifar_target(_history([(60, 0.65)]), TIMES)
    assert (got["target"], got["high"]) == (pytest.approx(0.63), pytest.approx(0.66))
    # 0.62 reached: the multiple of 0.05 below it, 0.60
    got = long_rule.long_cifar_target(_history([(60, 0.62)]), TIMES)
    assert got["target"] == pytest.approx(0.60)


def test_cifar_target_reads_a_frame():
    import pandas as pd

    got = long_rule.long_cifar_target(pd.DataFrame(_history([(50, 0.27)])), TIMES)
    assert got["target"] == pytest.approx(0.25)


def test_task_never_at_target_says_the_horizon_was_too_short():
    times = {**TIMES, "fmnist": None}
    with pytest.raises(FlkitError, match=r"\['fmnist'\] never reached.*horizon was too short"):
        long_rule.long_cifar_target(_history([(50, 0.31)]), times)


def test_cifar_below_the_first_step_gives_no_target():
    with pytest.raises(FlkitError, match=r"'cifar10' reached no multiple of 0.05 by T = 70"):
        long_rule.long_cifar_target(_history([(20, 0.04), (90, 0.5)]), TIMES)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"completion": {**TIMES, "emnist": 8.0}}, r"unknown task 'emnist'; accepted: the run's"),
        ({"cifar": "cifar100"}, r"unknown task 'cifar100'"),
        ({"completion": {**TIMES, "cifar10": 60.0}}, r"completion names 'cifar10'"),
        ({"completion": {}}, r"completion=\{\}; accepted"),
        (
            {"completion": {**TIMES, "mnist": -1.0}},
            r"completion time of 'mnist'=-1.0; accepted: a finite real number in \[0, inf\)",
        ),
        ({"step": 0}, r"step=0; accepted: a finite real number in \(0, inf\)"),
        ({"step": -0.05}, r"step=-0.05"),
        ({"cap": 0.0}, r"cap=0.0"),
        ({"high_above": -0.03}, r"high_above=-0.03; accepted: a finite real number in \[0, inf\)"),
    ],
)
def test_cifar_target_bad_input(kw, match):
    args = {"completion": TIMES, **kw}
    with pytest.raises(FlkitError, match=match):
        long_rule.long_cifar_target(_history([(50, 0.31)]), **args)


# ------------------------------------------------------------------------------ the probe
@pytest.mark.parametrize("horizon", [0, -5.0, math.inf, math.nan, "300", True, None])
def test_probe_refuses_a_bad_horizon_before_any_work(long, monkeypatch, horizon):
    def never(*a, **k):
        raise AssertionError("the probe ran")

    monkeypatch.setattr(asyncfl, "run", never)
    monkeypatch.setattr(study, "use_threads", never)
    with pytest.raises(
        FlkitError, match=r"horizon=.*; accepted: a finite real number in \(0, inf\)"
    ):
        study.long_cifar_probe(long, horizon=horizon)


def test_probe_refuses_a_mix_without_cifar(long, monkeypatch):
    monkeypatch.setattr(asyncfl, "run", lambda *a, **k: pytest.fail("the probe ran"))
    mix = {**long, "het_datasets": ["mnist", "fmnist", "mnist", "shakespeare"]}
    with pytest.raises(FlkitError, match=r"het_datasets=.*accepted: a mix with a 'cifar10' task"):
        study.long_cifar_probe(mix)


def test_probe_runs_the_mix_with_cifar_at_the_papers_target(long, monkeypatch):
    """The run the probe hands the simulator: `long`'s FedAST(D) mix, CIFAR-10 at 0.63 even when
    the preset's main target was cut, the other main targets kept, max_time the horizon; the
    reading takes T from the simulator's completion times and CIFAR-10's curve from the history."""
    seen = {}

    def fake(cfg, seed=0, **kw):
        seen.update(cfg=cfg, seed=seed, **kw)
        return asyncfl.SimResult(
            "FedAST(D)",
            [t["name"] for t in cfg["tasks"]],
            [],
            _history([(60, 0.36)]),
            {**TIMES, "cifar10": None},  # the simulator's completion times
            300.0,
        )

    monkeypatch.setattr(asyncfl, "run", fake)
    monkeypatch.setattr(study, "use_threads", lambda p: 1)
    cut = {**long, "het_targets_main": [0.93, 0.82, 0.25, 0.42]}
    got = study.long_cifar_probe(cut, seed=0, horizon=250.0, out_dir="/tmp/nowhere")
    cfg = seen["cfg"]
    assert cfg["method"] == "fedast_d" and cfg["max_time"] == 250.0 and seen["seed"] == 0
    assert seen["root"] == "/tmp/nowhere"
    assert {t["name"]: t["target"] for t in cfg["tasks"]} == {
        "mnist": 0.93,
        "fmnist": 0.82,
        "cifar10": 0.63,
        "shakespeare": 0.42,
    }
    assert cfg == configs.heterogeneous(
        {**long, "het_targets_main": [0.93, 0.82, 0.63, 0.42]}, "fedast_d", max_time=250.0
    )
    assert got["T"] == 70 and got["target"] == pytest.approx(0.35) and got["horizon"] == 250.0


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
