"""The per-tensor compressors: :func:`stc` (sparse ternary) and :func:`topk`, keeping
k = max(ceil(n·p), 1) entries of largest magnitude."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..utils import FlkitError, check_range

__all__ = ["check_p", "ceil_clean", "num_kept", "stc", "topk"]


def check_p(p, field: str = "p") -> float:
    """A sparsity rate (fraction of entries kept): a number in (0, 1]."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(float(p)):
        raise FlkitError(f"{field}={p!r} must be a number in the accepted range (0, 1]")
    check_range(field, float(p), 0.0, 1.0, low_open=True)
    return float(p)


def ceil_clean(x: float) -> int:
    """Ceiling robust to float noise: 100 * 0.07 = 7.000000000000001 -> 7, not 8."""
    return int(math.ceil(round(x, 6)))


def num_kept(n: int, p: float) -> int:
    """k = max(ceil(n·p), 1): entries kept by :func:`stc`/:func:`topk` in a tensor of n entries.

    (n·p is rounded to 6 decimals before the ceiling, so 100 × 0.07 keeps 7 entries.)
    Returns 0 for an empty tensor."""
    p = check_p(p)
    if n <= 0:
        return 0
    return min(max(ceil_clean(n * p), 1), int(n))


def _select(x: Tensor, p: float, stacked: bool):
    """Flattened view [K, n], top-k indices and values by magnitude along dim 1."""
    p = check_p(p)
    if not isinstance(x, Tensor):
        raise FlkitError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise FlkitError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if stacked:
        if x.dim() < 1:
            raise FlkitError("stacked=True needs a tensor of shape [K, ...]; got a 0-d tensor")
        flat = x.reshape(x.shape[0], -1)
    else:
        flat = x.reshape(1, -1)
    n = flat.shape[1]
    k = num_kept(n, p)
    if k == 0:
        return flat, None, None
    _, idx = torch.topk(
        flat.abs(), k, dim=1, sorted=False
    )  # exactly k indices, ties broken by topk
    vals = torch.gather(flat, 1, idx)
    return flat, idx, vals


def stc(x: Tensor, p: float, stacked: bool = False) -> Tensor:
    """Sparse ternary compression of one tensor (STC paper; STC-PA Algorithm 1).

    Keeps the k = max(ceil(n·p), 1) entries of largest magnitude (indices from ``torch.topk`` of
    |x|, so ties never keep more than k), sets each to ``sign(x_i)·mu`` with
    ``mu = mean |x_i|`` over the k kept entries, and zeroes the rest. The result has the shape,
    dtype and device of ``x`` and values in {-mu, 0, +mu}. An all-zero input gives all zeros
    (mu = 0);
    if fewer than k entries are non-zero, the kept zeros stay zero (so there are fewer than k
    non-zeros) and still count in mu's denominator, as in the algorithm. ``p = 1`` still ternarises.

    ``stacked=True``: ``x`` is ``[K, ...]``; each ``x[i]`` is compressed separately (its own k, mu).
    ``p`` outside (0, 1] raises :class:`~flkit.utils.FlkitError`.

    >>> stc(torch.tensor([0.5, -2.0, 0.1, 3.0]), 0.5)        # k = 2, mu = 2.5
    tensor([ 0.0000, -2.5000,  0.0000,  2.5000])
    """
    flat, idx, vals = _select(x, p, stacked)
    if idx is None:
        return x.clone()
    mu = vals.abs().mean(dim=1, keepdim=True)
    out = torch.zeros_like(flat)
    out.scatter_(1, idx, mu * torch.sign(vals))
    return out.view_as(x)


def topk(x: Tensor, p: float, stacked: bool = False) -> Tensor:
    """Top-k sparsification: the same k entries as :func:`stc`, kept at full precision.

    ``stacked=True`` compresses each ``x[i]`` of a ``[K, ...]`` tensor separately."""
    flat, idx, vals = _select(x, p, stacked)
    if idx is None:
        return x.clone()
    out = torch.zeros_like(flat)
    out.scatter_(1, idx, vals)
    return out.view_as(x)
