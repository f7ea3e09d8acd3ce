"""Notebook 03's interactive demo: sliders for the number of tasks, the active requests and the
buffer size above one figure (time to target per task, staleness histogram) that a move redraws
(:class:`flkit.workbook.widgets.Demo`). Each setting is a short simulated FedAST run
(:func:`run_setting`), cached on disk by the simulator and as a picture by the demo."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from flkit import asyncfl
from flkit.utils import FlkitError
from flkit.workbook import plots, widgets

from .numbers import LOAD, NUMBERS
from .panels import staleness_hist

#: The demo's first setting (the paper's R/b ratio of 4 on a small scale).
START = {"tasks": 2, "requests": 8, "buffer": 2}

#: The demo's synthetic tasks are timed like the paper's tasks, in this order.
DEMO_TIMED_LIKE = ("mnist", "fmnist", "cifar10", "shakespeare")
#: The demo's target test accuracy, samples per client and safety stop (simulated time): small
#: enough that every slider setting runs in seconds.
DEMO_TARGET, DEMO_SAMPLES, DEMO_MAX_TIME = 0.45, 64, 3000.0


def run_setting(
    n_tasks: int,
    requests: int,
    buffer: int,
    seed: int = 0,
    num_clients: int = 100,
    device="cpu",
    method: str = "fedast_s",
):
    """One setting of the demo: M synthetic tasks (logistic regression, delay ratios of
    :data:`DEMO_TIMED_LIKE` in turn) with R requests and buffer b each, on enough available
    clients for the paper's load; fast enough for a slider."""
    ratios = [NUMBERS["delay_ratios"][d] for d in DEMO_TIMED_LIKE]
    n_avail = max(n_tasks, math.ceil(n_tasks * requests / LOAD))
    if n_tasks * requests > num_clients:
        raise FlkitError(
            f"M x requests = {n_tasks * requests} is more than the {num_clients} clients can serve"
        )
    tasks = [
        dict(
            name=f"task {i + 1}",
            dataset="synthetic",
            target=DEMO_TARGET,
            requests=int(requests),
            buffer=int(buffer),
            samples_per_client=DEMO_SAMPLES,
            delay_ratio=ratios[i % len(ratios)],
        )
        for i in range(n_tasks)
    ]
    cfg = dict(
        method=method,
        tasks=tasks,
        num_clients=num_clients,
        availability=min(1.0, n_avail / num_clients),
        max_time=DEMO_MAX_TIME,
    )
    return asyncfl.run(cfg, seed=seed, device=device, progress=False)


def demo_figure(tasks: int, requests: int, buffer: int, seed: int = 0, num_clients: int = 100):
    """Time to target of each task (left) and the staleness histogram (right) of one run."""
    with plots.style():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.2))
        try:
            res = run_setting(tasks, requests, buffer, seed=seed, num_clients=num_clients)
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


def controls(preset) -> dict:
    """The demo's sliders: 1..demo_max_tasks tasks; requests and buffer sizes from short doubling
    lists (every setting is precomputed, so each list is kept short), each holding :data:`START`
    and otherwise bounded by demo_max_requests / 2 and demo_max_buffer."""
    import ipywidgets

    top_r = max(START["requests"], preset["demo_max_requests"] // 2)
    top_b = max(START["buffer"], preset["demo_max_buffer"])
    return {
        "tasks": ipywidgets.IntSlider(
            value=START["tasks"],
            min=1,
            max=max(START["tasks"], preset["demo_max_tasks"]),
            description="tasks",
            continuous_update=False,
        ),
        "requests": ipywidgets.SelectionSlider(
            options=[r for r in (2, 4, 8, 16) if r <= top_r],
            value=START["requests"],
            description="requests",
            continuous_update=False,
        ),
        "buffer": ipywidgets.SelectionSlider(
            options=[b for b in (1, 2, 4) if b <= top_b],
            value=START["buffer"],
            description="buffer",
            continuous_update=False,
        ),
    }


def demo_widget(preset, seed: int = 0, precompute: bool = True) -> widgets.Demo:
    """First drawn at :data:`START`; with ``precompute`` every setting is simulated now (each
    run is also cached on disk, so a second session starts at once)."""
    demo = widgets.Demo(lambda **v: demo_figure(**v, seed=seed), **controls(preset))
    if precompute:
        demo.precompute()
    return demo
