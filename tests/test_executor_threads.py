"""Every executor gives each run the same torch thread count, so a notebook records the same
numbers on the local executor (one job or a pool) and as a Ray task: the count is the driver's
($FLKIT_THREADS, else torch's default, what a local run of one notebook at a time always used),
not the pool's share of the cores nor a Ray task's CPUs, and a Ray worker applies it over its
node's own FLKIT_THREADS. Ray itself is not needed: its task function and its queueing run here
with a stand-in for the ray module."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from flkit.reproduce import ray_executor
from flkit.reproduce.executors import LocalExecutor
from flkit.reproduce.ray_executor import RayExecutor, run_task

ROOT = Path(__file__).resolve().parents[1]
INFO = {"status": "ok", "error": None, "wall_time_s": 0.0}


def _runs(tmp_path, n=3) -> list[dict]:
    nb = tmp_path / "nb.ipynb"
    nb.write_text("{}")
    return [
        {"notebook": "nb", "input": str(nb), "seed": s, "run_dir": str(tmp_path / f"r{s}")}
        for s in range(n)
    ]


class _Pool:
    """concurrent.futures.ProcessPoolExecutor's stand-in: records what each run is handed."""

    handed: list = []

    def __init__(self, *a, **k):
        pass

    def submit(self, fn, run):
        _Pool.handed.append(run)
        fut = concurrent.futures.Future()
        fut.set_result(INFO)
        return fut

    def shutdown(self, *a, **k):
        pass


def _local(runs, jobs, monkeypatch) -> list[int]:
    _Pool.handed = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _Pool)
    list(LocalExecutor(jobs).events(runs))
    return [r["threads"] for r in _Pool.handed]


def _fake_ray(handed: list):
    """The parts of the ray module RayExecutor.events uses; each task's payload is recorded."""
    ray = types.ModuleType("ray")

    class Task:
        def options(self, **k):
            return self

        def remote(self, payload, events):
            handed.append(payload)
            return len(handed) - 1

    ray.remote = lambda fn: Task()
    ray.wait = lambda refs, **k: (list(refs), [])
    ray.get = lambda ref: (INFO, {}, {})  # info, the run folder's files, runs trained
    util = types.ModuleType("ray.util")
    queue = types.ModuleType("ray.util.queue")

    class Empty(Exception):  # noqa: N818 - ray's own name
        pass

    class Queue:
        def __init__(self, **k):
            pass

        def size(self):
            return 0

        def get_nowait_batch(self, n):
            return []

        def shutdown(self, force=False):
            pass

    queue.Empty, queue.Queue = Empty, Queue
    ray.util, util.queue = util, queue
    return {"ray": ray, "ray.util": util, "ray.util.queue": queue}


def _ray(runs, cpus, monkeypatch) -> list[int]:
    handed: list = []
    for name, module in _fake_ray(handed).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(ray_executor, "write_run_files", lambda run, files: None)
    list(RayExecutor(cpus=cpus).events(runs))
    return [p["threads"] for p in handed]


@pytest.mark.parametrize("env", [None, "3"])
def test_local_pool_and_ray_hand_every_run_the_drivers_count(tmp_path, monkeypatch, env):
    """Today's finding: a local run used 2 threads (the default here), a Ray task 1 (its CPU),
    a pool of 2 jobs cores // 2; now every run gets the driver's count."""
    if env is None:
        monkeypatch.delenv("FLKIT_THREADS", raising=False)
        want = torch.get_num_threads()
    else:
        monkeypatch.setenv("FLKIT_THREADS", env)
        want = int(env)
    runs = _runs(tmp_path)
    got = {
        "local, 1 job": _local(runs, 1, monkeypatch),
        "local, 2 jobs": _local(runs, 2, monkeypatch),
        "ray, 1 CPU a task": _ray(runs, 1, monkeypatch),
        "ray, 4 CPUs a task": _ray(runs, 4, monkeypatch),
    }
    assert got == {k: [want] * len(runs) for k in got}


def test_the_drivers_count_is_what_a_fresh_process_computes_with(tmp_path):
    """A local run of one notebook at a time let its kernel take torch's default: the count
    handed out now is the same, so the runs it cached keep their keys."""
    env = {k: v for k, v in os.environ.items() if k != "FLKIT_THREADS"}
    env["PYTHONPATH"] = str(ROOT)

    def ask(code: str) -> int:
        res = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
        )
        assert res.returncode == 0, res.stderr[-2000:]
        return int(res.stdout.strip())

    fresh = ask("import torch; print(torch.get_num_threads())")
    driver = ask("from flkit.reproduce.plan import run_threads; print(run_threads())")
    assert driver == fresh


def test_a_ray_task_applies_the_drivers_count_over_its_nodes(tmp_path, monkeypatch):
    """A worker node whose environment says FLKIT_THREADS=1 still computes with the count the
    driver handed the task (what the notebook's kernel inherits)."""
    monkeypatch.setenv("FLKIT_THREADS", "1")
    seen = {}

    def fake_run_one(run, events=None):
        seen["threads"] = os.environ.get("FLKIT_THREADS")
        Path(run["run_dir"]).mkdir(parents=True, exist_ok=True)
        return dict(INFO)

    monkeypatch.setattr(ray_executor, "run_one", fake_run_one)
    run = {**_runs(tmp_path, 1)[0], "input": "/nowhere/nb.ipynb", "notebook_source": b"{}"}
    run_task({**run, "threads": 3})
    assert seen["threads"] == "3"


def test_a_bad_flkit_threads_is_one_line_not_a_traceback(tmp_path):
    env = {**os.environ, "FLKIT_THREADS": "0", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "flkit", "reproduce", "--preset", "smoke", "--only", "00"]
    res = subprocess.run(
        [*cmd, "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "FLKIT_THREADS='0' is not accepted" in res.stderr
    assert not (tmp_path / "out").exists()  # refused before any work
