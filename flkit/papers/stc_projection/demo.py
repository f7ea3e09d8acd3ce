"""Notebook 01's interactive demo: Fig. 1 (what the compressors keep of one update) under a slider
for p, as one :class:`flkit.workbook.widgets.Demo` (the static copy and the live figure are one
output)."""

from __future__ import annotations

import torch

from flkit import compress
from flkit.workbook import widgets

from .figures import fig1


def fig1_demo(
    update: torch.Tensor, p: float = 0.1, counter: str = compress.DEFAULT_COUNTER, title: str = ""
) -> widgets.Demo:
    """A slider over p = 0.001, 0.003, ..., 1 (and ``p``) above :func:`fig1`, first drawn at
    ``p``."""
    import ipywidgets

    slider = ipywidgets.SelectionSlider(
        options=widgets.log_stops(p, 0.001, 1.0),
        value=float(p),
        description="p (kept)",
        continuous_update=False,
    )
    demo = widgets.Demo(lambda p: fig1(update, float(p), counter, title), p=slider)
    demo.precompute()  # seven stops: every move then only swaps the picture
    return demo
