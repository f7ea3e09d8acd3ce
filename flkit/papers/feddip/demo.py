"""Notebook 02's interactive demo: sliders for s0, s_p and lambda_max above :func:`demo_figure`, as
one :class:`flkit.workbook.widgets.Demo` (the figure is a PNG in an Image widget; papermill never
has to emulate an Output widget, which once left a cell waiting forever)."""

from __future__ import annotations

from flkit.workbook import widgets

from .figures import demo_figure


def demo_widget(
    demo, pruned_accuracy, rounds, s0, s_p, lambda_max, segments, variant="code", every=1
) -> widgets.Demo:
    """First drawn at (s0, s_p, lambda_max); s0 can never exceed s_p: its slider stops at s_p.
    The sparsity schedule is the runs' (mask updates every `every` rounds, the ramp ending on
    s_p)."""
    import ipywidgets

    sp = ipywidgets.FloatSlider(
        value=s_p, min=0.05, max=0.99, step=0.01, description="s_p", continuous_update=False
    )
    s0w = ipywidgets.FloatSlider(
        value=min(s0, s_p), min=0.0, max=s_p, step=0.05, description="s0", continuous_update=False
    )
    lam = ipywidgets.FloatLogSlider(
        value=lambda_max,
        base=10,
        min=-5,
        max=-1,
        description="lambda_max",
        continuous_update=False,
    )

    def cap(controls):
        controls["s0"].max = controls["s_p"].value

    def draw(s0, s_p, lambda_max):
        return demo_figure(
            demo,
            pruned_accuracy,
            rounds,
            min(s0, s_p),
            s_p,
            lambda_max,
            segments,
            variant,
            every=every,
        )

    for w in (sp, s0w, lam):
        w.style.description_width = "initial"  # "lambda_max" in full, not "lambda_..."
    return widgets.Demo(draw, constrain=cap, s0=s0w, s_p=sp, lambda_max=lam)
