"""Figures of notebook 04 from result tables (they never train)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flkit.workbook import plots

ORDER = ("FedAvg", "BNNAvg", "FedMask", "Signed", "HideNseek")


def curves(runs: pd.DataFrame, tasks, title: str = ""):
    """Accuracy (%) vs round, one panel per task, mean over seeds (Figs. 2-3)."""
    tasks = list(tasks)
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.2), squeeze=False)
    ev = runs.dropna(subset=["test_accuracy"])
    for ax, task in zip(axes[0], tasks):
        sub = ev[ev.task == task]
        for m in ORDER:
            c = sub[sub.method == m].groupby("round")["test_accuracy"].mean() * 100
            if len(c):
                ax.plot(c.index, c.values, label=m, **plots.style_for(m, len(c)))
        ax.set_title(task)
        ax.set_xlabel("round")
        plots.integer_ticks(ax)
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def traffic(byt: pd.DataFrame, task: str):
    """Upload and download MiB per client per round for one task (Table 2 as bars)."""
    t = (
        byt[byt.task == task]
        .set_index("method")
        .reindex([m for m in ORDER if m in set(byt.method)])
    )
    fig, ax = plt.subplots(figsize=(6, 3))
    x = range(len(t))
    ax.bar([i - 0.2 for i in x], t["up_MiB"], width=0.4, label="upload")
    ax.bar([i + 0.2 for i in x], t["down_MiB"], width=0.4, label="download")
    ax.set_xticks(list(x), t.index)
    ax.set_ylabel("MiB per client per round")
    ax.set_title(f"traffic, {task}")
    ax.legend()
    fig.tight_layout()
    return fig


def keep_ratio_bars(kr: pd.DataFrame):
    """HideNseek accuracy at the two keep ratios per MNIST alpha (Fig. 4)."""
    piv = kr.pivot(index="task", columns="keep_ratio", values="mean")
    fig, ax = plt.subplots(figsize=(5, 3))
    piv.plot.bar(ax=ax, rot=0)
    ax.set_ylabel("accuracy (%)")
    ax.set_title("HideNseek, keep ratio p_r")
    fig.tight_layout()
    return fig


def active_lines(act: pd.DataFrame):
    """Accuracy vs clients per round (Table 4 as lines)."""
    fig, ax = plt.subplots(figsize=(5, 3))
    for m, g in act.groupby("method"):
        ax.errorbar(
            g["active"],
            g["mean"],
            yerr=g["std"].fillna(0),
            label=m,
            capsize=3,
            **plots.style_for(m),
        )
    ax.set_xlabel("clients per round")
    ax.set_ylabel("accuracy (%)")
    ax.legend()
    fig.tight_layout()
    return fig


def pruning_demo(grid: pd.DataFrame, ratio: float):
    """Channels kept per pruned VGG9 layer at one keep ratio, from the precomputed grid."""
    r = grid.keep_ratio.iloc[(grid.keep_ratio - ratio).abs().argsort().iloc[0]]
    g = grid[grid.keep_ratio == r]
    fig, ax = plt.subplots(figsize=(5, 2.8))
    ax.bar(g["layer"], g["channels"], color="lightgray", label="channels")
    ax.bar(g["layer"], g["kept"], color="tab:red", label="kept")
    ax.set_title(
        f"p_r = {r:g}: {100 * g['weight_fraction'].iloc[0]:.1f} % of pruned layers' weights kept"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def votes_demo(signs, latent, rule: str):
    """Client votes (top) and the server latent they produce (bottom) on a toy example."""
    fig, (a, b) = plt.subplots(2, 1, figsize=(6, 3.6), sharex=True)
    a.imshow(signs.numpy(), cmap="coolwarm", aspect="auto", vmin=-1, vmax=1)
    a.set_ylabel("client")
    a.set_title("client signs (red +1, blue -1)")
    b.bar(range(latent.numel()), latent.numpy(), color="tab:red")
    b.set_ylabel("server latent")
    b.set_xlabel("weight position")
    b.set_title(f"rule: {rule}")
    fig.tight_layout()
    return fig
