"""benchmarks/profile_fedast_groups.py on a small synthetic FedAST run: every training call's
group is among the task's waiting requests, the counts add up, and a float64 group trained at
once matches the same requests one at a time."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    return importlib.import_module("profile_fedast_groups")


def _cfg(dtype="float32"):
    task = dict(dataset="synthetic", requests=6, buffer=2, samples_per_client=64, max_rounds=30)
    return dict(
        method="fedast_d",
        num_clients=20,
        availability=0.75,
        ratio=2,
        dtype=dtype,
        tasks=[dict(task, name="a"), dict(task, name="b", delay_ratio=0.3)],
    )


def test_the_groups_add_up_and_fit_in_what_waits():
    from flkit import asyncfl
    from flkit.asyncfl.fedast import FedAST

    pg = _module()
    before = FedAST._update_of
    got = pg.groups(_cfg(), horizon=40.0)
    assert FedAST._update_of is before  # the counting hook is taken off again
    assert got["calls"] > 5
    assert got["requests_trained"] == pytest.approx(got["group_mean"] * got["calls"])
    assert got["waiting_mean"] >= got["group_mean"] >= 1
    assert got["versions_waiting_mean"] >= 1
    # the timing-only run it profiles, unprofiled, trains the same number of requests
    res = asyncfl.timing_run(_cfg(), 0, horizon=40.0)
    assert res.stats["trained_requests"] == got["requests_trained"]


def test_float64_groups_match_one_at_a_time():
    pg = _module()
    diffs = pg.batch_invariance(_cfg("float64"), clients=(3, 1, 3, 7))
    assert set(diffs) == {"a", "b"}
    assert max(diffs.values()) < 1e-12
