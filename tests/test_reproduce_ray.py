"""flkit reproduce / sweep with --executor ray on a local Ray instance of 1 CPU bound to
127.0.0.1: the same report as the local executor, the same floats of a training run, a worker
killed (at once, and mid-run: reported, its kernel ended, the run resumed to the same floats),
the driver killed (nothing of the run left), a 2-point sweep and its resume, the resource
check before anything queues, and every notebook of the workbook recording the same numbers and
verdicts on both executors. Skipped when Ray is not installed (it is the optional extra
flkit[ray])."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil  # a dependency of ipykernel, which every notebook run needs
import pytest

# a Ray instance started here binds to 127.0.0.1 only: Ray reads this when it is imported
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip(
    "ray", reason="Ray is the optional extra flkit[ray] (pip install 'flkit[ray]'); not installed"
)

from test_reproduce_stop import MARKER, _alive, _cmdline, _start  # noqa: E402

from flkit import reproduce as rp  # noqa: E402
from flkit import store  # noqa: E402
from flkit.reproduce.plan import discover, run_threads  # noqa: E402
from flkit.reproduce.pool_jobs import notebook_jobs  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402
from flkit.workbook import presets  # noqa: E402
from flkit.workbook.results import load_results  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NOTEBOOKS = FIXTURES / "notebooks"
#: the workbook's own notebooks, as flkit reproduce finds them
WORKBOOK = Path(__file__).resolve().parents[1] / "notebooks"
PRESET_PATH = os.pathsep.join([str(FIXTURES / "presets"), str(FIXTURES / "ray_presets")])
#: the smallest object store Ray accepts is 75 MiB; the tasks here ship a notebook each
OBJECT_STORE_BYTES = 100 * 2**20
#: how long the processes of a killed worker get to end (they sleep for 600 s otherwise)
SETTLE_S = 30
pytestmark = pytest.mark.slow


def _raylets() -> set[str]:
    res = subprocess.run(["pgrep", "-f", "raylet"], capture_output=True, text=True)
    return set(res.stdout.split())


#: variables no run of this module sees, on either executor
CLEARED = ("FLKIT_PRESET", "FLKIT_REPORT_DIR", "FLKIT_RUNS_DIR")


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("FLKIT_PRESET_PATH", PRESET_PATH)
    for var in CLEARED:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    """One local Ray (1 CPU, a small object store, no dashboard, 127.0.0.1) for the module;
    flkit uses a Ray already initialized in the process as is and leaves it running. Its workers
    inherit the environment it starts with: the variables of the local runs (``env``), and a run
    cache of their own (``FLKIT_RUNS``, returned), which no local run of the module reads."""
    cache = tmp_path_factory.mktemp("ray-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("FLKIT_PRESET_PATH", PRESET_PATH)  # the workers inherit it
    before = _raylets()
    for attempt in (1, 2):  # as flkit does: a busy machine can miss the raylet's start deadline
        try:
            with pytest.MonkeyPatch.context() as started:  # what the workers alone get
                started.setenv("FLKIT_RUNS", str(cache))
                for var in CLEARED:
                    started.delenv(var, raising=False)
                ray.init(
                    num_cpus=1,
                    include_dashboard=False,
                    object_store_memory=OBJECT_STORE_BYTES,
                    _node_ip_address="127.0.0.1",
                )
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    try:
        yield cache
    finally:
        ray.shutdown()
        mp.undo()
    assert _raylets() <= before, "the test's Ray instance left a raylet behind"


def _table_lines(md: str) -> list[str]:
    """Every table line of a report except the overview's (which holds run times)."""
    return [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| [")]


def _rows(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    return {
        nb["name"]: [(r["item"], r["paper"], r["measured"], r["holds"]) for r in nb["rows"]]
        for nb in summary["notebooks"]
    }


def test_two_notebooks_same_report_as_local(tmp_path):
    """flkit starts and stops its own Ray instance; the report's tables equal the local
    executor's on the same inputs, and no raylet is left behind."""
    before = _raylets()
    kw = dict(preset="smoke", seeds=[0, 1], jobs=2, overrides={"n": 50}, progress=False)
    kw["notebooks_dir"] = NOTEBOOKS
    path_ray, infos_ray = rp.reproduce_runs(out=tmp_path / "ray", executor="ray", **kw)
    assert not ray.is_initialized() and _raylets() <= before
    path_loc, infos_loc = rp.reproduce_runs(out=tmp_path / "local", **kw)
    assert [(r["notebook"], r["seed"], r["status"]) for r in infos_ray] == [
        (r["notebook"], r["seed"], r["status"]) for r in infos_loc
    ]
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")
    md_ray = path_ray.read_text()
    assert _table_lines(md_ray) == _table_lines(path_loc.read_text())
    assert any(ln.startswith("| mean of uniform samples") for ln in _table_lines(md_ray))
    for sub in ("fixture_ok/seed1/histogram.png", "fixture_ok/seed1/fixture_ok.ipynb"):
        assert (tmp_path / "ray" / sub).stat().st_size > 0  # gathered through the driver
    err = json.loads((tmp_path / "ray/fixture_fail/seed0/run.json").read_text())["error"]
    assert "fails on purpose" in err["evalue"] and err["cell_source"].startswith("raise")


#: Ray's own agents of a local instance whose driver was killed: they notice it and exit by
#: themselves, within about two minutes (Ray's behaviour, not flkit's processes)
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL on this platform")
def test_sigkill_of_reproduce_on_ray_leaves_no_run_behind(tmp_path):
    """`kill -9` of `flkit reproduce --executor ray` while a notebook runs: the Ray instance it
    started goes with it (Ray's fate sharing), and the run's watchdog ends the notebook's kernel
    with the process the kernel started; nothing goes on writing into the run cache."""
    proc, log = _start(tmp_path, "--executor", "ray")
    seen: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        while not any(MARKER in _cmdline(p) for p in seen):
            assert proc.poll() is None, f"reproduce ended early: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the fixture notebook never started its process"
            time.sleep(0.2)
            try:  # Ray's processes, the task's worker, its kernel and the kernel's process
                seen = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                seen = []
        assert any("ipykernel" in _cmdline(p) for p in seen)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        watched = [p for p in seen if not _cmdline(p).startswith(RAY_AGENTS)]
        left, end = watched, time.monotonic() + SETTLE_S
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        assert not left, f"still running after SIGKILL of the driver: {[_cmdline(p) for p in left]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in seen:  # Ray's agents too, rather than wait for them to leave
            if _alive(p):
                p.kill()
        proc.wait(timeout=10)


def _notebooks(tmp_path: Path, *names: str) -> Path:
    """A notebooks folder holding only the fixtures ``names`` (from notebooks/ or
    ray_notebooks/)."""
    nbs = tmp_path / "nbs"
    nbs.mkdir(exist_ok=True)
    for name in names:
        found = [d / f"{name}.ipynb" for d in (NOTEBOOKS, FIXTURES / "ray_notebooks")]
        shutil.copy(next(p for p in found if p.is_file()), nbs)
    return nbs


def _train(tmp_path: Path, out: str, executor: str, **overrides) -> tuple[dict, Path]:
    """One run of the training fixture at smoke: (its info, its run folder)."""
    _, (info,) = rp.reproduce_runs(
        preset="smoke",
        notebooks_dir=_notebooks(tmp_path, "fixture_train"),
        out=tmp_path / out,
        executor=executor,
        overrides=overrides,
        progress=False,
    )
    return info, tmp_path / out / "fixture_train" / "seed0"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> str:
    """Every float of the training fixture's history as the local executor records it, and the
    thread count it computed with (history.txt)."""
    tmp = tmp_path_factory.mktemp("local")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLKIT_PRESET_PATH", PRESET_PATH)
        info, folder = _train(tmp, "out", "local", cache_dir=str(tmp / "cache"))
    assert info["status"] == "ok", info["error"]
    return (folder / "history.txt").read_text()


def test_a_training_run_records_the_same_floats_as_on_the_local_executor(
    cluster, tmp_path, uninterrupted
):
    """The same notebook, preset and seed trained as a Ray task (a run cache of its own, so it
    trains) records the repr of every float of the local executor's history, with the same
    thread count: the driver's, not the task's one CPU (this run's floats change with it)."""
    info, folder = _train(tmp_path, "ray", "ray", cache_dir=str(tmp_path / "cache"))
    assert info["status"] == "ok", info["error"]
    recorded = (folder / "history.txt").read_text()
    assert recorded.splitlines()[0] == f"threads {run_threads()}"
    assert recorded == uninterrupted


def _left(pids: set[int], marker: str) -> list[psutil.Process]:
    """The live processes among ``pids`` and those whose command line holds ``marker``."""
    found = []
    for p in psutil.process_iter():
        try:
            mine = p.pid in pids or marker in " ".join(p.cmdline())
            if mine and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def test_a_worker_killed_mid_run_is_reported_ended_and_resumed_to_the_same_floats(
    cluster, tmp_path, uninterrupted
):
    """At round 3 of 5 the kernel kills the Ray worker running it (checkpoints of rounds 1-2
    written), starts a process of its own and waits, as a kernel training on unseen would. The
    run is reported failed; the task's watchdog ends the kernel and its process; the run cache
    holds the checkpoint, not a finished run; run again, the run resumes and records the floats
    of the uninterrupted run."""
    cache = tmp_path / "cache"
    info, folder = _train(tmp_path, "killed", "ray", cache_dir=str(cache), kill_at=3)
    assert info["status"] == "failed"
    assert "Worker" in info["error"]["ename"] or "died" in info["error"]["evalue"].lower()
    assert json.loads((folder / "run.json").read_text())["status"] == "failed"
    assert not (folder / "history.txt").exists()
    kernel = int((cache / "kernel.pid").read_text())
    left, end = _left({kernel}, str(cache)), time.monotonic() + SETTLE_S
    try:
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = _left({kernel}, str(cache))
        assert not left, f"still running after the worker was killed: {left}"
    finally:
        for p in left:
            p.kill()
    (run,) = [p for p in cache.iterdir() if p.is_dir()]
    assert not store.RunFolder(run, ()).finished
    assert json.loads((run / store.CHECKPOINT_SUM).read_text())["round"] == 2
    info, folder = _train(tmp_path, "resumed", "ray", cache_dir=str(cache))
    assert info["status"] == "ok", info["error"]
    assert (folder / "history.txt").read_text() == uninterrupted
    assert store.RunFolder(run, ()).finished and not (run / store.CHECKPOINT).exists()


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_the_pool_on_ray_trains_in_tasks_and_each_notebook_reads_its_runs(
    cluster, tmp_path, monkeypatch, capfd
):
    """`flkit reproduce --executor ray` with the run pool, 00 at smoke, seed 3 (no other test
    trains it): the pool's runs are Ray tasks, trained in a cache on the worker's side and
    written into this machine's run cache (empty before); the notebook's task gets them into
    its node's cache (the workers' own, ``cluster``) and reads them, training none: each run
    folder holds the same bytes in both caches, its record of when each round started included
    (a run trained again records other times), and every run the notebook reads is one of them
    (the workers' cache holds no other of this seed)."""
    driver = tmp_path / "driver-cache"
    monkeypatch.setenv("FLKIT_RUNS", str(driver))
    before = set(_run_folders(cluster))
    _, (info,) = rp.reproduce_runs(
        preset="smoke",
        only=["00_fl_primer"],
        seeds=[3],
        notebooks_dir=WORKBOOK,
        out=tmp_path / "out",
        executor="ray",
    )
    assert info["status"] == "ok", info["error"]
    err = capfd.readouterr().err
    assert "on a local Ray instance, 1 CPU per run" in err, err
    pooled = _run_folders(driver)
    assert pooled and f"pool: {len(pooled)}/{len(pooled)} run(s) trained" in err, err
    assert len(list((tmp_path / "out" / "pool").glob("*.log"))) == len(pooled)
    try:
        assert set(_run_folders(cluster)) - before == set(pooled)
        for name in pooled:
            shipped = _files(cluster / name)
            assert shipped == _files(driver / name) and "meta.json" in shipped
    finally:  # the workers' cache as it was: another test compares it with a local one
        for name in set(_run_folders(cluster)) - before:
            shutil.rmtree(cluster / name)


def test_runs_a_notebook_trains_in_its_task_come_back_so_a_second_call_trains_none(
    cluster, tmp_path, monkeypatch
):
    """04 at smoke, seed 6, on Ray with the pool: the pool trains its untimed runs and leaves
    the timed ones (it reads their seconds) to the notebook, which trains them in its task on
    the workers' cache; they come back into this machine's cache byte for byte. Called again
    with a fresh out folder, the pool has nothing to train and every run goes out with the
    notebook's task: the workers' cache gains no folder and changes no byte."""
    driver = tmp_path / "driver-cache"
    monkeypatch.setenv("FLKIT_RUNS", str(driver))
    before = set(_run_folders(cluster))
    kw = dict(preset="smoke", only=["04_hidenseek"], seeds=[6], notebooks_dir=WORKBOOK)
    try:
        _, (info,) = rp.reproduce_runs(out=tmp_path / "a", executor="ray", progress=False, **kw)
        assert info["status"] == "ok", info["error"]
        p = presets.load("04_hidenseek", "smoke")
        jobs = notebook_jobs("04_hidenseek", "smoke", [6], {}, run_threads())
        timed = [j for j in jobs if j.timed]
        assert timed and len(timed) < len(jobs) and p["seeds"] == 1
        names = {j.folder(driver, "cpu").name for j in jobs}
        assert set(_run_folders(driver)) == names  # the pool's and the notebook's
        trained = set(_run_folders(cluster)) - before
        assert {j.folder(driver, "cpu").name for j in timed} <= trained
        for name in trained:
            assert _files(cluster / name) == _files(driver / name)
        held = {name: _files(cluster / name) for name in trained}
        _, (info,) = rp.reproduce_runs(out=tmp_path / "b", executor="ray", **kw)
        assert info["status"] == "ok", info["error"]
        assert set(_run_folders(cluster)) - before == trained
        assert {name: _files(cluster / name) for name in trained} == held
    finally:  # the workers' cache as it was: another test compares it with a local one
        for name in set(_run_folders(cluster)) - before:
            shutil.rmtree(cluster / name)


def test_a_pool_run_that_fails_on_ray_is_reported_with_its_log_and_the_rest_train(
    cluster, tmp_path
):
    """Two pool runs as Ray tasks, the first of a study that cannot be imported: it is reported
    failed with the traceback its task printed in its log, and the second trains into this
    machine's cache."""
    from flkit.reproduce.pool import PoolPlan
    from flkit.reproduce.pool_ray import RayPool, RaySlots

    good = notebook_jobs("00_fl_primer", "smoke", [4], {}, run_threads())[0]
    bad = type(good)(**{**good.__dict__, "study": "flkit.papers.no_such_paper.study"})
    plan = PoolPlan([bad, good], RaySlots(1, 1, 0, "test"), tmp_path / "cache")
    plan.ray, plan.place, plan.log_dir = True, "cpu", tmp_path / "logs"
    events = list(RayPool(plan).events())
    done = {e[1]: e[2] for e in events if e[0] == "done"}
    assert sorted(e[1] for e in events if e[0] == "start") == [0, 1]
    assert done[0]["status"] == "failed" and "no_such_paper" in done[0]["error"]
    assert "Traceback" in Path(done[0]["log"]).read_text()
    assert done[1]["status"] == "ok" and done[1]["seconds"] > 0  # the task's own count
    assert good.finished(good.folder(plan.root, "cpu"))


def test_the_pool_on_a_two_node_cluster_joined_by_its_address(tmp_path, monkeypatch):
    """A Ray cluster of two nodes on this machine (Ray's own test cluster), each node's workers
    with a run cache of their own, joined by `flkit reproduce --executor ray --address` from a
    driver with a third: 00 at smoke, seed 5. The pool's runs, trained on the nodes, come back
    into the driver's cache whole; the notebook's node then holds each of them byte for byte as
    the driver does (its record of when each round started included: read, not trained again)."""
    from ray.cluster_utils import Cluster

    caches = {name: tmp_path / name for name in ("driver", "head", "node2")}
    monkeypatch.setenv("FLKIT_RUNS", str(caches["head"]))  # a node's workers inherit it
    nodes = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "object_store_memory": OBJECT_STORE_BYTES,
        },
    )
    try:
        monkeypatch.setenv("FLKIT_RUNS", str(caches["node2"]))
        nodes.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES)
        nodes.wait_for_nodes()
        address = nodes.address
        monkeypatch.setenv("FLKIT_RUNS", str(caches["driver"]))
        res = subprocess.run(
            [sys.executable, "-m", "flkit", "reproduce", "--preset", "smoke"]
            + ["--only", "00_fl_primer", "--seeds", "5", "--yes", "--executor", "ray"]
            + ["--address", address, "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        nodes.shutdown()
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"on the Ray cluster at {address}, 1 CPU per run" in res.stderr
    pooled = _run_folders(caches["driver"])
    assert pooled and f"pool: {len(pooled)}/{len(pooled)} run(s) trained" in res.stderr
    held = [c for c in (caches["head"], caches["node2"]) if c.is_dir()]
    reader = [c for c in held if set(_run_folders(c)) == set(pooled)]
    assert reader, {c.name: _run_folders(c) for c in held}
    for name in pooled:
        assert _files(reader[0] / name) == _files(caches["driver"] / name)


def test_killed_task_is_failed_and_the_rest_complete(cluster, tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    shutil.copy(NOTEBOOKS / "fixture_ok.ipynb", nbs)
    shutil.copy(FIXTURES / "ray_notebooks" / "fixture_killed.ipynb", nbs)
    path, infos = rp.reproduce_runs(
        preset="smoke",
        seeds=[0, 1],
        jobs=2,
        notebooks_dir=nbs,
        out=tmp_path / "out",
        executor="ray",
        progress=False,
    )
    status = {(r["notebook"], r["seed"]): r["status"] for r in infos}
    assert status == {
        ("fixture_killed", 0): "failed",
        ("fixture_killed", 1): "failed",
        ("fixture_ok", 0): "ok",
        ("fixture_ok", 1): "ok",
    }
    err = infos[0]["error"]
    assert "Worker" in err["ename"] or "died" in err["evalue"].lower(), err
    md = path.read_text()
    assert "| [fixture_killed](#fixture_killed) | **FAILED** | 0/2 |" in md
    assert "| [fixture_ok](#fixture_ok) | ok | 2/2 |" in md
    info = json.loads((tmp_path / "out/fixture_killed/seed0/run.json").read_text())
    assert info["status"] == "failed"
    assert ray.is_initialized()  # a Ray initialized by the caller is left running


def test_two_point_sweep_and_resume(cluster, tmp_path, capfd):
    kw = dict(preset="smoke", seeds=[0, 1], jobs=2, notebooks_dir=NOTEBOOKS, executor="ray")
    path, infos = rp.sweep("fixture_ok", {"n": [50, 400]}, out=tmp_path, **kw)
    assert [r["status"] for r in infos] == ["ok"] * 4
    local, _ = rp.sweep(
        "fixture_ok", {"n": [50, 400]}, out=tmp_path / "local", **kw | {"executor": "local"}
    )
    assert _table_lines(path.read_text()) == _table_lines(local.read_text())
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("n=*/fixture_ok/seed*/run.json")}
    capfd.readouterr()
    rp.sweep("fixture_ok", {"n": [50, 400]}, out=tmp_path, **kw)
    assert "4 already done, 0 to run" in capfd.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_gpu_asked_on_a_cluster_without_one(cluster, tmp_path):
    assert not ray.cluster_resources().get("GPU")
    with pytest.raises(FlkitError, match=r"asks for 1 CPU\(s\) and 1 GPU\(s\).*0 GPUs"):
        rp.reproduce(
            preset="paper",
            notebooks_dir=NOTEBOOKS,
            only=["fixture_ok"],
            out=tmp_path,
            executor="ray",
            progress=False,
        )
    assert not (tmp_path / "fixture_ok").exists()  # refused before any task queued


def test_unreachable_address(tmp_path):
    with pytest.raises(FlkitError, match=r"no Ray cluster reachable at --address '127.0.0.1:9'"):
        rp.reproduce(
            preset="smoke",
            notebooks_dir=NOTEBOOKS,
            out=tmp_path,
            executor="ray",
            address="127.0.0.1:9",
        )
    with pytest.raises(FlkitError, match=r"is not HOST:PORT"):
        rp.reproduce(
            preset="smoke", notebooks_dir=NOTEBOOKS, out=tmp_path, executor="ray", address="nohost"
        )


#: what a notebook measures on the clock, by notebook: the numbers whose keys start with one of
#: ``numbers`` (local training seconds, and savings computed from them) and the claims (by key)
#: whose evidence and face value are those seconds. No two runs record the same seconds, on any
#: executor, so they are left out of the comparison; such a claim is compared by its verdict.
CLOCK_READINGS = {
    "04_hidenseek": {
        "numbers": ("local training time per round, ", "training-time saving vs FedMask, "),
        "claims": ("time_order",),
    },
}
#: results.json's own record of when its run started and ended, and for how long it ran
RUN_CLOCK = ("started", "saved", "wall_time_s")


def _leaves(value, path: str = "") -> dict[str, str]:
    """``{path: repr(leaf)}`` of a JSON value: every number compared by its repr, so exactly
    (a NaN equals a NaN, 1 differs from 1.0)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return {path: repr(value)}
    return {p: v for key, item in items for p, v in _leaves(item, f"{path}/{key}").items()}


def _recorded(results: dict, notebook: str) -> tuple[dict[str, str], set[str]]:
    """Everything ``notebook`` recorded in its results.json as :func:`_leaves` (numbers keyed by
    their key, claims by their text), less its clock readings; and the clock readings found."""
    clock = CLOCK_READINGS.get(notebook, {})
    found: set[str] = set()
    numbers, claims = {}, {}
    for n in results["numbers"]:
        prefix = next((p for p in clock.get("numbers", ()) if n["key"].startswith(p)), None)
        if prefix is not None:
            found.add(prefix)
        else:
            numbers[n["key"]] = n
    for c in results["claims"]:
        if c.get("key") in clock.get("claims", ()):
            found.add(c["key"])
            claims[c["text"]] = {"verdict": c["verdict"]}
        else:
            claims[c["text"]] = c
    rest = {k: v for k, v in results.items() if k not in (*RUN_CLOCK, "numbers", "claims")}
    return _leaves({**rest, "numbers": numbers, "claims": claims}), found


def _run_folders(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def local_cache(tmp_path_factory) -> Path:
    """The run cache of this module's local runs (the Ray tasks have theirs: ``cluster``)."""
    return tmp_path_factory.mktemp("local-cache")


@pytest.mark.parametrize("notebook", sorted(discover(WORKBOOK)))
def test_a_notebook_records_the_same_numbers_on_the_local_executor_and_on_ray(
    cluster, local_cache, notebook, tmp_path, monkeypatch
):
    """Each notebook of the workbook at `smoke`, seed 0, with `flkit reproduce --executor local`
    and with `--executor ray`, each executor with a run cache of its own (so each trains every
    run itself) and without the run pool (which would train the runs on this machine for both):
    the two results.json hold the repr of every number, the same tables and the same verdicts,
    less the seconds a notebook measures on the clock; and the two caches hold the same runs
    (same identities, thread count included)."""
    recorded = {}
    for executor, cache in (("local", local_cache), ("ray", cluster)):
        monkeypatch.setenv("FLKIT_RUNS", str(cache))  # Ray's workers have had it since they started
        _, (info,) = rp.reproduce_runs(
            preset="smoke",
            only=[notebook],
            notebooks_dir=WORKBOOK,
            out=tmp_path / executor,
            executor=executor,
            pool=False,
            progress=False,
        )
        assert info["status"] == "ok", f"{executor}: {info['error']}"
        results = load_results(tmp_path / executor / notebook / "seed0")
        assert results["numbers"] and results["claims"]
        recorded[executor] = _recorded(results, notebook)
    (local, local_clock), (on_ray, ray_clock) = recorded["local"], recorded["ray"]
    clock = CLOCK_READINGS.get(notebook, {})
    assert local_clock == ray_clock == {*clock.get("numbers", ()), *clock.get("claims", ())}
    differ = {p: (local.get(p), on_ray.get(p)) for p in local.keys() | on_ray.keys()}
    differ = {p: pair for p, pair in differ.items() if pair[0] != pair[1]}
    assert not differ, f"{len(differ)} value(s) differ, local vs ray:\n" + "\n".join(
        f"{p}: {a} vs {b}" for p, (a, b) in sorted(differ.items())
    )
    assert _run_folders(local_cache) == _run_folders(cluster)
