"""flkit.asyncfl.timing: the simulator run without training (TimingTrainer, timing_config,
timing_run) on tiny synthetic configs, checked against the simulator's own event log and tallies."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from flkit import asyncfl
from flkit.asyncfl import TimingTrainer, timing_config, timing_run
from flkit.asyncfl import fedast as fedast_module
from flkit.utils import FlkitError


def _cfg(method="fedast_s", **kw) -> dict:
    tasks = tuple(
        asyncfl.TaskConfig(n, dataset="synthetic", target=0.5, requests=8, buffer=2)
        for n in ("a", "b")
    )
    return asyncfl.FedASTRun(method, tasks, num_clients=40, availability=0.5, **kw).to_dict()


class _Recorder(TimingTrainer):
    """Records every client it is asked to train and every test."""

    def __init__(self):
        super().__init__()
        self.trained = Counter()
        self.tests = Counter()

    def train(self, task, version, client_ids, *args, **kw):
        self.trained[task] += len(client_ids)
        return super().train(task, version, client_ids, *args, **kw)

    def evaluate(self, task):
        self.tests[task] += 1
        return super().evaluate(task)


@pytest.mark.parametrize("method", ["fedast_s", "fedast_d", "nobuffer", "sync_st"])
def test_a_recording_subclass_sees_the_whole_run_and_changes_no_timing(method):
    """A subclass passed as ``trainer`` is the one the scheduler calls: it is asked for exactly
    the trainings the simulator tallies and one test per evaluated history row, and the run's
    events are those of the default trainer's run."""
    cfg = _cfg(method, k=3)
    rec = _Recorder()
    res = timing_run(cfg, seed=2, horizon=30.0, trainer=rec)
    assert res.events == timing_run(cfg, seed=2, horizon=30.0).events
    assert sum(rec.trained.values()) == res.stats["trained_requests"] > 0
    assert sum(rec.tests.values()) == sum(r["accuracy"] is not None for r in res.history) > 0


def test_versions_counted_no_target_reached():
    """Each task's server updates are numbered 1, 2, ... (the scheduler checks aggregate's return
    against its own count), accuracy is 0 where tested, so no task completes and the run stops
    at its horizon, though every target is 0.5 in the config."""
    res = timing_run(_cfg(), seed=0, horizon=25.0)
    for task in res.tasks:
        rounds = [r["round"] for r in res.history if r["task"] == task]
        assert rounds == list(range(1, len(rounds) + 1)) and rounds
    assert {r["accuracy"] for r in res.history} <= {None, 0.0}
    assert res.completion_time == {"a": None, "b": None}
    assert res.total_time <= 25.0 and res.stats["stop_reason"] == "max_time"


def test_option_d_is_timed_as_option_s():
    """FedAST option D becomes option S with b = ceil(R / r) when no b is given (8 / 32 -> 1), no
    targets, the horizon as max_time; a synchronous config keeps its method."""
    cfg = _cfg("fedast_d")
    cfg["tasks"] = [dict(t, buffer=None) for t in cfg["tasks"]]
    timed = timing_config(cfg, 12.0, max_events=50)
    assert timed.method == "fedast_s" and (timed.max_time, timed.max_events) == (12.0, 50)
    assert [t.buffer for t in timed.tasks] == [1, 1] and {t.target for t in timed.tasks} == {None}
    assert timing_config(_cfg("sync_st"), 5.0).method == "sync_st"


def test_nobuffer_option_d_keeps_its_first_allocation(monkeypatch):
    """NoBuffer keeps option D in a timing run, and its Realloc is off: it measures no
    dispersion of the placeholder updates (that would be NaN), while a trainer that reports a
    dispersion does reallocate."""

    class WithDispersion(TimingTrainer):
        def dispersion(self, task, updates):
            return 1.0

    cfg = _cfg("nobuffer")
    assert asyncfl.FedASTRun.from_dict(cfg).fedast_option == "D"
    moved = timing_run(cfg, seed=0, horizon=1e9, max_events=400, trainer=WithDispersion())
    assert moved.stats["reallocations"] > 0

    def no_dispersion(*a, **k):
        raise AssertionError("a timing run measured the dispersion of placeholder updates")

    monkeypatch.setattr(fedast_module, "normalized_dispersion", no_dispersion)
    plain = timing_run(cfg, seed=0, horizon=1e9, max_events=400)
    assert plain.stats["reallocations"] == 0 and plain.allocations == []


def test_a_nan_variance_estimate_stops_realloc_with_the_task_named():
    """A trained run whose updates hold NaN gives Realloc a NaN estimate: an error naming the
    task, not an allocation skipped without a word (the placeholder-free trainer here reports
    the NaN dispersion a diverged task's updates give)."""

    class Diverged(TimingTrainer):
        placeholder_updates = False

        def dispersion(self, task, updates):
            return math.nan if task == "b" else 1.0

    with pytest.raises(FlkitError, match=r"variance estimate of task 'b' is nan"):
        timing_run(_cfg("nobuffer"), seed=0, horizon=1e9, max_events=400, trainer=Diverged())
