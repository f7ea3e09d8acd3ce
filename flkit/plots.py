"""Figure helpers in one consistent house style.

    with plots.style():            # or plots.apply_style() once per notebook
        ax = plots.label_distribution(parts, ds.y_train, ds.num_classes)

Conventions for helpers added here: take data (tensors, DataFrames), never re-run training; accept
``ax=None`` (make a new figure) and return the Axes; use ``COLORS`` / ``color_for(name)`` so one
method has the same colour in every figure.
"""

from __future__ import annotations

import contextlib

import numpy as np

# colour-blind-safe (Okabe-Ito), in a fixed order
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

STYLE = {
    "figure.figsize": (6.0, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.6,
    "image.cmap": "viridis",
}


def _prop_cycle():
    from cycler import cycler

    return cycler(color=list(COLORS))


def apply_style() -> None:
    """Set the house style globally (matplotlib rcParams) for the rest of the session."""
    import matplotlib as mpl

    mpl.rcParams.update(STYLE)
    mpl.rcParams["axes.prop_cycle"] = _prop_cycle()


# Session state that a ``with style():`` block must not undo: the first figure of a Jupyter
# session may be drawn inside the block, and the inline backend then switches interactive mode on
# there; restoring it to False on exit would stop every later figure from being shown.
SESSION_PARAMS = ("interactive",)


@contextlib.contextmanager
def style():
    """Use the house style inside a ``with`` block only (session state in ``SESSION_PARAMS``,
    such as interactive mode set by a backend activated inside the block, is kept on exit)."""
    import matplotlib as mpl

    kept = {}
    try:
        with mpl.rc_context({**STYLE, "axes.prop_cycle": _prop_cycle()}):
            try:
                yield
            finally:
                kept = {k: mpl.rcParams[k] for k in SESSION_PARAMS}
    finally:
        for k, v in kept.items():
            mpl.rcParams[k] = v


def integer_ticks(ax, axis: str = "x"):
    """Ticks on whole numbers only along ``axis`` ('x', 'y' or 'both'), for counts such as rounds
    (a short run otherwise gets ticks at 1.0, 1.2, ...). Returns the Axes."""
    from matplotlib.ticker import MaxNLocator

    from .utils import FlkitError

    if axis not in ("x", "y", "both"):
        raise FlkitError(f"axis={axis!r}; accepted: 'x', 'y', 'both'")
    for name in ("x", "y") if axis == "both" else (axis,):
        getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(integer=True))
    return ax


_NAMED: dict = {}


def color_for(name: str) -> str:
    """A stable colour per series name (method, dataset) within the session."""
    if name not in _NAMED:
        _NAMED[name] = COLORS[len(_NAMED) % len(COLORS)]
    return _NAMED[name]


def new_ax(ax=None, figsize=None):
    """``ax`` itself, or the axes of a new figure of ``figsize`` when ``ax`` is None."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def label_distribution(
    partition_indices,
    labels,
    num_classes: int,
    ax=None,
    normalize: bool = False,
    max_clients: int | None = None,
    class_names=None,
    cmap: str = "Blues",
    title: str | None = None,
    colorbar: bool = True,
):
    """Heat map of how many samples of each class every client holds (clients on x, classes on y).

    The papers' Dirichlet figure (e.g. Fig. 10 of the staleness paper, Fig. 5 of HideNseek).
    normalize=True shows each client's label proportions instead of counts; max_clients draws only
    the first clients.
    Returns the Axes.
    """
    from .partition import label_counts

    parts = list(partition_indices)
    if max_clients is not None:
        parts = parts[:max_clients]
    counts = label_counts(parts, labels, num_classes).numpy().astype(np.float64)
    if normalize:
        counts = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    k = len(parts)
    ax = new_ax(ax, figsize=(min(12.0, 2.5 + 0.09 * k), min(6.0, 1.2 + 0.25 * num_classes)))
    im = ax.imshow(counts.T, aspect="auto", origin="lower", cmap=cmap, interpolation="nearest")
    ax.grid(False)
    integer_ticks(ax, "x")
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    if class_names is not None and num_classes <= 30:
        ax.set_yticks(range(num_classes))
        ax.set_yticklabels([str(c) for c in class_names])
    elif num_classes <= 20:
        ax.set_yticks(range(num_classes))
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(
            im, ax=ax, label="fraction of client's data" if normalize else "samples", pad=0.01
        )
    return ax
