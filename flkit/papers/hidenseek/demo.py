"""Notebook 04's interactive demo: a keep-ratio slider and an aggregation-rule toggle above one
picture (the server's pruning at p_r, read from a precomputed grid, and a toy vote under the rule),
as a :class:`flkit.workbook.widgets.Demo`, with what it draws: the pruning grid, a toy set of votes
and the two aggregation rules."""

from __future__ import annotations

import pandas as pd
import torch

from flkit import models
from flkit.methods.hidenseek import arctanh_aggregate
from flkit.prune import default_prunable, structural_masks, synflow_group_mask, weight_layers
from flkit.utils import check_choice, derive_seed, generator
from flkit.workbook import widgets

from .figures import pruning_demo, votes_demo


def demo_widget(preset, seed: int = 0, precompute: bool = True) -> widgets.Demo:
    """First drawn at the preset's keep_ratio and the arctanh rule; the slider steps through the
    precomputed grid ``demo_ratios`` (plus keep_ratio); with ``precompute`` every setting is
    drawn now."""
    import ipywidgets

    ratios = sorted({*map(float, preset["demo_ratios"]), float(preset["keep_ratio"])})
    grid = pruning_grid(preset, ratios=ratios, seed=seed)
    signs, weights = toy_votes(seed=seed)

    def draw(p_r, rule):
        return [
            pruning_demo(grid, p_r),
            votes_demo(signs, aggregate_votes(signs, weights, rule, preset["eps"]), rule),
        ]

    p_r = ipywidgets.SelectionSlider(
        options=ratios,
        value=float(preset["keep_ratio"]),
        description="p_r",
        continuous_update=False,
    )
    rule = ipywidgets.ToggleButtons(
        options=["arctanh", "mean"], value="arctanh", description="rule"
    )
    demo = widgets.Demo(draw, p_r=p_r, rule=rule)
    if precompute:
        demo.precompute()
    return demo


def pruning_grid(preset, ratios=None, seed: int = 0, num_classes: int = 10) -> pd.DataFrame:
    """Server pruning of the preset's VGG9 at several keep ratios: channels kept per pruned layer
    and the realised weight fraction (precomputed so the interactive slider only looks them up)."""
    torch.manual_seed(derive_seed(seed, "init"))
    model = models.build("vgg9", num_classes=num_classes, width=float(preset["vgg_width"]))
    layers = default_prunable(model)
    mods = weight_layers(model)
    rows = []
    for r in ratios or preset["demo_ratios"]:
        keep = synflow_group_mask(
            model, (1, 28, 28), float(r), layers, int(preset["demo_iterations"])
        )
        masks = structural_masks(model, keep, (1, 28, 28))
        total = sum(mods[n].weight.numel() for n in layers)
        kept_w = sum(
            int(masks[f"{n}.weight"].sum()) if f"{n}.weight" in masks else mods[n].weight.numel()
            for n in layers
        )
        for n in layers:
            rows.append(
                {
                    "keep_ratio": float(r),
                    "layer": n,
                    "kept": int(keep[n].sum()),
                    "channels": keep[n].numel(),
                    "weight_fraction": kept_w / total,
                }
            )
    return pd.DataFrame(rows)


def toy_votes(clients: int = 5, positions: int = 12, seed: int = 0):
    """A toy set of client signs (some positions unanimous, some split) and sample counts."""
    g = generator(seed, "toy-votes")
    p = torch.linspace(0.0, 1.0, positions)
    signs = torch.where(torch.rand(clients, positions, generator=g) < p, 1.0, -1.0)
    weights = torch.randint(20, 200, (clients,), generator=g).float()
    return signs, weights


def aggregate_votes(signs, weights, rule: str = "arctanh", eps: float = 1e-6) -> torch.Tensor:
    """Server latent after one round: the arctanh aggregation, or the plain weighted mean vote."""
    check_choice("rule", rule, ("arctanh", "mean"))
    if rule == "arctanh":
        return arctanh_aggregate(signs, weights, eps)
    w = weights / weights.sum()
    return (w.view(-1, 1) * signs).sum(0)
