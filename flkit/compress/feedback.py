"""Error feedback: the residual each sender keeps of what its compressor dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..utils import FlkitError, resolve_device
from .codecs import Codec

__all__ = ["ErrorFeedback"]


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
            raise FlkitError(
                f"compress_fn must be a Codec or a callable, got {type(compress_fn).__name__}"
            )
        if not isinstance(out, Mapping) or set(out) != set(a):
            raise FlkitError(
                "compress_fn must return a dict with the same keys as its input "
                f"({sorted(a)[:5]}...)"
            )
        self.last_bits = bits
        return out

    def step(self, key, g: Mapping[str, Tensor], compress_fn) -> dict[str, Tensor]:
        """Accumulate, compress and update the residual of ``key``; return what is transmitted."""
        prev = self._res.get(key)
        _check_residual_keys(key, prev, g)
        a = {
            n: (x + prev[n].to(device=x.device, dtype=x.dtype)) if prev is not None else x.clone()
            for n, x in g.items()
        }
        t = self._apply(compress_fn, a, stacked=False)
        self._res[key] = {n: self._store(a[n] - t[n]) for n in a}
        return t

    def step_stacked(
        self, keys: Sequence, g: Mapping[str, Tensor], compress_fn
    ) -> dict[str, Tensor]:
        """``step`` for K senders at once: ``g[name]`` is ``[K, ...]``, row i belongs to keys[i]."""
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise FlkitError(f"keys must be distinct, got {keys}")
        for n, x in g.items():
            if x.dim() < 1 or x.shape[0] != len(keys):
                raise FlkitError(
                    f"tensor {n!r} has shape {tuple(x.shape)}; expected "
                    f"[{len(keys)}, ...] (one row per key)"
                )
        a = {}
        for n, x in g.items():
            rows = []
            for i, key in enumerate(keys):
                prev = self._res.get(key)
                _check_residual_keys(key, prev, g)
                rows.append(
                    prev[n].to(device=x.device, dtype=x.dtype)
                    if prev is not None
                    else torch.zeros_like(x[i])
                )
            a[n] = x + torch.stack(rows)
        t = self._apply(compress_fn, a, stacked=True)
        for i, key in enumerate(keys):
            self._res[key] = {n: self._store(a[n][i] - t[n][i]) for n in a}
        return t


def _check_residual_keys(key, prev, g):
    if prev is not None and set(prev) != set(g):
        raise FlkitError(
            f"tensor names for key {key!r} changed: stored {sorted(prev)}, got {sorted(g)}"
        )
