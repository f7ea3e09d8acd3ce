"""flkit.asyncfl.run_many: worker processes change the wall time, never a result."""

from __future__ import annotations

import json

import pytest

from flkit import asyncfl
from flkit.asyncfl import parallel
from flkit.utils import FlkitError


def _cfg(method="fedast_d", requests=4):
    task = dict(
        dataset="synthetic",
        target=None,
        requests=requests,
        buffer=2,
        samples_per_client=64,
        max_rounds=6,
        test_every=2,
    )
    return dict(
        method=method,
        num_clients=12,
        availability=0.75,
        ratio=2,
        k=2,
        tasks=[dict(task, name="a"), dict(task, name="b", delay_ratio=0.3)],
    )


def _same(a, b) -> bool:
    keys = ("history", "completion_time", "total_time", "allocations", "events")
    dump = lambda r: json.dumps([getattr(r, k) for k in keys], default=str, sort_keys=True)  # noqa: E731
    return dump(a) == dump(b)


ITEMS = [(_cfg(), 0), (_cfg("sync_st"), 1), (_cfg(requests=6), 0), (_cfg(), 0)]


def test_two_workers_give_the_serial_results_in_order(tmp_path):
    par = asyncfl.run_many(ITEMS, jobs=2, device="cpu", progress=False, root=tmp_path / "p")
    ser = [asyncfl.run(c, s, cache=False, progress=False, device="cpu") for c, s in ITEMS]
    assert len(par) == len(ITEMS)
    for p, s in zip(par, ser):
        assert _same(p, s)
    assert not _same(par[0], par[2])  # the order is the items', not the finishing order
    # the repeated item ran once: three cached runs for four items
    assert len([d for d in (tmp_path / "p").iterdir() if d.is_dir()]) == 3


def test_cached_runs_are_not_sent_to_workers(tmp_path, monkeypatch):
    kw = dict(device="cpu", progress=False, root=tmp_path, threads=1)  # the count is in the key
    first = asyncfl.run_many(ITEMS[:2], jobs=1, **kw)
    sent = []
    monkeypatch.setattr(parallel, "_pool", lambda todo, *a: sent.extend(todo))
    again = asyncfl.run_many(ITEMS[:2], jobs=2, **kw)
    assert sent == []
    assert all(_same(a, b) for a, b in zip(first, again))
    asyncfl.run_many(ITEMS[:3], jobs=2, **kw)
    assert [(c.tasks[0].requests, s) for c, s in sent] == [(6, 0)]


@pytest.mark.parametrize(
    "items, jobs, match",
    [
        ([(_cfg(), 0)], 0, r"jobs=0 .*accepted: an integer >= 1"),
        ([(_cfg(), 0)], 1.5, r"jobs=1.5 .*accepted: an integer >= 1"),
        ([_cfg()], 2, r"items\[0\] .*accepted: a \(config, seed\) pair"),
        ([(_cfg(), "0")], 2, r"items\[0\] has seed '0'; accepted: an integer"),
        ([(_cfg(), 0), (dict(_cfg(), method="fedsgd"), 0)], 2, r"unknown method 'fedsgd'"),
    ],
)
def test_bad_input_is_refused_before_any_run(items, jobs, match, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_pool", lambda *a: pytest.fail("a run started"))
    monkeypatch.setattr(parallel, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(FlkitError, match=match):
        asyncfl.run_many(items, jobs=jobs, device="cpu", progress=False, root=tmp_path)


def test_worker_threads_share_the_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert parallel.worker_threads(4, None) == 4
    assert parallel.worker_threads(3, 0) == 5
    assert parallel.worker_threads(32, None) == 1
    assert parallel.worker_threads(2, 1) == 1


def test_fig4_nobuffer_stops_at_its_own_horizon(tmp_path, monkeypatch):
    from flkit.papers.fedast import study
    from flkit.workbook import presets

    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path))
    preset = presets.load("03_fedast", "smoke", fig4_time=6.0, jobs=2)
    assert preset["max_time"] > 6.0  # the Fig. 4 runs must not follow the preset's max_time
    res = study.fig4_nobuffer(preset, [0, 1], device="cpu", progress=False)
    assert sorted(res) == [0, 1]
    for r in res.values():
        assert r.method == "FedAST-NoBuffer"
        assert r.total_time == 6.0 and r.stats["stop_reason"] == "max_time"
