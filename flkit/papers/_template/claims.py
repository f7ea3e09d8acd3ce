"""Verdicts of <paper>'s claims, as functions of the study's result tables.

Each function returns ``(holds, evidence)`` or a dict for ``report.claim(**c)``; thresholds are
named parameters, so a reader sees what "about equal" means here. Test every function on small
hand-built tables (tests/test_<slug>_claims.py). Do not special-case the smoke preset here:
``flkit.workbook.report.Report.claim`` records verdicts as inconclusive at ``smoke``.
"""

from __future__ import annotations

import pandas as pd


def beats(final: pd.DataFrame, better: str, worse: str, margin: float = 0.0) -> tuple[bool, str]:
    """<claim>: method ``better`` ends above ``worse`` by more than ``margin`` in every seed.
    ``final``: one row per (method, seed) with column ``accuracy``."""
    acc = final.pivot_table(index="seed", columns="method", values="accuracy")
    gap = acc[better] - acc[worse]
    ev = "; ".join(
        f"seed {s}: {better} {acc.loc[s, better]:.3f} vs {worse} {acc.loc[s, worse]:.3f}"
        for s in acc.index
    )
    return bool((gap > margin).all()), ev
