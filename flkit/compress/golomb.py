"""The Golomb–Rice position code of the STC paper: the optimal parameter b*, the expected bits per
position, and the bits actually written for given positions."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..utils import FlkitError
from .sparsify import check_p

__all__ = ["golomb_bstar", "golomb_position_bits", "positions_of", "exact_position_bits"]

_PHI = (1.0 + math.sqrt(5.0)) / 2.0


def golomb_bstar(p: float) -> int:
    """Optimal Golomb–Rice parameter b* = 1 + floor(log2(ln(φ−1) / ln(1−p))) for sparsity p.

    The Golomb divisor is M = 2**b*. For p > (about) 0.62 the formula goes negative; b* is then 0
    (M = 1, a pure unary code), the smallest valid Rice parameter. At p = 1 b* = 0."""
    p = check_p(p)
    if p >= 1.0:
        return 0
    b = 1 + math.floor(math.log2(math.log(_PHI - 1.0) / math.log1p(-p)))
    return max(int(b), 0)


def golomb_position_bits(p: float) -> float:
    """Expected bits per non-zero position: b̄_pos = b* + 1 / (1 − (1 − p)**(2**b*)).

    p = 0.1 → 4.756 (b* = 3); 0.05 → 5.786 (4); 0.01 → 8.108 (6); 0.0025 → 10.114 (8); 1 → 1."""
    p = check_p(p)
    b = golomb_bstar(p)
    return b + 1.0 / (1.0 - (1.0 - p) ** (2**b))


def positions_of(mask_or_positions) -> Tensor:
    """Increasing non-zero positions of a mask/tensor (flattened), or given positions checked."""
    if isinstance(mask_or_positions, Tensor):
        t = mask_or_positions
        if t.dtype == torch.bool or t.is_floating_point():
            return torch.nonzero(t.reshape(-1).detach().cpu()).reshape(-1)
        pos = t.reshape(-1).detach().cpu().long()
    else:
        pos = torch.as_tensor(list(mask_or_positions), dtype=torch.long).reshape(-1)
    if pos.numel() and (pos.min() < 0 or (pos[1:] <= pos[:-1]).any()):
        raise FlkitError(
            "positions must be distinct non-negative integers in increasing order; "
            f"got {pos.tolist()[:10]}{'...' if pos.numel() > 10 else ''}"
        )
    return pos


def exact_position_bits(mask_or_positions, p: float) -> int:
    """Bits of the Golomb–Rice code actually written for these non-zero positions.

    ``mask_or_positions``: a boolean or floating tensor (any shape; its non-zero entries, flattened
    row-major, are the positions) or an increasing sequence / integer tensor of positions.
    With M = 2**b* (b* = :func:`golomb_bstar` (p)), each gap d between consecutive positions
    (the first gap measured from position −1, so position 0 has gap 1) costs
    floor((d − 1) / M) + 1 + b* bits (unary quotient with stop bit, then b* remainder bits).
    No positions → 0 bits."""
    b = golomb_bstar(p)
    pos = positions_of(mask_or_positions)
    if pos.numel() == 0:
        return 0
    gaps = torch.diff(pos, prepend=torch.tensor([-1], dtype=torch.long))
    m = 2**b
    return int(((gaps - 1) // m).sum().item()) + int(pos.numel()) * (1 + b)
