"""Message formats: a :class:`Codec` compresses what a party sends and counts its exact size in
bits. Bits are counted here and only here: :meth:`Codec.bits` gives the size of a message from
its decoded tensors (closed form from the shapes for dense messages, from the non-zeros for
sparse ones), and :meth:`Codec.encode` is compress-then-count."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from ..utils import FlkitError, check_choice
from .sizes import (
    COUNTERS,
    DEFAULT_COUNTER,
    MessageSize,
    format_bytes,
    message_size,
    tensor_message_size,
)
from .sparsify import check_p, stc, topk

__all__ = [
    "Codec",
    "DenseCodec",
    "TopKCodec",
    "STCCodec",
    "make_codec",
    "shape_list",
    "traffic_table",
]


class Codec:
    """A message format: ``encode(tensors) -> (decoded, bits)``.

    ``tensors`` is a dict name -> Tensor; ``decoded`` has the same keys, shapes, dtypes and devices
    and holds what the receiver reconstructs; ``bits`` is the exact integer size of the message
    (the sum over tensors). With ``stacked=True`` every tensor is ``[K, ...]`` (one row per client),
    each client's tensors are compressed separately and ``bits`` is a list of K integers.

    Subclasses implement :meth:`_compress` (per tensor, stacked) and :meth:`_size`.
    Non-floating-point tensors (e.g. integer buffers) are passed through unchanged at their
    native width (``element_size * 8`` bits per entry)."""

    name: str = "codec"
    kind: str = "dense"
    counter: str = "fp32"

    def describe(self) -> str:  # pragma: no cover - overridden
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"

    # -- to implement
    def _compress(self, x: Tensor) -> Tensor:
        """x: [K, ...] floating tensor -> decoded [K, ...]."""
        raise NotImplementedError

    def _size(self, decoded_row: Tensor) -> MessageSize:
        raise NotImplementedError

    def _row_bits(self, dec: Tensor) -> list[int]:
        """Integer bits of each row of a decoded [K, ...] floating tensor."""
        return [self._size(dec[i]).bits for i in range(dec.shape[0])]

    # -- public
    def bits(self, decoded: Mapping[str, Tensor], stacked: bool = False):
        """Exact size of a message given what the receiver decodes (no copy is made): an int, or
        with ``stacked=True`` a list of K ints, one per row. Integer tensors count at their native
        width; floating tensors as the codec says (dense: 32 bits per entry from the shape)."""
        k = _check_message(self.name, decoded, stacked)
        bits = [0] * k
        for t in decoded.values():
            rows = t if stacked else t.unsqueeze(0)
            if not t.is_floating_point():
                per_row = [rows[0].numel() * rows.element_size() * 8] * rows.shape[0]
            else:
                per_row = self._row_bits(rows)
            bits = [b + r for b, r in zip(bits, per_row)]
        return bits if stacked else bits[0]

    def message_bits(self, tensors: Mapping[str, Tensor], stacked: bool = False):
        """Bits of sending ``tensors`` through this codec, i.e. ``encode(tensors)[1]``; codecs whose
        size follows from the shapes (dense) count without compressing or copying."""
        return self.encode(tensors, stacked)[1]

    def encode(self, tensors: Mapping[str, Tensor], stacked: bool = False):
        """``(decoded, bits)``: what the receiver reconstructs and the message's exact size."""
        _check_message(self.name, tensors, stacked)
        decoded = {}
        for name, t in tensors.items():
            rows = t if stacked else t.unsqueeze(0)
            dec = rows.clone() if not t.is_floating_point() else self._compress(rows)
            decoded[name] = dec if stacked else dec[0]
        return decoded, self.bits(decoded, stacked)

    def sizes(self, decoded: Mapping[str, Tensor]) -> dict[str, MessageSize]:
        """Per-tensor :class:`MessageSize` of an (unstacked) decoded message."""
        return {name: self._size(t) for name, t in decoded.items() if t.is_floating_point()}

    def expected_bits(self, shapes) -> int:
        """Size of a message for tensors of these shapes with the nominal k per tensor
        (``shapes``: dict name -> shape, list of shapes, or an nn.Module)."""
        total = 0
        for shape in shape_list(shapes):
            n = math.prod(shape)
            total += self._nominal_size(n).bits
        return total

    def _nominal_size(self, n: int) -> MessageSize:
        return message_size("dense", n)


def _check_message(codec: str, tensors, stacked: bool) -> int:
    """Rows of a message (1 unless stacked); FlkitError for anything but a dict of tensors with
    equal row counts."""
    if not isinstance(tensors, Mapping):
        raise FlkitError(
            f"{codec}.encode expects a dict name -> Tensor, got {type(tensors).__name__}"
        )
    k = None
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise FlkitError(f"tensor {name!r} is a {type(t).__name__}, not a torch.Tensor")
        if stacked:
            if t.dim() < 1:
                raise FlkitError(f"stacked=True: tensor {name!r} is 0-d; expected [K, ...]")
            if k is None:
                k = t.shape[0]
            elif t.shape[0] != k:
                raise FlkitError(
                    f"stacked=True: tensor {name!r} has {t.shape[0]} rows, others have {k}"
                )
    return (k or 0) if stacked else 1


class DenseCodec(Codec):
    """Uncompressed float32: 32 bits per entry, decoded = a copy of the input."""

    name = "dense"
    kind = "dense"
    counter = "fp32"

    def describe(self) -> str:
        return "dense float32, 32 bits per entry"

    def _compress(self, x):
        return x.clone()

    def _size(self, row):
        return message_size("dense", row.numel())

    def _row_bits(self, dec):
        return [message_size("dense", dec[0].numel()).bits] * dec.shape[0]

    def message_bits(self, tensors, stacked=False):
        return self.bits(tensors, stacked)  # dense: what is sent is what is decoded


class _SparseCodec(Codec):
    def __init__(self, p: float, counter: str = DEFAULT_COUNTER):
        self.p = check_p(p)
        check_choice("counter", counter, COUNTERS)
        self.counter = counter

    def _size(self, row):
        return tensor_message_size(self.kind, row, self.p, self.counter)

    def _row_bits(self, dec):
        if self.counter == "exact":
            return super()._row_bits(dec)
        n = dec[0].numel()
        counts = (dec.reshape(dec.shape[0], -1) != 0).sum(dim=1).tolist()  # one device sync
        return [
            message_size(self.kind, n, int(k), p=self.p, counter=self.counter).bits for k in counts
        ]

    def _nominal_size(self, n):
        if self.counter == "exact":
            raise FlkitError(
                "counter='exact' counts actual messages (encode); sizes from shapes "
                "need counter='paper' or 'reference-simulator'"
            )
        return message_size(self.kind, n, p=self.p, counter=self.counter)


class TopKCodec(_SparseCodec):
    """Top-k per tensor (k = max(ceil(n·p), 1)), values at float32.

    Cost: Golomb-coded positions as for STC under the same counter, plus 32 bits per value, no μ
    (``paper``: k·(b̄_pos(p) + 32); ``reference-simulator``: k·(b̄_pos(q) + 1 + 32))."""

    kind = "topk"

    @property
    def name(self):
        return f"topk(p={self.p:g})"

    def describe(self):
        return (
            f"top-k per tensor, p={self.p:g}, k=max(ceil(n*p),1), float32 values + Golomb "
            f"positions, counter={self.counter}"
        )

    def _compress(self, x):
        return topk(x, self.p, stacked=True)


class STCCodec(_SparseCodec):
    """Sparse ternary compression per tensor (values ±μ), Golomb-coded positions.

    Cost under ``counter``: see the module docstring (``reference-simulator`` by default)."""

    kind = "stc"

    @property
    def name(self):
        return f"stc(p={self.p:g})"

    def describe(self):
        return (
            f"sparse ternary compression per tensor, p={self.p:g}, k=max(ceil(n*p),1), "
            f"values ±mu + Golomb positions, counter={self.counter}"
        )

    def _compress(self, x):
        return stc(x, self.p, stacked=True)


def make_codec(name: str, p: float | None = None, counter: str = DEFAULT_COUNTER) -> Codec:
    """``make_codec("dense")``, ``make_codec("topk", 0.1)``, ``make_codec("stc", 0.1, "paper")``."""
    check_choice("codec", name, ("dense", "topk", "stc"))
    if name == "dense":
        return DenseCodec()
    if p is None:
        raise FlkitError(f"codec {name!r} needs a sparsity rate p in (0, 1]")
    return (TopKCodec if name == "topk" else STCCodec)(p, counter)


def shape_list(model_or_param_shapes) -> list[tuple]:
    obj = model_or_param_shapes
    if isinstance(obj, torch.nn.Module):
        return [tuple(p.shape) for p in obj.parameters()]
    if isinstance(obj, Mapping):
        obj = list(obj.values())
    out = []
    for s in obj:
        if isinstance(s, Tensor):
            s = tuple(s.shape)
        elif isinstance(s, int):
            s = (s,)
        s = tuple(int(v) for v in s)
        if any(v < 0 for v in s):
            raise FlkitError(f"shape {s} has a negative dimension")
        out.append(s)
    if not out:
        raise FlkitError("traffic_table needs at least one parameter shape")
    return out


def traffic_table(
    model_or_param_shapes,
    p: float = 0.1,
    counter: str = DEFAULT_COUNTER,
    methods: Iterable[str] = ("FedAvg", "STC"),
):
    """Per-round traffic per participating client, up and down, and the factor vs. FedAvg.

    ``model_or_param_shapes``: an ``nn.Module`` (all its parameters), a dict name -> shape/tensor,
    or a list of shapes. Each tensor is a separate message part (per-tensor k and μ).
    ``methods``: any of "FedAvg" (dense float32 both ways), "STC" (STC up and down, same message
    size as STC-PA), "Top-k" (top-k up and down). STC/top-k sizes use the nominal
    k = max(ceil(n·p), 1) per tensor (so ``counter`` is "reference-simulator" or "paper"; the
    "exact" counter needs actual messages). The downlink counts only the current round's update
    (a client that skipped rounds would also fetch the missed ones). Returns a pandas DataFrame
    with columns method, counter, p, params, up_bits, down_bits, up_bytes, down_bytes, up, down,
    factor.
    """
    p = check_p(p)
    check_choice("counter", counter, ("reference-simulator", "paper"))
    shapes = shape_list(model_or_param_shapes)
    d = sum(math.prod(s) for s in shapes)
    dense_bits = DenseCodec().expected_bits(shapes)
    codecs = {"FedAvg": DenseCodec(), "STC": STCCodec(p, counter), "Top-k": TopKCodec(p, counter)}
    rows = []
    for m in methods:
        check_choice("method", m, tuple(codecs))
        c = codecs[m]
        bits = c.expected_bits(shapes)
        rows.append(
            dict(
                method=m,
                counter="fp32" if m == "FedAvg" else counter,
                p=None if m == "FedAvg" else p,
                params=d,
                up_bits=bits,
                down_bits=bits,
                up_bytes=bits / 8,
                down_bytes=bits / 8,
                up=format_bytes(bits / 8),
                down=format_bytes(bits / 8),
                factor=dense_bits / bits if bits else math.inf,
            )
        )
    import pandas as pd

    return pd.DataFrame(rows)
