"""The figures of notebook 03 (FedAST), one function per figure of the paper: each lays out the
panels of ``panels.py`` on a new Figure from finished results and returns it; none re-runs
training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flkit.asyncfl import METHOD_LABELS
from flkit.workbook import plots

from . import claims
from .numbers import NUMBERS
from .panels import accuracy_curves, gain_bars, het_bars, queue_timeline, staleness_hist, sweep_plot

__all__ = [
    "QUEUE_HORIZON",
    "queue_figure",
    "sync_variants_figure",
    "gain_figure",
    "active_figure",
    "nobuffer_figure",
    "test_loss_figure",
    "heterogeneous_figure",
    "het_times_figure",
    "buffer_figure",
    "k_figure",
]

#: One request of an MNIST-timed task at normal speed takes 27 local steps x (shift 0.148 / 2 +
#: mean 0.148) = 6.0 time units on average; Fig. 1 shows the first 24 of them, a few requests per
#: client, where the interleaving of tasks is still readable.
QUEUE_HORIZON = 24 * NUMBERS["delay_multiplier"] * NUMBERS["delay_ratios"]["mnist"] * 1.5


def _targets(preset, res) -> dict:
    """{"target <task>": value} of the heterogeneous run's main targets, for ``accuracy_curves``."""
    return dict(zip([f"target {t}" for t in res.tasks], preset["het_targets_main"]))


def queue_figure(res, horizon: float = QUEUE_HORIZON):
    """Fig. 1: the client queues of the first ``horizon`` time units of a real run."""
    fig, ax = plt.subplots(figsize=(9, 4.6))
    queue_timeline(res, t_max=min(res.total_time, horizon), ax=ax, max_clients=12)
    return fig


def sync_variants_figure(preset, results: dict, seed: int):
    """Fig. 2: mean accuracy over the ``preset['fig2_M']`` identical tasks of every method of
    ``preset['fig2_methods']`` (one seed); ``results``: ``study.compare_methods``'s runs."""
    n_tasks = preset["fig2_M"]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    accuracy_curves(
        {METHOD_LABELS[m]: results[(n_tasks, m, seed)] for m in preset["fig2_methods"]},
        ax=ax,
        targets={"target": preset["target"]},
        title=f"{n_tasks} identical {preset['dataset']} tasks (seed {seed}), mean over tasks",
    )
    # under the x label, in the paper's colour: its setting differs from ours
    plots.paper_note(ax, fig2_paper_note())
    fig.tight_layout()
    return fig


def fig2_paper_note() -> str:
    """What the paper reports for Fig. 2 and the headline claim, in its own setting: its Fig. 2
    prints no values, so only its setting and the abstract's largest gain are given."""
    return (
        f"paper: Fig. 2 = {NUMBERS['fig2_tasks']} {NUMBERS['fig2_dataset']} tasks, "
        f"k {NUMBERS['sync_k']}, no values printed;\nFedAST up to "
        f"{NUMBERS['max_time_gain_vs_sync_st_pct']:.1f} % faster than Sync-ST (abstract)"
    )


def gain_figure(preset, gains: pd.DataFrame, df: pd.DataFrame):
    """Fig. 5: time to target of FedAST and Sync-ST per number of tasks, with the gain."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    gain_bars(
        gains,
        df,
        ax=ax,
        method=claims.IDENTICAL_FEDAST,
        paper_note=f"paper: up to {NUMBERS['max_time_gain_vs_sync_st_pct']} % "
        "(abstract; largest over its datasets)",
    )
    ax.set_title(f"{preset['fig2_dataset']}: FedAST vs Sync-ST, identical tasks")
    return fig


def active_figure(preset, act: pd.DataFrame, central: float, largest: dict):
    """Figs. 3/13 left: final accuracy vs active requests beside the centralised reference;
    right: the staleness histogram of ``largest`` ({label: run} at the largest R)."""
    # taller than one row needs: Fig. 14's eight curves have their legend below, off the data
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    sweep_plot(
        act,
        "active",
        "final_accuracy",
        hue="label",
        ax=a1,
        logx=True,
        hline=central,
        hline_label="centralised (pooled SGD)",
        ylabel="final mean test accuracy",
    )
    a1.set_xlabel("active requests (all tasks)")
    staleness_hist(largest, ax=a2)
    a2.set_title(f"staleness at R = {max(preset['active_requests'])} per task")
    return fig


def nobuffer_figure(preset, fedast, nobuffer):
    """Fig. 4: per-task accuracy of FedAST and NoBuffer on the heterogeneous tasks (one seed)."""
    # taller than Fig. 2: the legend of two methods x four tasks and four targets sits below
    fig, ax = plt.subplots(figsize=(8, 4.8))
    accuracy_curves(
        {"FedAST": fedast, "FedAST-NoBuffer": nobuffer},
        ax=ax,
        mean_over_tasks=False,
        targets=_targets(preset, fedast),
        title="the heterogeneous tasks: FedAST vs NoBuffer (Fig. 4)",
    )
    plots.legend_below(fig, ax)
    return fig


def test_loss_figure(act: pd.DataFrame, fedast, nobuffer):
    """Figs. 13/14: final test loss vs active requests; test loss over time of FedAST and
    NoBuffer on the heterogeneous tasks (one seed)."""
    # taller than one row needs: Fig. 14's eight curves have their legend below, off the data
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    sweep_plot(
        act,
        "active",
        "final_test_loss",
        hue="label",
        ax=a1,
        logx=True,
        ylabel="final mean test loss",
    )
    a1.set_xlabel("active requests (all tasks)")
    a1.set_title("Fig. 13: test loss vs active clients")
    accuracy_curves(
        {"FedAST": fedast, "FedAST-NoBuffer": nobuffer},
        ax=a2,
        mean_over_tasks=False,
        metric="test_loss",
        title="Fig. 14: test loss over time",
    )
    plots.legend_below(fig, a2)
    return fig


def heterogeneous_figure(preset, results: dict, seed: int):
    """Fig. 6: per-task accuracy of FedAST and Sync-ST on the heterogeneous tasks (one seed);
    ``results``: ``study.het_compare``'s runs."""
    fedast = results[("fedast_d", seed)]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    accuracy_curves(
        {"FedAST": fedast, "Sync-ST": results[("sync_st", seed)]},
        ax=ax,
        mean_over_tasks=False,
        targets=_targets(preset, fedast),
        title=f"heterogeneous tasks, seed {seed} (Fig. 6); vertical lines: time to target",
    )
    plots.legend_below(fig, ax)
    return fig


def het_times_figure(df: pd.DataFrame):
    """Fig. 7: time to each task's target beside the paper's demo plots."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    het_bars(
        df,
        ax=ax,
        paper={
            "FedAST": NUMBERS["het4_demo_fedast_times"],
            "Sync-ST": NUMBERS["het4_demo_sync_times"],
        },
        paper_label="paper (4 tasks, N = 1000, main targets; demo plots)",
    )
    return fig


def buffer_figure(preset, buf: pd.DataFrame):
    """Figs. 8/9: final accuracy and time to target vs buffer size, with the buffer at which R/b
    is the paper's best ratio."""
    requests, best = preset["buffer_requests"], NUMBERS["buffer_best_ratio"]
    b_paper = requests / best
    paper = dict(paper_x=b_paper, paper_label=f"paper's best R/b = {best} (b = {b_paper:.2g})")
    # taller than one row needs: Fig. 14's eight curves have their legend below, off the data
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    sweep_plot(
        buf,
        "buffer",
        "final_accuracy",
        hue="task",
        ax=a1,
        logx=True,
        ylabel="final test accuracy",
        **paper,
    )
    a1.set_title(f"Fig. 8: final accuracy (last test) at R = {requests}")
    sweep_plot(
        buf.fillna({"time_to_target": np.nan}),
        "buffer",
        "time_to_target",
        hue="task",
        ax=a2,
        logx=True,
        ylabel="time to target",
        missing="target not reached",
        **paper,
    )
    a2.set_title(
        f"Fig. 9: time to target (x on the axis: not reached by t = {preset['buffer_time']:g})"
    )
    return fig


def k_figure(preset, ksw: pd.DataFrame):
    """Figs. 10-12: time to target, rounds and mean round length vs Sync-ST's first-k, with the
    preset's k marked."""
    fig, axs = plt.subplots(1, 3, figsize=(13, 3.4))
    columns = {
        "time_to_target": "time to target",
        "rounds": "rounds",
        "round_length": "mean round length",
    }
    mark = f"preset k = {preset['k']} (paper: {NUMBERS['sync_k']} of {NUMBERS['available']})"
    for a, (col, label) in zip(axs, columns.items()):
        sweep_plot(
            ksw,
            "k",
            col,
            ax=a,
            mark=preset["k"],
            mark_label=mark,
            ylabel=label,
            logx=True,
            missing="target not reached",
        )
    return fig
