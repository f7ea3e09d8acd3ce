"""Notebook 01's interactive demo: Fig. 1 (what the compressors keep of one update) under a slider
for p, as one :class:`flkit.live.Demo` (the static copy and the live figure are one output)."""

from __future__ import annotations

import torch

from flkit import compress, live

from .figures import fig1


def fig1_demo(
    update: torch.Tensor, p: float = 0.1, counter: str = compress.DEFAULT_COUNTER, title: str = ""
) -> live.Demo:
    """A log-scale slider for p (0.001..1) above :func:`fig1`, first drawn at ``p``."""
    import ipywidgets as W

    slider = W.FloatLogSlider(
        value=p,
        base=10,
        min=-3,
        max=0,
        step=0.05,
        description="p (kept)",
        readout_format=".3f",
        continuous_update=False,
    )
    return live.Demo(lambda p: fig1(update, float(p), counter, title), p=slider)
