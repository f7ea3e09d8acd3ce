"""benchmarks/paper_cost.py: notebook 03's costed runs are the simulations the notebook trains
(``configs.notebook_runs``, one per seed), each with its own horizon; an arrival-limited run's
horizon is the time its last arrival lands."""

import importlib.util
import json
from pathlib import Path

import pytest

from flkit import asyncfl
from flkit.papers.fedast import configs
from flkit.utils import FlkitError
from flkit.workbook import presets

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "paper_cost.py"


def _paper_cost():
    spec = importlib.util.spec_from_file_location("paper_cost", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_CACHE: dict = {}


def _lists(name):
    """(paper_cost's 03 runs, the notebook's (config, seed) runs) at preset ``name``."""
    if name not in _CACHE:
        p = presets.load("03_fedast", name)
        ours = _paper_cost().notebook_runs("03_fedast", p)
        theirs = configs.notebook_runs(p, range(int(p["num_seeds"])))
        _CACHE[name] = (ours, theirs)
    return _CACHE[name]


@pytest.mark.parametrize("name", ["cpu", "paper"])
def test_fedast_runs_are_the_notebooks_own(name):
    ours, theirs = _lists(name)
    assert len(ours) == len(theirs)
    assert [c for c, _ in ours] == [c for c, _ in theirs]
    timed = [(c, h) for c, h in ours if c.get("max_time") is not None]
    # every run but Fig. 3's stops at a simulated time: that time is its horizon
    assert len(timed) == len(ours) - len([c for c, _ in ours if c.get("max_events")])
    assert all(h == float(c["max_time"]) for c, h in timed)


def test_arrival_limited_horizon_lands_on_its_last_arrival():
    ours, theirs = _lists("cpu")
    limited = [(c, h, seed) for (c, h), (_, seed) in zip(ours, theirs) if c.get("max_time") is None]
    assert limited, "the cpu preset's Fig. 3 runs stop after a number of arrivals"
    for c, h, seed in limited[:4]:
        assert h > 0
        # a timing-only run cut at the horizon, with no arrival limit, holds exactly the arrivals
        res = asyncfl.timing_run(c, seed, horizon=h)
        assert res.stats["events"] == int(c["max_events"])


def test_a_run_with_neither_time_nor_arrival_limit_is_refused():
    p = presets.load("03_fedast", "cpu")
    cfg = dict(configs.heterogeneous(p, "fedast_d"), max_time=None)
    with pytest.raises(FlkitError, match="max_time=None and max_events=None"):
        _paper_cost().fedast_horizon(cfg, 0)


def _estimate(monkeypatch, gi_extra, with_gi=True):
    """``estimate``'s info for a FedAvg run (10 rounds of 1 s) and, with ``with_gi``, a GI run
    (5 rounds of 2 s): stand-in configs holding only what it reads."""
    from types import SimpleNamespace

    pc = _paper_cost()
    monkeypatch.setattr(pc, "probe_key", lambda c: c.key)
    runs = [
        SimpleNamespace(method="fedavg", rounds=10, key="a"),
        SimpleNamespace(method="gi_staleness", rounds=5, key="b"),
    ]
    timed = {"a": {"seconds_per_round": 1.0}, "b": {"seconds_per_round": 2.0}}
    info = {}
    pc.estimate(runs if with_gi else runs[:1], timed, info, gi_extra=gi_extra)
    return info


def test_gi_runs_add_their_inversion_seconds_to_every_round(monkeypatch):
    info = _estimate(monkeypatch, gi_extra=3.0)
    assert info["gpu_hours"] == pytest.approx((10 * 1.0 + 5 * (2.0 + 3.0)) / 3600)
    assert info["complete"] is True and "without_inversion" not in info


def test_gi_runs_without_a_timed_inversion_are_not_called_complete(monkeypatch):
    info = _estimate(monkeypatch, gi_extra=None)
    assert info["gpu_hours"] == pytest.approx((10 * 1.0 + 5 * 2.0) / 3600)  # the rounds alone
    assert info["complete"] is False and info["without_inversion"] is True
    # a notebook without GI runs needs no inversion timing
    assert _estimate(monkeypatch, gi_extra=None, with_gi=False)["complete"] is True


def test_packed_hours_divide_only_what_the_pool_packs():
    pc = _paper_cost()
    # 10 GPU hours one run at a time, 4 of them alone (timed runs, inversions), packing factor 3:
    # the 6 packed hours take 2, the 4 alone still take 4
    info = {"gpu_hours": 10.0, "alone_gpu_hours": 4.0}
    assert pc.packed_hours(info, 3.0) == pytest.approx(6.0)
    assert pc.packed_hours(info, None) == 10.0  # no factor measured: unpacked
    assert pc.packed_hours({"gpu_hours": 10.0}, 2.0) == pytest.approx(5.0)  # nothing alone
    assert pc.packed_hours({"gpu_hours": None}, 2.0) is None
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(FlkitError, match=f"packing factor {bad!r}; accepted"):
            pc.packed_hours(info, bad)


def test_timed_runs_and_inversions_are_the_hours_that_go_alone(monkeypatch):
    # 04's timed runs (study.timed) at `smoke`, every run at a faked 2 s a round
    from flkit.papers.hidenseek import study

    pc = _paper_cost()
    p = presets.load("04_hidenseek", "smoke")
    runs = pc.notebook_runs("04_hidenseek", p)
    timed_runs = study.timed(p, [0])
    assert 0 < len(timed_runs) < len(runs)
    probes = {pc.probe_key(c): {"seconds_per_round": 2.0} for c in runs}
    info = {}
    pc.estimate(runs, probes, info, alone=pc.notebook_timed("04_hidenseek", p))
    assert info["gpu_hours"] == pytest.approx(2.0 * sum(c.rounds for c in runs) / 3600)
    assert info["alone_gpu_hours"] == pytest.approx(2.0 * sum(c.rounds for c in timed_runs) / 3600)
    # a GI run's inversion seconds go alone, its rounds are packed
    info = _estimate(monkeypatch, gi_extra=3.0)
    assert info["alone_gpu_hours"] == pytest.approx(5 * 3.0 / 3600)
    assert pc.notebook_timed("00_fl_primer", presets.load("00_fl_primer", "smoke")) == set()


def test_packed_estimates_sum_the_notebooks_with_an_estimate():
    pc = _paper_cost()
    methods = {
        "notebooks": {
            "a": {"gpu_hours": 8.0, "alone_gpu_hours": 2.0, "complete": True},
            "b": {"gpu_hours": 5.0, "alone_gpu_hours": 0.0, "complete": True},
            "c": {"gpu_hours": None, "complete": False},
        }
    }
    packing = {"notebooks": {"a": {"factor": 4.0, "k": 8}, "b": {"error": "out of time"}}}
    est = pc.packed_estimates(methods, packing)
    a, b = est["notebooks"]["a"], est["notebooks"]["b"]
    assert a["packed_gpu_hours"] == pytest.approx(6.0 / 4 + 2.0) and a["k"] == 8
    assert a["complete"] is True
    assert b["packed_gpu_hours"] == 5.0 and b["factor"] is None and b["complete"] is False
    assert est["total"] == {
        "gpu_hours": 13.0,
        "packed_gpu_hours": pytest.approx(8.5),
        "without_estimate": ["c"],
    }


def _report(probes, notebooks=None, packing=None):
    steps = {"methods": {"result": {"probes": probes, "notebooks": notebooks or {}}}}
    if packing:
        steps["packing"] = {"result": {"notebooks": packing}}
    return {"steps": steps}


def _probe(nb, c, seconds, key=False):
    p = {
        "notebook": nb,
        "method": c.method,
        "dataset": c.dataset,
        "model": c.model,
        "model_kwargs": dict(c.model_kwargs),
        "clients_per_round": c.clients_per_round,
        "seconds_per_round": seconds,
    }
    if key:
        p["key"] = [str(part) for part in _paper_cost().probe_key(c)]
    return p


def test_a_report_costs_the_runs_listed_today():
    # 00 at `paper`: FedAvg and FedProx runs; an older report names probes by their fields, a
    # later one by key replaces FedAvg's; a packing factor of 2 halves the hours
    pc = _paper_cost()
    runs = pc.notebook_runs("00_fl_primer", presets.load("00_fl_primer", "paper"))
    first = {c.method: c for c in reversed(runs)}
    assert sorted(first) == ["fedavg", "fedprox"]
    old = _report([_probe("00_fl_primer", first[m], s) for m, s in (("fedavg", 1), ("fedprox", 2))])
    new = _report(
        [_probe("00_fl_primer", first["fedavg"], 3.0, key=True)],
        packing={"00_fl_primer": {"factor": 2.0, "k": 8}},
    )
    rounds = {m: sum(c.rounds for c in runs if c.method == m) for m in first}
    (got,) = pc.recost([old], ["00_fl_primer"]).values()
    assert got["gpu_hours"] == pytest.approx((rounds["fedavg"] + 2 * rounds["fedprox"]) / 3600)
    assert got["complete"] is True and got["probed"] == 2 and "factor" not in got
    (got,) = pc.recost([old, new], ["00_fl_primer"]).values()
    hours = (3 * rounds["fedavg"] + 2 * rounds["fedprox"]) / 3600
    assert got["gpu_hours"] == pytest.approx(hours)
    assert (got["factor"], got["k"]) == (2.0, 8)
    assert "| 00_fl_primer | 6 |" in pc.table({"00_fl_primer": got})
    assert f"{hours / 2:,.2f} (2.00x, 8 per GPU)" in pc.table({"00_fl_primer": got})
    # no probe at all: no estimate
    (got,) = pc.recost([_report([])], ["00_fl_primer"]).values()
    assert got["gpu_hours"] is None and got["complete"] is False


def test_a_probe_named_by_fields_alone_does_not_cost_two_kinds_of_run(monkeypatch):
    from types import SimpleNamespace

    pc = _paper_cost()

    def run(epochs, rounds):
        return SimpleNamespace(
            method="fedavg",
            dataset="mnist",
            model="m",
            model_kwargs={},
            clients_per_round=10,
            rounds=rounds,
            epochs=epochs,
        )

    runs = [run(1, 10), run(5, 20)]  # the same fields, two local-epoch settings
    monkeypatch.setattr(pc, "notebook_runs", lambda nb, p: runs)
    monkeypatch.setattr(pc, "notebook_timed", lambda nb, p: set())
    monkeypatch.setattr(pc, "probe_key", lambda c: ("fedavg", c.epochs))
    (got,) = pc.recost([_report([_probe("00_fl_primer", runs[0], 1.0)])], ["00_fl_primer"]).values()
    assert got["gpu_hours"] is None and got["probed"] == 0  # ambiguous: neither is costed
    keyed = dict(_probe("00_fl_primer", runs[1], 2.0), key=["fedavg", "5"])
    (got,) = pc.recost([_report([keyed])], ["00_fl_primer"]).values()
    # by key it costs its own kind; the other takes the slowest probe and leaves it incomplete
    assert got["gpu_hours"] == pytest.approx((10 * 2.0 + 20 * 2.0) / 3600)
    assert got["runs_without_probe"] == 1 and got["complete"] is False


def test_an_inversion_timed_at_another_size_is_not_used():
    pc = _paper_cost()
    p = presets.load("05_staleness", "paper")
    runs = pc.notebook_runs("05_staleness", p)
    probes = [_probe("05_staleness", c, 1.0, key=True) for c in runs]
    gi_rounds = sum(c.rounds for c in runs if c.method == "gi_staleness")
    for size, counted in ((int(p["gi_size"]), True), (64, False)):
        info = {"inversion_s_per_iter": 0.001, "inversion_size": size}
        (got,) = pc.recost([_report(probes, {"05_staleness": info})], ["05_staleness"]).values()
        extra = gi_rounds * 1 * int(p["gi_iters"]) * 0.001 if counted else 0.0
        assert got["gpu_hours"] == pytest.approx((sum(c.rounds for c in runs) + extra) / 3600)
        assert got.get("without_inversion", False) is not counted


def test_the_readme_table_is_todays_cost_of_the_published_checks():
    pc = _paper_cost()
    results = SCRIPT.parent / "results"
    reports = [json.loads((results / name).read_text()) for name in pc.PUBLISHED]
    readme = (SCRIPT.parents[1] / "README.md").read_text()
    assert pc.table(pc.recost(reports)) in readme, (
        "README's `paper` cost table is not what `python benchmarks/paper_cost.py` prints today"
    )
