"""Notebook 04's interactive demo: a keep-ratio slider and an aggregation-rule toggle above one
picture (the server's pruning at p_r, read from a precomputed grid, and a toy vote under the rule),
as a :class:`flkit.workbook.widgets.Demo`."""

from __future__ import annotations

from flkit.workbook import widgets

from . import study
from .figures import pruning_demo, votes_demo


def demo_widget(preset, seed: int = 0, precompute: bool = True) -> widgets.Demo:
    """First drawn at the preset's keep_ratio and the arctanh rule; the slider steps through the
    precomputed grid ``demo_ratios`` (plus keep_ratio); with ``precompute`` every setting is
    drawn now."""
    import ipywidgets

    ratios = sorted({*map(float, preset["demo_ratios"]), float(preset["keep_ratio"])})
    grid = study.pruning_grid(preset, ratios=ratios, seed=seed)
    signs, weights = study.toy_votes(seed=seed)

    def draw(p_r, rule):
        return [
            pruning_demo(grid, p_r),
            votes_demo(signs, study.aggregate_votes(signs, weights, rule, preset["eps"]), rule),
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
