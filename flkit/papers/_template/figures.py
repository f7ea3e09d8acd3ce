"""Figures of notebook NN_<slug>. They read result tables and never train; each takes
``ax=None`` and returns the Figure (or Axes), in the house style of ``flkit.workbook.plots``."""

from __future__ import annotations

import pandas as pd

from flkit.workbook import plots


def accuracy_curves(curves: pd.DataFrame, column: str = "test_accuracy"):
    """One line per method (seed mean) of ``column`` against the round."""
    import matplotlib.pyplot as plt

    with plots.style():
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for m, g in curves.groupby("method", sort=False):
            mean = g.groupby("round")[column].mean()
            ax.plot(mean.index, mean.values, label=m, color=plots.color_for(m))
        ax.set_xlabel("round")
        ax.set_ylabel(column)
        ax.legend()
    return fig
