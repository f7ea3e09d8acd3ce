"""Data-free pruning at initialisation: SynFlow saliency (Tanaka et al. 2020) and HideNseek's
structured variant (whole output channels / nodes ranked globally, strict thresholding).

    keep = synflow_group_mask(model, (1, 28, 28), keep_ratio=0.8,
                              layers=["features.10", "features.13", "features.17", "features.20"])
    masks = structural_masks(model, keep, (1, 28, 28))   # {param name: bool tensor}

The saliency of weight theta is |dR/dtheta * theta| where R is the sum of the logits of an
all-ones input through a copy of the network with every parameter and buffer replaced by its
absolute value (the "linearised" network). Because |s * w| = |w|, the saliency of a sign equals the
ordinary SynFlow saliency of the weight: the initial signs never influence pruning.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..utils import FlkitError, check_choice, check_range

GROUP_SCORES = ("l2", "sum")


def weight_layers(model: nn.Module) -> dict[str, nn.Module]:
    """The Conv2d / Linear modules of a model by name, in definition order."""
    return {n: m for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}


def resolve_layers(model: nn.Module, layers) -> list[str]:
    """Check a selection of prunable layers (module names of Conv2d / Linear layers)."""
    known = weight_layers(model)
    if isinstance(layers, str):
        layers = [layers]
    layers = list(layers or [])
    if not layers:
        raise FlkitError(
            f"layers={layers!r} selects no prunable layer; accepted: a non-empty list of "
            f"{', '.join(known)}"
        )
    bad = [n for n in layers if n not in known]
    if bad:
        raise FlkitError(
            f"prunable layer(s) {bad} match no Conv2d/Linear layer of the model; "
            f"accepted: {', '.join(known)}"
        )
    return layers


def default_prunable(model: nn.Module) -> list[str]:
    """HideNseek's choice per architecture: the last four conv layers of a conv net (VGG9), the
    first two hidden layers of an MLP."""
    layers = weight_layers(model)
    convs = [n for n, m in layers.items() if isinstance(m, nn.Conv2d)]
    if convs:
        return convs[-4:]
    hidden = list(layers)[:-1]
    if not hidden:
        raise FlkitError(
            "the model has a single weight layer: nothing before the classifier to prune"
        )
    return hidden[:2]


def _linearised(model: nn.Module, dtype) -> nn.Module:
    net = copy.deepcopy(model).to(dtype)
    net.eval()  # BN uses its running statistics (mean 0, var 1 at init), dropout is off
    with torch.no_grad():
        for t in list(net.parameters()) + [b for b in net.buffers() if b.is_floating_point()]:
            t.abs_()
    return net


def _row_mask(keep: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return keep.view(-1, *[1] * (weight.dim() - 1)).to(weight.dtype)


def synflow_scores(
    model: nn.Module,
    input_shape,
    group_keep: dict | None = None,
    dtype=torch.float64,
    _net=None,
    _abs=None,
) -> dict[str, torch.Tensor]:
    """Per-weight saliency |dR/dw * w| of every Conv2d / Linear weight, {layer name: tensor}.

    group_keep {layer: bool[out]} zeroes removed channels / nodes first (their saliency is 0)."""
    net = _net if _net is not None else _linearised(model, dtype)
    layers = weight_layers(net)
    if _abs is None:
        _abs = {n: m.weight.detach().clone() for n, m in layers.items()}
    with torch.no_grad():
        for n, m in layers.items():
            w = _abs[n]
            if group_keep and n in group_keep:
                w = w * _row_mask(group_keep[n], w)
            m.weight.copy_(w)
    params = [m.weight for m in layers.values()]
    for p in net.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    dev = params[0].device
    with torch.enable_grad():
        r = net(torch.ones((1, *input_shape), dtype=params[0].dtype, device=dev)).sum()
        grads = torch.autograd.grad(r, params)
    return {
        n: (g * p).detach().abs()
        for (n, p), g in zip(((n, m.weight) for n, m in layers.items()), grads)
    }


def group_scores(weight: torch.Tensor, saliency: torch.Tensor, kind: str = "l2") -> torch.Tensor:
    """Score per output channel / node: ||w_i * S_i||_2 ("l2", the paper) or sum_i S_i ("sum")."""
    check_choice("group score", kind, GROUP_SCORES)
    w, s = weight.reshape(weight.shape[0], -1), saliency.reshape(saliency.shape[0], -1)
    return (w * s).norm(dim=1) if kind == "l2" else s.sum(1)


def strict_keep(scores: torch.Tensor, keep_fraction: float) -> torch.Tensor:
    """Global strict thresholding: with q = floor((1 - keep) * G), tau = the q-th smallest score and
    keep i iff score_i > tau, so every group tied with the threshold (zeros included) goes; q < 1
    keeps everything. The fraction kept can therefore end below keep_fraction."""
    g = scores.numel()
    q = math.floor((1.0 - keep_fraction) * g + 1e-9)  # 1e-9: (1 - 0.8) * 10 must give 2, not 1
    if q < 1:
        return torch.ones(g, dtype=torch.bool, device=scores.device)
    tau = torch.kthvalue(scores.flatten().cpu(), q).values.to(scores.device)
    return scores > tau


def synflow_group_mask(
    model: nn.Module,
    input_shape,
    keep_ratio: float,
    layers,
    iterations: int = 100,
    score: str = "l2",
    dtype=torch.float32,
) -> dict[str, torch.Tensor]:
    """HideNseek's server-side pruning: {layer name: bool tensor over its output channels / nodes}.

    Iteration k = 1..iterations re-scores the network with the current mask and keeps the top
    keep_ratio**(k / iterations) fraction of all groups of `layers` (ranked together, strict
    threshold). The model itself is not modified. dtype=torch.float64 guards against overflow of
    the path products in deep networks (float32 gives the same VGG9 mask, faster: the measured
    times are in benchmarks/RESULTS.md, HideNseek section)."""
    check_range("keep_ratio", keep_ratio, 0, 1, low_open=True)
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise FlkitError(f"iterations={iterations!r} must be an integer >= 1")
    check_range("iterations", iterations, 1)
    check_choice("group score", score, GROUP_SCORES)
    layers = resolve_layers(model, layers)
    net = _linearised(model, dtype)
    mods = weight_layers(net)
    absw = {n: m.weight.detach().clone() for n, m in mods.items()}
    keep = {
        n: torch.ones(mods[n].weight.shape[0], dtype=torch.bool, device=absw[n].device)
        for n in layers
    }
    sizes = [keep[n].numel() for n in layers]
    for k in range(1, iterations + 1):
        sal = synflow_scores(model, input_shape, keep, dtype, _net=net, _abs=absw)
        g = torch.cat(
            [group_scores(absw[n] * _row_mask(keep[n], absw[n]), sal[n], score) for n in layers]
        )
        new = strict_keep(g, keep_ratio ** (k / iterations)) & torch.cat([keep[n] for n in layers])
        keep = dict(zip(layers, new.split(sizes)))
    return keep


@torch.no_grad()
def structural_masks(model: nn.Module, group_keep: dict, input_shape) -> dict[str, torch.Tensor]:
    """Boolean masks {parameter name: tensor} that remove what the kept groups leave dead: the rows
    (and biases) of removed channels / nodes, the input slices of later layers that only receive
    zeros from them (found by pushing an all-ones input through the linearised, masked network),
    and the BatchNorm channels of removed conv channels. Unaffected parameters are absent."""
    net = _linearised(model, torch.float64)
    mods = dict(net.named_modules())
    for n, keep in group_keep.items():
        mods[n].weight.mul_(_row_mask(keep.to(mods[n].weight.device), mods[n].weight))
    alive_in: dict[str, torch.Tensor] = {}

    def hook(name):
        def fn(_m, inp, _out):
            x = inp[0]
            alive_in[name] = (x.abs().flatten(2).amax(2) if x.dim() > 2 else x.abs())[0] > 0

        return fn

    watched = {
        n: m
        for n, m in mods.items()
        if isinstance(m, (nn.Conv2d, nn.Linear, nn.modules.batchnorm._BatchNorm))
    }
    handles = [m.register_forward_hook(hook(n)) for n, m in watched.items()]
    try:
        dev = next(net.parameters()).device
        net(torch.ones((1, *input_shape), dtype=torch.float64, device=dev))
    finally:
        for h in handles:
            h.remove()
    out = {}
    for n, m in watched.items():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            if not bool(alive_in[n].all()) and m.weight is not None:
                out[f"{n}.weight"] = out[f"{n}.bias"] = alive_in[n].clone()
            continue
        rows = group_keep.get(n)
        rows = torch.ones(m.weight.shape[0], dtype=torch.bool) if rows is None else rows.cpu()
        cols = alive_in[n].cpu()
        if bool(rows.all()) and bool(cols.all()):
            continue
        shape = (-1, cols.numel()) + (1,) * (m.weight.dim() - 2)
        out[f"{n}.weight"] = (
            (rows.view(shape[0], 1, *shape[2:]) & cols.view(1, *shape[1:]))
            .expand(m.weight.shape)
            .clone()
            .to(m.weight.device)
        )
        if m.bias is not None and not bool(rows.all()):
            out[f"{n}.bias"] = rows.to(m.weight.device)
    return out


def weight_fraction(model: nn.Module, masks: dict, layers=None) -> float:
    """Fraction of the weights of `layers` (default: every Conv2d / Linear) that the masks keep."""
    mods = weight_layers(model)
    names = list(layers) if layers is not None else list(mods)
    total = sum(mods[n].weight.numel() for n in names)
    kept = sum(
        int(masks[f"{n}.weight"].sum()) if f"{n}.weight" in masks else mods[n].weight.numel()
        for n in names
    )
    return kept / total
