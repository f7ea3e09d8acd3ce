"""Figures of notebook 05, drawn from result tables (never training)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from flkit.utils import check_choice
from flkit.workbook import plots

from . import numbers
from .study import NAMES


def accuracy_curves(hist, title: str = "", paper_dataset: str | None = "mnist"):
    """Fig. 11: affected-class accuracy over rounds for every method (mean over seeds), with the
    paper's final affected-class accuracy per method (Table 9, column ``paper_dataset``; None:
    none) as open markers in the method's colour just right of our last round."""
    if paper_dataset is not None:
        check_choice("paper_dataset", paper_dataset, tuple(numbers.TABLE9))
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    ev = hist.dropna(subset=["affected_accuracy"])
    colours = {}
    for m, g in ev.groupby("method", sort=False):
        c = g.groupby("round")[["affected_accuracy", "test_accuracy"]].mean()
        style = "--" if m == "unstale" else "-"
        (line,) = ax[0].plot(c.index, 100 * c["affected_accuracy"], style, label=NAMES.get(m, m))
        ax[1].plot(c.index, 100 * c["test_accuracy"], style, label=NAMES.get(m, m))
        colours[m] = line.get_color()
    tau = int(hist["tau"].iloc[0])
    if paper_dataset is not None:
        _paper_finals(ax[0], numbers.TABLE9[paper_dataset], colours, int(ev["round"].max()))
    for a, lab in zip(ax, ("accuracy on the affected class (%)", "overall test accuracy (%)")):
        a.axvline(tau + 1, color="grey", lw=0.8, ls=":")
        a.set_xlabel("round")
        plots.integer_ticks(a)
        a.set_ylabel(lab)
    # below both panels: inside either one it covers the early rounds, where the lag starts
    fig.suptitle(title or f"Fig. 11 (ours): stale clients lag by tau = {tau} from round {tau + 1}")
    plots.legend_below(fig, ax[0])
    return fig


# the paper's setting behind Table 9, in the legend: ours differs (rounds, tau, partition, subset)
_TABLE9_SETTING = "paper, final per method (Table 9: 800 rounds, τ 40, Dir. α 0.1)"


def _paper_finals(ax, finals: dict, colours: dict, last_round: int):
    """The paper's final accuracy per method (``finals``, %), one open star per method in that
    method's colour at a fixed x right of ``last_round`` (the paper's own horizon is not ours) and
    one legend entry for them all. Each star's gid is ``paper:<method>``."""
    x = last_round + max(1.0, 0.04 * last_round)
    for m, v in finals.items():
        plots.paper_marker(
            ax,
            x,
            v,
            label="_nolegend_",
            mec=colours.get(m, plots.PAPER_COLOR),
            mew=1.4,
            gid=f"paper:{m}",
        )
    # one legend entry in the paper's colour stands for the stars of every method
    ax.plot(
        [],
        [],
        marker="*",
        ms=12,
        mfc="none",
        mec=plots.PAPER_COLOR,
        ls="none",
        label=_TABLE9_SETTING,
    )


def estimation_error(err):
    """Fig. 4: estimation error vs staleness for the stale update, 1st-Order and the GI estimate."""
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for est, g in err.groupby("estimator", sort=False):
        ax[0].plot(g["tau"], g["cos"], "o-", label=est)
        ax[1].plot(g["tau"], g["l1"], "o-", label=est)
    ax[0].plot(
        numbers.TABLE1["staleness"], numbers.TABLE1["cos"], "k:", label="paper 1st-Order (Table 1)"
    )
    ax[0].set_ylabel("cosine distance to the unstale update")
    ax[1].set_ylabel("relative L1 error")
    for a in ax:
        a.set_xlabel("staleness tau (rounds)")
    ax[0].legend(fontsize=8)
    fig.suptitle("Fig. 4 (ours): how far each estimate is from the true unstale update")
    fig.tight_layout()
    return fig


def switching(sw):
    """Fig. 5: E1 (GI estimate) and E2 (stale update) vs the oracle over training."""
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for a, col, lab in ((ax[0], "cos", "cosine distance"), (ax[1], "l1", "relative L1")):
        a.plot(sw["round"], sw[f"err_gi_{col}"], "o-", label="E1: GI estimate")
        a.plot(sw["round"], sw[f"err_stale_{col}"], "s-", label="E2: stale update")
        a.set_xlabel("round")
        plots.integer_ticks(a)
        a.set_ylabel(lab)
    ax[0].legend(fontsize=8)
    fig.suptitle("Fig. 5 (ours): estimate vs stale update, measured against the oracle")
    fig.tight_layout()
    return fig


def heatmaps(counts: dict):
    """Fig. 10: clients x classes sample counts of the Dirichlet partition for several alpha."""
    fig, axes = plt.subplots(1, len(counts), figsize=(4 * len(counts), 3))
    for ax, (alpha, c) in zip(np.atleast_1d(axes), counts.items()):
        im = ax.imshow(c.T, aspect="auto", cmap="viridis")
        ax.set_title(f"alpha = {alpha:g}")
        ax.set_xlabel("client")
        ax.set_ylabel("class")
        fig.colorbar(im, ax=ax, fraction=0.04)
    fig.suptitle("Fig. 10 (ours): Dirichlet label distributions")
    fig.tight_layout()
    return fig


def recovered_images(images: dict, n: int = 4):
    """Fig. 8: single-sample recovery at each sparsification rate (top row: the true samples)."""
    keys = ["truth"] + [k for k in images if k != "truth"]
    fig, axes = plt.subplots(len(keys), n, figsize=(1.4 * n, 1.4 * len(keys)))
    for r, k in enumerate(keys):
        for c in range(n):
            ax = axes[r, c]
            if c < images[k].shape[0]:
                ax.imshow(images[k][c, 0], cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel("true" if k == "truth" else f"{100 * k:.0f} %", fontsize=8)
    fig.suptitle("Fig. 8 (ours): recovery vs sparsification", fontsize=9)
    fig.tight_layout()
    return fig


def demo_panel(losses, errors: dict, samples):
    """The interactive demo: Disparity over iterations, error bars, a few surrogate samples."""
    fig, ax = plt.subplots(1, 3, figsize=(11, 3), gridspec_kw={"width_ratios": [2, 2, 2]})
    ax[0].plot(losses)
    ax[0].set_xlabel("inversion iteration")
    ax[0].set_ylabel("Disparity (L1)")
    ax[1].bar(list(errors), list(errors.values()), color=["tab:red", "tab:orange", "tab:green"])
    ax[1].set_ylabel("cosine distance to the unstale update")
    grid = np.concatenate([s[0] for s in samples[:4]], axis=1) if len(samples) else np.zeros((2, 2))
    ax[2].imshow(grid, cmap="gray")
    ax[2].set_axis_off()
    ax[2].set_title("surrogate samples", fontsize=9)
    fig.tight_layout()
    return fig


def detection(det, paper: dict):
    """Fig. 9: uniqueness-detection accuracy over training, ours and the paper's Table 8."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(det["round"], 100 * det["accuracy"], "o-", label="ours")
    ax.plot(list(paper), list(paper.values()), "k:s", label="paper (800 rounds)")
    ax.set_xlabel("round")
    plots.integer_ticks(ax)
    ax.set_ylabel("detection accuracy (%)")
    ax.legend(fontsize=8)
    fig.suptitle("Fig. 9 (ours): is a stale update unique?", fontsize=10)
    fig.tight_layout()
    return fig


def landscape(coords, grids: dict, cos: float):
    """Fig. 3: loss surfaces around w^(t-tau) with the surrogate data and with the real data."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, (name, z) in zip(axes, grids.items()):
        cs = ax.contourf(coords, coords, z.T, levels=20, cmap="viridis")
        fig.colorbar(cs, ax=ax, fraction=0.04)
        ax.set_title(f"{name} data")
        ax.set_xlabel("direction 1")
        ax.set_ylabel("direction 2")
    fig.suptitle(
        f"Fig. 3 (ours): loss landscapes; gradient cosine similarity at the centre {cos:.2f}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
