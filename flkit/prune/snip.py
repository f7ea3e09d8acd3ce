"""SNIP connection sensitivity (Lee et al. 2019): one-shot pruning before training.

For a multiplicative mask c = 1 on each prunable weight, |dL/dc| = |w * dL/dw|; scores are
normalised by their total and the top (1 - s) fraction is kept globally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional

from .masks import Mask, global_magnitude_mask


def snip_scores(
    model: nn.Module, params: Mapping[str, Tensor], x: Tensor, y: Tensor, names: Iterable[str]
) -> dict[str, Tensor]:
    """|w * dL/dw| / sum of all scores, L = mean cross-entropy of ``model`` with ``params`` (a
    state dict) on the batch (x, y); one tensor per prunable name."""
    names = list(names)
    leaves = {n: params[n].detach().clone().requires_grad_(n in names) for n in params}
    loss = functional.cross_entropy(functional_call(model, leaves, (x,)), y)
    grads = torch.autograd.grad(loss, [leaves[n] for n in names])
    raw = {n: (g * leaves[n]).abs().detach() for n, g in zip(names, grads)}
    total = sum(float(v.sum()) for v in raw.values())
    return {n: v / total for n, v in raw.items()} if total > 0 else raw


def snip_mask(scores: Mapping[str, Tensor], sparsity: float) -> Mask:
    """Keep the largest (1 - sparsity) share of the scores globally (exact count, ties by
    position)."""
    return global_magnitude_mask(dict(scores), sparsity, scores=dict(scores))
