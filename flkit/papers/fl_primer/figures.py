"""Figures of the FL primer notebook, in the house style (flkit.workbook.plots). They read results
only."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from flkit.workbook import plots


def _series(curves: pd.DataFrame, label: str, column: str) -> pd.Series:
    h = curves[curves["run"] == label].dropna(subset=[column])
    return pd.Series(h[column].to_numpy(), index=h["round"].to_numpy(), name=label)


def _curves(ax, curves: pd.DataFrame, labels: Sequence[str], column: str) -> str:
    """One line per run in the shared style cycle; returns the note on runs that coincide (also
    written under the legend), so a line hidden under another is said, not lost."""
    series = {lab: _series(curves, lab, column) for lab in labels}
    for lab, y in series.items():
        ax.plot(y.index, y.to_numpy(), label=lab, **plots.style_for(lab, len(y)))
    ax.legend(loc="lower right" if column == "test_accuracy" else "best")
    return plots.note_coincident(ax, plots.coincident(series))


def partitions(
    labels,
    num_classes: int,
    num_clients: int,
    alphas: Sequence[float],
    seed: int = 0,
    max_clients: int | None = 50,
):
    """One label heat map per alpha, stacked (the static version of the alpha slider), all on the
    same colour scale (share of the client's data, 0..1) so that panels compare."""
    import matplotlib.pyplot as plt

    from .study import draw_partition

    with plots.style():
        fig, axes = plt.subplots(len(alphas), 1, figsize=(8.0, 2.4 * len(alphas)), squeeze=False)
        for ax, a in zip(axes[:, 0], alphas):
            draw_partition(
                labels, num_classes, num_clients, a, seed, ax=ax, max_clients=max_clients
            )
        fig.tight_layout()
    return fig


def iid_vs_noniid(curves: pd.DataFrame, iid: str, noniid: str):
    """Test accuracy (left) and training loss (right) per round, IID vs non-IID, side by side."""
    import matplotlib.pyplot as plt

    with plots.style():
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.0, 3.6))
        _curves(a1, curves, (iid, noniid), "test_accuracy")
        _curves(a2, curves, (iid, noniid), "train_loss")
        a1.set(xlabel="round", ylabel="test accuracy", title="Global model accuracy")
        plots.integer_ticks(a1)
        a2.set(xlabel="round", ylabel="mean local training loss", title="Clients' training loss")
        plots.integer_ticks(a2)
        fig.tight_layout()
    return fig


def fedprox(curves: pd.DataFrame, labels: Sequence[str], drift_by_mu: pd.DataFrame | None = None):
    """Accuracy curves of FedAvg vs FedProx (left) and, if given, the drift per mu (right). Runs
    whose curves coincide (``plots.coincident``) are named under the legend."""
    import matplotlib.pyplot as plt

    with plots.style():
        n = 2 if drift_by_mu is not None else 1
        fig, axes = plt.subplots(1, n, figsize=(5.0 * n, 3.6), squeeze=False)
        ax = axes[0, 0]
        _curves(ax, curves, labels, "test_accuracy")
        ax.set(xlabel="round", ylabel="test accuracy", title="FedAvg vs FedProx (non-IID)")
        plots.integer_ticks(ax)
        if drift_by_mu is not None:
            drift_vs_mu(drift_by_mu, ax=axes[0, 1])
        fig.tight_layout()
    return fig


def drift_vs_mu(drift: pd.DataFrame, ax=None, column: str = "dist_global"):
    """Distance of each client from the global model after local training, per FedProx mu:
    one thin line per client, the mean over clients in bold."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots()
    mus = sorted(drift["mu"].unique())
    pos = {m: i for i, m in enumerate(mus)}
    for _, d in drift.groupby("client"):
        d = d.sort_values("mu")
        ax.plot([pos[m] for m in d["mu"]], d[column], color="0.6", lw=0.8, alpha=0.7)
    mean = drift.groupby("mu")[column].mean()
    ax.plot(
        [pos[m] for m in mean.index],
        mean.values,
        marker="o",
        lw=2.2,
        color=plots.COLORS[3],
        label="mean over clients",
    )
    ax.set_xticks(range(len(mus)))
    ax.set_xticklabels([f"{m:g}" for m in mus])
    what = "global model" if column == "dist_global" else "clients' average"
    ax.set(
        xlabel="FedProx μ (0 = FedAvg)",
        ylabel=f"L2 distance from the {what}",
        title="Client drift vs μ (one line per client)",
    )
    ax.legend()
    return ax


def drift_iid_vs_noniid(drift: pd.DataFrame, by: str = "data"):
    """Per-client distance from the global model and from the average, one group per `by` value."""
    import matplotlib.pyplot as plt
    import numpy as np

    with plots.style():
        fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.4))
        groups = list(dict.fromkeys(drift[by]))
        for ax, col, title in zip(
            axes,
            ("dist_global", "dist_avg"),
            ("distance from the global model", "distance from the clients' average"),
        ):
            for i, gname in enumerate(groups):
                d = drift[drift[by] == gname]
                jitter = np.linspace(-0.15, 0.15, len(d)) if len(d) > 1 else [0.0]
                ax.scatter(
                    i + np.asarray(jitter),
                    d[col],
                    s=14 + 40 * d["samples"] / drift["samples"].max(),
                    color=plots.color_for(gname),
                    alpha=0.8,
                )
                ax.hlines(d[col].mean(), i - 0.25, i + 0.25, color="k", lw=1.2)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels(groups)
            ax.set(ylabel="L2 distance", title=title)
        fig.suptitle(
            "Client drift after one round of local training (dot size = client's data)", y=1.02
        )
        fig.tight_layout()
    return fig
