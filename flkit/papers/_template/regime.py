"""Regime indicators of <paper>'s claims: the quantities of the paper's setting that make its
effect possible, the paper's value of each, and the rule saying where ours must be.

Fix the rules before reading any verdict. ``report.claim(..., regime=regime.readings(ours,
keys))`` then records a claim whose indicator breaks its rule as "outside regime" (with ours and
the paper's value), never as "does not hold". Test on hand-built inputs (tests/test_regime.py).

Interface (the same in every paper's ``regime.py``): ``paper_indicators()`` (here the constant
``INDICATORS``), ``measure(...)`` (ours, from a finished run), ``readings(ours, keys)``,
``in_regime(ours)``, ``CLAIMS`` (claim -> the indicators it depends on).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.workbook.verdict import Indicator, at_least, read

INDICATORS = {
    "baseline_rounds_share": Indicator(
        "baseline_rounds_share",
        "<baseline>: share of the run's rounds spent reaching the target",
        0.9,  # <the paper's value, from its table or figure>
        at_least(0.5, missing="outside"),
    ),
}

#: which indicators each claim depends on (claim function of ``claims`` -> keys)
CLAIMS = {"beats": ("baseline_rounds_share",)}


def paper_indicators() -> dict:
    return INDICATORS


def measure(rounds_to_target: pd.Series, rounds: int) -> dict:
    """Our indicators: ``rounds_to_target`` of the baseline by seed (NaN: not reached),
    ``rounds`` the run's length."""
    shares = rounds_to_target / rounds
    return {"baseline_rounds_share": None if shares.isna().any() else float(shares.min())}


def readings(ours: Mapping, keys=None) -> list:
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))
