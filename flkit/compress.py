"""Update compression and exact communication accounting.

Everything a federated method sends goes through a :class:`Codec`, which returns the
decoded tensors (what the receiver reconstructs) together with the message size in bits::

    codec = STCCodec(p=0.1)                       # sparse ternary compression, simulator counter
    decoded, bits = codec.encode({"w": w, "b": b})
    decoded, bits_per_client = codec.encode(stacked_updates, stacked=True)   # [K, ...] tensors

The building blocks are public and documented so they can be called from a notebook:

* :func:`stc`, :func:`topk` -- per-tensor sparsifiers (Sattler et al. 2019, Algorithm 1 of the
  STC-PA paper).
* :class:`ErrorFeedback` -- residual accumulation ``a = g + e; t = C(a); e = a - t`` with one
  residual per sender (client id, or ``"server"``).
* :func:`golomb_bstar`, :func:`golomb_position_bits`, :func:`exact_position_bits` -- the
  Golomb position code of the STC paper.
* :func:`message_size` / :func:`tensor_message_size` -- bits of dense, top-k and STC messages
  under a named *counter* (every :class:`MessageSize` records the counter it used).
* :func:`traffic_table` -- per-round bytes per client, FedAvg vs. STC, from parameter shapes.

Counters (``counter=`` argument)
--------------------------------
``"reference-simulator"`` (default, :data:`DEFAULT_COUNTER`)
    The approximate counter of the STC simulator (``felisat/federated-learning``,
    ``compression_utils.get_bits(..., approx=True)``): with k the number of non-zeros of the tensor
    and n its size, q = (k+1)/(n+1), each non-zero costs b̄_pos(q) + 1 position bits plus 1 sign
    bit (b̄_pos + 2 in total), μ is not counted. This reproduces the ≈47× the papers report at p = 0.1.
``"paper"``
    The closed form of the STC paper: k·(b̄_pos(p) + 1) + 32 bits (positions, one sign bit per
    non-zero, one float32 μ), with q = p, the nominal sparsity rate (≈55.6× at p = 0.1).
``"exact"``
    The Golomb code actually written for the tensor's non-zero positions
    (:func:`exact_position_bits` with b* from p), plus 1 sign bit per non-zero and 32 bits for μ.

Top-k messages (full-precision values) cost the same positions as STC under the same counter plus
32 bits per value instead of the sign bit, and no μ: ``paper``/``exact``: positions + 32·k;
``reference-simulator``: k·(b̄_pos(q) + 1 + 32). Dense messages cost 32 bits per entry under every
counter (recorded as counter ``"fp32"``).

Bits are exact integers: the expected-size formulas (``paper``, ``reference-simulator``) are
rounded up per tensor with ``math.ceil`` (after rounding to 6 decimals to remove float noise), so a
message's size is the sum of its tensors' integer sizes and histories can carry exact bytes
(bytes = bits / 8).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch
from torch import Tensor

from .utils import FlkitError, check_choice, check_range, resolve_device

__all__ = [
    "COUNTERS", "DEFAULT_COUNTER", "FLOAT_BITS", "num_kept", "stc", "topk",
    "ErrorFeedback", "golomb_bstar", "golomb_position_bits", "exact_position_bits",
    "MessageSize", "message_size", "tensor_message_size",
    "Codec", "DenseCodec", "TopKCodec", "STCCodec", "make_codec", "traffic_table",
    "format_bytes",
]

COUNTERS = ("reference-simulator", "paper", "exact")
DEFAULT_COUNTER = "reference-simulator"
FLOAT_BITS = 32
_PHI = (1.0 + math.sqrt(5.0)) / 2.0


# --------------------------------------------------------------------------- helpers
def _check_p(p, field: str = "p") -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(float(p)):
        raise FlkitError(f"{field}={p!r} must be a number in the accepted range (0, 1]")
    check_range(field, float(p), 0.0, 1.0, low_open=True)
    return float(p)


def _ceil(x: float) -> int:
    """Ceiling robust to float noise: 100 * 0.07 = 7.000000000000001 -> 7, not 8."""
    return int(math.ceil(round(x, 6)))


def num_kept(n: int, p: float) -> int:
    """k = max(ceil(n·p), 1): entries kept by :func:`stc`/:func:`topk` in a tensor of n entries.

    (n·p is rounded to 6 decimals before the ceiling, so 100 × 0.07 keeps 7 entries.)
    Returns 0 for an empty tensor."""
    p = _check_p(p)
    if n <= 0:
        return 0
    return min(max(_ceil(n * p), 1), int(n))


def _select(x: Tensor, p: float, stacked: bool):
    """Flattened view [K, n], top-k indices and values by magnitude along dim 1."""
    p = _check_p(p)
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
    _, idx = torch.topk(flat.abs(), k, dim=1, sorted=False)   # exactly k indices, ties broken by topk
    vals = torch.gather(flat, 1, idx)
    return flat, idx, vals


def stc(x: Tensor, p: float, stacked: bool = False) -> Tensor:
    """Sparse ternary compression of one tensor (STC paper; STC-PA Algorithm 1).

    Keeps the k = max(ceil(n·p), 1) entries of largest magnitude (indices from ``torch.topk`` of
    |x|, so ties never keep more than k), sets each to ``sign(x_i)·mu`` with
    ``mu = mean |x_i|`` over the k kept entries, and zeroes the rest. The result has the shape,
    dtype and device of ``x`` and values in {-mu, 0, +mu}. An all-zero input gives all zeros (mu = 0);
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


# --------------------------------------------------------------------------- Golomb position code
def golomb_bstar(p: float) -> int:
    """Optimal Golomb–Rice parameter b* = 1 + floor(log2(ln(φ−1) / ln(1−p))) for sparsity p.

    The Golomb divisor is M = 2**b*. For p > (about) 0.62 the formula goes negative; b* is then 0
    (M = 1, a pure unary code), the smallest valid Rice parameter. At p = 1 b* = 0."""
    p = _check_p(p)
    if p >= 1.0:
        return 0
    b = 1 + math.floor(math.log2(math.log(_PHI - 1.0) / math.log1p(-p)))
    return max(int(b), 0)


def golomb_position_bits(p: float) -> float:
    """Expected bits per non-zero position: b̄_pos = b* + 1 / (1 − (1 − p)**(2**b*)).

    p = 0.1 → 4.756 (b* = 3); 0.05 → 5.786 (4); 0.01 → 8.108 (6); 0.0025 → 10.114 (8); 1 → 1."""
    p = _check_p(p)
    b = golomb_bstar(p)
    return b + 1.0 / (1.0 - (1.0 - p) ** (2 ** b))


def _positions(mask_or_positions) -> Tensor:
    if isinstance(mask_or_positions, Tensor):
        t = mask_or_positions
        if t.dtype == torch.bool or t.is_floating_point():
            return torch.nonzero(t.reshape(-1).detach().cpu()).reshape(-1)
        pos = t.reshape(-1).detach().cpu().long()
    else:
        pos = torch.as_tensor(list(mask_or_positions), dtype=torch.long).reshape(-1)
    if pos.numel() and (pos.min() < 0 or (pos[1:] <= pos[:-1]).any()):
        raise FlkitError("positions must be distinct non-negative integers in increasing order; "
                         f"got {pos.tolist()[:10]}{'...' if pos.numel() > 10 else ''}")
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
    pos = _positions(mask_or_positions)
    if pos.numel() == 0:
        return 0
    gaps = torch.diff(pos, prepend=torch.tensor([-1], dtype=torch.long))
    m = 2 ** b
    return int(((gaps - 1) // m).sum().item()) + int(pos.numel()) * (1 + b)


# --------------------------------------------------------------------------- message sizes
@dataclass(frozen=True)
class MessageSize:
    """Size of one tensor's message. ``bits`` is an exact integer; ``expected_bits`` the formula's
    unrounded value (equal to ``bits`` for dense and exact counting)."""
    kind: str            # "dense" | "topk" | "stc"
    counter: str         # "fp32" for dense, else one of COUNTERS
    n: int               # entries of the tensor
    k: int               # non-zeros sent (n for dense)
    bits: int
    expected_bits: float

    @property
    def bytes(self) -> float:
        return self.bits / 8


_KINDS = ("dense", "topk", "stc")


def message_size(kind: str, n: int, k: int | None = None, *, p: float | None = None,
                 counter: str = DEFAULT_COUNTER, positions=None) -> MessageSize:
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
            raise FlkitError("message_size needs k (non-zeros) or p (sparsity rate) for "
                             f"kind={kind!r}")
        k = num_kept(n, p)
    if isinstance(k, bool) or not isinstance(k, int):
        raise FlkitError(f"k={k!r} must be an integer")
    check_range("k", k, 0, n)
    if p is None:
        p = k / n if n else 1.0
    p = _check_p(p)
    value_bits = 1 if kind == "stc" else FLOAT_BITS          # sign bit vs. float32 value
    mu_bits = FLOAT_BITS if kind == "stc" else 0
    if counter == "reference-simulator":
        if k == 0:
            return MessageSize(kind, counter, n, 0, 0, 0.0)
        q = (k + 1) / (n + 1)
        expected = k * (golomb_position_bits(q) + 1 + value_bits)
        return MessageSize(kind, counter, n, k, _ceil(expected), expected)
    if counter == "paper":
        expected = k * (golomb_position_bits(p) + value_bits) + mu_bits
        return MessageSize(kind, counter, n, k, _ceil(expected), expected)
    # exact
    if positions is None:
        raise FlkitError("counter='exact' needs the non-zero positions (positions=mask or indices)")
    pos = _positions(positions)
    if pos.numel() != k:
        raise FlkitError(f"counter='exact': got {pos.numel()} positions but k={k}")
    bits = exact_position_bits(pos, p) + k * value_bits + mu_bits
    return MessageSize(kind, counter, n, k, bits, float(bits))


def tensor_message_size(kind: str, tensor: Tensor, p: float | None = None,
                        counter: str = DEFAULT_COUNTER) -> MessageSize:
    """:func:`message_size` of an already compressed tensor (k = its number of non-zeros)."""
    n = tensor.numel()
    if kind == "dense":
        return message_size("dense", n)
    mask = tensor.reshape(-1) != 0
    k = int(mask.sum().item())
    return message_size(kind, n, k, p=p, counter=counter,
                        positions=mask if counter == "exact" else None)


# --------------------------------------------------------------------------- codecs
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
        """Integer bits of each row of a decoded [K, ...] tensor."""
        return [self._size(dec[i]).bits for i in range(dec.shape[0])]

    # -- public
    def encode(self, tensors: Mapping[str, Tensor], stacked: bool = False):
        if not isinstance(tensors, Mapping):
            raise FlkitError(f"{self.name}.encode expects a dict name -> Tensor, "
                             f"got {type(tensors).__name__}")
        decoded: dict[str, Tensor] = {}
        K = None
        if stacked:
            for name, t in tensors.items():
                if t.dim() < 1:
                    raise FlkitError(f"stacked=True: tensor {name!r} is 0-d; expected [K, ...]")
                if K is None:
                    K = t.shape[0]
                elif t.shape[0] != K:
                    raise FlkitError(f"stacked=True: tensor {name!r} has {t.shape[0]} rows, "
                                     f"others have {K}")
            bits = [0] * (K or 0)
        else:
            bits = 0
        for name, t in tensors.items():
            if not isinstance(t, Tensor):
                raise FlkitError(f"tensor {name!r} is a {type(t).__name__}, not a torch.Tensor")
            rows = t if stacked else t.unsqueeze(0)
            if not t.is_floating_point():
                dec = rows.clone()
                per_row = [rows[0].numel() * rows.element_size() * 8] * rows.shape[0]
            else:
                dec = self._compress(rows)
                per_row = self._row_bits(dec)
            decoded[name] = dec if stacked else dec[0]
            if stacked:
                bits = [b + r for b, r in zip(bits, per_row)]
            else:
                bits += per_row[0]
        return decoded, bits

    def sizes(self, decoded: Mapping[str, Tensor]) -> dict[str, MessageSize]:
        """Per-tensor :class:`MessageSize` of an (unstacked) decoded message."""
        return {name: self._size(t) for name, t in decoded.items() if t.is_floating_point()}

    def expected_bits(self, shapes) -> int:
        """Size of a message for tensors of these shapes with the nominal k per tensor
        (``shapes``: dict name -> shape, list of shapes, or an nn.Module)."""
        total = 0
        for shape in _shape_list(shapes):
            n = math.prod(shape)
            total += self._nominal_size(n).bits
        return total

    def _nominal_size(self, n: int) -> MessageSize:
        return message_size("dense", n)


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


class _SparseCodec(Codec):
    def __init__(self, p: float, counter: str = DEFAULT_COUNTER):
        self.p = _check_p(p)
        check_choice("counter", counter, COUNTERS)
        self.counter = counter

    def _size(self, row):
        return tensor_message_size(self.kind, row, self.p, self.counter)

    def _row_bits(self, dec):
        if self.counter == "exact":
            return super()._row_bits(dec)
        n = dec[0].numel()
        counts = (dec.reshape(dec.shape[0], -1) != 0).sum(dim=1).tolist()   # one device sync
        return [message_size(self.kind, n, int(k), p=self.p, counter=self.counter).bits
                for k in counts]

    def _nominal_size(self, n):
        if self.counter == "exact":
            raise FlkitError("counter='exact' counts actual messages (encode); sizes from shapes "
                             "need counter='paper' or 'reference-simulator'")
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
        return (f"top-k per tensor, p={self.p:g}, k=max(ceil(n*p),1), float32 values + Golomb "
                f"positions, counter={self.counter}")

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
        return (f"sparse ternary compression per tensor, p={self.p:g}, k=max(ceil(n*p),1), "
                f"values ±mu + Golomb positions, counter={self.counter}")

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


# --------------------------------------------------------------------------- error feedback
class ErrorFeedback:
    """Error-feedback (residual) accumulator, one residual per sender key.

    ``step(key, g, compress_fn)`` does, tensor by tensor, ``a = g + e[key]; t = C(a);
    e[key] = a − t`` and returns ``t``. A key seen for the first time starts with e = 0; a key not
    stepped in a round keeps its residual unchanged (clients skipped in a round, STC paper). Use any
    hashable key: client ids on the clients, ``"server"`` for the downlink.

    ``compress_fn``: a :class:`Codec` (its bits are stored in ``last_bits``) or a callable mapping
    the dict ``a`` to the transmitted dict (or to ``(transmitted, bits)``), e.g.
    ``lambda d: {n: stc(x, 0.1) for n, x in d.items()}``.

    ``device``: where residuals are stored ("cpu" by default: 100 clients × VGG11* is 350 MB of
    float32); the arithmetic runs on ``g``'s device and the result stays there.
    ``dtype``: storage dtype (None keeps ``g``'s dtype; ``torch.float16`` halves memory but then
    conservation Σ transmitted + residual = Σ inputs holds only to float16 precision).

    ``step_stacked(keys, g, compress_fn)`` does the same for ``g`` = dict of ``[K, ...]`` tensors,
    row i belonging to ``keys[i]``; ``compress_fn`` then receives stacked tensors (a Codec is called
    with ``stacked=True``; ``last_bits`` becomes a list of K ints)."""

    def __init__(self, device: str | torch.device = "cpu", dtype: torch.dtype | None = None):
        self.device = resolve_device(device)
        self.dtype = dtype
        self._res: dict = {}
        self.last_bits = None

    # -- inspection
    def keys(self):
        return list(self._res.keys())

    def __contains__(self, key) -> bool:
        return key in self._res

    def residual(self, key) -> dict[str, Tensor] | None:
        """The stored residual of ``key`` (None if it never stepped)."""
        return self._res.get(key)

    def reset(self, key=None) -> None:
        """Forget one key's residual, or all of them."""
        if key is None:
            self._res.clear()
        else:
            self._res.pop(key, None)

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for r in self._res.values() for t in r.values())

    # -- core
    def _store(self, t: Tensor) -> Tensor:
        return t.detach().to(device=self.device, dtype=self.dtype or t.dtype).clone()

    def _apply(self, compress_fn, a: dict, stacked: bool):
        if isinstance(compress_fn, Codec):
            out, bits = compress_fn.encode(a, stacked=stacked)
        elif callable(compress_fn):
            out = compress_fn(a)
            bits = None
            if isinstance(out, tuple) and len(out) == 2:
                out, bits = out
        else:
            raise FlkitError(f"compress_fn must be a Codec or a callable, got "
                             f"{type(compress_fn).__name__}")
        if not isinstance(out, Mapping) or set(out) != set(a):
            raise FlkitError("compress_fn must return a dict with the same keys as its input "
                             f"({sorted(a)[:5]}...)")
        self.last_bits = bits
        return out

    def step(self, key, g: Mapping[str, Tensor], compress_fn) -> dict[str, Tensor]:
        """Accumulate, compress and update the residual of ``key``; return what is transmitted."""
        prev = self._res.get(key)
        _check_residual_keys(key, prev, g)
        a = {n: (x + prev[n].to(device=x.device, dtype=x.dtype)) if prev is not None else x.clone()
             for n, x in g.items()}
        t = self._apply(compress_fn, a, stacked=False)
        self._res[key] = {n: self._store(a[n] - t[n]) for n in a}
        return t

    def step_stacked(self, keys: Sequence, g: Mapping[str, Tensor], compress_fn) -> dict[str, Tensor]:
        """``step`` for K senders at once: ``g[name]`` is ``[K, ...]``, row i belongs to keys[i]."""
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise FlkitError(f"keys must be distinct, got {keys}")
        for n, x in g.items():
            if x.dim() < 1 or x.shape[0] != len(keys):
                raise FlkitError(f"tensor {n!r} has shape {tuple(x.shape)}; expected "
                                 f"[{len(keys)}, ...] (one row per key)")
        a = {}
        for n, x in g.items():
            rows = []
            for i, key in enumerate(keys):
                prev = self._res.get(key)
                _check_residual_keys(key, prev, g)
                rows.append(prev[n].to(device=x.device, dtype=x.dtype) if prev is not None
                            else torch.zeros_like(x[i]))
            a[n] = x + torch.stack(rows)
        t = self._apply(compress_fn, a, stacked=True)
        for i, key in enumerate(keys):
            self._res[key] = {n: self._store(a[n][i] - t[n][i]) for n in a}
        return t


def _check_residual_keys(key, prev, g):
    if prev is not None and set(prev) != set(g):
        raise FlkitError(f"tensor names for key {key!r} changed: stored {sorted(prev)}, "
                         f"got {sorted(g)}")


# --------------------------------------------------------------------------- traffic table
def _shape_list(model_or_param_shapes) -> list[tuple]:
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


def format_bytes(nbytes: float) -> str:
    """3461928 -> '3.46 MB' (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def traffic_table(model_or_param_shapes, p: float = 0.1, counter: str = DEFAULT_COUNTER,
                  methods: Iterable[str] = ("FedAvg", "STC")):
    """Per-round traffic per participating client, up and down, and the factor vs. FedAvg.

    ``model_or_param_shapes``: an ``nn.Module`` (all its parameters), a dict name -> shape/tensor,
    or a list of shapes. Each tensor is a separate message part (per-tensor k and μ).
    ``methods``: any of "FedAvg" (dense float32 both ways), "STC" (STC up and down, same message
    size as STC-PA), "Top-k" (top-k up and down). STC/top-k sizes use the nominal
    k = max(ceil(n·p), 1) per tensor (so ``counter`` is "reference-simulator" or "paper"; the
    "exact" counter needs actual messages). The downlink counts only the current round's update (a client
    that skipped rounds would also fetch the missed ones). Returns a pandas DataFrame with columns
    method, counter, p, params, up_bits, down_bits, up_bytes, down_bytes, up, down, factor.
    """
    p = _check_p(p)
    check_choice("counter", counter, ("reference-simulator", "paper"))
    shapes = _shape_list(model_or_param_shapes)
    d = sum(math.prod(s) for s in shapes)
    dense_bits = DenseCodec().expected_bits(shapes)
    codecs = {"FedAvg": DenseCodec(), "STC": STCCodec(p, counter), "Top-k": TopKCodec(p, counter)}
    rows = []
    for m in methods:
        check_choice("method", m, tuple(codecs))
        c = codecs[m]
        bits = c.expected_bits(shapes)
        rows.append(dict(method=m, counter="fp32" if m == "FedAvg" else counter,
                         p=None if m == "FedAvg" else p, params=d, up_bits=bits, down_bits=bits,
                         up_bytes=bits / 8, down_bytes=bits / 8, up=format_bytes(bits / 8),
                         down=format_bytes(bits / 8), factor=dense_bits / bits if bits else math.inf))
    import pandas as pd
    return pd.DataFrame(rows)
