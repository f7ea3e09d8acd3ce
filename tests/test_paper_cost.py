"""benchmarks/paper_cost.py: notebook 03's costed runs are the simulations the notebook trains
(``configs.notebook_runs``, one per seed), each with its own horizon; an arrival-limited run's
horizon is the time its last arrival lands."""

import importlib.util
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
