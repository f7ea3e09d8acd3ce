"""The global random states a run draws from: saved in its checkpoints, restored on resume, and
kept untouched by work done on the side (the backend's timing probe).

The engine's batch orders and the methods' choices come from generators seeded per round
(:func:`flkit.utils.generator`); dropout draws from torch's global generators, which a run's
model initialisation seeds. Python's and NumPy's global states are saved as well, for any
method that draws from them."""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


def capture(device: torch.device) -> dict:
    """Every global random state (torch's CPU one, the run device's CUDA one, NumPy's, Python's)."""
    out = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if device.type == "cuda":
        out["cuda"] = torch.cuda.get_rng_state(device)
    return out


def restore(saved: dict, device: torch.device) -> None:
    """Put back the states :func:`capture` returned."""
    torch.set_rng_state(saved["torch"])
    np.random.set_state(saved["numpy"])
    random.setstate(saved["python"])
    if device.type == "cuda" and "cuda" in saved:
        torch.cuda.set_rng_state(saved["cuda"], device)


@contextlib.contextmanager
def untouched(device: torch.device):
    """Whatever the block draws, the global random states afterwards are those before it."""
    saved = capture(device)
    try:
        yield
    finally:
        restore(saved, device)
