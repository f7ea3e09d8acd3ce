"""Bits of one tensor's message (dense, top-k, STC) under a named counter; see the package
docstring for the counters' formulas."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ..utils import FlkitError, check_choice, check_range
from .golomb import exact_position_bits, golomb_position_bits, positions_of
from .sparsify import ceil_clean, check_p, num_kept

__all__ = [
    "COUNTERS",
    "DEFAULT_COUNTER",
    "FLOAT_BITS",
    "MessageSize",
    "message_size",
    "tensor_message_size",
    "format_bytes",
]

COUNTERS = ("reference-simulator", "paper", "exact")
DEFAULT_COUNTER = "reference-simulator"
FLOAT_BITS = 32


@dataclass(frozen=True)
class MessageSize:
    """Size of one tensor's message. ``bits`` is an exact integer; ``expected_bits`` the formula's
    unrounded value (equal to ``bits`` for dense and exact counting)."""

    kind: str  # "dense" | "topk" | "stc"
    counter: str  # "fp32" for dense, else one of COUNTERS
    n: int  # entries of the tensor
    k: int  # non-zeros sent (n for dense)
    bits: int
    expected_bits: float

    @property
    def bytes(self) -> float:
        return self.bits / 8


_KINDS = ("dense", "topk", "stc")


def message_size(
    kind: str,
    n: int,
    k: int | None = None,
    *,
    p: float | None = None,
    counter: str = DEFAULT_COUNTER,
    positions=None,
) -> MessageSize:
    """Bits of one tensor's message of ``kind`` in ``("dense", "topk", "stc")``.

    n: tensor size; k: non-zeros sent (default: the nominal ``num_kept(n, p)``);
    p: nominal sparsity rate (needed by the ``paper`` and ``exact`` counters; default k/n);
    positions: the non-zero positions or mask (needed by the ``exact`` counter).
    See the module docstring for the formulas of each counter."""
    check_choice("kind", kind, _KINDS)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FlkitError(f"n={n!r} must be a non-negative integer")
    if kind == "dense":
        return MessageSize("dense", "fp32", n, n, FLOAT_BITS * n, float(FLOAT_BITS * n))
    check_choice("counter", counter, COUNTERS)
    if k is None:
        if p is None:
            raise FlkitError(
                f"message_size needs k (non-zeros) or p (sparsity rate) for kind={kind!r}"
            )
        k = num_kept(n, p)
    if isinstance(k, bool) or not isinstance(k, int):
        raise FlkitError(f"k={k!r} must be an integer")
    check_range("k", k, 0, n)
    if p is None:
        p = k / n if n else 1.0
    p = check_p(p)
    value_bits = 1 if kind == "stc" else FLOAT_BITS  # sign bit vs. float32 value
    mu_bits = FLOAT_BITS if kind == "stc" else 0
    if counter == "reference-simulator":
        if k == 0:
            return MessageSize(kind, counter, n, 0, 0, 0.0)
        q = (k + 1) / (n + 1)
        expected = k * (golomb_position_bits(q) + 1 + value_bits)
        return MessageSize(kind, counter, n, k, ceil_clean(expected), expected)
    if counter == "paper":
        expected = k * (golomb_position_bits(p) + value_bits) + mu_bits
        return MessageSize(kind, counter, n, k, ceil_clean(expected), expected)
    # exact
    if positions is None:
        raise FlkitError("counter='exact' needs the non-zero positions (positions=mask or indices)")
    pos = positions_of(positions)
    if pos.numel() != k:
        raise FlkitError(f"counter='exact': got {pos.numel()} positions but k={k}")
    bits = exact_position_bits(pos, p) + k * value_bits + mu_bits
    return MessageSize(kind, counter, n, k, bits, float(bits))


def tensor_message_size(
    kind: str, tensor: Tensor, p: float | None = None, counter: str = DEFAULT_COUNTER
) -> MessageSize:
    """:func:`message_size` of an already compressed tensor (k = its number of non-zeros)."""
    n = tensor.numel()
    if kind == "dense":
        return message_size("dense", n)
    mask = tensor.reshape(-1) != 0
    k = int(mask.sum().item())
    return message_size(
        kind, n, k, p=p, counter=counter, positions=mask if counter == "exact" else None
    )


def format_bytes(nbytes: float) -> str:
    """3461928 -> '3.46 MB' (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"
