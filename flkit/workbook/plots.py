"""Figure helpers in one consistent house style.

    with plots.style():            # or plots.apply_style() once per notebook
        ax = plots.label_distribution(parts, ds.y_train, ds.num_classes)

Conventions for helpers added here: take data (tensors, DataFrames), never re-run training; accept
``ax=None`` (make a new figure) and return the Axes; use ``style_for(name)`` (colour, line style and
marker) or ``color_for(name)`` so one method looks the same in every figure and two methods never
share both colour and line style; draw targets with ``target_line`` and the paper's numbers with
``paper_line`` / ``paper_marker`` (labelled "paper"); say when two curves coincide
(``coincident`` + ``note_coincident``) instead of letting one hide the other; put a legend of many
entries under the axes (``legend_below``), where it covers no curve.
"""

from __future__ import annotations

import contextlib

import numpy as np

# Okabe-Ito (colour-blind safe), in a fixed order, without its yellow (#F0E442 barely shows on
# white) and without black, kept for the paper's numbers (PAPER_COLOR); grey is for our targets
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9")
# cycled together with COLORS: 6 colours x 4 dash patterns give 12 distinct lines before a repeat,
# and the markers (7, coprime to both) tell apart even lines drawn exactly on top of each other
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
PAPER_COLOR = "#000000"
TARGET_COLOR = "0.45"

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

    from ..utils import FlkitError

    if axis not in ("x", "y", "both"):
        raise FlkitError(f"axis={axis!r}; accepted: 'x', 'y', 'both'")
    for name in ("x", "y") if axis == "both" else (axis,):
        getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(integer=True))
    return ax


_NAMED: dict = {}


def _index_for(name: str) -> int:
    if name not in _NAMED:
        _NAMED[name] = len(_NAMED)
    return _NAMED[name]


def color_for(name: str) -> str:
    """A stable colour per series name (method, dataset) within the session."""
    return COLORS[_index_for(name) % len(COLORS)]


def style_for(name: str, points: int | None = None) -> dict:
    """Line keywords (color, linestyle, marker) for a series name, stable within the session: the
    one shared style cycle of every figure. ``points``: the number of points of the line; markers
    are then thinned to about 12 so dense curves stay readable (markevery)."""
    i = _index_for(name)
    kw = {
        "color": COLORS[i % len(COLORS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
        "markersize": 4,
    }
    if points is not None and points > 12:
        # a different phase per series, so that coinciding lines show both markers
        step = max(1, points // 12)
        kw["markevery"] = (i % step, step)
    return kw


def target_line(ax, y: float, label: str = "target", **kw):
    """A labelled horizontal line at our target (grey, dotted); returns the line."""
    kw = {"color": TARGET_COLOR, "lw": 1.0, "ls": ":", **kw}
    return ax.axhline(y, label=label, **kw)


def paper_line(ax, y: float | None = None, x: float | None = None, label: str = "paper", **kw):
    """The paper's number for what the axes plot: a black dashed line labelled "paper"
    (horizontal at ``y`` or vertical at ``x``); returns the line. Take the value from the paper
    folder's ``numbers.py``."""
    if (y is None) == (x is None):
        from ..utils import FlkitError

        raise FlkitError(f"paper_line: give exactly one of y={y!r} or x={x!r}")
    kw = {"color": PAPER_COLOR, "lw": 1.0, "ls": "--", **kw}
    return ax.axhline(y, label=label, **kw) if x is None else ax.axvline(x, label=label, **kw)


def paper_marker(ax, x, y: float, label: str = "paper", **kw):
    """The paper's number at one point: a black open star labelled "paper"; returns the artist."""
    kw = {"marker": "*", "ms": 12, "mfc": "none", "mec": PAPER_COLOR, "ls": "none", **kw}
    return ax.plot([x], [y], label=label, **kw)[0]


def paper_note(ax, text: str):
    """What the paper reports where it prints nothing to replot (its setting, its headline
    number), in the paper's colour under the x label; returns the annotation (gid "paper")."""
    return ax.annotate(
        text,
        xy=(0, 0),
        xycoords="axes fraction",
        xytext=(0, -42),
        textcoords="offset points",
        va="top",
        fontsize=7,
        color=PAPER_COLOR,
        gid="paper",
    )


# two curves closer than this fraction of the plotted range are drawn on top of each other
# (about a line's width on a figure of the house size)
COINCIDE_REL_TOL = 0.005


def coincident(
    series: dict, tol: float | None = None, rel_tol: float = COINCIDE_REL_TOL
) -> list[tuple[str, str, float]]:
    """Pairs of series that lie on top of each other: ``series`` maps a name to a pandas Series
    (index = x); two coincide when they share their index and the largest absolute difference of
    their values is at most ``tol`` (default: ``rel_tol`` times the range of all the values).
    Returns [(name a, name b, max |a - b|)] in input order."""
    import pandas as pd

    clean = {k: pd.Series(v, dtype=float).dropna() for k, v in series.items()}
    if tol is None:
        vals = [v.to_numpy() for v in clean.values() if len(v)]
        allv = np.concatenate(vals) if vals else np.zeros(1)
        tol = rel_tol * float(allv.max() - allv.min())
    names = list(clean)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            sa, sb = clean[a], clean[b]
            if len(sa) == 0 or not sa.index.equals(sb.index):
                continue
            d = float(np.max(np.abs(sa.to_numpy() - sb.to_numpy())))
            if d <= tol:
                out.append((a, b, d))
    return out


def coincident_text(pairs, width: int = 60) -> str:
    """One sentence per group of coinciding series (pairs joined transitively; empty when none),
    wrapped at ``width`` characters, for a caption or a legend title."""
    import textwrap

    groups: list[list[str]] = []
    diff: list[float] = []
    for a, b, d in pairs:
        hit = [i for i, g in enumerate(groups) if a in g or b in g]
        if not hit:
            groups.append([a, b])
            diff.append(d)
            continue
        keep = hit[0]
        for i in reversed(hit[1:]):
            groups[keep] += [n for n in groups.pop(i) if n not in groups[keep]]
            diff[keep] = max(diff[keep], diff.pop(i))
        groups[keep] += [n for n in (a, b) if n not in groups[keep]]
        diff[keep] = max(diff[keep], d)
    out = []
    for g, d in zip(groups, diff):
        names = ", ".join(g[:-1]) + " and " + g[-1]
        out.append(f"{names} coincide (max diff {d:.2g}): the lines lie on top of each other.")
    return "\n".join(textwrap.fill(t, width) for t in out)


def note_coincident(ax, pairs) -> str:
    """Write ``coincident_text(pairs)`` under the axes' legend (as its title) and return it."""
    text = coincident_text(pairs)
    if text:
        leg = ax.get_legend()
        if leg is None:
            leg = ax.legend()
        leg.set_title(text, prop={"size": 7})
    return text


def legend_below(fig, ax, ncol: int = 4):
    """Move ``ax``'s legend (entries and title) under all of ``fig``'s axes and shrink the axes
    so it covers no data: a legend of many curves and targets inside the axes hides some of them.
    Returns the figure's legend."""
    handles, labels = ax.get_legend_handles_labels()
    old = ax.get_legend()
    title = old.get_title().get_text() if old is not None else ""
    if old is not None:
        old.remove()
    leg = fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=ncol,
        fontsize=8,
        frameon=False,
        title=title or None,
        title_fontsize=7,
    )
    # the legend's height is known only once drawn: reserve exactly that strip at the bottom
    fig.tight_layout()
    fig.canvas.draw()
    height = leg.get_window_extent(fig.canvas.get_renderer()).height / fig.bbox.height
    fig.tight_layout(rect=(0, height, 1, 1))
    return leg


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
    vmax: float | None = None,
):
    """Heat map of how many samples of each class every client holds (clients on x, classes on y).

    The papers' Dirichlet figure (e.g. Fig. 10 of the staleness paper, Fig. 5 of HideNseek).
    normalize=True shows each client's label proportions instead of counts, on the fixed scale
    0..1 so that panels side by side compare; max_clients draws only the first clients. ``vmax``:
    the top of the colour scale (default 1 when normalised, else this panel's largest count; pass
    one value to every panel of a figure to share the scale).
    Returns the Axes.
    """
    from ..data.partition import label_counts

    parts = list(partition_indices)
    if max_clients is not None:
        parts = parts[:max_clients]
    counts = label_counts(parts, labels, num_classes).numpy().astype(np.float64)
    if normalize:
        counts = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    k = len(parts)
    ax = new_ax(ax, figsize=(min(12.0, 2.5 + 0.09 * k), min(6.0, 1.2 + 0.25 * num_classes)))
    if vmax is None:
        vmax = 1.0 if normalize else max(float(counts.max()), 1.0)
    im = ax.imshow(
        counts.T,
        aspect="auto",
        origin="lower",
        cmap=cmap,
        interpolation="nearest",
        vmin=0.0,
        vmax=vmax,
    )
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
