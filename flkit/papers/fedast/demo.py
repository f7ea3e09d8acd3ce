"""Notebook 03's interactive demo: sliders for the number of tasks, the active requests and the
buffer size above one figure (time to target per task, staleness histogram) that a move redraws
(:class:`flkit.live.Demo`). Each setting is a short simulated FedAST run (:func:`.study.demo`),
cached on disk by the simulator and as a picture by the demo."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from flkit import live, plots
from flkit.utils import FlkitError

from . import study as S
from .figures import staleness_hist

#: The demo's first setting (the paper's R/b ratio of 4 on a small scale).
START = {"tasks": 2, "requests": 8, "buffer": 2}


def demo_figure(tasks: int, requests: int, buffer: int, seed: int = 0, num_clients: int = 100):
    """Time to target of each task (left) and the staleness histogram (right) of one run."""
    with plots.style():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.2))
        try:
            res = S.demo(tasks, requests, buffer, seed=seed, num_clients=num_clients)
        except FlkitError as e:  # more requests than clients: say so in the figure
            for a in (a1, a2):
                a.set_axis_off()
            a1.text(0, 0.5, str(e), wrap=True, fontsize=10, va="center")
            return fig
        ct = {k: (v if v is not None else np.nan) for k, v in res.completion_time.items()}
        a1.bar(
            list(ct),
            list(ct.values()),
            color=[plots.COLORS[i % len(plots.COLORS)] for i in range(len(ct))],
        )
        a1.set_ylabel("time to target")
        a1.set_title(f"all done at {np.nanmax(list(ct.values())):.0f}")
        staleness_hist({f"R={requests}, b={buffer}": res}, ax=a2)
    return fig


def controls(P) -> dict:
    """The demo's sliders: 1..demo_max_tasks tasks; requests and buffer sizes from short doubling
    lists (every setting is precomputed, so each list is kept short), each holding :data:`START`
    and otherwise bounded by demo_max_requests / 2 and demo_max_buffer."""
    import ipywidgets as W

    top_r = max(START["requests"], P["demo_max_requests"] // 2)
    top_b = max(START["buffer"], P["demo_max_buffer"])
    return {
        "tasks": W.IntSlider(
            value=START["tasks"],
            min=1,
            max=max(START["tasks"], P["demo_max_tasks"]),
            description="tasks",
            continuous_update=False,
        ),
        "requests": W.SelectionSlider(
            options=[r for r in (2, 4, 8, 16) if r <= top_r],
            value=START["requests"],
            description="requests",
            continuous_update=False,
        ),
        "buffer": W.SelectionSlider(
            options=[b for b in (1, 2, 4) if b <= top_b],
            value=START["buffer"],
            description="buffer",
            continuous_update=False,
        ),
    }


def demo_widget(P, seed: int = 0, precompute: bool = True) -> live.Demo:
    """First drawn at :data:`START`; with ``precompute`` every setting is simulated now (each
    run is also cached on disk, so a second session starts at once)."""
    demo = live.Demo(lambda **v: demo_figure(**v, seed=seed), **controls(P))
    if precompute:
        demo.precompute()
    return demo
