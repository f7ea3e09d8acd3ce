"""What the run pool trains, checked before any training (:func:`prepare_pool`): every selected
notebook's runs listed by its paper's ``study.runs`` (:mod:`.pool_jobs`), those not yet in the run
cache, in the order they start, and where they go: over this machine's cores or GPUs
(:mod:`.pool_slots`), or as Ray tasks (:mod:`.pool_ray`). :mod:`.pool` trains them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import store
from ..preset_runs import identity
from ..utils import FlkitError
from .plan import run_threads
from .pool_jobs import PoolJob, notebook_jobs
from .pool_slots import (
    Slots,
    check_fit,
    cpu_cores,
    job_bytes,
    packs,
    parse_devices,
    probe_gpus,
)

__all__ = ["PoolPlan", "prepare_pool", "plan_pool", "LOG_DIR"]

#: the folder under the reproduce output holding each pool run's log
LOG_DIR = "pool"


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
    #: on Ray (:mod:`.pool_ray`): the runs are Ray tasks; ``place`` is the device type they
    #: train on, ``folders`` each notebook's run folders, which go out to its task's node
    ray: bool = False
    place: str = "auto"
    folders: dict = field(default_factory=dict)


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
    ray_resources: tuple = (1, 0),
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
    if executor == "ray":
        return _prepare_ray(
            plan,
            root,
            device,
            (devices, per_device, ray_resources, address),
            allow_reduced_data,
            (checkpoint_every, checkpoint_seconds),
        )
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
    notes: list[str] = []
    jobs = _listed(plan, threads, allow_reduced_data, notes)
    if not chosen:
        jobs = _packable(jobs, cpu_cores(), notes)
    place = "auto" if chosen else device
    todo, cached = _todo(jobs, root, place, notes)
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


def _listed(plan: dict, threads: int, allow_reduced: bool, notes: list[str]) -> list[PoolJob]:
    """Every selected notebook's jobs, each run once; a notebook whose runs cannot be listed
    trains them itself (a line in ``notes``)."""
    jobs, seen = [], set()
    for notebook in plan["notebooks"]:
        try:
            found = notebook_jobs(
                notebook,
                plan["preset"],
                plan["seeds"],
                plan["overrides"],
                threads,
                allow_reduced,
            )
        except FlkitError as e:
            notes.append(f"{notebook} trains its own runs: {e}")
            continue
        for job in found:
            key = (identity(_item(job)), job.threads)
            if key not in seen:
                seen.add(key)
                jobs.append(job)
    return jobs


def _todo(jobs: list[PoolJob], root: Path, place: str, notes: list[str]) -> tuple[list, int]:
    """The jobs whose runs are not whole in the cache at ``root`` on ``place``, and how many
    are; a job whose folder cannot be named is left to its notebook (a line in ``notes``)."""
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
    return todo, cached


def _prepare_ray(plan, root, device, where, allow_reduced, checkpoints) -> PoolPlan:
    """The pool as Ray tasks (:mod:`.pool_ray`): every listed job but the timed ones, each
    asking for a notebook task's CPUs and, when the tasks ask for GPUs, 1 / ``per_device`` of
    one GPU."""
    from .pool_ray import RaySlots, place_of

    devices, per_device, (cpus, gpus), address = where
    if devices is not None:
        raise FlkitError(
            f"--pool-devices {devices!r} with --executor ray: Ray places the pool's runs on its "
            "nodes; accepted: leave it out (--runs-per-device N puts N runs on each GPU)"
        )
    if per_device is not None and (
        isinstance(per_device, bool)
        or not isinstance(per_device, int)
        or per_device < 1
        or not gpus
    ):
        raise FlkitError(
            f"--runs-per-device {per_device!r} with --executor ray puts that many runs on each "
            f"GPU, and the tasks ask for {gpus:g} GPU(s); accepted: an integer >= 1 with "
            "--gpus-per-task > 0"
        )
    notes: list[str] = []
    jobs = _listed(plan, run_threads(), allow_reduced, notes)
    place = place_of(gpus, device)
    folders: dict[str, list[Path]] = {}
    for job in jobs:
        try:
            folder = job.folder(root, place)
        except FlkitError:
            continue
        if folder is not None:
            folders.setdefault(job.notebook, []).append(folder)
    timed = {}
    for job in jobs:
        if job.timed:
            timed.setdefault(job.notebook, []).append(job)
    for notebook, left in timed.items():
        notes.append(
            f"{notebook} trains its own {len(left)} timed run(s) in its task: it reads their "
            "wall-clock times, so each goes alone"
        )
    todo, cached = _todo([j for j in jobs if not j.timed], root, place, notes)
    where_ = f"the Ray cluster at {address}" if address else "a local Ray instance"
    # a pool run uses one GPU, whatever a notebook's task asks for: 1 / N of one with N per GPU
    per_device = per_device or 1
    slots = RaySlots(0, cpus, 1 / per_device if gpus else 0, where_, per_device)
    every, seconds = checkpoints
    return PoolPlan(
        jobs=_order(todo),
        slots=slots,
        root=root,
        device=device,
        cached=cached,
        notes=notes,
        log_dir=Path(plan["out"]) / LOG_DIR,
        allow_reduced=bool(allow_reduced),
        checkpoint_every=every,
        checkpoint_seconds=seconds,
        ray=True,
        place=place,
        folders=folders,
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
