"""The run pool (flkit/reproduce/pool.py) on the CPU: runs packed two at a time write, byte for
byte, the histories they write alone at the same thread count; the pool's order changes no
number; a worker killed mid-run leaves a checkpoint that the next pool resumes from, to the same
history; runs the cores hold only one at a time are left to their notebooks; bad settings are
refused, with the accepted ones, before any training."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import torch
from tiny_runs import TINY_FEDAVG

from flkit import store
from flkit.experiment import computed_history as _history
from flkit.experiment import run
from flkit.papers.staleness import study as staleness
from flkit.reproduce import pool as pool_mod
from flkit.reproduce import pool_plan
from flkit.reproduce.pool import Pool, PoolPlan, prepare_pool, run_pool
from flkit.reproduce.pool_jobs import PoolJob
from flkit.reproduce.pool_slots import (
    MAX_PER_DEVICE,
    Slots,
    check_fit,
    parse_devices,
    training_bytes,
)
from flkit.reproduce.pool_workers import WorkerProcess, slot_key
from flkit.utils import FlkitError
from flkit.workbook import presets

PRIMER = "flkit.papers.fl_primer.study"  # a study without train(): experiment.run alone
STALENESS = "flkit.papers.staleness.study"  # train(): each run from a seeded generator
WAIT_S = 300  # the most a test waits for a worker's checkpoint (a busy machine is slow)


def _unstale():
    """Notebook 05's smoke Unstale run: LeNet with dropout, trained through staleness.train."""
    return staleness.config(presets.load("05_staleness", "smoke"), "unstale", 0)


def _jobs() -> list[PoolJob]:
    runs = [
        (PRIMER, TINY_FEDAVG),
        (PRIMER, TINY_FEDAVG.replace(seed=2, method="fedprox", method_params={"mu": 0.1})),
        (STALENESS, _unstale()),
    ]
    return [PoolJob("test", s, "smoke", "run", c.to_dict(), None, 1) for s, c in runs]


def _alone(job: PoolJob, root: Path) -> bytes:
    """The job trained alone in this process at its thread count, as its notebook trains it."""
    from flkit.experiment import RunConfig

    cfg = RunConfig.from_dict(job.config)
    before = torch.get_num_threads()
    torch.set_num_threads(job.threads)
    try:
        if job.study == STALENESS:
            res = staleness.train(cfg, out_dir=root, progress=False)
        else:
            res = run(cfg, out_dir=root, progress=False)
    finally:
        torch.set_num_threads(before)
    return _history(res.run_dir)


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    root = tmp_path_factory.mktemp("alone")
    return [_alone(j, root) for j in _jobs()]


def _plan(jobs, root: Path, cores: int, **kw) -> PoolPlan:
    return PoolPlan(jobs, Slots(cores), root, log_dir=root.parent / "logs", **kw)


def _events(plan: PoolPlan) -> list:
    return [e for e in Pool(plan).events() if e[0] != "tick"]


def test_a_packed_pool_gives_each_run_its_history_alone(tmp_path, alone):
    jobs = _jobs()
    plan = _plan(jobs, tmp_path / "cache", cores=2)
    events = _events(plan)
    assert [e[2]["status"] for e in events if e[0] == "done"] == ["ok"] * len(jobs)
    kinds = [e[0] for e in events]
    assert kinds[:2] == ["start", "start"]  # two runs went at once: the pool packed them
    pids = [e[2] for e in events if e[0] == "start"]
    assert len(set(pids)) == 2  # the third run went to a worker that had trained one already
    for job, hist in zip(jobs, alone):
        folder = job.folder(plan.root)
        assert folder.parent == plan.root and job.finished(folder)
        assert _history(folder) == hist, job.label()


def test_the_pools_order_changes_no_number(tmp_path, alone):
    jobs = _jobs()[::-1]
    plan = _plan(jobs, tmp_path / "cache", cores=1)  # one at a time, in the other order
    events = _events(plan)
    assert [e[1] for e in events if e[0] == "done"] == [0, 1, 2]
    # one worker process trained all three, one after another, as a notebook's kernel does
    assert len({e[2] for e in events if e[0] == "start"}) == 1
    for job, hist in zip(jobs, alone[::-1]):
        assert _history(job.folder(plan.root)) == hist, job.label()


def test_a_killed_pool_resumes_from_the_checkpoint_to_the_same_history(tmp_path):
    cfg = TINY_FEDAVG.replace(rounds=150)
    job = PoolJob("test", PRIMER, "smoke", "run", cfg.to_dict(), None, 1)
    plan = _plan([job], tmp_path / "cache", cores=1, checkpoint_every=1)
    folder = job.folder(plan.root)
    done = None
    for event in Pool(plan).events():
        if event[0] == "start":
            deadline = time.monotonic() + WAIT_S
            while not (folder / store.CHECKPOINT_SUM).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(event[2], signal.SIGKILL)  # the worker dies mid-run
        elif event[0] == "done":
            done = event[2]
    assert done["status"] == "failed" and done["returncode"] == -signal.SIGKILL
    assert not job.finished(folder)
    saved = store.load_json(folder / store.CHECKPOINT_SUM)["round"]
    assert 1 <= saved < cfg.rounds

    again = [e for e in Pool(plan).events() if e[0] in ("start", "done")]
    assert again[0][3] >= saved  # the rerun starts from the checkpoint, not from round 1
    assert again[1][2]["status"] == "ok" and job.finished(folder)
    assert not (folder / store.CHECKPOINT).exists()
    assert _history(folder) == _alone(job, tmp_path / "alone")


_DRIVER = """
import sys, time
from pathlib import Path
from flkit.reproduce.pool import Pool, PoolPlan
from flkit.reproduce.pool_jobs import PoolJob
from flkit.reproduce.pool_slots import Slots
job = PoolJob(**__import__("json").loads(sys.argv[1]))
root = Path(sys.argv[2])
for event in Pool(PoolPlan([job], Slots(1), root, log_dir=root.parent / "logs")).events():
    if event[0] == "start":
        print(event[2], flush=True)
        time.sleep(3600)
"""


def test_a_pool_worker_ends_when_its_driver_is_killed(tmp_path):
    import json
    import subprocess
    import sys

    import psutil

    cfg = TINY_FEDAVG.replace(rounds=100_000)  # hours: it never ends on its own here
    job = PoolJob("test", PRIMER, "smoke", "run", cfg.to_dict(), None, 1)
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, json.dumps(job.__dict__), str(tmp_path / "cache")],
        stdout=subprocess.PIPE,
        text=True,
    )
    worker = psutil.Process(int(driver.stdout.readline()))
    driver.kill()  # SIGKILL: no handler of the driver's ends the worker
    driver.wait(timeout=10)
    try:
        worker.wait(timeout=30)
    except psutil.TimeoutExpired:
        worker.kill()
        pytest.fail("the pool worker went on training after its driver was killed")


def test_run_pool_reports_and_leaves_a_failed_run_to_its_notebook(tmp_path):
    study = "flkit.papers.no_such_paper.study"
    bad = PoolJob("test", study, "smoke", "run", TINY_FEDAVG.to_dict(), None, 1)
    plan = _plan([bad], tmp_path / "cache", cores=1)
    lines = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    out = run_pool(plan, stream=Stream())
    assert out["failed"] == [bad.label()] and out["trained"] == 0
    text = "".join(lines)
    assert "FAILED" in text and "No module named 'flkit.papers.no_such_paper'" in text


def test_a_failed_run_ends_its_worker_and_the_next_run_gets_a_fresh_one(tmp_path):
    bad = PoolJob(
        "test", "flkit.papers.no_such_paper.study", "smoke", "run", TINY_FEDAVG.to_dict(), None, 1
    )
    good = _jobs()[0]
    plan = _plan([bad, good], tmp_path / "cache", cores=1)
    events = _events(plan)
    done = {e[1]: e[2] for e in events if e[0] == "done"}
    assert done[0]["status"] == "failed" and done[0]["returncode"] == 1
    assert "No module named 'flkit.papers.no_such_paper'" in done[0]["error"]
    assert done[1]["status"] == "ok" and good.finished(good.folder(plan.root))
    pids = [e[2] for e in events if e[0] == "start"]
    assert pids[0] != pids[1]
    # each run's output in its own log: the traceback in the failed run's, none in the other's
    assert "Traceback" in Path(done[0]["log"]).read_text()
    assert "Traceback" not in Path(done[1]["log"]).read_text()


# ----------------------------------------------------------------------------- bad input
GPUS = [
    {"index": 0, "name": "A", "free": 10 * 2**30, "total": 16 * 2**30},
    {"index": 1, "name": "B", "free": 4 * 2**30, "total": 16 * 2**30},
]


def test_a_device_list_naming_a_missing_gpu_is_refused_with_the_visible_ones():
    with pytest.raises(FlkitError, match=r"cuda:3 is not a visible GPU; accepted: cuda:0, cuda:1"):
        parse_devices("cuda:0,cuda:3", GPUS)
    with pytest.raises(FlkitError, match="this machine shows no GPU: use cpu"):
        parse_devices("cuda:0", [])
    with pytest.raises(FlkitError, match="'gpu0' is not a GPU name"):
        parse_devices("gpu0", GPUS)
    assert parse_devices(None, GPUS) == [0, 1] and parse_devices("1,cuda:0", GPUS) == [1, 0]
    assert parse_devices("cpu", GPUS) is None and parse_devices(None, []) is None


def test_more_runs_per_gpu_than_fit_are_refused_with_the_estimate():
    need = 3 * 2**30  # 3 GiB a run: cuda:1's 4 GiB free hold one
    with pytest.raises(FlkitError, match=r"2 runs per device do not fit cuda:1.*3\.00 GiB.*1\.\.1"):
        check_fit(2, need, GPUS, [0, 1])
    assert check_fit(3, need, GPUS, [0]) == 3  # 10 GiB hold three
    assert check_fit(None, need, GPUS, [0]) == 3 and check_fit(None, need, GPUS, [0, 1]) == 1
    assert check_fit(None, 2**20, GPUS, [0]) == MAX_PER_DEVICE  # 10,240 would fit


def test_the_memory_estimate_counts_parameters_and_activations_by_hand():
    from flkit.data import load

    ds = load("mnist", device="cpu", train_subset=200, test_subset=50)
    # mlp_mnist: 784*200+200 + 200*200+200 + 200*10+10 = 199,210 parameters; one sample's leaf
    # outputs: Identity 784, Linear 200, ReLU 200, Linear 200, ReLU 200, Linear 10 = 1,594
    want = 4 * (5 * 199_210 * 6 + 5 * 20 * 1_594 * 3)
    assert training_bytes("mlp_mnist", {}, ds, 5, 20) == want


def _plan_dict(tmp_path, notebooks=(), overrides=None) -> dict:
    return {
        "overrides": dict(overrides or {}),
        "notebooks": list(notebooks),
        "preset": "smoke",
        "seeds": [0],
        "runs": [{"notebook": n} for n in notebooks],
        "out": tmp_path / "out",
    }


def test_bad_pool_settings_are_refused_before_any_training(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    plan = _plan_dict(tmp_path, ["02_feddip"])
    monkeypatch.setenv("FLKIT_THREADS", "0")
    with pytest.raises(FlkitError, match=r"FLKIT_THREADS.*'0'"):
        prepare_pool(plan, root=root)
    monkeypatch.delenv("FLKIT_THREADS")
    with pytest.raises(FlkitError, match="applies to GPUs, and this pool runs on the CPU"):
        prepare_pool(plan, devices="cpu", per_device=2, root=root)
    with pytest.raises(FlkitError, match="cuda:1 is not a visible GPU"):
        prepare_pool(plan, devices="cuda:1", root=root)
    # a GPU machine whose GPUs have 1 GiB free: 02's smoke runs fit one per GPU, not 50
    tiny = [{"index": 0, "name": "A", "free": 2**30, "total": 2**30}]
    monkeypatch.setattr(pool_plan, "probe_gpus", lambda: tiny)
    with pytest.raises(FlkitError, match=r"50 runs per device do not fit cuda:0: each needs about"):
        prepare_pool(plan, per_device=50, root=root)
    assert not root.exists() or not any(root.iterdir())  # nothing trained


@pytest.fixture
def driver_threads(monkeypatch):
    """The driver at 3 torch threads, a count no default gives on the test machines."""
    monkeypatch.delenv("FLKIT_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)


@pytest.fixture
def cores(monkeypatch):
    """A machine of 8 cores, whatever this one has: the pool packs by the cores it is given."""
    monkeypatch.setattr(pool_mod, "cpu_cores", lambda: 8)
    monkeypatch.setattr(pool_plan, "cpu_cores", lambda: 8)
    return 8


def test_a_cpu_pool_run_computes_with_the_executors_thread_count(tmp_path, driver_threads, cores):
    # the count the executors hand every notebook's kernel (plan.with_threads) is the one a pooled
    # run of a preset that pins none computes with: same floats, same cache folder as unpooled
    from flkit.reproduce.plan import with_threads

    plan = _plan_dict(tmp_path, ["02_feddip"])
    pooled = prepare_pool(plan, root=tmp_path / "cache")
    kernel = with_threads(plan["runs"])[0]["threads"]
    assert kernel == driver_threads
    assert len(pooled.jobs) == 12 and pooled.cached == 0 and pooled.slots.cores >= 1
    assert {j.threads for j in pooled.jobs} == {kernel} and pooled.threads == kernel
    costs = [j.cost() for j in pooled.jobs]
    assert costs == sorted(costs, reverse=True)  # the dearest start first


def test_a_cpu_pool_run_follows_flkit_threads(tmp_path, driver_threads, cores, monkeypatch):
    monkeypatch.setenv("FLKIT_THREADS", "1")
    pooled = prepare_pool(_plan_dict(tmp_path, ["02_feddip"]), root=tmp_path / "cache")
    assert {j.threads for j in pooled.jobs} == {1}
    assert pooled.slots.capacity() == pooled.slots.cores  # one core a run


def test_a_preset_that_pins_its_threads_keeps_them_in_the_pool(tmp_path, driver_threads, cores):
    pinned = presets.load("03_fedast", "smoke")["threads"]
    assert pinned not in (0, driver_threads)
    pooled = prepare_pool(_plan_dict(tmp_path, ["03_fedast"]), root=tmp_path / "cache")
    assert pooled.jobs and {j.threads for j in pooled.jobs} == {pinned}


def test_cpu_runs_the_cores_hold_one_at_a_time_are_left_to_their_notebook(tmp_path, monkeypatch):
    # 2 cores: 02's smoke runs at 2 threads go one at a time, where a worker per run only adds
    # its start-up; 03's simulations pin 1 thread, so two go at once and the pool keeps them
    monkeypatch.setattr(pool_plan, "cpu_cores", lambda: 2)
    monkeypatch.setenv("FLKIT_THREADS", "2")
    pooled = prepare_pool(_plan_dict(tmp_path, ["02_feddip", "03_fedast"]), root=tmp_path / "c")
    assert pooled.jobs and {j.notebook for j in pooled.jobs} == {"03_fedast"}
    assert {j.threads for j in pooled.jobs} == {1} and pooled.slots.capacity() == 2
    assert pooled.notes == [
        "02_feddip trains its own 12 run(s): each computes with 2 torch thread(s), so the 2 "
        "core(s) hold one at a time and a worker process would only add its start-up"
    ]
    # at one thread a run, 02's runs pack two to the 2 cores and the pool takes them
    monkeypatch.setenv("FLKIT_THREADS", "1")
    pooled = prepare_pool(_plan_dict(tmp_path, ["02_feddip"]), root=tmp_path / "c")
    assert len(pooled.jobs) == 12 and pooled.notes == []
    # on a GPU the pool keeps every run, whatever its CPU thread count
    monkeypatch.setenv("FLKIT_THREADS", "2")
    big = [{"index": 0, "name": "A", "free": 80 * 2**30, "total": 80 * 2**30}]
    monkeypatch.setattr(pool_plan, "probe_gpus", lambda: big)
    pooled = prepare_pool(_plan_dict(tmp_path, ["02_feddip"]), root=tmp_path / "c")
    assert len(pooled.jobs) == 12 and pooled.slots.gpu and pooled.notes == []


class _Proc:
    """A stand-in for a pool worker's process: alive until its input is closed."""

    pid = 0

    def __init__(self):
        self.stdin, self.returncode = self, None

    def close(self):  # its stdin closed: it exits
        self.returncode = 0

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def terminate(self):
        self.returncode = -15


class _StandIn(WorkerProcess):
    """A stand-in pool worker whose run ends after three polls."""

    def outcome(self):
        self.left -= 1
        return 0 if self.left <= 0 else None


def _schedule(jobs, slots: Slots, tmp_path, monkeypatch) -> list[tuple]:
    """Each start of ``Pool(jobs on slots).events()`` as (job index, GPU or None, the indices
    running on that GPU, or on the machine, at that moment), with stand-in workers."""
    starts, where = [], {}
    monkeypatch.setattr(pool_mod, "_POLL_S", 0.0)

    def spawn(self, job, gpu, log):
        return _StandIn(_Proc(), slot_key(job, gpu))

    def give(self, worker, i, job, log, tmp):
        where[i] = worker.key[1] if worker.key[0] == "cuda" else None
        worker.job, worker.left = i, 3

    monkeypatch.setattr(Pool, "_spawn", spawn)
    monkeypatch.setattr(Pool, "_give", give)
    plan = PoolPlan(jobs, slots, tmp_path / "cache", log_dir=tmp_path / "logs")
    running: set = set()
    for e in Pool(plan).events():
        if e[0] == "start":
            gpu = where[e[1]]
            starts.append((e[1], gpu, sorted(j for j in running if where[j] == gpu)))
            running.add(e[1])
        elif e[0] == "done":
            running.discard(e[1])
    return starts


def _workers_seen(jobs, slots: Slots, tmp_path, monkeypatch, failing=()) -> tuple[list, int]:
    """The slot of every worker ``Pool(jobs on slots)`` started, and the most workers alive at
    once (started and not yet ended), with stand-in workers whose runs all take three polls;
    the runs numbered in ``failing`` fail."""
    started, alive, most = [], set(), 0
    monkeypatch.setattr(pool_mod, "_POLL_S", 0.0)

    class Counted(_StandIn):
        def close(self):
            alive.discard(id(self))

        def outcome(self):
            code = super().outcome()
            if code is not None and self.job in failing:
                alive.discard(id(self))  # a worker exits after a failed run
                return 1
            return code

    def spawn(self, job, gpu, log):
        nonlocal most
        w = Counted(_Proc(), slot_key(job, gpu))
        started.append(w.key)
        alive.add(id(w))
        most = max(most, len(alive))
        return w

    def give(self, worker, i, job, log, tmp):
        worker.job, worker.left, worker.log = i, 3, log

    monkeypatch.setattr(Pool, "_spawn", spawn)
    monkeypatch.setattr(Pool, "_give", give)
    plan = PoolPlan(jobs, slots, tmp_path / "cache", log_dir=tmp_path / "logs")
    done = [e[2]["status"] for e in Pool(plan).events() if e[0] == "done"]
    assert done.count("failed") == len(failing) and len(done) == len(jobs)
    return started, most


def _one_thread_jobs(n: int, threads=1) -> list[PoolJob]:
    cfg = TINY_FEDAVG.to_dict()
    return [PoolJob("t", PRIMER, "smoke", "run", cfg, None, threads) for _ in range(n)]


def test_a_worker_serves_its_slot_run_after_run(tmp_path, monkeypatch):
    # six runs on two GPUs of one slot each: one worker per GPU trains all of that GPU's runs
    two_gpus = Slots(2, [0, 1], 1)
    started, most = _workers_seen(_one_thread_jobs(6), two_gpus, tmp_path, monkeypatch)
    assert started == [("cuda", 0), ("cuda", 1)] and most == 2
    # a failed run (the third, on GPU 0) ends its worker: GPU 0 gets a new one, and GPU 1's
    # idle worker waits for GPU 1's next run
    started, most = _workers_seen(_one_thread_jobs(6), two_gpus, tmp_path, monkeypatch, (2,))
    assert started == [("cuda", 0), ("cuda", 1), ("cuda", 0)] and most == 2
    # the CPU, two cores: two one-thread workers for four runs, then a run of two threads takes
    # both cores, and the idle one-thread workers end before its worker starts
    jobs = _one_thread_jobs(4) + _one_thread_jobs(1, threads=2)
    started, most = _workers_seen(jobs, Slots(2), tmp_path, monkeypatch)
    assert started == [("cpu", 1), ("cpu", 1), ("cpu", 2)] and most == 2


def _timed_mix() -> list[PoolJob]:
    """Five one-thread jobs, the second and fourth timed."""
    return [
        PoolJob(
            "t",
            PRIMER,
            "smoke",
            "run",
            TINY_FEDAVG.replace(seed=i).to_dict(),
            None,
            1,
            timed=i in (1, 3),
        )
        for i in range(5)
    ]


def test_a_timed_run_goes_alone_on_its_device(tmp_path, monkeypatch):
    # its wall-clock times are evidence: nothing runs beside it on its device, pooled or not
    jobs = _timed_mix()
    starts = _schedule(jobs, Slots(2), tmp_path, monkeypatch)  # the CPU: two runs fit
    assert sorted(i for i, _, _ in starts) == [0, 1, 2, 3, 4]
    for i, _, beside in starts:
        if jobs[i].timed:
            assert beside == [], (i, beside)  # it started on an idle machine
        else:
            assert not any(jobs[j].timed for j in beside), (i, beside)  # and nothing joined it
    assert any(len(beside) == 1 for _, _, beside in starts)  # the untimed ones still pack
    # two GPUs of 2 slots: a timed run alone on its GPU while the other GPU goes on
    starts = _schedule(jobs, Slots(2, [0, 1], 2), tmp_path, monkeypatch)
    for i, gpu, beside in starts:
        assert gpu in (0, 1)
        if jobs[i].timed:
            assert beside == [], (i, gpu, beside)
        else:
            assert not any(jobs[j].timed for j in beside), (i, gpu, beside)


def test_a_cpu_pool_leaves_timed_runs_to_their_notebook(tmp_path, monkeypatch):
    # 04 reads its Table 1 runs' training seconds: on the CPU the pool packs the others and its
    # notebook trains those alone after it; on a GPU the pool keeps them, marked timed
    from flkit.experiment import RunConfig
    from flkit.papers.hidenseek import study as hidenseek
    from flkit.preset_runs import identity

    monkeypatch.setattr(pool_plan, "cpu_cores", lambda: 2)
    p = presets.load("04_hidenseek", "smoke")
    timed = {identity(c) for c in hidenseek.timed(p, [0])}
    listed = {identity(c) for c in hidenseek.runs(p, [0])}
    assert timed < listed
    assert len(timed) == len(hidenseek.tasks(p)) * len(p["methods"]) * p["seeds"]

    def ids(pooled):
        return {identity(RunConfig.from_dict(j.config)) for j in pooled.jobs}

    pooled = prepare_pool(_plan_dict(tmp_path, ["04_hidenseek"]), root=tmp_path / "c")
    assert ids(pooled) == listed - timed
    assert not any(j.timed for j in pooled.jobs)
    assert pooled.notes == [
        f"04_hidenseek trains its own {len(timed)} timed run(s): it reads their wall-clock "
        "times, so each goes alone on the machine, and alone a run is faster in the notebook's "
        "kernel than in a worker process"
    ]
    big = [{"index": 0, "name": "A", "free": 80 * 2**30, "total": 80 * 2**30}]
    monkeypatch.setattr(pool_plan, "probe_gpus", lambda: big)
    pooled = prepare_pool(_plan_dict(tmp_path, ["04_hidenseek"]), root=tmp_path / "c")
    assert ids(pooled) == listed
    assert {identity(RunConfig.from_dict(j.config)) for j in pooled.jobs if j.timed} == timed
    assert [j.timed for j in pooled.jobs] == sorted(j.timed for j in pooled.jobs)  # timed last


def test_a_notebook_whose_runs_cannot_be_listed_trains_them_itself(tmp_path):
    plan = _plan_dict(tmp_path, ["02_feddip"], overrides={"no_such_key": 1})
    pooled = prepare_pool(plan, root=tmp_path / "cache")
    assert pooled.jobs == [] and "not preset keys" in pooled.notes[0]


def test_no_pool_with_pool_settings_is_refused(tmp_path, monkeypatch):
    from flkit import reproduce as rp

    fixtures = Path(__file__).parent / "fixtures"
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(fixtures / "presets"))
    nbs = fixtures / "notebooks"
    with pytest.raises(FlkitError, match="--pool-devices set.*--no-pool turns off"):
        rp.reproduce(
            preset="smoke", notebooks_dir=nbs, out=tmp_path, pool=False, pool_devices="cpu"
        )


def test_a_ray_address_that_does_not_answer_stops_before_the_pool(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from flkit import reproduce as rp

    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "cache"))
    with pytest.raises(FlkitError, match="no Ray cluster reachable"):
        rp.reproduce(
            preset="smoke",
            only=["02_feddip"],
            out=tmp_path / "out",
            executor="ray",
            address="127.0.0.1:9",
        )
    assert not (tmp_path / "cache").exists()


def test_the_time_left_counts_timed_runs_one_at_a_time_per_device():
    # untimed runs share the pool's capacity; a timed run has its device to itself
    from flkit.reproduce.pool_progress import PoolProgress

    jobs = _timed_mix()[:4]  # 0 and 2 untimed, 1 and 3 timed, each of cost c
    c = jobs[0].cost()
    assert {j.cost() for j in jobs} == {c}
    cpu = PoolProgress(PoolPlan(jobs, Slots(2), Path("unused")), enabled=False)
    cpu.rate["run"] = (5.0, 10.0)  # finished runs took 0.5 s per unit of cost
    # untimed: 2 c x 0.5 s over 2 slots; timed: 2 c x 0.5 s, one after another
    assert cpu.eta() == pytest.approx(c * 0.5 + 2 * c * 0.5)
    gpus = PoolProgress(PoolPlan(jobs, Slots(2, [0, 1], 2), Path("unused")), enabled=False)
    gpus.rate["run"] = (5.0, 10.0)
    # untimed: over min(4 slots, 2 runs); timed: one on each of the 2 GPUs
    assert gpus.eta() == pytest.approx(c * 0.5 + c * 0.5)
