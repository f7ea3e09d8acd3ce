"""Regime indicators of notebook 05's accuracy claims: where staleness costs accuracy.

The paper's comparisons (Tables 9-11) are made where stale updates cost the affected class
accuracy that a compensation can win back: its models are still under-trained at 800 rounds
(82 % even at alpha = 1), and its method gains 3.8 points over Unweighted at alpha = 0.1,
tau = 40, so the cost of staleness (Unstale minus Unweighted, which bounds any compensation's
gain) is at least that. Two indicators:

- ``staleness_gap``: Unstale minus Unweighted, affected-class accuracy (points, mean over seeds);
  the rule asks for at least 4 points, the gain the paper's text claims;
- ``still_rising``: Unweighted's affected-class accuracy over the last quarter of the run minus
  over the quarter before (points): a run that has settled leaves the stale update nearly right.

A compensation claim judged where the gap is small is outside the regime, whatever its outcome.

Interface (the same in every paper's ``regime.py``): ``paper_indicators()`` (here the constant
``INDICATORS``), ``measure(...)``, ``readings(ours, keys)``, ``in_regime(ours)``, ``CLAIMS``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.utils import FlkitError
from flkit.workbook.verdict import Indicator, above, at_least, read

#: Unstale minus Unweighted must be at least this many points of affected-class accuracy
MIN_GAP = 4.0

INDICATORS = {
    "staleness_gap": Indicator(
        "staleness_gap",
        "Unstale minus Unweighted, affected-class accuracy",
        "≥ 3.8 (Ours − Unweighted, Table 10, α = 0.1, τ = 40; Unstale not reported)",
        at_least(MIN_GAP),
        unit="points",
    ),
    "still_rising": Indicator(
        "still_rising",
        "Unweighted: affected-class accuracy, last quarter of the run minus the quarter before",
        "still rising at round 800 (82 % at α = 1)",
        above(0.0),
        unit="points",
    ),
}

_COMPENSATION = ("staleness_gap", "still_rising")
#: which indicators each claim depends on (claim function name -> keys)
CLAIMS = {
    "staleness_hurts": ("still_rising",),
    "weighted_worst": _COMPENSATION,
    "compensations_track_unweighted": _COMPENSATION,
    "gi_beats_unweighted": _COMPENSATION,
}

__all__ = [
    "INDICATORS",
    "CLAIMS",
    "paper_indicators",
    "measure",
    "readings",
    "in_regime",
    "late_rise",
]


def late_rise(hist: pd.DataFrame, method: str = "unweighted") -> float | None:
    """Mean over seeds of (mean affected-class accuracy in the last quarter of the rounds minus
    in the quarter before), in points; None without evaluations in both quarters."""
    ev = hist[hist.method == method].dropna(subset=["affected_accuracy"])
    if ev.empty:
        return None
    last = int(ev["round"].max())
    q = max(1, last // 4)
    rises = []
    for _, g in ev.groupby("seed"):
        late = g[g["round"] > last - q].affected_accuracy
        before = g[(g["round"] > last - 2 * q) & (g["round"] <= last - q)].affected_accuracy
        if len(late) and len(before):
            rises.append(100 * (late.mean() - before.mean()))
    return float(sum(rises) / len(rises)) if rises else None


def measure(acc: pd.DataFrame, hist: pd.DataFrame) -> dict:
    """Our indicators: ``acc`` = ``study.accuracy_table`` (by method: acc in %), ``hist`` = the
    histories it came from (``study.compare``)."""
    missing = [m for m in ("unstale", "unweighted") if m not in acc.index]
    if missing:
        raise FlkitError(
            f"the staleness gap needs the methods {missing}; the table has {list(acc.index)}"
        )
    gap = float(acc.loc["unstale", "acc"] - acc.loc["unweighted", "acc"])
    return {"staleness_gap": gap, "still_rising": late_rise(hist)}


def paper_indicators() -> dict:
    return INDICATORS


def readings(ours: Mapping, keys=None) -> list:
    """Readings of ``keys`` (default: every measured one) for ``report.claim(regime=...)``."""
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))
