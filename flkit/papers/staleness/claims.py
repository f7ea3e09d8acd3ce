"""Claim verdicts of notebook 05 as functions of result tables; thresholds are named parameters.
Each returns (holds, evidence); Report.claim records a smoke run's verdict as inconclusive."""

from __future__ import annotations

import math

import pandas as pd


def staleness_hurts(acc: pd.DataFrame, min_gap: float = 2.0):
    """Unstale beats Unweighted on the affected class by at least `min_gap` points."""
    u, s = acc.loc["unstale", "acc"], acc.loc["unweighted", "acc"]
    return u - s >= min_gap, f"Unstale {u:.1f} % vs Unweighted {s:.1f} %"


def weighted_worst(acc: pd.DataFrame, margin: float = 2.0, chance: float = 10.0):
    """Weighted is below every other stale-update method by at least `margin` points. A method
    that diverged (below `chance` %) is a failure of its own, not evidence about Weighted: it is
    left out of the comparison and named in the evidence."""
    others = acc.drop(index=[m for m in ("unstale", "weighted") if m in acc.index])["acc"]
    diverged = sorted(others[others < chance].index)
    others = others[others >= chance]
    w = acc.loc["weighted", "acc"]
    note = f" ({', '.join(diverged)} diverged, left out)" if diverged else ""
    return (
        w <= others.min() - margin,
        f"Weighted {w:.1f} % vs the others' minimum {others.min():.1f} %{note}",
    )


def compensations_track_unweighted(acc: pd.DataFrame, tol: float = 2.0, chance: float = 10.0):
    """1st-Order and W-Pred end within `tol` points of Unweighted (a method below `chance` % is
    named as diverged in the evidence)."""
    u = acc.loc["unweighted", "acc"]
    d = {m: acc.loc[m, "acc"] - u for m in ("first_order", "w_pred")}
    tag = {m: " (diverged)" if acc.loc[m, "acc"] < chance else "" for m in d}
    return all(abs(v) <= tol for v in d.values()), ", ".join(
        f"{m} {v:+.1f} points{tag[m]}" for m, v in d.items()
    ) + " vs Unweighted"


def gi_beats_unweighted(acc: pd.DataFrame, min_gain: float = 2.0):
    """Ours ends at least `min_gain` points above Unweighted and Unweighted needs more rounds
    (Time > 100) to reach the common target."""
    g, u = acc.loc["gi_staleness", "acc"], acc.loc["unweighted", "acc"]
    t = acc.loc["unweighted", "time"]
    ok = g - u >= min_gain and (t > 100 if not math.isnan(t) else False)
    return ok, f"Ours {g:.1f} % vs Unweighted {u:.1f} % (Unweighted's Time {t:.0f} vs Ours 100)"


def gi_error_lower_at_large_tau(err: pd.DataFrame):
    """At the largest staleness measured, the GI estimate is closer (cosine distance) to the
    unstale update than both the stale update and 1st-Order; stale error grows with tau."""
    big = err["tau"].max()
    e = err[err["tau"] == big].set_index("estimator")["cos"]
    small = err[err["tau"] == err["tau"].min()].set_index("estimator")["cos"]
    grows = e["stale"] > small["stale"]
    ok = bool(e["GI"] < min(e["stale"], e["1st-Order"]) and grows)
    return ok, (
        f"tau={big}: GI {e['GI']:.3f}, stale {e['stale']:.3f}, 1st-Order "
        f"{e['1st-Order']:.3f}; stale error {small['stale']:.3f} at tau={err['tau'].min()}"
    )


def e2_falls_below_e1(sw: pd.DataFrame, col: str = "l1"):
    """E2 (stale vs truth) shrinks over training and ends below E1 (GI vs truth) at some round."""
    if len(sw) < 2:
        return None, "fewer than two rounds with an inversion"
    e1, e2 = sw[f"err_gi_{col}"].values, sw[f"err_stale_{col}"].values
    half = len(e2) // 2 or 1
    shrinks = e2[half:].mean() < e2[:half].mean()
    below = (e2 < e1).any()
    return bool(shrinks and below), (
        f"E2 first half {e2[:half].mean():.3f}, second half "
        f"{e2[half:].mean():.3f}; E2 < E1 in {(e2 < e1).sum()} of "
        f"{len(e2)} inversion rounds"
    )


def efficiency_devices(sparse: pd.DataFrame, warm: pd.DataFrame, max_error_rise: float = 0.1):
    """Top-5 % masking saves iterations with an error rise <= `max_error_rise` (cosine distance),
    and warm start saves iterations when the data did not change."""
    row = sparse[(sparse["sparsification"] - 0.95).abs() < 1e-9]
    if row.empty:
        return None, "top-5 % not measured"
    saved = float(row["computation_reduction"].iloc[0])
    rise = float(row["error"].iloc[0] - sparse["error"].iloc[0])
    w = float(warm[warm["data_changed"] == 0]["saved"].iloc[0])
    ok = saved > 0 and rise <= max_error_rise and w > 0
    return ok, (
        f"top-5 %: {100 * saved:.0f} % fewer iterations, error {rise:+.3f}; "
        f"warm start saves {100 * w:.0f} %"
    )


def privacy_degrades(priv: pd.DataFrame, factor: float = 2.0):
    """Recovery of a single sample degrades with sparsification: MSE at 95 % >= factor x MSE
    at 0 %."""
    numeric = priv["sparsification"].apply(lambda v: not isinstance(v, str))
    p = priv[numeric].set_index("sparsification")
    a, b = p.loc[0.0, "mse"], p.loc[0.95, "mse"]
    return b >= factor * a, f"MSE {a:.4f} without sparsification, {b:.4f} at 95 %"


def detection_accurate(det: pd.DataFrame, min_acc: float = 0.8):
    """After the first measured round, the uniqueness test is right at least `min_acc` of the
    time on average (the paper: 89-95 % from round 100 on, 93 % on average)."""
    late = det[det["round"] > det["round"].min()]
    if late.empty:
        return None, "a single measured round"
    a = float(late["accuracy"].mean())
    return a >= min_acc, f"mean accuracy {100 * a:.0f} % over rounds {late['round'].tolist()}"
