"""The horizons of notebook 03's cost estimate (README, "The `long` cut rule", "Horizons of the
estimate, per run"): per-run horizons in the count, the read-only lookup of cached runs, the
`cpu` runs' all-done times, and the `long` runs' horizons from them on hand-made times. Nothing
is trained: the counts come from the timing simulation at a few time units, and the cached runs
are hand-made results written into a temporary run cache."""

from __future__ import annotations

import math

import pytest
import torch

from flkit import asyncfl, store
from flkit.asyncfl import runner
from flkit.papers.fedast import configs, cost, horizons, long_build, regime
from flkit.utils import FlkitError
from flkit.workbook import presets

EXPERIMENTS = ("mix", "fig4", "fig2", "buffer", "fig5", "fig3", "k")


@pytest.fixture(scope="module")
def cpu():
    return presets.load("03_fedast", "cpu")


@pytest.fixture(scope="module")
def long():
    return long_build.uncut(presets.load("03_fedast", "long"))


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
    timing = regime.timing_config(cfg, limit, run.max_events).validate()
    go = asyncfl.run_sync if timing.is_sync else asyncfl.run_fedast
    res = go(timing, regime.TimingTrainer(), seed=0)
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


def test_cpu_alldone_reads_each_run_once(tmp_path, monkeypatch):
    """Four runs, one listed twice: a: tasks done at 40 and 55 -> 55; b: a task missed -> None,
    'missed a target'; c: no target -> None, 'no target'; d: not in the cache -> None, 'not
    cached'. Stored at 1 thread, the preset's count (the current count is another)."""
    a = _synthetic(name="a")
    two = asyncfl.FedASTRun.from_dict(a).to_dict()
    two["tasks"] = [dict(two["tasks"][0]), dict(two["tasks"][0], name="a2")]
    b, c, d = _synthetic(name="b"), _synthetic(target=None, name="c"), _synthetic(requests=5)
    _store(tmp_path, two, 0, 1, {"a": 40.0, "a2": 55.0})
    _store(tmp_path, b, 0, 1, {"b": None})
    _store(tmp_path, c, 0, 1, {"c": None})
    _store(tmp_path, d, 1, 1, {"a": 5.0})  # seed 1 only
    pairs = [("mix", two), ("fig2", b), ("fig3", c), ("k", d), ("fig5", two)]
    monkeypatch.setattr(configs, "experiment_configs", lambda p: pairs)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        times, why = horizons.cpu_alldone({"threads": 1}, tmp_path)
    finally:
        torch.set_num_threads(before)
    assert times == {_key(two): 55.0, _key(b): None, _key(c): None, _key(d): None}
    assert why == {_key(b): "missed a target", _key(c): "no target", _key(d): "not cached"}
    with pytest.raises(FlkitError, match=r"root='.*nowhere' is not a folder; accepted: a run-"):
        horizons.cpu_alldone({"threads": 1}, tmp_path / "nowhere")


# ------------------------------------------------------------------------------ `long`'s horizons
#: hand-made `cpu` all-done times (seed 0), by run; None: a task missed its target
CPU_TIMES = {
    ("mix", "fedast_d"): 100.0,  # the `cpu` mix's FedAST(D): cpu_mix_alldone
    ("mix", "fedast_s"): 80.0,
    ("mix", "sync_st"): 120.0,
    ("fig2", "fedast_s"): 65.0,  # also Fig. 5 at M = 6
    ("fig2", "sync_st"): 61.0,
    ("fig2", "sync_st_nomit"): None,
    ("fig2", "sync_ucb"): 179.0,
    ("fig2", "sync_bayes"): 56.0,
    ("fig5", "fedast_s", 2): 30.0,
    ("fig5", "sync_st", 2): 32.0,
    ("buffer", 8): 70.0,
    ("buffer", 2): 50.0,
    ("buffer", 1): 72.0,
    ("k", 2): 31.0,
    ("k", 10): 12.0,
    ("k", 60): 16.0,
}


def _cpu_times(cpu) -> dict:
    """CPU_TIMES keyed by the `cpu` runs' keys, built from the configs directly; Fig. 3's runs
    and NoBuffer (Fig. 4) have no time."""
    t = CPU_TIMES
    out = {}
    for m in ("fedast_d", "fedast_s", "sync_st"):
        out[_key(configs.heterogeneous(cpu, m))] = t[("mix", m)]
    for m in cpu["fig2_methods"]:
        out[_key(configs.fig2_config(cpu, m))] = t[("fig2", m)]
    for m in ("fedast_s", "sync_st"):
        out[_key(configs.fig2_config(cpu, m, n_tasks=2))] = t[("fig5", m, 2)]
    for b in (8, 2, 1):
        out[_key(configs.buffer_config(cpu, b))] = t[("buffer", b)]
    for k in (2, 10, 60):
        out[_key(configs.k_config(cpu, k))] = t[("k", k)]
    out[_key(configs.heterogeneous(cpu, "nobuffer", max_time=float(cpu["fig4_time"])))] = None
    for r in cpu["active_requests"]:
        for m in ("fedast_d", "nobuffer"):
            out[_key(configs.active_config(cpu, r, m))] = None
    return out


def test_long_horizons_by_hand(cpu, long):
    """T = 200 and T_high = 300 over the `cpu` mix's 100: the main level x 2, the high x 3.
    The mix: FedAST(D) 100 x 2 = 200 (T itself), (S) 160, Sync-ST 240; high: 300 and 240.
    Fig. 2: each method x 2, Sync-ST without the mitigation missed at `cpu`: None. The buffer
    sweep b = 5 (not run at `cpu`): the later of b = 2 and 8, 70 x 2 = 140; b = 2: 100, b = 1:
    144. Fig. 5 M = 4: the later of M = 2 and 6 (Fig. 2's run), FedAST(S) 65 x 2 = 130, Sync-ST
    61 x 2 = 122; M = 2: 60 and 64. The k sweep: k = 5 between 2 and 10, 31 x 2 = 62; 10: 24;
    30 between 10 and 60: 32. Fig. 3 and Fig. 4: None (own stop)."""
    got = horizons.long_horizons(long, cpu, _cpu_times(cpu), 100.0, 200.0, 300.0)
    het, fig2, fig5 = configs.heterogeneous, configs.fig2_config, configs.fig2_config
    want = {
        "mix": [
            (het(long, "fedast_d", "main"), 200.0),
            (het(long, "fedast_s", "main"), 160.0),
            (het(long, "fedast_s", "high"), 240.0),
            (het(long, "fedast_d", "high"), 300.0),
            (het(long, "sync_st", "main"), 240.0),
        ],
        "fig4": [(het(long, "nobuffer", max_time=200.0), None)],
        "fig2": [
            (fig2(long, "fedast_s"), 130.0),
            (fig2(long, "sync_st"), 122.0),
            (fig2(long, "sync_st_nomit"), None),
            (fig2(long, "sync_ucb"), 358.0),
            (fig2(long, "sync_bayes"), 112.0),
        ],
        "buffer": [
            (configs.buffer_config(long, b), h) for b, h in ((5, 140.0), (2, 100.0), (1, 144.0))
        ],
        "fig5": [
            (fig5(long, "fedast_s", n_tasks=4), 130.0),
            (fig5(long, "sync_st", n_tasks=4), 122.0),
            (fig5(long, "fedast_s", n_tasks=2), 60.0),
            (fig5(long, "sync_st", n_tasks=2), 64.0),
        ],
        "fig3": [
            (configs.active_config(long, r, m), None)
            for r in (96, 32, 4)
            for m in ("fedast_d", "nobuffer")
        ],
        "k": [(configs.k_config(long, k), h) for k, h in ((5, 62.0), (10, 24.0), (30, 32.0))],
    }
    # every run of `long`, in the experiment it is counted in and in the order it is counted
    assert list(got) == list(want)
    for exp, runs in want.items():
        assert list(got[exp]) == [_key(c) for c, _ in runs], exp
        for (_, h), value in zip(runs, got[exp].values()):
            assert value == (None if h is None else pytest.approx(h)), (exp, h)
    groups = cost.experiment_runs(long)
    assert {e: [_key(c) for c in cs] for e, cs in groups.items() if e != "central"} == {
        e: list(r) for e, r in got.items()
    }


def test_long_horizons_missed_neighbour_and_own_max_time(cpu, long, monkeypatch):
    """k = 5 lies between k = 2 and 10: k = 2 missed at `cpu`, so k = 5 runs to its own
    max_time (None), while k = 10 keeps 12 x 2; the count then gets that None."""
    times = _cpu_times(cpu)
    times[_key(configs.k_config(cpu, 2))] = None
    got = horizons.long_horizons(long, cpu, times, 100.0, 200.0, 300.0)
    assert got["k"][_key(configs.k_config(long, 5))] is None
    assert got["k"][_key(configs.k_config(long, 10))] == pytest.approx(24.0)
    seen = {}
    monkeypatch.setattr(
        cost, "_count_one", lambda cfg, hz, seed: seen.update({_key(cfg): hz}) or {}
    )
    cost.count_runs(long, got)  # the per-run form count_runs takes
    assert seen == {k: v for runs in got.values() for k, v in runs.items()}


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"t_main": 0}, r"t_main=0; accepted: a finite real number in \(0, inf\)"),
        ({"cpu_mix_alldone": float("inf")}, r"cpu_mix_alldone=inf; accepted"),
        ({"t_high": -3.0}, r"t_high=-3.0; accepted"),
        ({"t_high": None}, r"t_high=None with the mix's high-level run of fedast_s at `long`"),
        ({"bad_time": -1.0}, r"cpu_times\[.*\]=-1.0; accepted: a finite real number in \(0"),
        ({"drop": ("k", 10)}, r"cpu_times has no entry for the `cpu` counterpart of k/sync_st"),
        (
            {"cpu": {"fig2_methods": ["fedast_s", "sync_st"]}},
            r"the `long` run fig2/sync_st_nomit/None has no `cpu` counterpart; accepted:",
        ),
    ],
)
def test_long_horizons_bad_input(cpu, long, args, match):
    base = dict(cpu, **args.get("cpu", {}))
    times = _cpu_times(cpu)
    if "bad_time" in args:
        times[next(iter(times))] = args["bad_time"]
    if "drop" in args:
        del times[_key(configs.k_config(cpu, 10))]
    kw = {"cpu_mix_alldone": 100.0, "t_main": 200.0, "t_high": 300.0}
    kw.update({k: v for k, v in args.items() if k in kw})
    with pytest.raises(FlkitError, match=match):
        horizons.long_horizons(long, base, times, **kw)


def test_long_horizons_beyond_the_cpu_sweep_take_the_nearest_end(cpu, long):
    """k = 1 lies below `cpu`'s k = 2 (31 x 2 = 62), k = 100 above its k = 60 (16 x 2 = 32)."""
    wide = dict(long, ks=[1, 100])
    got = horizons.long_horizons(wide, cpu, _cpu_times(cpu), 100.0, 200.0, 300.0)["k"]
    assert got == {
        _key(configs.k_config(wide, 1)): pytest.approx(62.0),
        _key(configs.k_config(wide, 100)): pytest.approx(32.0),
    }


def test_long_horizons_without_a_high_level_need_no_t_high(cpu, long):
    one = dict(long, dvs_levels=["main"])
    got = horizons.long_horizons(one, cpu, _cpu_times(cpu), 100.0, 200.0)
    assert got["mix"][_key(configs.heterogeneous(one, "fedast_d"))] == pytest.approx(200.0)
    assert len(got["mix"]) == 3


def test_run_roles_name_level_and_setting(cpu, long):
    """At `cpu` the ablation's run is the main one (its regime_* keys equal the preset's): one
    run, both roles; at `long` the high level is its own run; sweeps carry their setting."""
    roles = {(e, k): r for e, k, r in horizons.run_roles(cpu)}
    main_d = _key(configs.heterogeneous(cpu, "fedast_d"))
    assert roles[("mix", main_d)] == (("fedast_d", "main", None), ("fedast_d", "ablation", None))
    assert roles[("buffer", _key(configs.buffer_config(cpu, 8)))] == (("fedast_s", None, 8),)
    assert roles[("fig5", _key(configs.fig2_config(cpu, "sync_st")))] == (("sync_st", None, 6),)
    high = _key(configs.heterogeneous(long, "fedast_s", "high"))
    assert dict(((e, k), r) for e, k, r in horizons.run_roles(long))[("mix", high)] == (
        ("fedast_s", "high", None),
    )


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
