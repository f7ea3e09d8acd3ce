"""Notebook 04's interactive demo: a keep-ratio slider and an aggregation-rule toggle above one
picture (the server's pruning at p_r, read from a precomputed grid, and a toy vote under the rule),
as a :class:`flkit.live.Demo`."""

from __future__ import annotations

from flkit import live

from . import study as S
from .figures import pruning_demo, votes_demo


def demo_widget(P, seed: int = 0, precompute: bool = True) -> live.Demo:
    """First drawn at the preset's keep_ratio and the arctanh rule; the slider steps through the
    precomputed grid ``demo_ratios`` (plus keep_ratio); with ``precompute`` every setting is
    drawn now."""
    import ipywidgets as W

    ratios = sorted({*map(float, P["demo_ratios"]), float(P["keep_ratio"])})
    grid = S.pruning_grid(P, ratios=ratios, seed=seed)
    signs, weights = S.toy_votes(seed=seed)

    def draw(p_r, rule):
        return [
            pruning_demo(grid, p_r),
            votes_demo(signs, S.aggregate_votes(signs, weights, rule, P["eps"]), rule),
        ]

    p_r = W.SelectionSlider(
        options=ratios,
        value=float(P["keep_ratio"]),
        description="p_r",
        continuous_update=False,
    )
    rule = W.ToggleButtons(options=["arctanh", "mean"], value="arctanh", description="rule")
    demo = live.Demo(draw, p_r=p_r, rule=rule)
    if precompute:
        demo.precompute()
    return demo
