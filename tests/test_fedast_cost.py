"""Notebook 03's cost estimate (README, "Cost"): the estimate on a hand-computed example, the
learners' prices, the counts of the timing simulation against the simulator's own tallies and
per run, the notebook's runs counted once, and the read-only lookup of cached runs. Nothing is
trained: the counts come from the timing simulation at a few time units, and the cached runs are
hand-made results written into a temporary run cache."""

from __future__ import annotations

import math

import pytest
import torch

from flkit import asyncfl, store
from flkit.asyncfl import runner
from flkit.papers.fedast import configs, cost
from flkit.utils import FlkitError
from flkit.workbook import presets

EXPERIMENTS = ("mix", "fig4", "fig2", "buffer", "fig5", "fig3", "k")


@pytest.fixture(scope="module")
def long():
    return presets.load("03_fedast", "long")


@pytest.fixture(scope="module")
def tiny():
    """`cpu` with every run stopping within 2 time units (Fig. 3 at 6 arrivals): the timing
    simulation of all its runs takes well under a second."""
    return presets.load(
        "03_fedast", "cpu", max_time=2.0, fig4_time=1.0, buffer_time=2.0, active_arrivals=2
    )


def _key(cfg):
    return configs.run_key(cfg)


def _tally(cfg: dict, horizon: float | None) -> tuple[int, int]:
    """(trainings, tests) the simulator itself reports for one timing-only run to ``horizon``
    (capped by its max_time), without the estimate's counting trainer."""
    run = asyncfl.FedASTRun.from_dict(cfg)
    limit = min((x for x in (run.max_time, horizon) if x is not None), default=math.inf)
    res = asyncfl.timing_run(cfg, 0, limit, run.max_events)
    return res.stats["trained_requests"], sum(r["accuracy"] is not None for r in res.history)


def _totals(counts: dict, exp: str) -> tuple[int, int]:
    per = counts[exp].values()
    return sum(tr for tr, _ in per), sum(te for _, te in per)


# ------------------------------------------------------------------------------ per-run horizons
def test_old_form_counts_each_run_to_its_experiments_horizon(tiny):
    """The one-time-per-experiment form, as before: each experiment's trainings and tests are the
    simulator's own tallies of its runs, each run to min(horizon, max_time)."""
    given = {"mix": 1.0, "fig2": 1.5, "buffer": 1.0}
    counts, runs = cost.count_runs(tiny, given)
    groups = cost.experiment_runs(tiny)
    for exp in EXPERIMENTS:
        want = [_tally(cfg, given.get(exp)) for cfg in groups[exp]]
        assert _totals(counts, exp) == (sum(w[0] for w in want), sum(w[1] for w in want)), exp
        assert runs[exp] == len(groups[exp])


def test_per_run_forms_give_the_old_forms_counts(tiny):
    """One time for an experiment, the same time for each of its runs by key, and a function
    giving it for every config: three spellings of one horizon, one count."""
    old = {exp: 1.0 for exp in EXPERIMENTS}
    groups = cost.experiment_runs(tiny)
    by_key = {exp: {_key(c): 1.0 for c in groups[exp]} for exp in EXPERIMENTS}
    by_fn = {exp: (lambda cfg: 1.0) for exp in EXPERIMENTS}
    want = cost.count_runs(tiny, old)
    assert cost.count_runs(tiny, by_key) == want
    assert cost.count_runs(tiny, by_fn) == want


def test_per_run_horizons_reach_their_own_runs(tiny):
    """The buffer sweep (b = 8, 2, 1) with a horizon per run: 0.5, 1.5 and None (its own
    buffer_time, 2): the count is the sum of the simulator's tallies of each run to its own
    horizon, and differs from one horizon for all three."""
    b8, b2, b1 = cost.experiment_runs(tiny)["buffer"]
    assert [c["tasks"][0]["buffer"] for c in (b8, b2, b1)] == [8, 2, 1]
    per_run = {_key(b8): 0.5, _key(b2): 1.5, _key(b1): None}
    counts, _ = cost.count_runs(tiny, {"buffer": per_run})
    want = [_tally(b8, 0.5), _tally(b2, 1.5), _tally(b1, 2.0)]
    assert _totals(counts, "buffer") == (sum(w[0] for w in want), sum(w[1] for w in want))
    by_fn = {"buffer": lambda cfg: {8: 0.5, 2: 1.5, 1: None}[cfg["tasks"][0]["buffer"]]}
    assert cost.count_runs(tiny, by_fn)[0]["buffer"] == counts["buffer"]


def test_each_run_gets_its_horizon(tiny, monkeypatch):
    """What reaches the per-run count: the mapping's value for each run, None for the own stop,
    a function's value per config, one time for all."""
    seen = []
    monkeypatch.setattr(cost, "_count_one", lambda cfg, h, seed: seen.append((_key(cfg), h)) or {})
    groups = cost.experiment_runs(tiny)
    mix = {_key(c): float(i + 1) for i, c in enumerate(groups["mix"])}
    mix[_key(groups["mix"][1])] = None
    cost.count_runs(tiny, {"mix": mix, "k": lambda cfg: cfg["k"] / 10, "fig2": 3.0})
    got = dict(seen)
    assert [got[_key(c)] for c in groups["mix"]] == [1.0, None, 3.0]
    assert [got[_key(c)] for c in groups["k"]] == [0.2, 1.0, 6.0]
    assert {got[_key(c)] for c in groups["fig2"]} == {3.0}
    assert {got[_key(c)] for c in groups["fig3"]} == {None}


def _bad_cases(tiny):
    groups = cost.experiment_runs(tiny)
    mix = {_key(c): 1.0 for c in groups["mix"]}
    shared = _key(configs.fig2_config(tiny, "fedast_s"))  # Fig. 5's M = 6: counted in fig2
    return [
        ({"fig9": 1.0}, r"unknown experiment 'fig9'"),
        ({"mix": -1}, r"horizon of 'mix'=-1; accepted: a finite real number in \(0, inf\)"),
        ({"mix": "300"}, r"horizon of 'mix'='300'"),
        ({"mix": {**mix, "nonsense": 2.0}}, r"horizons\['mix'\] names the run 'nonsense', not"),
        (
            {"fig5": {shared: 1.0, **{_key(c): 1.0 for c in groups["fig5"]}}},
            r"not one of 'fig5''s; accepted: the run keys \(configs.run_key\) of its 2 runs",
        ),
        (
            {"mix": dict(list(mix.items())[:2])},
            r"horizons\['mix'\] has no entry for run 3 of 3 of 'mix' \(sync_st on mnist, fmnist",
        ),
        (
            {"mix": {**mix, _key(groups["mix"][0]): 0.0}},
            r"horizon of run 1 of 3 of 'mix' \(fedast_d .*\)=0.0; accepted: a positive finite "
            r"time, or None for the run's own stop",
        ),
        ({"k": lambda cfg: float("nan")}, r"horizon of run 1 of 3 of 'k' \(sync_st on mnist\)"),
        ({"k": lambda cfg: True}, r"'k' \(sync_st on mnist\)=True; accepted: a positive finite"),
        ({"central": {}}, r"horizons\['central'\] is per run; accepted: one time or nothing"),
    ]


def test_bad_horizons_are_refused_before_any_count(tiny, monkeypatch):
    monkeypatch.setattr(cost, "_count_one", lambda *a: pytest.fail("counted before checking"))
    for given, match in _bad_cases(tiny):
        with pytest.raises(FlkitError, match=match):
            cost.count_runs(tiny, given)


def test_a_run_without_any_stop_needs_a_horizon(tiny, monkeypatch):
    """A run with neither max_time nor max_events is refused without a horizon, before the
    first experiment is counted; a per-run horizon for it is enough."""
    counted = []
    monkeypatch.setattr(cost, "_count_one", lambda cfg, h, seed: counted.append(h) or {})
    endless = tiny
    monkeypatch.setattr(
        configs,
        "experiment_configs",
        lambda p: [
            ("mix", configs.heterogeneous(p, "fedast_d")),
            ("k", dict(configs.k_config(p, 2), max_time=None)),
        ],
    )
    with pytest.raises(FlkitError, match=r"run 1 of 1 of 'k' \(sync_st on mnist\) has no max_time"):
        cost.count_runs(endless)
    assert counted == []
    k_run = dict(configs.k_config(endless, 2), max_time=None)
    cost.count_runs(endless, {"k": {_key(k_run): 4.0}})
    assert counted == [None, 4.0]


# ------------------------------------------------------------------------------ cached runs
def _synthetic(target=0.9, name="a", requests=4):
    task = asyncfl.TaskConfig(name, dataset="synthetic", target=target, requests=requests)
    return asyncfl.FedASTRun("fedast_s", (task,), num_clients=20, max_time=50.0).to_dict()


def _result(cfg: dict, completion: dict) -> asyncfl.SimResult:
    return asyncfl.SimResult(cfg["method"], list(completion), [], [], completion, 50.0, {}, [])


def _store(root, cfg: dict, seed: int, threads: int, completion: dict):
    """Writes a hand-made result of ``cfg`` into the run cache as :func:`run` would (nothing
    trained); returns its folder."""
    run = asyncfl.FedASTRun.from_dict(cfg).validate()
    dev = torch.device("cpu")
    key = runner.cache_key(run, seed, dev)
    key["threads"] = threads
    folder = runner.open_folder(run, seed, dev, root, key)
    runner.commit(folder, _result(cfg, completion), runner.data_used(run))
    return folder.path


def test_cached_serves_what_run_would_without_training(tmp_path, monkeypatch):
    cfg = _synthetic()
    folder = _store(tmp_path, cfg, 0, 1, {"a": 12.5})
    got = runner.cached(cfg, 0, device="cpu", root=tmp_path, threads=1)
    assert got.completion_time == {"a": 12.5} and got.total_time == 50.0
    assert runner.cached(cfg, 1, device="cpu", root=tmp_path, threads=1) is None  # other seed
    assert runner.cached(cfg, 0, device="cpu", root=tmp_path, threads=2) is None  # other count
    monkeypatch.setattr(runner, "build_schedule", lambda *a, **k: pytest.fail("trained"))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # run() at the same thread count reads the same folder
        assert runner.run(cfg, 0, device="cpu", root=tmp_path, progress=False) == got
        assert runner.cached(cfg, 0, device="cpu", root=tmp_path) == got
    finally:
        torch.set_num_threads(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def test_cached_leaves_a_damaged_or_unsealed_folder_alone(tmp_path):
    """run() would discard a damaged folder or one without a manifest; cached() reads a cache
    it must not change: None, every file as it was."""
    cfg = _synthetic()
    folder = _store(tmp_path, cfg, 0, 1, {"a": 12.5})
    result = folder / "result.json"
    result.write_text(result.read_text().replace("12.5", "13.5"))
    files = sorted(p.name for p in folder.iterdir())
    assert runner.cached(cfg, 0, device="cpu", root=tmp_path, threads=1) is None
    assert sorted(p.name for p in folder.iterdir()) == files
    (folder / store.MANIFEST).unlink()
    assert runner.cached(cfg, 0, device="cpu", root=tmp_path, threads=1) is None
    assert not (folder / store.MANIFEST).exists()
    empty = tmp_path / "empty"
    assert runner.cached(cfg, 0, device="cpu", root=empty, threads=1) is None
    assert not empty.exists()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"threads": 0}, r"threads=0; accepted: an integer >= 1 \(a CPU run's torch thread"),
        ({"threads": 1.0}, r"threads=1.0; accepted: an integer >= 1"),
        ({"threads": True}, r"threads=True; accepted"),
        ({"seed": "0"}, r"seed='0'; accepted: an integer"),
    ],
)
def test_cached_bad_input(tmp_path, kw, match):
    with pytest.raises(FlkitError, match=match):
        runner.cached(_synthetic(), **{"seed": 0, "root": tmp_path, **kw})


def test_long_runs_per_experiment_by_hand(long):
    """One seed of `long`, counted from the notebook's structure, not from the config builder: the
    mix runs FedAST(D), FedAST(S) and Sync-ST at the main level and both FedAST options again at
    the high level (5); Fig. 4 one NoBuffer run; Fig. 2 one run per method of `fig2_methods`; the
    buffer and k sweeps one run per point; Fig. 5 FedAST(S) and Sync-ST per M except the largest
    (Fig. 2's run); Fig. 3 FedAST and NoBuffer per R; one centralised reference."""
    groups = cost.experiment_runs(long)
    expected = {
        "mix": 3 + 2 * (len(long["dvs_levels"]) - 1),
        "fig4": 1,
        "fig2": len(long["fig2_methods"]),
        "buffer": len(long["buffers"]),
        "fig5": 2 * (len(long["Ms"]) - 1),
        "fig3": 2 * len(long["active_requests"]),
        "k": len(long["ks"]),
        "central": 1,
    }
    assert {e: len(runs) for e, runs in groups.items()} == expected
    assert max(long["Ms"]) == long["fig2_M"]  # so Fig. 5's largest M is Fig. 2's run
    mix = sorted((c["method"], c["tasks"][0]["target"]) for c in groups["mix"])
    assert mix == sorted(
        [
            ("fedast_d", long["het_targets_high"][0]),
            ("fedast_d", long["het_targets_main"][0]),
            ("fedast_s", long["het_targets_high"][0]),
            ("fedast_s", long["het_targets_main"][0]),
            ("sync_st", long["het_targets_main"][0]),
        ]
    )


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
    """The LSTM is priced by its hidden size: `long`'s 32, the paper's 100 (width 0)."""
    wide = {**long, "shakespeare_width": 0}
    keys = {t["name"]: cost.price_key(t) for t in configs.heterogeneous(wide, "fedast_d")["tasks"]}
    assert keys == {
        "mnist": "mnist_mlp",
        "fmnist": "fmnist_mlp",
        "cifar10": "cifar10_lenet5",
        "shakespeare": "shakespeare_lstm100",
    }
    narrow = configs.heterogeneous(long, "fedast_d")["tasks"][3]
    assert cost.price_key(narrow) == "shakespeare_lstm32"
    with pytest.raises(
        FlkitError, match=r"no price for dataset 'cifar10' with model 'cnn_cifar10'"
    ):
        cost.price_key({"dataset": "cifar10"})


def test_counting_trainer_matches_the_simulators_tallies(long):
    """What the counting trainer is asked for equals what the simulator says it trained, and one
    test per history row with an accuracy."""
    for method in ("fedast_s", "sync_st"):
        cfg = configs.heterogeneous(long, method)
        trainer = cost.CountingTrainer()
        res = asyncfl.timing_run(cfg, 0, 8.0, trainer=trainer)
        assert sum(trainer.trainings.values()) == res.stats["trained_requests"] > 0
        tested = sum(r["accuracy"] is not None for r in res.history)
        assert sum(trainer.tests.values()) == tested > 0


def test_count_runs_covers_the_notebooks_runs(long):
    """Every trained run of the notebook counted once, plus the centralised reference (1,500
    steps priced as 1500 / 27 requests). The mix: FedAST(D) and (S) at both levels and Sync-ST; at
    `long` the ablation's preset is `long` itself, so its two runs are those (5, not 7); Fig. 5's
    M = 6 is Fig. 2's run (2 of its 4)."""
    horizons = dict.fromkeys(("mix", "fig2", "buffer", "fig5", "k", "fig3"), 2.0)
    counts, runs = cost.count_runs({**long, "active_arrivals": 20}, horizons)
    assert runs == {
        "mix": 5,
        "fig4": 1,
        "fig2": 5,
        "buffer": 3,
        "fig5": 2,
        "fig3": 6,
        "k": 3,
        "central": 1,
    }
    assert sum(runs.values()) - 1 == len(configs.notebook_runs(long, [0]))
    assert set(counts["mix"]) == set(cost.PRICES) - {"shakespeare_lstm100"}
    assert counts["central"] == {"mnist_mlp": (pytest.approx(1500 / 27), 1)}
    with pytest.raises(FlkitError, match=r"unknown experiment 'fig9'"):
        cost.count_runs(long, {"fig9": 10.0})
    with pytest.raises(FlkitError, match=r"horizon of 'mix'=-1"):
        cost.count_runs(long, {"mix": -1})
