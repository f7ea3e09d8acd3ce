"""Verdicts of the FedAST paper's claims from notebook 03's study results.

Each function takes the tables the studies in `study.py` return and gives
`(holds, evidence)`: holds is True only when the claim holds for every seed, evidence is the
text shown beside the verdict. The thresholds are named parameters so a reader can see (and
change) what "far slower" or "about equal" means here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from flkit import metrics
from flkit.utils import FlkitError

from .configs import IDENTICAL_FEDAST as _IDENTICAL_FEDAST
from .tables import curves

#: Fig. 2: "far slower" is more than this factor times Sync-ST's time ...
FAR_SLOWER = 1.2
#: ... and "about equal" within this fraction of Sync-ST's time.
NEAR = 0.3
#: Figs. 3/13: FedAST and NoBuffer are "about equal" when their mean final accuracies differ by
#: less than EQUAL_GAP, and NoBuffer "falls behind" by more than MIN_GAP.
EQUAL_GAP, MIN_GAP = 0.03, 0.01
#: Figs. 21-26: a "small margin" is a gain of at most this many percent.
SMALL_GAIN_PCT = 20.0


#: a claim comparing run outcomes (times to target, accuracies, curve noise) needs at least this
#: many seeds: with fewer the spread over seeds is not measured, so the run cannot tell the effect
#: from seed noise and the verdict is inconclusive (its reason keeps the face-value outcome)
MIN_SEEDS = 2


def seed_rule(holds, seeds, min_seeds: int = MIN_SEEDS) -> tuple[object, str]:
    """``(holds, reason)`` for ``report.claim``: unchanged (reason "") with at least
    ``min_seeds`` distinct seeds; otherwise ``(None, reason)``, the reason naming the seeds and
    the face-value outcome, which makes the verdict inconclusive (``flkit.workbook.verdict``)."""
    if isinstance(min_seeds, bool) or not isinstance(min_seeds, int) or min_seeds < 1:
        raise FlkitError(f"min_seeds={min_seeds!r}; accepted: an integer >= 1")
    distinct = sorted({int(s) for s in seeds})
    if len(distinct) >= min_seeds:
        return holds, ""
    face = {True: "it holds", False: "it does not hold"}.get(holds, "it cannot be judged either")
    return None, (
        f"{len(distinct)} seed(s) {distinct}, fewer than {min_seeds}: the spread over seeds is "
        f"not measured, so the effect cannot be told from seed noise; at face value {face}"
    )


#: the binomial standard error of an accuracy (shared with the other papers' noise bands)
binomial_se = metrics.binomial_se


#: the FedAST variant of the identical-task experiments (option S, as the paper)
IDENTICAL_FEDAST = _IDENTICAL_FEDAST


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) or pd.isna(v) else float(v)


def all_done_by_seed(
    df: pd.DataFrame, method: str, n_tasks: int | None = None
) -> dict[int, float | None]:
    """{seed: time when every task reached its target (None: not reached)} for one method."""
    g = df[(df.method == method) & ((df.M == n_tasks) if n_tasks is not None else True)]
    return {int(s): _num(v) for s, v in zip(g.seed, g.all_done)}


def _earlier(a, b) -> bool:
    """a finished, and before b (b not finishing counts as later)."""
    return a is not None and (b is None or a < b)


def _near(x, y, rel: float) -> bool:
    return x is not None and y is not None and abs(x - y) <= rel * y


def sync_variants(
    df: pd.DataFrame,
    seeds: Iterable[int],
    nomit_factor: float = FAR_SLOWER,
    near_rel: float = NEAR,
    fedast: str = IDENTICAL_FEDAST,
) -> dict[str, tuple[bool, str]]:
    """Fig. 2 claims: FedAST (method ``fedast``) before Sync-ST; Sync-ST without mitigation >
    nomit_factor x slower; Sync-UCB-ST and Sync-Bayes-ST within near_rel of Sync-ST. Every seed."""
    seeds = list(seeds)
    names = (fedast, "sync_st", "sync_st_nomit", "sync_ucb", "sync_bayes")
    fa, sy, nm, ucb, bay = (all_done_by_seed(df, m) for m in names)
    ev = "; ".join(
        f"seed {s}: FedAST {fa[s]}, Sync-ST {sy[s]}, NoMit {nm[s]}, UCB {ucb[s]}, Bayes {bay[s]}"
        for s in seeds
    ).replace("None", "not reached")
    first = all(_earlier(fa[s], sy[s]) for s in seeds)
    slower = all(
        _earlier(sy[s], nm[s]) and (nm[s] is None or nm[s] > nomit_factor * sy[s]) for s in seeds
    )
    near = all(_near(ucb[s], sy[s], near_rel) and _near(bay[s], sy[s], near_rel) for s in seeds)
    return {"fedast_first": (first, ev), "nomit_slower": (slower, ev), "ucb_bayes_near": (near, ev)}


def gain_grows(gain_table: pd.DataFrame, seeds: Iterable[int]) -> tuple[bool, str]:
    """Fig. 5 claim: for every seed the gain at the largest M exceeds the gain at the
    smallest M (gain_table: `tables.gain_table` output, rows per seed and 'mean')."""
    grow = []
    per_seed = gain_table[gain_table.seed != "mean"]
    for s in seeds:
        g = [_num(x) for x in per_seed[per_seed.seed == s].sort_values("M").gain_pct]
        grow.append(bool(g) and all(x is not None for x in g) and g[-1] > g[0])
    means = gain_table[gain_table.seed == "mean"].set_index("M")["gain_pct"]
    ev = ", ".join(f"M={M}: {g:.1f}%" for M, g in means.items() if not pd.isna(g))
    return all(grow), ev


def _task_curves(res):
    """[(times, accuracies)] per task, at its evaluated points, in time order."""
    c = curves(res)
    if c.empty:
        return []
    return [
        (g.sim_time.to_numpy(float), g.accuracy.to_numpy(float))
        for _, g in c.sort_values("sim_time", kind="stable").groupby("task", sort=False)
    ]


def mean_test_interval(res) -> float:
    """Mean simulated time between two consecutive tests of a task (over tasks; NaN: none)."""
    gaps = [np.diff(t).mean() for t, _ in _task_curves(res) if len(t) > 1]
    return float(np.mean(gaps)) if gaps else float("nan")


def curve_noise(res, step: float | None = None) -> float:
    """Mean over tasks of the mean |Δ accuracy| between consecutive points of the task's curve.

    With ``step`` the curve is read on a grid of ``step`` time units from its first test (the last
    test at or before each grid time), so that runs testing at different rates are compared at one
    time resolution: per test, a run that tests six times as often shows a smaller change per
    point on the same curve."""
    per_task = []
    for t, acc in _task_curves(res):
        if step is not None and len(t):
            grid = np.arange(t[0], t[-1] + 1e-9 * max(1.0, t[-1]), step)
            acc = acc[np.searchsorted(t, grid, side="right") - 1]
        if len(acc) > 2:
            per_task.append(metrics.mean_abs_change(acc))
    return float(np.mean(per_task)) if per_task else float("nan")


def nobuffer_noisier(fedast: dict, nobuffer: dict) -> tuple[bool, str]:
    """Fig. 4 claim: NoBuffer's curve is noisier than FedAST's, every seed.
    fedast / nobuffer: {seed: SimResult}. Both curves of a seed are read at one resolution, the
    coarser of the two runs' mean test intervals (NoBuffer steps, and so tests, once per arrival;
    FedAST once per buffer of b arrivals)."""
    nz = {}
    for s in fedast:
        step = max(mean_test_interval(fedast[s]), mean_test_interval(nobuffer[s]))
        nz[s] = (curve_noise(fedast[s], step), curve_noise(nobuffer[s], step), step)
    ev = (
        "; ".join(f"seed {s}: FedAST {a:.4f}, NoBuffer {b:.4f}" for s, (a, b, _) in nz.items())
        + " (mean |Δacc| per "
        + ", ".join(f"{st:.3g}" for *_, st in nz.values())
        + " time units)"
    )
    return all(b > a for a, b, _ in nz.values()), ev


def first_finished(res) -> str:
    return min(
        res.completion_time,
        key=lambda k: res.completion_time[k] if res.completion_time[k] is not None else math.inf,
    )


def requests_moved(res) -> bool:
    """After the first task finishes, the other tasks hold more requests than just before."""
    h = pd.DataFrame(res.history)
    first = first_finished(res)
    t_done = res.completion_time[first]
    if t_done is None:
        return False
    others = [t for t in res.tasks if t != first]
    before = h[(h.sim_time < t_done) & h.task.isin(others)].groupby("task").requests.last()
    after = h[(h.sim_time > t_done) & h.task.isin(others)].groupby("task").requests.max()
    return bool(len(after) and after.sum() > before.sum())


def heterogeneous(het_df: pd.DataFrame, fedast: dict, easy_task: str) -> dict:
    """Figs. 6/7 claim and numbers. het_df rows: method, seed, task, time (NaN: not reached);
    fedast: {seed: SimResult of FedAST}. Returns the all-done times, per-seed and mean gains, the
    first task, the seeds where a method did not finish, and (holds, evidence).

    The mean all-done times (and the gain between them) are over the *same* seeds for both
    methods: the seeds where both finished. A seed where one did not finish is excluded from both
    means and named in ``unfinished`` and in the evidence (it also makes the claim fail)."""
    done = (
        het_df.groupby(["method", "seed"])
        .time.apply(lambda v: None if v.isna().any() else float(v.max()))
        .unstack()
    )
    seeds = sorted(fedast)
    sync = {s: _num(done.loc["sync_st", s]) for s in seeds}
    fast = {s: _num(done.loc["fedast_d", s]) for s in seeds}
    gains = {s: metrics.time_gain(sync[s], fast[s]) for s in seeds}
    both = [s for s in seeds if sync[s] is not None and fast[s] is not None]
    unfinished = {
        s: [lab for lab, d in (("FedAST", fast), ("Sync-ST", sync)) if d[s] is None]
        for s in seeds
        if s not in both
    }
    first = het_df[het_df.method == "fedast_d"].groupby("task").time.mean()
    mean_sync = float(np.mean([sync[s] for s in both])) if both else None
    mean_fedast = float(np.mean([fast[s] for s in both])) if both else None
    moved = [requests_moved(fedast[s]) for s in seeds]
    easy_first = all(first_finished(fedast[s]) == easy_task for s in seeds)
    holds = easy_first and all(moved) and all(g is not None and g > 0 for g in gains.values())
    ev = f"easy first: {easy_first}; requests moved: {moved}; gains per seed: " + ", ".join(
        f"{s}: {g:.1f}%" if g is not None else f"{s}: n/a" for s, g in gains.items()
    )
    if unfinished:
        ev += "; not finished (seed left out of both means): " + ", ".join(
            f"seed {s}: {' and '.join(m)}" for s, m in unfinished.items()
        )
    return {
        "first_task": first.idxmin(),
        "first_time": float(first.min()),
        "all_done_fedast": mean_fedast,
        "all_done_sync": mean_sync,
        "gain_pct": metrics.time_gain(mean_sync, mean_fedast),
        "gains": gains,
        "seeds_compared": both,
        "unfinished": unfinished,
        "holds": bool(holds),
        "evidence": ev,
    }


def dynamic_vs_static(
    dvs: pd.DataFrame, max_small_gain: float = SMALL_GAIN_PCT
) -> tuple[pd.DataFrame, bool, str]:
    """Figs. 21-26 claim: dynamic beats static by a small margin (<= max_small_gain %) that
    grows with target difficulty (levels in the order given, easiest first)."""
    rows = []
    for level, g in dvs.groupby("level", sort=False):
        d = g[g.method == "fedast_d"].all_done.astype(float).mean()
        s = g[g.method == "fedast_s"].all_done.astype(float).mean()
        rows.append(
            {
                "level": level,
                "static": s,
                "dynamic": d,
                "gain_pct": metrics.time_gain(_num(s), _num(d)),
            }
        )
    gains = [r["gain_pct"] for r in rows]
    holds = (
        bool(gains)
        and all(x is not None for x in gains)
        and gains[0] > 0
        and gains[-1] >= gains[0]
        and max(gains) <= max_small_gain
    )
    ev = ", ".join(
        f"{r['level']}: {r['gain_pct']:.1f}%" if r["gain_pct"] is not None else f"{r['level']}: n/a"
        for r in rows
    )
    return pd.DataFrame(rows), bool(holds), ev


def few_vs_many_active(
    act: pd.DataFrame, equal_tol: float = EQUAL_GAP, min_gap: float = MIN_GAP
) -> tuple[bool, str, float, float]:
    """Figs. 3/13 claim: FedAST ~ NoBuffer with few active clients (|accuracy gap| < equal_tol at
    the fewest requests), NoBuffer falls behind with many (gap grows and exceeds min_gap at the
    most requests). act: `study.active_sweep` output. Returns (holds, evidence, gap at fewest,
    gap at most); gap = mean final accuracy of FedAST minus NoBuffer."""
    m = act.groupby(["requests", "method"]).final_accuracy.mean().unstack()
    lo, hi = m.index.min(), m.index.max()
    gap_lo = float(m.loc[lo, "fedast_d"] - m.loc[lo, "nobuffer"])
    gap_hi = float(m.loc[hi, "fedast_d"] - m.loc[hi, "nobuffer"])
    holds = abs(gap_lo) < equal_tol and gap_hi > gap_lo and gap_hi > min_gap
    ev = f"gap (FedAST − NoBuffer) {gap_lo:+.3f} at R={lo}, {gap_hi:+.3f} at R={hi}"
    return bool(holds), ev, gap_lo, gap_hi


def buffer_optimum(buf: pd.DataFrame) -> tuple[bool, str, int | None]:
    """Figs. 8/9 claim: the buffer sweep has an interior optimum: the buffer with the shortest
    mean time to target (over tasks and seeds; a point where some task did not reach its target
    by the horizon ranks after every point that did) is neither the smallest nor the largest
    swept. buf: `study.buffer_sweep` output. Returns (holds, evidence, best buffer; None when no
    point reached every target)."""
    ok = buf.groupby("buffer").reached.all()
    t = buf.groupby("buffer").time_to_target.mean()
    done = [int(b) for b in ok.index if ok[b]]
    parts = []
    for b in ok.index:
        if ok[b]:
            parts.append(f"{int(b)}: {t[b]:.3g}")
        else:
            miss = int((~buf[buf.buffer == b].reached.astype(bool)).sum())
            n = int((buf.buffer == b).sum())
            parts.append(f"{int(b)}: not reached ({miss} of {n} by t = {buf.horizon.max():g})")
    ev = "mean time to target by b: " + ", ".join(parts)
    if not done:
        return False, ev, None
    best = min(done, key=lambda b: (t[b], b))
    holds = best not in (int(ok.index.min()), int(ok.index.max()))
    return bool(holds), ev, best


def k_tradeoff(ksw: pd.DataFrame) -> tuple[bool, str]:
    """Figs. 10-12 claim: a larger first-k gives longer rounds (mean round length non-decreasing
    in k) and fewer rounds (largest k needs fewer than smallest k). ksw: `study.k_sweep`."""
    kt = ksw.groupby("k")[["rounds", "round_length"]].mean()
    longer = bool(kt.round_length.is_monotonic_increasing)
    fewer = bool(kt.rounds.iloc[-1] < kt.rounds.iloc[0])
    ev = (
        f"round length increasing in k: {longer}; rounds at k={kt.index[0]}: "
        f"{kt.rounds.iloc[0]:.1f} vs k={kt.index[-1]}: {kt.rounds.iloc[-1]:.1f}"
    )
    return longer and fewer, ev


def best_k(ksw: pd.DataFrame) -> int | None:
    """The k with the shortest mean time to target (None if no k reached it)."""
    t = ksw.groupby("k").time_to_target.mean()
    return int(t.idxmin()) if t.notna().any() else None
