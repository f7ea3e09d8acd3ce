"""Figures of notebook 01 (STC with projection aggregation): Fig. 1 and the accuracy/variance
curves.

Helpers take data (tensors, RunResults, DataFrames), never train, accept ``ax=None`` and return
the Axes (or the Figure for multi-panel plots).
"""

from __future__ import annotations

import numpy as np
import torch

from flkit import compress, plots

LABELS = {"fedavg": "FedAvg", "stc": "STC", "fedfv": "FedFV", "stc_pa": "STC-PA"}
STYLES = {"fedavg": "-", "stc": "--", "fedfv": ":", "stc_pa": "-"}


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
):
    """Mean over seeds (line) and min–max over seeds (band) of ``column`` vs. round per method.

    ``results``: {(method, seed): RunResult} from ``study.run_comparison``."""
    import pandas as pd

    ax = plots.new_ax(ax)
    methods = methods or list(dict.fromkeys(m for m, _ in results))
    for m in methods:
        frames = [r.history.set_index("round")[column] for (mm, _), r in results.items() if mm == m]
        if not frames:
            continue
        df = pd.concat(frames, axis=1) * scale
        c = plots.color_for(LABELS.get(m, m))
        ax.plot(
            df.index,
            df.mean(axis=1),
            STYLES.get(m, "-"),
            color=c,
            label=f"{LABELS.get(m, m)} ({df.shape[1]} seed{'s' if df.shape[1] > 1 else ''})",
        )
        if df.shape[1] > 1:
            ax.fill_between(df.index, df.min(axis=1), df.max(axis=1), color=c, alpha=0.15, lw=0)
    if target is not None:
        ax.axhline(target * scale, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("communication round")
    ax.set_ylabel(ylabel or column)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax


def accuracy_and_variance(results: dict, dataset: str, target: float | None = None, figs: str = ""):
    """Two panels: average per-client accuracy (Fig. 3/5) and its variance across clients
    (Fig. 4/6)."""
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


def ablation_plot(df, ax=None):
    """Final accuracy and variance of STC-PA across the α/τ grid (bars)."""
    import matplotlib.pyplot as plt

    with plots.style():
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), constrained_layout=True)
        labels = [f"α={a:g}\nτ={t}" for a, t in zip(df["alpha"], df["tau"])]
        x = np.arange(len(df))
        axes[0].bar(x, df["final_acc"], color=plots.COLORS[0])
        axes[0].set_ylabel("final client accuracy (%)")
        axes[1].bar(x, df["variance"], color=plots.COLORS[1])
        axes[1].set_ylabel("variance (%², 2nd half)")
        for a in axes:
            a.set_xticks(x)
            a.set_xticklabels(labels, fontsize=8)
        lo = max(0.0, float(df["final_acc"].min()) - 5)
        axes[0].set_ylim(lo, min(100.0, float(df["final_acc"].max()) + 2))
    return fig
