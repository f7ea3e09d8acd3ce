"""Notebook 05's interactive demo: sliders for the stale client and the staleness above one panel
(a short inversion of that client's stale update, :func:`.estimation.demo`), as a
:class:`flkit.workbook.widgets.Demo`."""

from __future__ import annotations

from flkit.workbook import widgets

from . import estimation
from .figures import demo_panel


def staleness_values(tau: int, rounds: int) -> list[int]:
    """The staleness slider's stops: 1, tau/4, tau/2, tau, 2 tau (within 1..rounds), tau kept."""
    tau = max(1, min(int(tau), rounds))
    return sorted({v for v in (1, tau // 4, tau // 2, tau, 2 * tau) if 1 <= v <= rounds} | {tau})


def demo_widget(preset, tr: estimation.Trajectory, precompute: bool = True) -> widgets.Demo:
    """First drawn for the first stale client at the preset's staleness tau; with ``precompute``
    every (client, staleness) setting is inverted now."""
    import ipywidgets

    def draw(client, staleness):
        return demo_panel(*estimation.demo(preset, tr, client, staleness))

    rounds = len(tr.models) - 1
    client = ipywidgets.IntSlider(
        value=0, min=0, max=len(tr.stale) - 1, description="client", continuous_update=False
    )
    stops = staleness_values(preset["tau"], rounds)
    staleness = ipywidgets.SelectionSlider(
        options=stops,
        value=max(1, min(int(preset["tau"]), rounds)),
        description="staleness",
        continuous_update=False,
    )
    demo = widgets.Demo(draw, client=client, staleness=staleness)
    if precompute:
        demo.precompute()
    return demo
