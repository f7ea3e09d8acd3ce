"""Panels of notebook 03's figures (FedAST): each draws one kind of plot on one Axes from finished
results (SimResult / DataFrames), never re-running training; each accepts ``ax=None`` and returns
the Axes. The paper's figures, composed of these, are in ``figures.py``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flkit.workbook import plots
from flkit.workbook.plots import COLORS, color_for, new_ax

from . import tables

__all__ = [
    "queue_timeline",
    "accuracy_curves",
    "gain_bars",
    "staleness_hist",
    "sweep_plot",
    "het_bars",
]


def queue_timeline(res, clients=None, t_max: float | None = None, ax=None, max_clients: int = 12):
    """Fig. 1 from a real run: one row per client, every request drawn as a bar from its *start*
    (after waiting in the client's FCFS queue) to its finish, coloured by task; hatched bars are
    requests cancelled when their task finished (they still block the client). Thin lines show
    the waiting time between dispatch and start; dots mark arrivals.

    Request start/finish times are reconstructed from the event log by replaying each client's
    FCFS queue: a request dispatched at d to a client busy until L starts at max(d, L) and ends
    at its arrival (or cancellation) time."""
    import matplotlib.patches as mpatches

    ev = tables.events(res)
    disp = ev[ev.kind == "dispatch"]
    if clients is None:
        busy = disp.groupby("client").size().sort_values(ascending=False)
        clients = [int(c) for c in busy.index[:max_clients]]
    ax = new_ax(ax, figsize=(8, 0.35 * len(clients) + 1.2))
    tasks = list(res.tasks)
    col = {t: COLORS[i % len(COLORS)] for i, t in enumerate(tasks)}
    for row, c in enumerate(clients):
        e = ev[ev.client == c].sort_values("time", kind="stable")
        queue = []  # dispatched, not yet ended: (dispatch time, task, version)
        last_end = 0.0
        for _, r in e.iterrows():
            if r.kind == "dispatch":
                queue.append((r.time, r.task, r.version))
            elif r.kind in ("arrive", "cancel") and queue:
                # FCFS: the oldest queued request of this task/version ends (arrive) or is dropped
                k = next(
                    (i for i, q in enumerate(queue) if q[1] == r.task and q[2] == r.version), 0
                )
                d, task, _ = queue.pop(k)
                if r.kind == "arrive":
                    start = max(d, last_end)
                    ax.plot([d, start], [row, row], color=col[task], lw=0.8, alpha=0.6)
                    ax.barh(
                        row,
                        r.time - start,
                        left=start,
                        height=0.6,
                        color=col[task],
                        alpha=0.9,
                        edgecolor="white",
                        linewidth=0.5,
                    )
                    ax.plot([r.time], [row], "o", ms=2.5, color="black")
                    last_end = r.time
                else:
                    ax.barh(
                        row,
                        0.6,
                        left=r.time,
                        height=0.6,
                        color="none",
                        edgecolor=col[task],
                        hatch="///",
                    )
    for _, r in ev[ev.kind == "complete"].iterrows():
        ax.axvline(r.time, color=col[r.task], ls="--", lw=1)
    ax.set_yticks(range(len(clients)))
    ax.set_yticklabels([f"client {c}" for c in clients])
    ax.invert_yaxis()
    ax.set_xlabel("simulated time")
    if t_max is not None:
        ax.set_xlim(0, t_max)
    handles = [mpatches.Patch(color=col[t], label=t) for t in tasks]
    handles.append(
        mpatches.Patch(facecolor="none", edgecolor="grey", hatch="///", label="cancelled")
    )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=len(handles),
        fontsize=8,
    )
    n = len(tasks)
    ax.set_title(
        f"Client queues (FCFS): requests of {n} task{'s' if n != 1 else ''}, "
        "bar = processing, line = waiting"
    )
    return ax


def accuracy_curves(
    results: dict,
    ax=None,
    mean_over_tasks: bool = True,
    targets: dict | None = None,
    title: str = "",
    metric: str = "accuracy",
):
    """Test accuracy (or ``metric="test_loss"``) vs simulated time. ``results``: {label: SimResult}.
    With ``mean_over_tasks`` one line per run (mean over tasks at each task's latest evaluation),
    else one per task. ``targets``: {name: value}, drawn as labelled grey lines. Runs in the shared
    style cycle (colour, dash, marker); runs whose curves coincide are named under the legend."""
    ax = new_ax(ax)
    drawn = {}
    for label, res in results.items():
        c = tables.curves(res)
        if c.empty or metric not in c:
            continue
        c = c.rename(columns={metric: "_y"})
        if mean_over_tasks:
            piv = c.pivot_table(index="sim_time", columns="task", values="_y").sort_index().ffill()
            y = piv.mean(axis=1)
            # a run that stops at its first evaluation is one point, not a line: say so
            shown = label if len(y) > 1 else f"{label} (1 evaluation)"
            ax.plot(y.index, y.to_numpy(), label=shown, **plots.style_for(label, len(y)))
            drawn[label] = y
        else:
            kw = plots.style_for(label)
            order = {t: i for i, t in enumerate(res.tasks)}
            by_task = sorted(c.groupby("task"), key=lambda tg: order.get(tg[0], len(order)))
            for j, (t, g) in enumerate(by_task):
                ls = plots.LINESTYLES[j % len(plots.LINESTYLES)]
                ax.plot(
                    g.sim_time,
                    g._y,
                    ls=ls,
                    color=kw["color"],
                    marker=kw["marker"],
                    markersize=3,
                    markevery=max(1, len(g) // 12),
                    label=f"{label}: {t}",
                )
                drawn[f"{label}: {t}"] = g.set_index("sim_time")._y
                ct = res.completion_time.get(t)
                if ct is not None:
                    ax.axvline(ct, color=kw["color"], ls=ls, lw=0.8, alpha=0.6)
    for name, v in (targets or {}).items():
        plots.target_line(ax, v, label=f"{name} {v:g}")
    ax.set_xlabel("simulated time")
    ax.set_ylabel("test accuracy" if metric == "accuracy" else metric.replace("_", " "))
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    plots.note_coincident(ax, plots.coincident(drawn))
    return ax


def gain_bars(
    gains: pd.DataFrame,
    df: pd.DataFrame,
    ax=None,
    baseline: str = "sync_st",
    method: str = "fedast_d",
    by: str = "M",
    col: str = "all_done",
    paper: dict | None = None,
    paper_note: str = "",
):
    """Bars of the seed-mean time to target per ``by`` value for baseline and method (whisker =
    std over seeds), annotated with the gain % = (T_baseline − T_method) / T_baseline (> 0: the
    method is faster; the sign convention is written on the axes); ``paper``: {by value: paper
    gain %} printed beside ours; ``paper_note``: the paper's number when it is not per bar (e.g.
    "paper: up to 46.0 %")."""
    ax = new_ax(ax)
    keys = sorted(df[by].unique())
    w = 0.38
    for j, m in enumerate((baseline, method)):
        vals, errs = [], []
        for k in keys:
            v = df[(df[by] == k) & (df.method == m)][col].astype(float)
            vals.append(v.mean() if v.notna().all() and len(v) else np.nan)
            errs.append(v.std(ddof=0) if len(v) > 1 else 0)
        label = {"fedast_d": "FedAST", "fedast_s": "FedAST(S)", "sync_st": "Sync-ST"}.get(m, m)
        ax.bar(
            np.arange(len(keys)) + (j - 0.5) * w,
            vals,
            w,
            yerr=errs,
            label=label,
            color=color_for(label),
            capsize=3,
        )
    for i, k in enumerate(keys):
        g = gains[(gains[by] == k) & (gains.seed == "mean")]
        if len(g) and g.gain_pct.iloc[0] is not None and not pd.isna(g.gain_pct.iloc[0]):
            top = np.nanmax([float(g.baseline.iloc[0]), float(g.method.iloc[0])])
            txt = f"{g.gain_pct.iloc[0]:+.1f}%"
            if paper and k in paper and paper[k] is not None:
                txt += f"\n(paper {paper[k]})"
            ax.text(i, top * 1.03, txt, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{by} = {k}" for k in keys])
    ax.set_ylabel("time until all tasks reach target")
    names = {"fedast_d": "FedAST", "fedast_s": "FedAST(S)", "sync_st": "Sync-ST"}
    b, m = names.get(baseline, baseline), names.get(method, method)
    note = f"% above bars: gain = (T_{b} − T_{m}) / T_{b}; > 0: {m} faster"
    # outside the axes, so that it never covers a bar's gain label
    ax.legend(
        title=note.replace("; ", ";\n") + (f"\n{paper_note}" if paper_note else ""),
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        alignment="left",
    )
    ax.margins(y=0.1)
    return ax


def staleness_hist(results: dict, ax=None, bins: int | None = None):
    """Histogram of update staleness (server versions between dispatch and arrival) per run, as
    step outlines in the shared style cycle over a light fill, so that no run hides another;
    identical histograms are named under the legend."""
    ax = new_ax(ax)
    dens = {}
    for label, res in results.items():
        st = tables.staleness(res).staleness
        if st.empty:
            continue
        hi = int(st.max())
        b = bins or np.arange(-0.5, hi + 1.5, max(1, (hi + 1) // 40))
        kw = plots.style_for(label)
        h, edges, _ = ax.hist(
            st,
            bins=b,
            histtype="step",
            lw=1.6,
            ls=kw["linestyle"],
            label=f"{label} (mean {st.mean():.1f})",
            color=kw["color"],
            density=True,
        )
        ax.hist(st, bins=b, alpha=0.15, color=kw["color"], density=True)
        dens[f"{label} (mean {st.mean():.1f})"] = pd.Series(h, index=edges[:-1])
    ax.set_xlabel("staleness (server updates between dispatch and arrival)")
    ax.set_ylabel("fraction of updates")
    ax.legend(fontsize=8)
    plots.note_coincident(ax, plots.coincident(dens))
    return ax


def sweep_plot(
    df: pd.DataFrame,
    x: str,
    y: str,
    hue: str | None = None,
    ax=None,
    logx: bool = False,
    mark: float | None = None,
    ylabel: str | None = None,
    hline: float | None = None,
    hline_label: str = "",
    mark_label: str = "preset",
    missing: str = "no value",
    paper_x: float | None = None,
    paper_label: str = "paper",
):
    """Mean (± std over seeds) of ``y`` vs ``x``, one line per ``hue`` value in the shared style
    cycle. ``mark`` draws a red star at that x (labelled ``mark_label``); ``paper_x`` a black
    dashed vertical line (the paper's value, labelled ``paper_label``). x values where ``y`` is
    missing in every seed are drawn as crosses on the x-axis and named in the legend
    ("``missing``: x = ..."), so an almost empty panel says why. With ``logx`` the ticks are the
    swept values themselves, in plain numbers."""
    ax = new_ax(ax)
    groups = df.groupby(hue) if hue else [(y, df)]
    drawn = {}
    for name, g in groups:
        s = g.groupby(x)[y].agg(["mean", "std"]).reset_index()
        label = str(name)
        kw = plots.style_for(label)
        ok = s["mean"].notna()
        ax.errorbar(
            s[x][ok],
            s["mean"][ok],
            yerr=s["std"][ok].fillna(0),
            capsize=3,
            label=label,
            **kw,
        )
        drawn[label] = s.set_index(x)["mean"]
        gone = s[x][~ok].tolist()
        if gone:
            ax.plot(
                gone,
                [0.0] * len(gone),
                "x",
                color=kw["color"],
                ms=8,
                mew=2,
                clip_on=False,
                transform=ax.get_xaxis_transform(),
                label=f"{label}: {missing} at {x} = " + ", ".join(f"{v:g}" for v in gone),
            )
        if mark is not None and mark in set(s[x][ok]):
            ax.plot(
                [mark],
                [float(s[s[x] == mark]["mean"].iloc[0])],
                "*",
                color="red",
                ms=14,
                label=mark_label if not any(h == mark_label for h in _labels(ax)) else None,
            )
    if hline is not None:
        ax.axhline(hline, color=plots.TARGET_COLOR, ls="--", label=hline_label or "reference")
    if paper_x is not None:
        xs = df[x].dropna()
        if xs.min() <= paper_x <= xs.max():
            plots.paper_line(ax, x=paper_x, label=paper_label)
        else:  # said in the legend, without stretching the axis to a value we did not sweep
            ax.plot(
                [], [], ls="--", color=plots.PAPER_COLOR, label=paper_label + ": outside the sweep"
            )
    if logx:
        from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

        ax.set_xscale("log")
        ticks = sorted(float(v) for v in df[x].dropna().unique())
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        fmt = ScalarFormatter()
        fmt.set_scientific(False)
        ax.xaxis.set_major_formatter(fmt)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or y)
    ax.legend(fontsize=7)
    plots.note_coincident(ax, plots.coincident(drawn))
    return ax


def _labels(ax) -> list:
    return ax.get_legend_handles_labels()[1]


def het_bars(df: pd.DataFrame, ax=None, paper: dict | None = None, paper_label: str = "paper"):
    """Fig. 7: mean time to target per task and method (tasks sorted by the first method's times),
    whisker = min–max over seeds. ``paper``: {method label: {task: time}}, drawn as black stars
    (labelled ``paper_label``) on the bars of the tasks the paper reports."""
    ax = new_ax(ax)
    g = df.groupby(["task", "label"])["time"]
    piv, lo, hi = (g.agg(f).unstack() for f in ("mean", "min", "max"))
    order = piv.sort_values(piv.columns[0]).index
    piv, lo, hi = piv.loc[order], lo.loc[order], hi.loc[order]
    w = 0.8 / max(1, len(piv.columns))
    starred = False
    for j, m in enumerate(piv.columns):
        xs = np.arange(len(piv)) + (j - (len(piv.columns) - 1) / 2) * w
        ax.bar(xs, piv[m], w, label=m, color=color_for(m))
        ax.errorbar(
            xs,
            piv[m],
            yerr=[piv[m] - lo[m], hi[m] - piv[m]],
            fmt="none",
            ecolor="black",
            capsize=3,
            lw=1,
        )
        for xi, task in zip(xs, piv.index):
            v = (paper or {}).get(m, {}).get(task)
            if v is not None:
                plots.paper_marker(ax, xi, v, label=None if starred else paper_label)
                starred = True
    n = int(df.groupby(["task", "label"])["seed"].nunique().min()) if "seed" in df else 1
    ax.set_xticks(range(len(piv)))
    ax.set_xticklabels(piv.index)
    ax.set_ylabel("simulated time to target")
    ax.set_title(
        f"Fig. 7: time to each task's target ({n} seed{'s' if n > 1 else ''}; "
        "bar = mean, whisker = min–max)"
    )
    ax.legend(fontsize=8)
    return ax
