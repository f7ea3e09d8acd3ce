"""Where the run pool's workers go: the local cores, or every chosen GPU with several workers on
each, and whether they fit.

On a CPU machine the pool shares out the cores: a run takes as many as it has torch threads, the
count it computes with without the pool too (the thread count changes a CPU run's floats). With
``FLKIT_THREADS=1`` two runs share two cores, which ``benchmarks/bench_pool.py`` measures against
the same runs one after another. On a GPU machine each
GPU holds ``per_device`` worker processes, each pinned to it by ``CUDA_VISIBLE_DEVICES``; how many
fit is estimated from the runs' data, models and batches before anything starts
(:func:`run_bytes`), and a request for more is refused with the estimate."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field

from ..utils import FlkitError

__all__ = [
    "Slots",
    "cpu_cores",
    "packs",
    "probe_gpus",
    "parse_devices",
    "check_fit",
    "run_bytes",
    "job_bytes",
    "training_bytes",
    "simulation_bytes",
    "threads_per_gpu_worker",
    "CONTEXT_BYTES",
    "HEADROOM",
    "MAX_PER_DEVICE",
]

#: a CUDA context with torch's kernels loaded, held by every worker process on its GPU
CONTEXT_BYTES = 600 * 2**20
#: the estimate's margin for the allocator's caching and what it does not count
HEADROOM = 1.25
#: the most workers the pool puts on one GPU unless asked for more (each needs a CPU core to
#: launch its kernels)
MAX_PER_DEVICE = 8
GiB = 2**30


@dataclass
class Slots:
    """The pool's capacity: ``cores`` CPU cores to share out by threads (``devices`` empty; a run
    takes ``threads`` of them unless its preset pins another count), or ``per_device`` workers
    on each GPU index of ``devices``."""

    cores: int
    devices: list[int] = field(default_factory=list)
    per_device: int = 1
    threads: int = 1

    @property
    def gpu(self) -> bool:
        return bool(self.devices)

    def capacity(self) -> int:
        if self.gpu:
            return len(self.devices) * self.per_device
        return max(1, self.cores // max(1, self.threads))

    def describe(self) -> str:
        if self.gpu:
            names = ", ".join(f"cuda:{i}" for i in self.devices)
            return f"{self.per_device} run(s) on each of {names}"
        return f"{self.cores} CPU core(s)"


def packs(threads: int, cores: int) -> bool:
    """Whether two runs of ``threads`` torch threads fit ``cores`` at once: the CPU pool takes
    only such runs (one that takes every core is faster in its notebook's kernel)."""
    return min(threads, cores) * 2 <= cores


def cpu_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_PROBE = (
    "import json, torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "out = []\n"
    "for i in range(n):\n"
    "    free, total = torch.cuda.mem_get_info(i)\n"
    "    out.append({'index': i, 'name': torch.cuda.get_device_name(i), 'free': free,"
    " 'total': total})\n"
    "print(json.dumps(out))\n"
)


def probe_gpus() -> list[dict]:
    """The visible GPUs with their free and total memory (bytes), read in a child process so that
    the driver holds no CUDA context of its own while the workers run; [] without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return []
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=False
    )
    if out.returncode != 0:
        raise FlkitError(f"could not read the GPUs' memory: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_devices(spec: str | None, gpus: list[dict]) -> list[int] | None:
    """The GPU indices of a device list (``--pool-devices``): None for the CPU ("cpu", or no
    list on a machine without GPUs), every visible GPU for no list or "cuda", else the named ones
    ("cuda:0,cuda:2" or "0,2"). FlkitError naming a GPU that is not there and the visible ones."""
    visible = [g["index"] for g in gpus]
    shown = ", ".join(f"cuda:{i}" for i in visible) or "none"
    if spec is None:
        return visible or None
    if not isinstance(spec, str) or not spec.strip():
        raise FlkitError(
            f"pool devices {spec!r}; accepted: cpu, cuda, or cuda:N,... (visible: {shown})"
        )
    if spec.strip() == "cpu":
        return None
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if part == "cuda":
            picked = visible
        else:
            text = part[5:] if part.startswith("cuda:") else part
            if not text.isdigit():
                raise FlkitError(
                    f"pool device {part!r} is not a GPU name; accepted: cpu, cuda, cuda:N or N "
                    f"(visible GPUs: {shown})"
                )
            picked = [int(text)]
        for i in picked:
            if i not in visible:
                raise FlkitError(
                    f"pool device cuda:{i} is not a visible GPU; accepted: {shown}"
                    + ("" if visible else " (this machine shows no GPU: use cpu)")
                )
            if i not in out:
                out.append(i)
    if not out:
        raise FlkitError(f"pool devices {spec!r} name no GPU; visible: {shown}")
    return out


def check_fit(per_device: int | None, need: int, gpus: list[dict], devices: list[int]) -> int:
    """How many workers go on each GPU of ``devices``: ``per_device`` when given, checked; else as
    many runs of ``need`` bytes as the GPU with the least free memory holds (at least 1, at most
    :data:`MAX_PER_DEVICE`). FlkitError, before anything runs, when ``per_device`` runs of ``need``
    bytes each would not fit a chosen GPU's free memory, with the estimate and the most that fit."""
    free = {g["index"]: int(g["free"]) for g in gpus}
    least = min(devices, key=lambda i: free[i])
    most = max(0, free[least] // max(need, 1))
    if per_device is None:
        return int(max(1, min(most, MAX_PER_DEVICE)))
    if isinstance(per_device, bool) or not isinstance(per_device, int) or per_device < 1:
        raise FlkitError(f"runs per device = {per_device!r}; accepted: an integer >= 1")
    if per_device > most:
        raise FlkitError(
            f"{per_device} runs per device do not fit cuda:{least}: each needs about "
            f"{need / GiB:.2f} GiB (estimated from its data, model and batch, with a CUDA context "
            f"and a {HEADROOM:g}x margin), {per_device * need / GiB:.2f} GiB in all, and "
            f"{free[least] / GiB:.2f} GiB are free; accepted: 1.."
            f"{max(most, 1)} runs per device" + ("" if most else " (even one run may not fit)")
        )
    return per_device


def _activation_floats(model, x) -> int:
    """Floats the leaf modules of ``model`` output for the sample batch ``x`` (one forward)."""
    import torch

    total = [0]

    def hook(_m, _inp, out):
        if isinstance(out, torch.Tensor):
            total[0] += out.numel()

    hooks = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            model.eval()(x)
    finally:
        for h in hooks:
            h.remove()
    return total[0]


def training_bytes(model_name, model_kwargs, ds, clients: int, batch: int) -> int:
    """Bytes of ``clients`` models trained at once on batches of ``batch``: parameters, their
    gradients, momenta and copies (6 per parameter), and the activations kept for the backward
    pass (3 per output float)."""
    from .. import models

    in_ch = ds.input_shape[0] if len(ds.input_shape) == 3 else None
    model = models.build(model_name, num_classes=ds.num_classes, in_channels=in_ch, **model_kwargs)
    params = sum(p.numel() for p in model.parameters())
    acts = _activation_floats(model, ds.x_train[:1].float())
    return 4 * (clients * params * 6 + clients * batch * acts * 3)


def _data_bytes(ds) -> int:
    tensors = (ds.x_train, ds.y_train, ds.x_test, ds.y_test)
    return sum(t.numel() * t.element_size() for t in tensors)


def run_bytes(config: dict, loaded: dict | None = None) -> int:
    """GPU memory one :func:`flkit.experiment.run` of ``config`` (a RunConfig's fields) needs, an
    estimate: a CUDA context, the dataset on the device, and the clients of a round trained at
    once, times :data:`HEADROOM`. ``loaded``: datasets already read, by (name, options)."""
    from .. import data

    loaded = {} if loaded is None else loaded
    key = (config["dataset"], json.dumps(config["dataset_kwargs"], sort_keys=True))
    if key not in loaded:
        loaded[key] = data.load(config["dataset"], device="cpu", **config["dataset_kwargs"])
    ds = loaded[key]
    train = training_bytes(
        config["model"],
        config["model_kwargs"],
        ds,
        config["clients_per_round"],
        config["batch_size"],
    )
    return int(HEADROOM * (CONTEXT_BYTES + _data_bytes(ds) + train))


def simulation_bytes(config: dict, loaded: dict | None = None) -> int:
    """The same estimate for a FedAST simulation: every task's data and its active requests
    trained at once at the task's batch size."""
    from .. import data
    from ..asyncfl import FedASTRun
    from ..asyncfl.trainer import data_kwargs

    loaded = {} if loaded is None else loaded
    cfg = FedASTRun.from_dict(config).validate()
    total = CONTEXT_BYTES
    for t in cfg.tasks:
        kw = data_kwargs(t, cfg)
        key = (t.dataset, json.dumps(kw, sort_keys=True))
        if key not in loaded:
            loaded[key] = data.load(t.dataset, device="cpu", **kw)
        ds = loaded[key]
        model = t.model or t.default("model")
        flags = t.model_flags or {}
        total += _data_bytes(ds)
        total += training_bytes(model, flags, ds, int(t.requests), int(t.default("batch_size")))
    return int(HEADROOM * total)


def job_bytes(job, loaded: dict | None = None) -> int:
    """:func:`run_bytes` or :func:`simulation_bytes` of a :class:`~.pool_jobs.PoolJob`."""
    if job.kind == "simulation":
        return simulation_bytes(job.config, loaded)
    return run_bytes(job.config, loaded)


def threads_per_gpu_worker(slots: Slots, cores: int) -> int:
    """Torch threads of a GPU worker (a GPU run's numbers do not depend on them): the cores
    shared out among all the workers."""
    return max(1, math.floor(cores / max(1, slots.capacity())))
