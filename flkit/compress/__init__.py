"""Update compression and exact communication accounting (one module per kind: ``sparsify``
(the compressors), ``golomb`` (the position code), ``sizes`` (bits of one message under a counter),
``codecs`` (message formats: compress + count), ``feedback`` (error feedback)).

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
    bit (b̄_pos + 2 in total), μ is not counted. This reproduces the ≈47× the papers report at
    p = 0.1.
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

from .codecs import Codec, DenseCodec, STCCodec, TopKCodec, make_codec, shape_list, traffic_table
from .feedback import ErrorFeedback
from .golomb import exact_position_bits, golomb_bstar, golomb_position_bits, positions_of
from .sizes import (
    COUNTERS,
    DEFAULT_COUNTER,
    FLOAT_BITS,
    MessageSize,
    format_bytes,
    message_size,
    tensor_message_size,
)
from .sparsify import check_p, num_kept, stc, topk

__all__ = [
    "COUNTERS",
    "DEFAULT_COUNTER",
    "FLOAT_BITS",
    "num_kept",
    "stc",
    "topk",
    "check_p",
    "ErrorFeedback",
    "golomb_bstar",
    "golomb_position_bits",
    "exact_position_bits",
    "positions_of",
    "MessageSize",
    "message_size",
    "tensor_message_size",
    "Codec",
    "DenseCodec",
    "TopKCodec",
    "STCCodec",
    "make_codec",
    "traffic_table",
    "shape_list",
    "format_bytes",
]
