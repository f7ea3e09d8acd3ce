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

``flkit reproduce --no-pool`` turns it off; with ``--executor ray --address ...`` it is off too
(the cluster's workers would not see this machine's run cache)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import store
from ..data.provenance import ENV_ALLOW
from ..preset_runs import identity
from ..utils import FlkitError
from .plan import SOURCE_ROOT, run_threads
from .pool_jobs import PoolJob, notebook_jobs
from .pool_progress import PoolProgress
from .pool_slots import (
    Slots,
    check_fit,
    cpu_cores,
    job_bytes,
    packs,
    parse_devices,
    probe_gpus,
    threads_per_gpu_worker,
)
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

#: the folder under the reproduce output holding each pool run's log
LOG_DIR = "pool"
#: how often the pool says where it stands while runs are going (seconds)
HEARTBEAT_S = 60.0
_POLL_S = 0.2


@dataclass
class PoolPlan:
    """What :func:`run_pool` trains, checked: the jobs not yet in the cache, in the order they
    start, where they go, and what the notebooks' kernels need to find them."""

    jobs: list[PoolJob]
    slots: Slots
    root: Path
    device: str = "auto"
    cached: int = 0
    threads: int | None = None  # torch threads of a CPU run, the most (None: the runs go to GPUs)
    notes: list[str] = field(default_factory=list)
    log_dir: Path | None = None
    allow_reduced: bool = False
    checkpoint_every: int | None = None
    checkpoint_seconds: float = 60.0


def prepare_pool(
    plan: dict,
    *,
    devices: str | None = None,
    per_device: int | None = None,
    executor: str = "local",
    address: str | None = None,
    allow_reduced_data: bool = False,
    root=None,
    checkpoint_every: int | None = None,
    checkpoint_seconds: float = 60.0,
) -> PoolPlan:
    """The pool of a reproduce ``plan`` (:func:`.plan.plan`): every selected notebook's runs for
    its seeds, those not yet in the run cache ``root`` (default :func:`flkit.store.default_root`),
    the devices they go to and how many at a time. Everything is checked here, before any
    training: the thread count, the device list, and on GPUs that the runs per device fit their
    memory (FlkitError naming the bad value and what is accepted). A notebook whose runs cannot
    be listed is left out with a note (it trains them itself).

    On the CPU a pool run computes with the executors' thread count (:func:`.plan.run_threads`:
    ``$FLKIT_THREADS``, else the driver's), the count every notebook's kernel gets, or with the
    count its preset pins: the run is the one the notebook would train without the pool, in the
    same cache folder, with the same floats. A run takes that many cores; more runs fit at once
    when ``FLKIT_THREADS`` is below the cores (and every run, pooled or not, then computes with
    it)."""
    root = Path(root) if root is not None else store.default_root()
    device = plan["overrides"].get("device") or "auto"
    on_cpu = device == "cpu"
    threads = run_threads()
    gpus = [] if on_cpu else probe_gpus()
    if on_cpu and devices not in (None, "cpu"):
        raise FlkitError(f"pool devices {devices!r} with --device cpu; accepted: cpu")
    if devices is None and device.startswith("cuda:"):
        devices = device  # the notebooks' one GPU
    chosen = parse_devices(devices, gpus)
    if chosen is None and gpus and not on_cpu:
        raise FlkitError(
            f"pool devices {devices!r} put the runs on the CPU, while the notebooks run on a GPU "
            f"(device {device!r}), so they would not find them; accepted: --device cpu with it, "
            "or GPUs (cuda, cuda:N,...)"
        )
    if chosen is None and per_device is not None:
        raise FlkitError(
            f"runs per device = {per_device!r} applies to GPUs, and this pool runs on the CPU; "
            "accepted: leave it out (the CPU pool shares out the cores by $FLKIT_THREADS)"
        )
    notes = []
    if executor == "ray" and address is not None:
        notes.append(
            f"the pool is off with --address {address}: the cluster's workers read their own run "
            "caches, not this machine's"
        )
        return PoolPlan([], Slots(cpu_cores()), root, device, notes=notes)
    jobs, seen = [], set()
    for notebook in plan["notebooks"]:
        try:
            found = notebook_jobs(
                notebook,
                plan["preset"],
                plan["seeds"],
                plan["overrides"],
                threads,
                allow_reduced_data,
            )
        except FlkitError as e:
            notes.append(f"{notebook} trains its own runs: {e}")
            continue
        for job in found:
            key = (identity(_item(job)), job.threads)
            if key not in seen:
                seen.add(key)
                jobs.append(job)
    if not chosen:
        jobs = _packable(jobs, cpu_cores(), notes)
    place = "auto" if chosen else device
    todo, cached = [], 0
    for job in jobs:
        try:
            done = job.finished(job.folder(root, place))
        except FlkitError as e:  # e.g. a reduced copy at `paper`: the notebook says so itself
            notes.append(f"{job.label()} is left to its notebook: {e}")
            continue
        if done:
            cached += 1
        else:
            todo.append(job)
    # a preset may pin fewer threads than the executors': the runs' own count sets how many fit
    threads = max((j.threads for j in todo), default=threads)
    slots = Slots(cpu_cores(), threads=threads)
    if chosen:
        loaded: dict = {}
        need = max((job_bytes(j, loaded) for j in todo), default=0)
        slots = Slots(cpu_cores(), chosen, check_fit(per_device, need, gpus, chosen))
    return PoolPlan(
        _order(todo),
        slots,
        root,
        device,
        cached,
        None if chosen else threads,
        notes,
        Path(plan["out"]) / LOG_DIR,
        bool(allow_reduced_data),
        checkpoint_every,
        checkpoint_seconds,
    )


def _packable(jobs: list[PoolJob], cores: int, notes: list[str]) -> list[PoolJob]:
    """The CPU jobs two of which fit the ``cores`` at once and whose wall-clock times no
    notebook reads; each notebook trains the others itself, with a line in ``notes``. Such a run
    goes one at a time (a timed run alone, so that its times are those of a run alone), and in a
    worker process, which starts Python, torch and the data again, it is the same run, slower
    than in the notebook's kernel, which has them already (``benchmarks/RESULTS.md``)."""
    kept, alone, timed = [], {}, {}
    for job in jobs:
        if not packs(job.threads, cores):
            alone.setdefault(job.notebook, []).append(job)
        elif job.timed:
            timed.setdefault(job.notebook, []).append(job)
        else:
            kept.append(job)
    for notebook, left in alone.items():
        threads = sorted({j.threads for j in left})
        notes.append(
            f"{notebook} trains its own {len(left)} run(s): each computes with "
            f"{'/'.join(map(str, threads))} torch thread(s), so the {cores} core(s) hold one at "
            "a time and a worker process would only add its start-up"
        )
    for notebook, left in timed.items():
        notes.append(
            f"{notebook} trains its own {len(left)} timed run(s): it reads their wall-clock "
            "times, so each goes alone on the machine, and alone a run is faster in the "
            "notebook's kernel than in a worker process"
        )
    return kept


def plan_pool(plan: dict, pool: bool = True, **settings) -> PoolPlan | None:
    """:func:`prepare_pool` of ``plan`` with ``settings`` when ``pool``; else None, and a
    FlkitError for any of the pool's settings given with it off (``--no-pool``)."""
    if pool:
        return prepare_pool(plan, **settings)
    flags = {"devices": "--pool-devices", "per_device": "--runs-per-device"}
    given = [flag for key, flag in flags.items() if settings.get(key) is not None]
    if given:
        raise FlkitError(
            f"{', '.join(given)} set(s) the run pool, which --no-pool turns off; accepted: "
            "either the pool's settings or --no-pool"
        )
    return None


def _item(job: PoolJob):
    """The run-list entry a job came from (its identity)."""
    if job.kind == "simulation":
        return (job.config, job.seed)
    from ..experiment import RunConfig

    return RunConfig.from_dict(job.config)


def _order(jobs: list[PoolJob]) -> list[PoolJob]:
    """Simulations first, then the dearest runs first (:meth:`PoolJob.cost`): the long runs start
    early and the short ones fill the gaps at the end; timed runs last, each alone once the
    packed runs are done. The order changes the wall time only."""
    sims = [j for j in jobs if j.kind == "simulation"]
    runs = sorted((j for j in jobs if j.kind != "simulation"), key=lambda j: (j.timed, -j.cost()))
    return sims + runs


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
        log = log_dir / f"{i:03d}-{_slug(job.label())}.log"
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
        folder = job.folder(self.plan.root, "auto" if self.plan.slots.gpu else self.plan.device)
        try:
            return int(store.load_json(folder / store.CHECKPOINT_SUM)["round"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

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


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:80]


def run_pool(plan: PoolPlan, progress: bool = True, stream=None) -> dict:
    """Train ``plan``'s jobs; returns {"trained", "failed", "cached", "seconds"}. A failed run is
    reported and left to its notebook; a stop (Stopped, KeyboardInterrupt) ends every worker."""
    t0 = time.monotonic()
    bar = PoolProgress(plan, stream, progress)
    bar.start()
    failed = []
    if plan.jobs:
        for event in Pool(plan).events():
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
        "visible GPU, else the CPU)",
    )
    p.add_argument(
        "--runs-per-device",
        type=int,
        default=None,
        metavar="N",
        help="pool runs on each GPU at once (default: as many as its free memory holds by the "
        "runs' estimate, at most 8)",
    )


def pool_kwargs(args) -> dict:
    """The keyword arguments of :func:`.execute.reproduce_runs` the pool's flags give."""
    return dict(
        pool=getattr(args, "pool", True),
        pool_devices=getattr(args, "pool_devices", None),
        runs_per_device=getattr(args, "runs_per_device", None),
    )
