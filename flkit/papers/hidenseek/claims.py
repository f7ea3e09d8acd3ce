"""Verdicts on the paper's claims, as functions of the study's result tables.

Each function returns (holds, evidence). Thresholds are named parameters, fixed before any run.
Report.claim records a verdict as "inconclusive" at the smoke preset (too small to say anything).
"""

from __future__ import annotations

import pandas as pd

BASELINES = ("FedMask", "Signed", "BNNAvg")


def _pivot(acc: pd.DataFrame, value: str = "mean") -> pd.DataFrame:
    return acc.pivot(index="task", columns="method", values=value)


def beats_baselines(acc: pd.DataFrame, tasks, margin: float = 0.0):
    """HideNseek's final accuracy exceeds FedMask, Signed and BNNAvg by more than `margin` points
    on every task in `tasks`, and stays below FedAvg (claim 1)."""
    piv = _pivot(acc).loc[list(tasks)]
    lead = piv["HideNseek"] - piv[list(BASELINES)].max(axis=1)
    below = piv["HideNseek"] < piv["FedAvg"]
    ev = "; ".join(
        f"{t}: HideNseek {piv.at[t, 'HideNseek']:.1f} vs best baseline "
        f"{piv.loc[t, list(BASELINES)].max():.1f}, FedAvg {piv.at[t, 'FedAvg']:.1f}"
        for t in piv.index
    )
    return bool((lead > margin).all()), bool(below.all()), ev


def margin_narrows(acc: pd.DataFrame, skewed: str = "mnist_a0.1", mild: str = "mnist_a1"):
    """HideNseek's lead over FedMask is smaller at alpha = 0.1 than at alpha = 1 (claim 2)."""
    piv = _pivot(acc)
    lead = piv["HideNseek"] - piv["FedMask"]
    return bool(
        lead[skewed] < lead[mild]
    ), f"lead over FedMask: alpha 0.1 {lead[skewed]:+.1f}, alpha 1 {lead[mild]:+.1f} points"


def traffic_order(byt: pd.DataFrame, task: str = "har", ratio_tol: float = 0.01):
    """Per-round traffic HideNseek < FedMask = Signed < BNNAvg < FedAvg = 4 x BNNAvg, and
    HideNseek below FedMask in both directions (claim 3)."""
    t = byt[byt.task == task].set_index("method")
    tot = t["up_MiB"] + t["down_MiB"]
    order = (
        tot["HideNseek"] < min(tot["FedMask"], tot["Signed"])
        and max(tot["FedMask"], tot["Signed"]) < tot["BNNAvg"] < tot["FedAvg"]
    )
    four = abs(tot["FedAvg"] / tot["BNNAvg"] - 4) < 4 * ratio_tol
    both = (
        t.at["HideNseek", "up_MiB"] < t.at["FedMask", "up_MiB"]
        and t.at["HideNseek", "down_MiB"] < t.at["FedMask", "down_MiB"]
    )
    ev = ", ".join(
        f"{m} {tot[m]:.3f}" for m in ("HideNseek", "FedMask", "Signed", "BNNAvg", "FedAvg")
    )
    return bool(order and four and both), f"{task}, MiB per client per round (up + down): {ev}"


def time_order(tim: pd.DataFrame, task: str = "har"):
    """Local training time per round: FedAvg < HideNseek < FedMask, Signed (claim 4)."""
    t = tim[tim.task == task].set_index("method")["per_round_s"]
    holds = t["FedAvg"] < t["HideNseek"] < min(t["FedMask"], t["Signed"])
    ev = ", ".join(f"{m} {t[m]:.2f} s" for m in ("FedAvg", "HideNseek", "FedMask", "Signed"))
    return bool(holds), f"{task}, seconds per round (wall-clock, each run timed alone): {ev}"


def small_keep_ratio_harmless(kr: pd.DataFrame, tasks, max_drop: float = 2.0):
    """Cutting p_r from 0.8 to 0.2 costs at most `max_drop` points on the mild tasks (claim 5)."""
    piv = kr.pivot(index="task", columns="keep_ratio", values="mean").loc[list(tasks)]
    lo, hi = min(piv.columns), max(piv.columns)
    drop = piv[hi] - piv[lo]
    return bool((drop <= max_drop).all()), "; ".join(
        f"{t}: p_r {hi:g} {piv.at[t, hi]:.1f} vs {lo:g} {piv.at[t, lo]:.1f}" for t in piv.index
    )


def more_clients_no_help(act: pd.DataFrame, tolerance: float = 1.0):
    """More active clients per round do not raise HideNseek's accuracy by more than `tolerance`
    points (the paper: a slight drop), while FedMask's does not fall (claim 6)."""
    piv = act.pivot(index="active", columns="method", values="mean")
    lo, hi = piv.index.min(), piv.index.max()
    h = piv.at[hi, "HideNseek"] - piv.at[lo, "HideNseek"]
    f = piv.at[hi, "FedMask"] - piv.at[lo, "FedMask"]
    return bool(
        h <= tolerance and f >= -tolerance
    ), f"{lo} -> {hi} clients per round: HideNseek {h:+.1f}, FedMask {f:+.1f} points"
