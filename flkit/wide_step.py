"""One local step of the wide backend, apart from the SGD around it (flkit.train): the wide model
built once per model, the loss of K clients in one forward pass, and that loss under
torch.compile for the "compiled" backend, which falls back to the eager loss on any failure.
"""

from __future__ import annotations

import os
import warnings
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from .utils import per_model
from .wide import WideModel


def cross_entropy_batch_major(logits, y):
    """logits [B, K, C], y [B, K] class indices or [B, K, C] probabilities (soft labels)
    -> per-client mean loss [K] and per-client loss sum [K]."""
    b, k = y.shape[:2]
    target = y.reshape(b * k, -1) if y.is_floating_point() else y.reshape(-1)
    per = F.cross_entropy(logits.reshape(b * k, -1), target, reduction="none").view(b, k)
    return per.mean(0), per.detach().sum(0)


_WIDE_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def wide_model(model: nn.Module) -> WideModel:
    """The wide version of `model`, built once per model object and structure (a model whose
    layers change is rebuilt): building it copies the whole module tree, which is worth doing
    once per run, not once per round."""
    return per_model(_WIDE_MODELS, model, WideModel)


def compile_settings(device: torch.device) -> dict:
    """torch.compile arguments of the "compiled" backend: CUDA graphs ("reduce-overhead") on a
    GPU, where per-kernel launch cost dominates small models; $FLKIT_COMPILE_BACKEND picks the
    compiler ("inductor" by default; "aot_eager" traces without generating code, which the tests
    use to keep compile time small)."""
    opts = {"backend": os.environ.get("FLKIT_COMPILE_BACKEND", "inductor"), "dynamic": False}
    if device.type == "cuda" and opts["backend"] == "inductor":
        opts["mode"] = "reduce-overhead"
    return opts


def wide_loss(wide, tensors, xb, yb, k, train):
    out = wide.forward_batch_major(tensors, xb, k, train=train)
    return cross_entropy_batch_major(out, yb)


class CompiledLoss:
    """`wide_loss` under torch.compile, kept on the wide model so it compiles once; the first
    failure (no compiler, an unsupported op) warns and switches to the eager function for good."""

    def __init__(self, wide: WideModel, device: torch.device):
        self.wide, self.failed = wide, None
        self.fn = torch.compile(wide_loss, **compile_settings(device))

    def __call__(self, *args):
        if self.failed is None:
            try:
                return self.fn(self.wide, *args)
            except Exception as e:  # noqa: BLE001 - any compiler failure means: run eagerly
                self.failed = f"{type(e).__name__}: {e}"
                warnings.warn(
                    f"backend='compiled' could not compile the wide step ({self.failed}); "
                    "running it eagerly (backend 'wide')",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return wide_loss(self.wide, *args)


def compiled_loss(wide: WideModel, device: torch.device) -> CompiledLoss:
    fn = getattr(wide, "compiled_loss", None)
    if fn is None:
        fn = wide.compiled_loss = CompiledLoss(wide, device)
    return fn


__all__ = [
    "CompiledLoss",
    "compile_settings",
    "compiled_loss",
    "cross_entropy_batch_major",
    "wide_loss",
    "wide_model",
]
