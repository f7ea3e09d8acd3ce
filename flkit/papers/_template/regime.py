"""Regime indicators of <paper>'s claims: the quantities of the paper's setting (or behaviours of
the baselines a claim presupposes) that make its effect possible, the paper's value of each, the
rule saying where ours must be, and the source of that rule's threshold.

Fix the rules before reading any verdict. An indicator never measures the claim's own outcome,
nor a result the paper reports as a finding (that is a claim of its own). Each threshold names its
source: "paper: <section/table, the number>", "computed: <from which stated setting>" or "ours:
<one sentence why>". An indicator the paper's own setting would fail is a diagnostic.

``report.claim(..., regime=REGIME.readings(ours, "beats"))`` records a claim whose indicator
breaks its rule as "outside regime" (with ours, the paper's value and the source), never as
"does not hold", and keeps the measured values so a changed rule re-judges it without training.
Test on hand-built inputs.

Interface (the same in every paper's ``regime.py``): ``REGIME`` (a
:class:`flkit.workbook.regime.Regime`) and ``measure(...)`` (ours, from a finished run).
"""

from __future__ import annotations

import pandas as pd

from flkit.workbook.regime import ClaimRule, Regime
from flkit.workbook.verdict import Indicator, at_least

REGIME = Regime(
    indicators=[
        Indicator(
            "baseline_rounds_share",
            "<baseline>: share of the run's rounds spent reaching the target",
            0.9,  # <the paper's value, from its table or figure>
            at_least(0.5, missing="outside"),
            source="ours: <one sentence why half the run is enough for the effect to show>",
        ),
    ],
    claims={"beats": ClaimRule(("baseline_rounds_share",), methods=("<baseline>", "<method>"))},
)


def measure(rounds_to_target: pd.Series, rounds: int) -> dict:
    """Our indicators: ``rounds_to_target`` of the baseline by seed (NaN: not reached),
    ``rounds`` the run's length."""
    shares = rounds_to_target / rounds
    return {"baseline_rounds_share": None if shares.isna().any() else float(shares.min())}
