"""Evaluation of one model on a test set: eval mode, inference mode, no copy of the weights.

`evaluate` runs a cached inference copy of the model (`inference_model`) through
torch.func.functional_call with the state to evaluate, so a round's evaluation copies no model and
loads no state dict; its 2-D max-pools are computed exactly, but faster, by `_WindowMax`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

import torch
from torch import nn
from torch.nn import functional

from .copies import engine_copy, per_model


class _WindowMax(nn.Module):
    """MaxPool2d with kernel == stride, no padding or dilation, for inference only: the maximum
    over each window's k rows, then over its k columns. The same values as max_pool2d (a
    maximum rounds nothing; NaN propagates in both), about 20x faster on a CPU for LeNet's 2x2
    pools, where max_pool2d also computes the indices that only its backward needs."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x):
        k = self.k
        h, w = x.shape[-2] // k * k, x.shape[-1] // k * k
        v = x[..., :h, :w].unflatten(-1, (w // k, k)).unflatten(-3, (h // k, k))
        # the window's rows first (each a run of k neighbours in memory), then those k columns:
        # about 2x faster than a maximum over the k*k strided views
        rows = v[..., 0, :, :]
        for i in range(1, k):
            rows = torch.maximum(rows, v[..., i, :, :])
        out = rows[..., 0]
        for j in range(1, k):
            out = torch.maximum(out, rows[..., j])
        return out


def _window_max_ok(m: nn.Module) -> bool:
    def pair(v):
        return v if isinstance(v, tuple) else (v, v)

    k, s = pair(m.kernel_size), pair(m.stride if m.stride is not None else m.kernel_size)
    return (
        k[0] == k[1] == s[0] == s[1]
        and pair(m.padding) == (0, 0)
        and pair(m.dilation) == (1, 1)
        and not m.ceil_mode
        and not m.return_indices
    )


_EVAL_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def inference_model(model: nn.Module) -> nn.Module:
    """A copy of `model` for evaluation, built once per model object and structure, with its
    non-overlapping 2-D max-pools computed as `_WindowMax` (same outputs, faster). Parameters
    and buffers are passed in at each call (torch.func.functional_call), never copied into it."""
    return per_model(_EVAL_MODELS, model, _build_inference_model)


def _build_inference_model(model: nn.Module) -> nn.Module:
    def window_max(name, mod):
        if type(mod) is nn.MaxPool2d and _window_max_ok(mod) and name:
            return _WindowMax(
                mod.kernel_size if isinstance(mod.kernel_size, int) else mod.kernel_size[0]
            )
        return None

    return engine_copy(model, window_max).eval().requires_grad_(False)


# Evaluation runs the forward pass in chunks of FORWARD_CHUNK samples (a LeNet-sized model's
# activations then stay in the CPU cache; larger chunks fall out of it and run slower) and
# sums the loss over `batch_size` samples at a time, so the loss is the same float as it was
# with whole-batch forward passes (the logits do not depend on the chunking).
FORWARD_CHUNK = 256


def evaluate(
    model: nn.Module,
    state: Mapping[str, torch.Tensor] | None,
    x,
    y,
    batch_size: int = 2048,
    per_class: int | None = None,
):
    """Accuracy and mean cross-entropy of one model (state=None: the model as it is), in eval mode
    and inference mode, without copying the state into a model.

    per_class=C additionally returns the accuracy on each of the C classes (NaN when absent)."""
    from torch.func import functional_call

    net = inference_model(model)
    full = model.state_dict()
    if state is None or state.keys() != full.keys():  # as load_state_dict would, fill from model
        state = {**full, **(state or {})}
    chunk = min(FORWARD_CHUNK, batch_size)
    correct, loss = 0, 0.0
    preds = []
    with torch.inference_mode():
        for lo in range(0, len(x), batch_size):
            xx = x[lo : lo + batch_size]
            out = torch.cat(
                [
                    functional_call(net, state, (xx[c : c + chunk],))
                    for c in range(0, len(xx), chunk)
                ]
            )
            yy = y[lo : lo + batch_size]
            loss += float(functional.cross_entropy(out, yy, reduction="sum"))
            p = out.argmax(1)
            preds.append(p)
            correct += int((p == yy).sum())
    acc, mean_loss = correct / len(x), loss / len(x)
    if per_class is None:
        return acc, mean_loss
    pred = torch.cat(preds)
    hits = torch.zeros(per_class, device=y.device).index_add_(0, y, (pred == y).float())
    counts = torch.bincount(y, minlength=per_class).float()
    return (
        acc,
        mean_loss,
        torch.where(counts > 0, hits / counts.clamp(min=1), torch.full_like(counts, float("nan"))),
    )
