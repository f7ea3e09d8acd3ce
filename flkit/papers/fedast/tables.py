"""Tables of notebook 03 (FedAST) read from finished simulations (``SimResult``) and from the
study's DataFrames; nothing here runs a simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flkit import metrics

__all__ = [
    "summarize",
    "events",
    "staleness",
    "curves",
    "final_test_loss",
    "gain_table",
    "buffer_table",
]


# ------------------------------------------------------------------------------ reading results
def summarize(res) -> dict:
    """Per-run summary: completion per task, time all done (None if some task did not finish),
    mean task time, final accuracies, wall seconds, trainings."""
    ct = dict(res.completion_time)
    done = all(v is not None for v in ct.values())
    return {
        "method": res.method,
        "all_done": max(ct.values()) if done else None,
        "mean_task_time": float(np.mean(list(ct.values()))) if done else None,
        "completion": ct,
        "final_accuracy": res.stats.get("final_accuracy", {}),
        "wall_seconds": res.stats.get("wall_seconds"),
        "trained": res.stats.get("trained"),
        "total_time": res.total_time,
    }


def events(res) -> pd.DataFrame:
    """The event log as a DataFrame with task names (robust to rows without a task)."""
    return res.events_frame()


def staleness(res) -> pd.DataFrame:
    """Staleness of every arrived update: columns task, staleness, time."""
    ev = events(res)
    ev = ev[ev.kind == "arrive"]
    return ev[["task", "staleness", "time"]].astype({"staleness": int}).reset_index(drop=True)


def curves(res) -> pd.DataFrame:
    """Accuracy (and test loss, where recorded) vs simulated time at the evaluated points:
    task, round, sim_time, accuracy[, test_loss]."""
    h = pd.DataFrame(res.history)
    if h.empty:
        return h
    cols = ["task", "round", "sim_time", "accuracy"] + (["test_loss"] if "test_loss" in h else [])
    return h[h.accuracy.notna()][cols].reset_index(drop=True)


def final_test_loss(res) -> float:
    """Mean over tasks of the test loss at each task's last evaluation (NaN if not recorded)."""
    c = curves(res)
    if c.empty or "test_loss" not in c:
        return float("nan")
    return float(c.groupby("task").test_loss.last().mean())


def gain_table(
    df: pd.DataFrame,
    baseline: str = "sync_st",
    method: str = "fedast_d",
    by: str = "M",
    col: str = "all_done",
) -> pd.DataFrame:
    """Per ``by`` value and seed: baseline time, method time, gain % = (T_b - T_m) / T_b x 100;
    plus a 'mean' row per ``by`` value (gain of the seed-mean times). A run that did not finish
    (time None) gives gain None."""
    rows = []
    for key, g in df.groupby(by):
        per = []
        for s, gs in g.groupby("seed"):
            tb = gs[gs.method == baseline][col]
            tm = gs[gs.method == method][col]
            tb = None if tb.empty or pd.isna(tb.iloc[0]) else float(tb.iloc[0])
            tm = None if tm.empty or pd.isna(tm.iloc[0]) else float(tm.iloc[0])
            per.append((tb, tm))
            rows.append(
                {
                    by: key,
                    "seed": s,
                    "baseline": tb,
                    "method": tm,
                    "gain_pct": metrics.time_gain(tb, tm),
                }
            )
        ok = [(a, b) for a, b in per if a is not None and b is not None]
        if ok:
            mb, mm = float(np.mean([a for a, _ in ok])), float(np.mean([b for _, b in ok]))
            rows.append(
                {
                    by: key,
                    "seed": "mean",
                    "baseline": mb,
                    "method": mm,
                    "gain_pct": metrics.time_gain(mb, mm),
                }
            )
    return pd.DataFrame(rows)


def buffer_table(buf: pd.DataFrame) -> pd.DataFrame:
    """Figs. 8/9 as a table: per buffer (rows) and task (columns), the fraction of seeds that
    reached the target, the mean time to target and the mean final accuracy.
    ``buf``: ``study.buffer_sweep``'s frame."""
    g = buf.groupby(["buffer", "task"])
    return (
        g.agg(reached=("reached", "mean"), time_to_target=("time_to_target", "mean"))
        .join(g.final_accuracy.mean())
        .unstack()
    )
