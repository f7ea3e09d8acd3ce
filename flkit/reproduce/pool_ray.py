"""The run pool on Ray (``flkit reproduce --executor ray``): each pool run is a Ray task, placed by
Ray on the cluster's nodes (or on the local Ray instance), asking for the resources of a notebook's
task (``--cpus-per-task``; ``--gpus-per-task`` shared by ``--runs-per-device`` runs, so several
runs pack onto one GPU as Ray's fractional GPUs).

No shared file system is assumed. A task trains its run into an empty run cache of its own on its
node (given the run's checkpoint from this machine's cache, if any, to resume from) and returns the
run's folder with the run's output; the driver writes the folder into this machine's run cache
(:mod:`.run_transfer`). Each notebook's task then receives the folders of its runs into its node's
cache before its kernel starts (:mod:`.ray_executor`), so the notebook reads them as it would on
this machine. A run computes with the thread count its notebook would (the job's, as in the local
pool) and on the device type the driver named its folder by: "cuda" when the tasks ask for GPUs,
else "cpu", so a run's numbers are those of the run alone on that device.

Runs whose wall-clock times a notebook reads (``study.timed``) are left to their notebooks, which
train them alone inside their own task. A task whose worker dies takes its run with it (what it had
trained since its checkpoint is lost with the node's temporary cache); the run is reported and its
notebook trains it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..utils import environment
from .pool_jobs import PoolJob, log_name, resume_round
from .pool_workers import run_info
from .run_transfer import folder_files, install

__all__ = [
    "RaySlots",
    "RayPool",
    "train_task",
    "place_of",
    "on_device",
    "gpu_memory",
    "check_gpu_fit",
    "PROBE_WAIT_S",
]

_POLL_S = 0.5


def place_of(gpus: float, device: str = "auto") -> str:
    """The device type the pool's Ray tasks train on: the notebooks' own when set, else "cuda"
    when a task asks for GPUs, else "cpu"."""
    if device not in (None, "auto"):
        return str(device).split(":")[0]
    return "cuda" if gpus else "cpu"


@dataclass
class RaySlots:
    """What a pool run asks Ray for (``cpus``; ``gpus``: 1 / ``per_device`` of one GPU, or 0 on
    CPUs) and how many runs Ray holds at once (``runs``, counted once Ray is up)."""

    runs: int
    cpus: float
    gpus: float
    where: str
    per_device: int = 1
    gpu: bool = False  # what the progress reads: Ray, not the pool, places the runs
    devices: tuple = ()

    def capacity(self) -> int:
        return max(1, self.runs)

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"{self.where}, {self.cpus:g} CPU{gpus} per run ({self.runs} at once)"


#: seconds the GPU memory probe may wait for a GPU of the cluster to be free
PROBE_WAIT_S = 120.0


def gpu_memory() -> list[dict]:
    """Runs as a Ray task of one GPU: that GPU's free and total memory, as
    :func:`.pool_slots.probe_gpus` reports a local one."""
    import torch

    free, total = torch.cuda.mem_get_info()
    return [{"index": 0, "name": torch.cuda.get_device_name(0), "free": free, "total": total}]


def check_gpu_fit(ray, plan, wait_s: float = PROBE_WAIT_S) -> str | None:
    """With several runs per GPU (``--runs-per-device``), FlkitError before any training when
    that many of the plan's largest run (:func:`.pool_slots.job_bytes`) would not fit the free
    memory of a GPU of the cluster, read by a task of one GPU (:func:`gpu_memory`); a note
    when no GPU came free within ``wait_s`` seconds to be read, else None."""
    from .pool_slots import check_fit, job_bytes

    slots = plan.slots
    if not slots.gpus or slots.per_device <= 1 or not plan.jobs:
        return None
    ref = ray.remote(gpu_memory).options(num_gpus=1, num_cpus=0, max_retries=0).remote()
    ready, _ = ray.wait([ref], timeout=wait_s)
    if not ready:
        ray.cancel(ref, force=True)
        return (
            f"no GPU of the cluster came free within {wait_s:.0f} s to check that "
            f"{slots.per_device} runs fit one; they go as asked"
        )
    loaded: dict = {}
    need = max(job_bytes(j, loaded) for j in plan.jobs)
    check_fit(slots.per_device, need, ray.get(ref), [0])
    return None


def capacity(ray, cpus: float, gpus: float) -> int:
    """How many tasks of ``cpus`` CPUs and ``gpus`` GPUs the live nodes hold at once."""
    total = 0
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        r = node.get("Resources", {})
        fits = [r.get("CPU", 0) // cpus] if cpus else []
        if gpus:
            fits.append(r.get("GPU", 0) // gpus)
        total += int(min(fits)) if fits else 0
    return total


def on_device(device_type: str | None):
    """``$FLKIT_DEVICE`` set to ``device_type`` while inside (None: left as it is), then put
    back: a run whose device is "auto" trains on the device type its folder was named by,
    whatever a node's Ray shows a task of no GPUs."""
    return environment(**({"FLKIT_DEVICE": device_type} if device_type else {}))


def train_task(spec: dict, events=None) -> dict:
    """Runs on a Ray worker: the job of ``spec`` trained into a temporary run cache holding the
    files shipped with it (a checkpoint); returns its returncode, its output and every file of
    that cache (the run's folder, whole or as far as it got)."""
    from .pool_worker import output_to, train_logged

    tmp = Path(tempfile.mkdtemp(prefix="flkit-pool-ray-"))
    try:
        root = tmp / "cache"
        install(root, spec.get("files") or {})
        if events is not None:
            events.put(("start", spec["index"], os.getpid(), spec.get("resume", 0)))
        log = tmp / "run.log"
        t0 = time.monotonic()
        with output_to(log), on_device(spec["device"]):
            returncode = train_logged(spec, root)
        return {
            "returncode": returncode,
            "seconds": time.monotonic() - t0,
            "log": log.read_bytes(),
            "files": folder_files(root, sorted(root.iterdir())) if root.is_dir() else {},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class RayPool:
    """Runs ``plan``'s jobs as Ray tasks (Ray must be initialized: the executor's
    :meth:`~.ray_executor.RayExecutor.prepare` does it) and yields the events of
    :class:`.pool.Pool`: ``("start", i, pid, resume_round)`` when a task begins on its worker,
    ``("done", i, info)`` and ``("tick",)``."""

    def __init__(self, plan, heartbeat_s: float = 60.0):
        self.plan = plan
        self.heartbeat_s = heartbeat_s

    def _spec(self, i: int, job: PoolJob) -> dict:
        plan = self.plan
        folder = job.folder(plan.root, plan.place)
        shipped = folder_files(plan.root, [folder]) if folder is not None else {}
        return {
            "index": i,
            "job": job.__dict__,
            "device": plan.place,
            "files": shipped,
            "resume": resume_round(folder),
            "checkpoint_every": plan.checkpoint_every,
            "checkpoint_seconds": plan.checkpoint_seconds,
        }

    def _done(self, i: int, job: PoolJob, result: dict | None, error, seconds: float) -> dict:
        """Run ``i``'s folder into this machine's cache and its output into its log; its
        seconds are the task's own (``seconds``, the driver's count since the task said it
        started, only for a task that died)."""
        plan = self.plan
        log_dir = plan.log_dir or Path(tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / log_name(i, job)
        if result is None:  # the task's worker died: Ray's error is all there is to say
            log.write_text(f"{type(error).__name__}: {error}\n", encoding="utf-8")
            return run_info(1, seconds, log)
        log.write_bytes(result["log"])
        if result["files"]:
            install(plan.root, result["files"])
        return run_info(int(result["returncode"]), float(result["seconds"]), log)

    def events(self):
        import ray
        from ray.util.queue import Empty, Queue

        plan, slots = self.plan, self.plan.slots
        task = ray.remote(train_task).options(
            num_cpus=slots.cpus,
            num_gpus=slots.gpus,
            max_retries=0,
            name="flkit-pool-run",
        )
        queue = Queue(actor_options={"num_cpus": 0})
        pending: dict = {}
        started: dict[int, float] = {}
        last_tick = time.monotonic()
        try:
            for i, job in enumerate(plan.jobs):
                pending[task.remote(self._spec(i, job), queue)] = i
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
                try:
                    batch = queue.get_nowait_batch(queue.size())
                except Empty:
                    batch = []
                for event in batch:
                    started[event[1]] = time.monotonic()
                    yield event
                for ref in ready:
                    i = pending.pop(ref)
                    result, error = None, None
                    try:
                        result = ray.get(ref)
                    except Exception as e:  # WorkerCrashedError & co.
                        error = e
                    seconds = time.monotonic() - started.get(i, time.monotonic())
                    if i not in started:  # it died before it could say it started
                        yield ("start", i, None, 0)
                    yield ("done", i, self._done(i, plan.jobs[i], result, error, seconds))
                if pending and time.monotonic() - last_tick >= self.heartbeat_s:
                    last_tick = time.monotonic()
                    yield ("tick",)
        finally:
            for ref in pending:  # a stop: the runs still queued or going end with it
                ray.cancel(ref, force=True)
            queue.shutdown(force=True)
