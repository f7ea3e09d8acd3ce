"""Masks for unstructured pruning: which tensors are prunable, ERK densities and random ERK masks,
global and layer-wise magnitude masks, prune-and-regrow, and the information loss of a mask.

Conventions (shared by every function here):
- a *mask* is ``{name: bool Tensor}``, True = weight kept; names not in the mask are never pruned;
- *sparsity* = fraction of pruned (False) entries among the masked tensors,
  *density* = 1 - sparsity;
- ``stacked=True`` means every tensor has a leading client dimension ``[K, ...]`` and each client
  gets its own mask (the same rule applied row by row).
Exact counts are the point: a global magnitude mask at sparsity s prunes exactly round(s * total)
entries, ties being broken by position (see :func:`global_magnitude_mask`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor, nn

from ..utils import FlkitError, check_range

Mask = dict[str, Tensor]

# shortcut / downsample 1x1 convs of residual networks stay dense (as the FedDIP code does)
DEFAULT_EXCLUDE = ("shortcut", "downsample")


def prunable_names(
    model_or_state,
    include: Iterable[str] | str | None = None,
    exclude: Iterable[str] = DEFAULT_EXCLUDE,
) -> list[str]:
    """Names of the prunable weight tensors: conv and linear weights (floating, >= 2 dims, name
    ending in 'weight'), minus names containing an ``exclude`` substring; biases and normalisation
    parameters are never prunable.

    include: a regular expression or a list of them; when given only names matching one (re.search)
    are kept. A selection that matches nothing raises FlkitError listing the candidates."""
    if isinstance(model_or_state, nn.Module):
        items = [(n, p) for n, p in model_or_state.named_parameters()]
    else:
        items = list(model_or_state.items())
    cands = [
        n
        for n, v in items
        if v.is_floating_point()
        and v.dim() >= 2
        and n.endswith("weight")
        and not any(e in n for e in exclude)
    ]
    if include is None:
        if not cands:
            raise FlkitError(
                "the model has no prunable tensor (conv/linear weight); "
                f"tensors: {[n for n, _ in items]}"
            )
        return cands
    pats = [include] if isinstance(include, str) else list(include)
    chosen = [n for n in cands if any(re.search(p, n) for p in pats)]
    if not chosen:
        raise FlkitError(
            f"prunable selection {pats!r} matches no layer; accepted: patterns matching "
            f"some of {cands}"
        )
    return chosen


def check_sparsity(name: str, s) -> float:
    """A sparsity in [0, 1) (1 would prune everything)."""
    if isinstance(s, bool) or not isinstance(s, (int, float)) or math.isnan(float(s)):
        raise FlkitError(f"{name}={s!r} must be a number in the accepted range [0, 1)")
    check_range(name, float(s), 0.0, 1.0, high_open=True)
    return float(s)


def check_mask(tensors: Mapping[str, Tensor], mask: Mapping[str, Tensor]) -> None:
    """FlkitError unless every mask entry names a tensor of broadcast-compatible shape."""
    for n, m in mask.items():
        if n not in tensors:
            raise FlkitError(f"mask entry {n!r} names no tensor; accepted names: {sorted(tensors)}")
        t = tensors[n]
        if tuple(m.shape) != tuple(t.shape) and tuple(m.shape) != tuple(t.shape[1:]):
            raise FlkitError(
                f"mask[{n!r}] has shape {tuple(m.shape)} but its tensor has shape "
                f"{tuple(t.shape)}; accepted: the tensor's shape (or without the client dim)"
            )


def apply_mask(tensors: Mapping[str, Tensor], mask: Mapping[str, Tensor] | None) -> dict:
    """w * m for the masked tensors, the others unchanged (a new dict)."""
    if not mask:
        return dict(tensors)
    check_mask(tensors, mask)
    return {n: (v * mask[n].to(v.dtype) if n in mask else v) for n, v in tensors.items()}


def mask_sparsity(mask: Mapping[str, Tensor]) -> float:
    """Fraction of pruned entries over all masked tensors."""
    total = sum(m.numel() for m in mask.values())
    kept = sum(int(m.sum()) for m in mask.values())
    return 1.0 - kept / total


def zero_fraction(tensors: Mapping[str, Tensor], names: Iterable[str], stacked: bool = False):
    """Fraction of exact zeros over the named tensors (per client when stacked: a [K] tensor)."""
    names = list(names)
    if stacked:
        zeros = sum((tensors[n] == 0).flatten(1).sum(1) for n in names)
        return zeros.double() / sum(tensors[n][0].numel() for n in names)
    return sum(int((tensors[n] == 0).sum()) for n in names) / sum(tensors[n].numel() for n in names)


# --------------------------------------------------------------------------- ERK
def erk_densities(
    shapes: Mapping[str, tuple], density: float, power: float = 1.0
) -> dict[str, float]:
    """Erdős–Rényi–Kernel layer densities with total kept fraction ``density`` (= 1 - s0).

    Layer l of shape (d_1..d_k) gets density eps * r_l with r_l = (sum d_i / prod d_i) ** power and
    eps solved so that sum_l density_l * n_l = density * sum_l n_l. When the largest eps * r_l
    exceeds 1 that layer is marked dense (density 1) and eps is solved again over the rest (the
    iterative solve of RigL / the FedDIP code)."""
    check_range("density", density, 0.0, 1.0, low_open=True)
    check_range("power", power, 0.0, low_open=True)
    if not shapes:
        raise FlkitError("erk_densities needs at least one shape")
    n = {k: math.prod(s) for k, s in shapes.items()}
    raw = {k: (sum(s) / math.prod(s)) ** power for k, s in shapes.items()}
    total = sum(n.values())
    dense: set[str] = set()
    while True:
        rest = [k for k in shapes if k not in dense]
        if not rest:
            eps = 0.0
            break
        budget = density * total - sum(n[k] for k in dense)
        eps = budget / sum(raw[k] * n[k] for k in rest)
        top = max(raw[k] for k in rest)
        if eps * top > 1.0 + 1e-12:
            dense |= {k for k in rest if raw[k] == top}
            continue
        break
    return {k: 1.0 if k in dense else eps * raw[k] for k in shapes}


def keep_counts(
    shapes: Mapping[str, tuple], densities: Mapping[str, float], total: int | None = None
) -> dict[str, int]:
    """floor(density_l * n_l) entries kept per layer (what a random ERK mask keeps). With
    ``total``, the entries the floors leave out go one each to the layers with the largest
    fractional parts (ties: first layer first), so that exactly ``total`` are kept."""
    size = {k: math.prod(s) for k, s in shapes.items()}
    exact = {k: densities[k] * size[k] for k in shapes}
    out = {k: int(math.floor(exact[k] + 1e-9)) for k in shapes}
    if total is None:
        return out
    if (
        isinstance(total, bool)
        or not isinstance(total, int)
        or not 0 <= total <= sum(size.values())
    ):
        raise FlkitError(f"total={total!r} must be an integer in [0, {sum(size.values())}]")
    left = total - sum(out.values())
    order = sorted(shapes, key=lambda k: -(exact[k] - out[k]))
    while left:
        step = 1 if left > 0 else -1
        moved = False
        for k in order if step > 0 else order[::-1]:
            if left and 0 <= out[k] + step <= size[k]:
                out[k] += step
                left -= step
                moved = True
        if not moved:
            break
    return out


def erk_mask(
    shapes: Mapping[str, tuple],
    density: float,
    generator: torch.Generator,
    power: float = 1.0,
    device="cpu",
    counts: Mapping[str, int] | None = None,
) -> Mask:
    """A random mask with exactly keep_counts(erk_densities(...)) entries kept per layer (or the
    given per-layer ``counts``), at uniformly random positions drawn from ``generator``."""
    if counts is None:
        counts = keep_counts(shapes, erk_densities(shapes, density, power))
    out = {}
    for k, s in shapes.items():
        n = math.prod(s)
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.randperm(n, generator=generator)[: counts[k]]] = True
        out[k] = m.view(*s).to(device)
    return out


# --------------------------------------------------------------------------- magnitude masks
def _keep_smallest_out(scores: Tensor, n_prune: int) -> Tensor:
    """Bool mask over the last dim of ``scores`` ([..., N]) pruning the n_prune smallest entries;
    ties are broken by position (the earlier entry is pruned first: a stable sort)."""
    order = torch.sort(scores, dim=-1, stable=True).indices[..., :n_prune]
    keep = torch.ones_like(scores, dtype=torch.bool)
    return keep.scatter(-1, order, False)


def global_magnitude_mask(
    tensors: Mapping[str, Tensor],
    sparsity: float,
    stacked: bool = False,
    scores: Mapping[str, Tensor] | None = None,
) -> Mask:
    """Global unstructured magnitude pruning: the round(sparsity * total) entries of smallest |w|
    over all given tensors together are pruned (False).

    Ties: entries are ranked by |w| with a stable sort over the tensors concatenated in dict order,
    flattened row-major, so among equal magnitudes the earlier position is pruned first; the count
    is always exact. ``scores`` replaces |w| as the ranking (e.g. SNIP scores, squared gradients).
    stacked=True: tensors are [K, ...] and every client gets its own mask."""
    s = check_sparsity("sparsity", sparsity)
    if not tensors:
        raise FlkitError("global_magnitude_mask needs at least one tensor")
    src = scores if scores is not None else {n: t.abs() for n, t in tensors.items()}
    names = list(tensors)
    lead = 1 if stacked else 0
    flat = torch.cat([src[n].reshape(*src[n].shape[:lead], -1).float() for n in names], dim=-1)
    total = flat.shape[-1]
    keep = _keep_smallest_out(flat, int(round(s * total)))
    out, pos = {}, 0
    for n in names:
        t = tensors[n]
        size = t[0].numel() if stacked else t.numel()
        out[n] = keep[..., pos : pos + size].reshape(t.shape)
        pos += size
    return out


def layerwise_magnitude_mask(
    tensors: Mapping[str, Tensor],
    sparsity: float | None = None,
    keep: Mapping[str, int] | None = None,
    stacked: bool = False,
) -> Mask:
    """Magnitude pruning inside each tensor: either the same ``sparsity`` per layer (round(s * n_l)
    pruned) or exactly ``keep[name]`` entries kept (e.g. back to ERK counts). Ties as in
    :func:`global_magnitude_mask`."""
    if (sparsity is None) == (keep is None):
        raise FlkitError("give exactly one of sparsity= and keep= to layerwise_magnitude_mask")
    if sparsity is not None:
        check_sparsity("sparsity", sparsity)
    out = {}
    for n, t in tensors.items():
        flat = t.abs().reshape(t.shape[0], -1) if stacked else t.abs().reshape(-1)
        size = flat.shape[-1]
        if keep is not None:
            k = keep[n]
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= size:
                raise FlkitError(f"keep[{n!r}]={k!r} must be an integer in [0, {size}]")
            n_prune = size - k
        else:
            n_prune = int(round(sparsity * size))
        out[n] = _keep_smallest_out(flat.float(), n_prune).reshape(t.shape)
    return out


def prune_and_regrow(
    mask: Mapping[str, Tensor],
    magnitude: Mapping[str, Tensor],
    grow_score: Mapping[str, Tensor],
    fraction: float,
) -> tuple[Mask, dict[str, int]]:
    """One dynamic-sparse-training reconfiguration, per layer (FedDST / RigL style).

    In each layer, k = floor(fraction * active) active entries with the smallest |magnitude| are
    pruned and k entries that were inactive before this step, with the largest grow_score, are
    regrown; the layer's count of active entries is unchanged. Returns (new mask, {name: k})."""
    check_range("fraction", fraction, 0.0, 1.0)
    new, moved = {}, {}
    for n, m in mask.items():
        flat = m.reshape(-1)
        active = int(flat.sum())
        k = int(math.floor(fraction * active))
        inactive = int(flat.numel() - active)
        k = min(k, inactive)
        mag = magnitude[n].abs().reshape(-1).float().masked_fill(~flat, float("inf"))
        drop = torch.sort(mag, stable=True).indices[:k]
        score = grow_score[n].reshape(-1).float().masked_fill(flat, float("-inf"))
        grow = torch.sort(score, descending=True, stable=True).indices[:k]
        out = flat.clone()
        out[drop] = False
        out[grow] = True
        new[n], moved[n] = out.view_as(m), k
    return new, moved


def information_loss(tensors: Mapping[str, Tensor], mask: Mapping[str, Tensor]) -> float:
    """delta = ||w - w * m||^2 / ||w||^2 over the masked tensors (share of the squared norm that
    pruning removes)."""
    check_mask(tensors, mask)
    removed = sum(float((tensors[n].double() * (~mask[n]).double()).pow(2).sum()) for n in mask)
    total = sum(float(tensors[n].double().pow(2).sum()) for n in mask)
    return removed / total if total > 0 else 0.0
