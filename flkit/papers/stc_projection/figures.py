"""Figures of notebook 01 (STC with projection aggregation): Fig. 1 and the accuracy/variance
curves.

Helpers take data (tensors, RunResults, DataFrames), never train, accept ``ax=None`` and return
the Axes (or the Figure for multi-panel plots).
"""

from __future__ import annotations

import numpy as np
import torch

from flkit import compress
from flkit.workbook import plots

LABELS = {"fedavg": "FedAvg", "stc": "STC", "fedfv": "FedFV", "stc_pa": "STC-PA"}


def as_matrix(t: torch.Tensor) -> torch.Tensor:
    """A layer's tensor as a 2-D matrix (conv [out, in, kh, kw] -> [out, in·kh·kw])."""
    t = t.detach().float().cpu()
    if t.dim() == 1:
        return t.unsqueeze(0)
    return t.reshape(t.shape[0], -1)


def compress_views(update: torch.Tensor, p: float, counter: str = compress.DEFAULT_COUNTER) -> dict:
    """Dense / top-k / STC versions of one tensor with their bits per entry (Fig. 1's three
    panels)."""
    x = update.detach().float().cpu()
    n = x.numel()
    out = {}
    for name, codec in (
        ("dense", compress.DenseCodec()),
        ("top-k", compress.TopKCodec(p, counter)),
        ("STC", compress.STCCodec(p, counter)),
    ):
        dec, bits = codec.encode({"w": x})
        out[name] = {
            "tensor": dec["w"],
            "bits": bits,
            "bits_per_entry": bits / n,
            "nonzeros": int((dec["w"] != 0).sum()),
        }
    return out


def fig1(
    update: torch.Tensor,
    p: float,
    counter: str = compress.DEFAULT_COUNTER,
    title: str = "",
    max_rows: int = 48,
    max_cols: int = 96,
):
    """Fig. 1: one layer's update as a matrix — dense, top-k (kept entries at full precision),
    STC (kept entries at ±μ) — colour = signed value, with bits per entry in the titles.
    Large matrices are cropped to the top-left ``max_rows`` × ``max_cols`` block for legibility
    (compression is computed on the whole tensor)."""
    import matplotlib.pyplot as plt

    views = compress_views(update, p, counter)
    with plots.style():
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), constrained_layout=True)
        mats = {
            k: as_matrix(v["tensor"].reshape(update.shape))[:max_rows, :max_cols]
            for k, v in views.items()
        }
        vmax = float(max(m.abs().max() for m in mats.values())) or 1.0
        for ax, (k, v) in zip(axes, views.items()):
            im = ax.imshow(
                mats[k].numpy(),
                cmap="RdBu_r",
                vmin=-vmax,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
            )
            ax.grid(False)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(
                f"{k}: {v['bits_per_entry']:.3g} bits/entry\n{v['nonzeros']:,} of "
                f"{update.numel():,} non-zero"
            )
        fig.colorbar(im, ax=axes, shrink=0.8, label="value")
        if title:
            fig.suptitle(title)
    return fig


def curves(
    results: dict,
    column: str = "client_acc_mean",
    ax=None,
    scale: float = 100.0,
    ylabel: str | None = None,
    title: str = "",
    target: float | None = None,
    methods=None,
    paper_target: float | None = None,
    paper_rounds: dict | None = None,
):
    """Mean over seeds (line) and min–max over seeds (band) of ``column`` vs. round per method.

    ``results``: {(method, seed): RunResult} from ``study.run_comparison``. ``target``: our target
    (grey dotted line); ``paper_target`` / ``paper_rounds`` ({method: rounds}): the paper's target
    and its rounds to that target (black, labelled "paper"); a paper round beyond our last round
    is written at the right edge instead of stretching the axis. Methods whose mean curves
    coincide are named under the legend. Returns the Axes."""
    import pandas as pd

    ax = plots.new_ax(ax)
    methods = methods or list(dict.fromkeys(m for m, _ in results))
    means = {}
    for m in methods:
        frames = [r.history.set_index("round")[column] for (mm, _), r in results.items() if mm == m]
        if not frames:
            continue
        df = pd.concat(frames, axis=1) * scale
        lab = LABELS.get(m, m)
        kw = plots.style_for(lab, len(df))
        means[lab] = df.mean(axis=1)
        n = df.shape[1]
        ax.plot(df.index, means[lab], label=f"{lab} ({n} seed{'s' if n > 1 else ''})", **kw)
        if n > 1:
            ax.fill_between(
                df.index, df.min(axis=1), df.max(axis=1), color=kw["color"], alpha=0.15, lw=0
            )
    if target is not None:
        plots.target_line(ax, target * scale, label=f"our target {target * scale:g}")
    last = max((float(s.index.max()) for s in means.values()), default=0.0)
    if paper_target is not None:
        plots.paper_line(ax, y=paper_target * scale, label=f"paper target {paper_target * scale:g}")
        beyond = []
        for m, r in (paper_rounds or {}).items():
            if r is None:
                continue
            if r <= last:
                plots.paper_marker(
                    ax, r, paper_target * scale, label=f"paper: {LABELS.get(m, m)} at round {r}"
                )
            else:
                beyond.append(f"{LABELS.get(m, m)} {r}")
        if beyond:
            ax.annotate(
                "paper, rounds to target:\n" + ", ".join(beyond) + " →",
                xy=(1.0, paper_target * scale),
                xycoords=("axes fraction", "data"),
                xytext=(-4, -4),
                textcoords="offset points",
                ha="right",
                va="top",
                fontsize=7,
            )
    ax.set_xlabel("communication round")
    ax.set_ylabel(ylabel or column)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    plots.note_coincident(ax, plots.coincident(means))
    return ax


def accuracy_and_variance(
    results: dict,
    dataset: str,
    target: float | None = None,
    figs: str = "",
    paper_target: float | None = None,
    paper_rounds: dict | None = None,
):
    """Two panels: average per-client accuracy (Fig. 3/5, with our target and the paper's) and
    its variance across clients (Fig. 4/6; the paper prints no number for it)."""
    import matplotlib.pyplot as plt

    with plots.style():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
        curves(
            results,
            "client_acc_mean",
            a1,
            100,
            "average client accuracy (%)",
            f"{dataset}: accuracy" + (f" ({figs.split('/')[0]})" if figs else ""),
            target,
            paper_target=paper_target,
            paper_rounds=paper_rounds,
        )
        curves(
            results,
            "client_acc_var",
            a2,
            1e4,
            "variance across clients (%²)",
            f"{dataset}: variance" + (f" ({figs.split('/')[-1]})" if figs else ""),
        )
    return fig


def ablation_plot(df, title: str = ""):
    """Final accuracy and variance of STC-PA across the α/τ grid, with plain STC and the default
    (α, τ) among the bars: bar = mean over seeds, whisker = min–max over seeds, both y-axes from
    0. ``df``: ``study.ablation``'s table (one row per setting and seed). Returns the Figure."""
    import matplotlib.pyplot as plt

    g = df.groupby("setting", sort=False)
    order = list(g.groups)
    with plots.style():
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)
        x = np.arange(len(order))
        for ax, col, ylabel in (
            (axes[0], "final_acc", "final client accuracy (%)"),
            (axes[1], "variance", "variance across clients (%², 2nd half)"),
        ):
            st = g[col].agg(["mean", "min", "max"]).loc[order]
            colors = [
                plots.color_for("STC") if k == "STC" else plots.color_for("STC-PA") for k in order
            ]
            bars = ax.bar(x, st["mean"], color=colors, alpha=0.85)
            for b, k in zip(bars, order):
                if k.endswith("(default)"):
                    b.set_edgecolor("black")
                    b.set_linewidth(1.5)
            ax.errorbar(
                x,
                st["mean"],
                yerr=[st["mean"] - st["min"], st["max"] - st["mean"]],
                fmt="none",
                ecolor="black",
                capsize=3,
                lw=1,
            )
            ax.set_xticks(x)
            ax.set_xticklabels([k.replace(", ", "\n") for k in order], fontsize=8)
            ax.set_ylabel(ylabel)
            ax.set_ylim(0, None)
        n = int(df.groupby("setting")["seed"].nunique().min())
        axes[0].set_ylim(0, 100)
        fig.suptitle(
            title
            or (
                f"STC-PA ablation on MNIST ({int(df['rounds'].iloc[0])} rounds, {n} seed"
                f"{'s' if n > 1 else ''}; bar = mean, whisker = min–max; outlined = default)"
            )
        )
    return fig


COUNTERS = (
    ("internal_projections", "internal projections per round"),
    ("external_projections", "external projections per round"),
    ("update_norm", "‖update‖ applied (before downlink STC)"),
)


def projection_counters(results: dict, title: str = "", smooth: int = 5):
    """The projection's own counters per round for every run that has them (FedFV, STC-PA and
    its link variants): internal and external projection steps and the norm of the applied
    update; line = mean over seeds, smoothed over ``smooth`` rounds (a centred rolling mean).
    ``results``: {(label, seed): RunResult}, e.g. ``study.link_ablation``'s. Returns the
    Figure."""
    import matplotlib.pyplot as plt
    import pandas as pd

    by_label: dict = {}
    for (label, _seed), r in results.items():
        h = r.history
        if "internal_projections" in h:
            by_label.setdefault(label, []).append(h.set_index("round"))
    with plots.style():
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), constrained_layout=True)
        for label, hs in by_label.items():
            for ax, (col, name) in zip(axes, COUNTERS):
                s = pd.concat([h[col] for h in hs], axis=1).mean(axis=1)
                s = s.rolling(max(int(smooth), 1), center=True, min_periods=1).mean()
                ax.plot(s.index, s.values, label=label)
                ax.set_title(name)
                ax.set_xlabel("round")
        axes[0].legend(fontsize=8)
        if title:
            fig.suptitle(title)
    return fig
