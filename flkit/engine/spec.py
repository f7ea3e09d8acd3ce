"""What one client's local training is (LocalSpec), what the engine returns (LocalResult), and the
batch plan every backend and the reference loop consume (so they can be compared exactly)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from ..state import State
from ..utils import FlkitError, check_range, generator

__all__ = ["LocalSpec", "LocalResult", "batch_plan", "reused_plans"]

# batch_plan's results by their arguments while `reused_plans` is active (None: not active)
_REUSED: dict | None = None


@dataclass(frozen=True)
class LocalSpec:
    """Local SGD as torch.optim.SGD does it (coupled weight decay, momentum without dampening)."""

    lr: float
    batch_size: int
    epochs: int | None = None
    steps: int | None = None
    momentum: float = 0.0
    weight_decay: float = 0.0
    drop_last: bool = False
    # step mode only: every step draws its batch from a fresh permutation (a new shuffled loader
    # per step, as the FedAST code's Shakespeare training), so batches overlap across steps
    fresh_batches: bool = False

    def __post_init__(self):
        check_range("lr", self.lr, 0, None, low_open=True)
        check_range("batch_size", self.batch_size, 1)
        check_range("momentum", self.momentum, 0, 1, high_open=True)
        check_range("weight_decay", self.weight_decay, 0)
        if (self.epochs is None) == (self.steps is None):
            raise FlkitError(f"give exactly one of epochs={self.epochs!r} and steps={self.steps!r}")
        if self.epochs is not None:
            check_range("epochs", self.epochs, 1)
        if self.steps is not None:
            check_range("steps", self.steps, 1)
        if self.fresh_batches and self.steps is None:
            raise FlkitError(
                f"fresh_batches=True needs step mode (steps=...); got epochs={self.epochs!r}"
            )


@dataclass
class LocalResult:
    state: State  # {name: Tensor[K, ...]} parameters and buffers after training
    train_loss: torch.Tensor  # [K] sample-weighted mean training loss over all local steps
    samples: torch.Tensor  # [K] samples processed
    steps: torch.Tensor  # [K] optimiser steps taken
    backend: str = ""  # the backend that ran (a failed "compiled" reports "wide")


@contextlib.contextmanager
def reused_plans():
    """Within it, :func:`batch_plan` gives the tensors it gave before for the same arguments
    instead of drawing and copying them again. The gradient inversion unrolls the same local
    program with the same plans at every iteration: this saves the draws, and a CUDA graph that
    records an iteration can record no copy from host memory. Nested uses share the outer one's
    plans; they are dropped when the outermost one ends."""
    global _REUSED
    outer = _REUSED
    if outer is None:
        _REUSED = {}
    try:
        yield
    finally:
        if outer is None:
            _REUSED = None


def batch_plan(n: int, spec: LocalSpec, seed: int, device="cpu") -> list[torch.Tensor]:
    """Positions (into a client's index tensor) of each local step's mini-batch.

    Epoch mode: a fresh permutation per epoch cut into batches (last one short unless drop_last).
    Step mode: consecutive batches of successive permutations, `steps` of them; with
    ``fresh_batches`` each step takes the first batch of its own permutation (a client with fewer
    than batch_size samples uses all of them each step: our choice, the official loader with
    drop_last would yield no batch at all)."""
    if n < 1:
        raise FlkitError(
            "a client with no data cannot train; every client index tensor must be non-empty"
        )
    if _REUSED is not None:
        key = (n, spec, int(seed), str(torch.device(device)))
        if key not in _REUSED:
            _REUSED[key] = _draw_plan(n, spec, seed, device)
        return list(_REUSED[key])
    return _draw_plan(n, spec, seed, device)


def _draw_plan(n: int, spec: LocalSpec, seed: int, device) -> list[torch.Tensor]:
    gen = generator(seed, "batch-plan")
    bsz = spec.batch_size
    if spec.fresh_batches:
        # drawn on the CPU generator (the same batches on every device), moved in one copy
        perms = torch.stack([torch.randperm(n, generator=gen)[:bsz] for _ in range(spec.steps)])
        return list(perms.to(device).unbind(0))
    per_epoch = n // bsz if spec.drop_last else math.ceil(n / bsz)
    if per_epoch == 0:
        raise FlkitError(
            f"batch_size={bsz} with drop_last=True leaves no batch for a client with {n} samples"
        )
    plan: list[torch.Tensor] = []
    target = spec.steps if spec.steps is not None else spec.epochs * per_epoch
    while len(plan) < target:
        perm = torch.randperm(n, generator=gen).to(device)  # one copy per epoch, not per batch
        for j in range(per_epoch):
            if len(plan) == target:
                break
            plan.append(perm[j * bsz : (j + 1) * bsz])
    return plan
