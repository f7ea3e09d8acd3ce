"""Which backend trains a model, and how many clients one wide call holds (the engine's plan,
before any training; re-exported by flkit.train)."""

from __future__ import annotations

import torch
from torch import nn

from .utils import FlkitError, check_choice
from .wide import unsupported_reason

BACKENDS = ("auto", "wide", "vmap", "loop", "compiled")


def choose_backend(model: nn.Module, backend: str = "auto") -> str:
    check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        if backend in ("wide", "compiled") and unsupported_reason(model):
            raise FlkitError(
                f"backend={backend!r} cannot run this model: {unsupported_reason(model)}; "
                "accepted backends for it: 'vmap', 'loop'"
            )
        return backend
    if unsupported_reason(model) is None:
        return "wide"
    return "vmap" if not list(model.buffers()) else "loop"


def eligible_backends(model: nn.Module, device: torch.device) -> list[str]:
    """Backends a run's measured "auto" times for `model` on `device`: the compiled wide step
    (GPU only: compiling costs tens of seconds, which a CPU run does not earn back), the wide
    step, and the loop; vmap only for models the wide step cannot run (it does the same batched
    work less directly: 2-5x slower than wide on the 2-core CPU, and its first call alone took
    14-22 s of a loaded machine's wall clock in the probe)."""
    if unsupported_reason(model) is None:
        wide = ["compiled", "wide"] if torch.device(device).type == "cuda" else ["wide"]
        return wide + ["loop"]
    return (["vmap"] if not list(model.buffers()) else []) + ["loop"]


# The memory the wide step plans for per call. The chunk size is a function of the model, the
# batch and this constant only, never of the machine's free memory: a grouped convolution over a
# different number of clients rounds differently (cnn3_mnist, 10 clients, one local epoch: up to
# 4e-5 apart between chunks of 10 and 1), so a chunk that followed free RAM/GPU memory would change
# float results between machines (or between two runs on one busy machine) without changing the
# run-cache key. 4 GiB trains every client of a round at once for the notebooks' models (LeNet-5:
# ~190 clients, VGG11* at batch 50: ~40).
CHUNK_MEMORY_BYTES = 4 << 30


def auto_chunk(model: nn.Module, k: int, batch_size: int, sample_shape) -> int:
    """How many of `k` clients the wide step trains at once: as many as fit CHUNK_MEMORY_BYTES by
    a coarse estimate, a fixed number for a given model, batch size and input shape."""
    n_param = sum(p.numel() for p in model.parameters())
    # parameters, gradient, momentum, plus activations (a coarse 64 floats per input value per
    # layer)
    per_client = 4 * (4 * n_param + 64 * batch_size * int(torch.Size(sample_shape).numel()))
    return max(1, min(k, CHUNK_MEMORY_BYTES // max(per_client, 1)))
