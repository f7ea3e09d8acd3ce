"""Figures for notebook 03 (FedAST). Every helper reads results (SimResult / DataFrames) and
never re-runs training; each accepts ``ax=None`` and returns the Axes (or Figure)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flkit.plots import COLORS, color_for, new_ax

from . import tables as S

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

    ev = S.events(res)
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
    ax.set_title("Client queues (FCFS): requests of two tasks, bar = processing, line = waiting")
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
    else one per task."""
    ax = new_ax(ax)
    for label, res in results.items():
        c = S.curves(res)
        if c.empty or metric not in c:
            continue
        c = c.rename(columns={metric: "_y"})
        if mean_over_tasks:
            piv = c.pivot_table(index="sim_time", columns="task", values="_y").sort_index().ffill()
            ax.plot(piv.index, piv.mean(axis=1), label=label, color=color_for(label))
        else:
            for j, (t, g) in enumerate(c.groupby("task", sort=False)):
                ls = ["-", "--", ":", "-."][j % 4]
                ax.plot(g.sim_time, g._y, ls, color=color_for(label), label=f"{label}: {t}")
                ct = res.completion_time.get(t)
                if ct is not None:
                    ax.axvline(ct, color=color_for(label), ls=ls, lw=0.8, alpha=0.6)
    for _t, v in (targets or {}).items():
        ax.axhline(v, color="black", lw=0.8, ls=":")
    ax.set_xlabel("simulated time")
    ax.set_ylabel("test accuracy" if metric == "accuracy" else metric.replace("_", " "))
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
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
):
    """Bars of the seed-mean time to target per ``by`` value for baseline and method, annotated
    with the gain %; ``paper``: {by value: paper gain %} printed beside ours."""
    ax = new_ax(ax)
    keys = sorted(df[by].unique())
    w = 0.38
    for j, m in enumerate((baseline, method)):
        vals, errs = [], []
        for k in keys:
            v = df[(df[by] == k) & (df.method == m)][col].astype(float)
            vals.append(v.mean() if v.notna().all() and len(v) else np.nan)
            errs.append(v.std(ddof=0) if len(v) > 1 else 0)
        label = {"fedast_d": "FedAST", "sync_st": "Sync-ST"}.get(m, m)
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
            top = g.baseline.iloc[0]
            txt = f"{g.gain_pct.iloc[0]:.1f}%"
            if paper and k in paper and paper[k] is not None:
                txt += f"\n(paper {paper[k]})"
            ax.text(i, top * 1.03, txt, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{by} = {k}" for k in keys])
    ax.set_ylabel("time until all tasks reach target")
    ax.legend()
    return ax


def staleness_hist(results: dict, ax=None, bins: int | None = None):
    """Histogram of update staleness (server versions between dispatch and arrival) per run."""
    ax = new_ax(ax)
    for label, res in results.items():
        st = S.staleness(res).staleness
        if st.empty:
            continue
        hi = int(st.max())
        b = bins or np.arange(-0.5, hi + 1.5, max(1, (hi + 1) // 40))
        ax.hist(
            st,
            bins=b,
            alpha=0.55,
            label=f"{label} (mean {st.mean():.1f})",
            color=color_for(label),
            density=True,
        )
    ax.set_xlabel("staleness (server updates between dispatch and arrival)")
    ax.set_ylabel("fraction of updates")
    ax.legend(fontsize=8)
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
):
    """Mean (± std over seeds) of ``y`` vs ``x``, one line per ``hue`` value; ``mark`` draws a
    red star at that x (the paper's choice)."""
    ax = new_ax(ax)
    groups = df.groupby(hue) if hue else [(y, df)]
    for name, g in groups:
        s = g.groupby(x)[y].agg(["mean", "std"]).reset_index()
        label = str(name)
        ax.errorbar(
            s[x],
            s["mean"],
            yerr=s["std"].fillna(0),
            marker="o",
            capsize=3,
            label=label,
            color=color_for(label),
        )
        if mark is not None and mark in set(s[x]):
            ax.plot([mark], [float(s[s[x] == mark]["mean"].iloc[0])], "*", color="red", ms=14)
    if hline is not None:
        ax.axhline(hline, color=color_for("centralised"), ls="--", label=hline_label or "reference")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or y)
    ax.legend(fontsize=8)
    return ax


def het_bars(df: pd.DataFrame, ax=None):
    """Fig. 7: mean time to target per task and method (tasks sorted by FedAST's times)."""
    ax = new_ax(ax)
    piv = df.groupby(["task", "label"])["time"].mean().unstack()
    order = piv.sort_values(piv.columns[0]).index
    piv = piv.loc[order]
    w = 0.8 / max(1, len(piv.columns))
    for j, m in enumerate(piv.columns):
        ax.bar(
            np.arange(len(piv)) + (j - (len(piv.columns) - 1) / 2) * w,
            piv[m],
            w,
            label=m,
            color=color_for(m),
        )
    ax.set_xticks(range(len(piv)))
    ax.set_xticklabels(piv.index)
    ax.set_ylabel("time to target (mean over seeds)")
    ax.legend()
    return ax
