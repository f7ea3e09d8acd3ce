"""The run pool of ``flkit reproduce``: every notebook's training runs first, packed over the
machine, then the notebooks, which read them from the run cache.

A notebook's runs are known before it executes: its paper folder's ``study.runs(preset, seeds)``
lists them (:mod:`flkit.preset_runs`, :mod:`.pool_jobs`). The pool trains them in worker processes
(:mod:`.pool_worker`), as many at a time as the machine holds (:mod:`.pool_slots`), each worker one
run after another, as a notebook's kernel does: on a CPU machine, as many runs as the cores hold at
the executors' torch thread count (``$FLKIT_THREADS``, else the driver's:
:func:`.plan.run_threads`), and only runs two of which fit at once (one that takes every core is
faster in its notebook's kernel, which has already started Python, torch and the data); on a GPU
machine, several runs per GPU on every chosen GPU. A run's numbers never depend on the packing or
the order: a worker computes each run exactly as the notebook would without the pool (same config,
device type, backend and thread count, hence the same cache folder and the same floats). Wall-clock
times do depend on what runs beside a run, so a run whose times a notebook reads as evidence
(``study.timed``, :attr:`.pool_jobs.PoolJob.timed`) goes alone: on a GPU alone on its device, on the
CPU in its notebook's kernel after the pool.

Progress shows runs done / total and an estimate of the time left. A run whose worker fails or
dies is reported and left to its notebook, which trains it, resuming from its last checkpoint;
a pool stopped (Ctrl-C, kill) resumes the same way the next time (a FedAST simulation keeps no
checkpoint: it starts again). Bad settings (a GPU that is not there, more runs per GPU than its
memory holds) are refused before any training.

Processes, not runs stacked into one wide model: a worker fixes what a run's numbers depend on
(its thread count, its GPU) for its life, works for every method and for FedAST's simulations
alike, and a worker that dies takes only its current run with it. A worker serves one slot (a GPU,
or the CPU at one thread count) for as long as the pool has runs for it, so Python, torch and
the data start once per slot, not once per run, as in 03's own prefetch, whose two workers also
serve every run (``benchmarks/RESULTS.md``: 03 at ``cpu`` now takes as long pooled as not).

``flkit reproduce --no-pool`` turns it off. With ``--executor ray`` the runs are Ray tasks on the
cluster's nodes (:mod:`.pool_ray`), whose folders travel back into this machine's run cache and
out to each notebook's node (:mod:`.run_transfer`). What the pool trains and where is planned and
checked in :mod:`.pool_plan`."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from ..data.provenance import ENV_ALLOW
from .plan import SOURCE_ROOT
from .pool_jobs import PoolJob, log_name, resume_round
from .pool_plan import LOG_DIR, PoolPlan, plan_pool, prepare_pool
from .pool_progress import PoolProgress
from .pool_ray import RayPool
from .pool_slots import cpu_cores, threads_per_gpu_worker
from .pool_workers import WorkerProcess, run_info, slot_key, stop

__all__ = [
    "Pool",
    "PoolPlan",
    "prepare_pool",
    "plan_pool",
    "run_pool",
    "add_pool_arguments",
    "pool_kwargs",
    "LOG_DIR",
    "HEARTBEAT_S",
]

#: how often the pool says where it stands while runs are going (seconds)
HEARTBEAT_S = 60.0
_POLL_S = 0.2


class Pool:
    """Runs ``plan``'s jobs in worker processes within its slots. :meth:`events` yields
    ``("start", i, pid, resume_round)``, ``("done", i, info)`` (info: status "ok" or "failed",
    seconds, returncode, log, error) and, every ``heartbeat_s`` while runs go, ``("tick",)``."""

    def __init__(self, plan: PoolPlan, heartbeat_s: float = HEARTBEAT_S):
        self.plan = plan
        self.heartbeat_s = heartbeat_s

    def _env(self, job: PoolJob, gpu: int | None) -> dict:
        env = dict(os.environ)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(SOURCE_ROOT)] + paths)  # this same flkit
        if gpu is None:
            env["FLKIT_THREADS"] = str(job.threads)
            if self.plan.device != "auto":
                env["FLKIT_DEVICE"] = self.plan.device
        else:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
            env["FLKIT_THREADS"] = str(threads_per_gpu_worker(self.plan.slots, cpu_cores()))
            env.pop("FLKIT_DEVICE", None)  # "auto": the one visible GPU
        if self.plan.allow_reduced:
            env[ENV_ALLOW] = "1"
        return env

    def _spawn(self, job: PoolJob, gpu: int | None, log: Path) -> WorkerProcess:
        """A worker process for ``job``'s slot (its GPU, or the CPU at its thread count)."""
        return WorkerProcess.start(slot_key(job, gpu), self._env(job, gpu), log)

    def _log(self, i: int, job: PoolJob, tmp: Path) -> Path:
        """Where run ``i``'s output goes, emptied."""
        log_dir = self.plan.log_dir or tmp
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / log_name(i, job)
        log.write_bytes(b"")
        return log

    def _give(self, worker: WorkerProcess, i: int, job: PoolJob, log: Path, tmp: Path) -> None:
        """Hand run ``i`` to ``worker`` (:meth:`.pool_workers.WorkerProcess.give`)."""
        spec = {
            "job": job.__dict__,
            "root": str(self.plan.root),
            "device": "auto",
            "log": str(log),
            "checkpoint_every": self.plan.checkpoint_every,
            "checkpoint_seconds": self.plan.checkpoint_seconds,
        }
        worker.give(i, spec, tmp)

    def _worker_for(
        self, workers: list, retired: list, job: PoolJob, gpu: int | None, log: Path
    ) -> WorkerProcess:
        """An idle worker of ``job``'s slot, else a new one. On the CPU an idle worker of another
        thread count is ended first, so that no more processes hold the machine's memory than
        runs go at once; on GPUs an idle worker holds only its own GPU's memory, within that
        GPU's runs per device, and waits for that GPU's next run."""
        key = slot_key(job, gpu)
        for w in workers:
            if w.job is None and w.key == key:
                return w
        for w in [w for w in workers if w.job is None and w.key[0] == key[0] == "cpu"]:
            w.close()  # it exits; the pool's end reaps it
            workers.remove(w)
            retired.append(w.proc)
        worker = self._spawn(job, gpu, log)
        workers.append(worker)
        return worker

    def _resume_round(self, job: PoolJob) -> int:
        return resume_round(
            job.folder(self.plan.root, "auto" if self.plan.slots.gpu else self.plan.device)
        )

    def events(self):
        jobs, slots = self.plan.jobs, self.plan.slots
        pending = list(range(len(jobs)))
        running: dict[int, tuple] = {}  # i -> (worker, gpu or None, cores)
        workers: list[WorkerProcess] = []
        retired: list = []  # processes of workers that ended or are ending
        free_cores = slots.cores
        free_gpu = {d: slots.per_device for d in slots.devices}
        alone: set = set()  # where a timed run goes: its GPU, or None for the CPU machine
        tmp = Path(tempfile.mkdtemp(prefix="flkit-pool-"))
        last_tick = time.monotonic()
        try:
            while pending or running:
                for i in list(pending):  # start what fits, in order, skipping what does not
                    job, gpu, cores = jobs[i], None, 0
                    if slots.gpu:
                        open_ = [d for d in free_gpu if d not in alone]
                        if job.timed:  # a device with nothing on it
                            open_ = [d for d in open_ if free_gpu[d] == slots.per_device]
                        if not open_:
                            continue
                        gpu = max(open_, key=lambda d: free_gpu[d])
                        if free_gpu[gpu] < 1:
                            continue
                        free_gpu[gpu] -= 1
                    else:
                        cores = min(job.threads, slots.cores)
                        if cores > free_cores or alone or (job.timed and running):
                            continue
                        free_cores -= cores
                    if job.timed:
                        alone.add(gpu)
                    pending.remove(i)
                    resume = self._resume_round(job)
                    log = self._log(i, job, tmp)
                    worker = self._worker_for(workers, retired, job, gpu, log)
                    self._give(worker, i, job, log, tmp)
                    running[i] = (worker, gpu, cores)
                    yield ("start", i, worker.proc.pid, resume)
                time.sleep(_POLL_S)
                for i in [i for i, r in running.items() if r[0].outcome() is not None]:
                    worker, gpu, cores = running.pop(i)
                    returncode, seconds, log = worker.outcome(), worker.seconds(), worker.log
                    worker.job = None
                    if returncode != 0:  # it exits after a failed run (or has died): a new
                        workers.remove(worker)  # one takes the next run
                        retired.append(worker.proc)
                    if jobs[i].timed:
                        alone.discard(gpu)
                    if gpu is None:
                        free_cores += cores
                    else:
                        free_gpu[gpu] += 1
                    yield ("done", i, run_info(returncode, seconds, log))
                if running and time.monotonic() - last_tick >= self.heartbeat_s:
                    last_tick = time.monotonic()
                    yield ("tick",)
            for w in workers:  # every run done: end of input ends each worker
                w.close()
            stop([w.proc for w in workers] + retired, wait_first=True)
        finally:
            stop([w.proc for w in workers] + retired)
            shutil.rmtree(tmp, ignore_errors=True)


def run_pool(plan: PoolPlan, progress: bool = True, stream=None) -> dict:
    """Train ``plan``'s jobs; returns {"trained", "failed", "cached", "seconds"}. A failed run is
    reported and left to its notebook; a stop (Stopped, KeyboardInterrupt) ends every worker."""
    t0 = time.monotonic()
    if plan.ray and plan.jobs:
        import ray

        from .pool_ray import capacity, check_gpu_fit

        note = check_gpu_fit(ray, plan)  # several runs per GPU: they fit, before any training
        if note:
            plan.notes.append(note)
        plan.slots.runs = capacity(ray, plan.slots.cpus, plan.slots.gpus)
    bar = PoolProgress(plan, stream, progress)
    bar.start()
    failed = []
    if plan.jobs:
        for event in (RayPool(plan) if plan.ray else Pool(plan)).events():
            bar.event(event)
            if event[0] == "done" and event[2]["status"] != "ok":
                failed.append(plan.jobs[event[1]].label())
    seconds = time.monotonic() - t0
    bar.end(seconds)
    return {
        "trained": len(plan.jobs) - len(failed),
        "failed": failed,
        "cached": plan.cached,
        "seconds": seconds,
    }


def add_pool_arguments(p) -> None:
    """``--no-pool``, ``--pool-devices``, ``--runs-per-device``."""
    p.add_argument(
        "--no-pool",
        dest="pool",
        action="store_false",
        help="let each notebook train its own runs one after another (default: the run pool "
        "trains every notebook's runs first, packed over the cores or GPUs)",
    )
    p.add_argument(
        "--pool-devices",
        default=None,
        metavar="LIST",
        help="where the pool trains: cpu, cuda (every GPU) or cuda:0,cuda:2 (default: every "
        "visible GPU, else the CPU; with --executor ray: where Ray places them)",
    )
    p.add_argument(
        "--runs-per-device",
        type=int,
        default=None,
        metavar="N",
        help="pool runs on each GPU at once (default: as many as its free memory holds by the "
        "runs' estimate, at most 8; with --executor ray: 1, and N runs share each GPU)",
    )


def pool_kwargs(args) -> dict:
    """The keyword arguments of :func:`.execute.reproduce_runs` the pool's flags give."""
    return dict(
        pool=getattr(args, "pool", True),
        pool_devices=getattr(args, "pool_devices", None),
        runs_per_device=getattr(args, "runs_per_device", None),
    )
