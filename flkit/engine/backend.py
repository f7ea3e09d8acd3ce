"""A run's `backend="auto"`, chosen by measurement (`measure_backend`) instead of the engine's
fixed rule (`flkit.engine.train.default_backend`).

Which backend trains a model fastest depends on the model, the batch size, the number of clients and
the machine: on a 2-core CPU the wide (grouped-convolution) step wins at batch 10 but may not at
batch 50, and on a GPU a step replayed from CUDA graphs or the compiled step can win.
`measure_backend` times a few local steps of every eligible backend (`eligible_backends`,
`time_backends`) on the run's own model, batch size, clients and device, interleaved, and keeps the
fastest. Backends sum floats in different orders, so the choice changes numbers in the last bits: a
run records the backend it chose in its config (and so in its run-cache key), and the choice is
remembered per machine and shape in `backend-choices.json` of the machine folder
(`flkit.paths.machine_dir`, beside the run cache), so that a machine keeps making the same choice,
whichever run cache a run uses, and measures once. Pin a backend (`RunConfig(backend="wide")`,
`flkit run --backend wide`) where results must not depend on the machine: the presets do.

The probe trains without the run's hooks. A method with hooks (FedProx's proximal term, a mask's
parameter transform) that the probe sends to the graph backend runs the eager wide step there
(`LocalResult.backend` says so), so on a GPU such a run may be better pinned to "compiled".
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch
from torch import nn

from .. import store
from ..paths import machine_dir
from ..state import broadcast_state, model_state
from ..utils import FlkitError, generator
from .graphed import GRAPH_WARMUP, STEPS_PER_GRAPH, model_reason
from .spec import LocalSpec
from .train import train_clients
from .wide import unsupported_reason

CACHE_FILE = "backend-choices.json"
# Local steps per client in one timed probe. On a GPU the graph backend runs GRAPH_WARMUP steps
# eagerly and replays the rest STEPS_PER_GRAPH at a time: a probe of one step would time it as
# the eager wide step, so there a probe holds the warm-up and two replays (where the graph backend
# is among those timed).
PROBE_STEPS = {"cpu": 1, "cuda": GRAPH_WARMUP + 2 * STEPS_PER_GRAPH}
PROBE_REPEATS = 3  # interleaved probes per backend; the minimum counts
# After the untimed warm-up calls, a backend this many times slower than the best in the first
# timed probe drops out, since probes cost run time too.
PROBE_MARGIN = 2.0
# Untimed calls per backend before the timed probes. On a GPU the compiled step runs under CUDA
# graphs, which torch records on the second call and replays from the third; with one warm-up
# its first timed probe pays the recording and it dropped out against the wide step, although
# pinned it ran R1 twice as fast on an H200 (benchmarks/RESULTS.md, GPU section).
WARMUP_CALLS = {"cpu": 1, "cuda": 3}


def eligible_backends(model: nn.Module, device: torch.device) -> list[str]:
    """Backends a run's measured "auto" times for `model` on `device`: on a GPU the wide step
    replayed from CUDA graphs and the compiled wide step (compiling costs tens of seconds, which a
    CPU run does not earn back), the wide step, and the loop; vmap only for models the wide step
    cannot run (it does the same batched work less directly, and its first call is slow)."""
    if unsupported_reason(model) is None:
        wide = ["wide"]
        if torch.device(device).type == "cuda":
            # the graph backend only where it can replay this model's calls at all
            wide = (["graph"] if model_reason(model) is None else []) + ["compiled", "wide"]
        return wide + ["loop"]
    return (["vmap"] if not list(model.buffers()) else []) + ["loop"]


def machine() -> dict:
    """What makes timings comparable: the host, its processor, torch and its threads."""
    dev = "cpu"
    if torch.cuda.is_available():
        dev = torch.cuda.get_device_name(torch.cuda.current_device())
    return {
        "host": platform.node(),
        "processor": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": dev,
    }


def _cpu_model() -> str:
    """The CPU's model name where the system tells it without a subprocess (Linux's
    /proc/cpuinfo), else the architecture. `platform.processor()` starts a `uname -p` subprocess at
    every run's start-up, and on Linux mostly answers the architecture anyway."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def time_backends(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    clients: int,
    spec: LocalSpec,
    backends: list[str] | None = None,
    steps: int | None = None,
    repeats: int = PROBE_REPEATS,
) -> dict[str, float]:
    """Seconds per local step (all `clients` together) of each backend: the minimum of `repeats`
    interleaved probes of `steps` steps (default PROBE_STEPS of the device), after WARMUP_CALLS
    untimed calls each, on samples drawn from (x, y). A backend more than PROBE_MARGIN times
    slower than the best in the first probe keeps that time."""
    backends = backends or eligible_backends(model, x.device)
    steps = steps or (PROBE_STEPS.get(x.device.type, 1) if "graph" in backends else 1)
    per_client = steps * spec.batch_size
    pick = torch.randint(len(x), (clients, per_client), generator=generator(0, "probe"))
    idx = [row.to(x.device) for row in pick]
    start = broadcast_state(model_state(model), clients)
    probe = LocalSpec(spec.lr, spec.batch_size, steps=steps, momentum=spec.momentum)
    seeds = list(range(clients))
    best = {b: float("inf") for b in backends}
    warmups = WARMUP_CALLS.get(x.device.type, 1)
    for b in backends:  # one-time costs are not a step's time: compiling, recording CUDA graphs,
        # and torch importing its compiler stack on the loop's first torch.optim.SGD step
        for _ in range(warmups):
            train_clients(model, start, x, y, idx, probe, seeds, backend=b)
    for r in range(repeats):
        if r == 1:
            fastest = min(best.values())
            backends = [b for b in backends if best[b] <= PROBE_MARGIN * fastest]
        for b in backends:
            _sync(x.device)
            t = time.perf_counter()
            train_clients(model, start, x, y, idx, probe, seeds, backend=b)
            _sync(x.device)
            best[b] = min(best[b], (time.perf_counter() - t) / steps)
    return best


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure_backend(
    shape: dict, probe, folder: str | os.PathLike | None = None, cache: bool = True
) -> tuple[str, dict]:
    """(backend, record) for a run of this `shape` (what decides speed: model, batch size,
    clients, device, ...): the choice this machine remembers, else `probe()` -> {backend: seconds
    per step} measured now and remembered. folder: where `CACHE_FILE` lives (default
    `flkit.paths.machine_dir()`)."""
    key = json.dumps({"machine": machine(), **shape}, sort_keys=True, default=str)
    path = Path(folder if folder is not None else machine_dir()) / CACHE_FILE
    known = _read(path) if cache else {}
    if key in known:
        return known[key]["backend"], known[key]
    seconds = probe()
    if not seconds:
        raise FlkitError("no backend could be measured for this run; pin one with backend=...")
    record = {"backend": min(seconds, key=seconds.get), "seconds_per_step": seconds}
    if cache:
        store.save_json(path, {**_read(path), key: record})
    return record["backend"], record


def _read(path: Path) -> dict:
    try:
        return store.load_json(path)
    except (OSError, ValueError):
        return {}
