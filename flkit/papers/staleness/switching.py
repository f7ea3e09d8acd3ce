"""When the server stops inverting (Section 3.2, Fig. 5): the GI run's errors E1 (its estimate)
and E2 (the stale update) against the unstale update over training, read from the run's history,
and the round at which the server detected E1 > E2."""

from __future__ import annotations

import pandas as pd


def detected_round(sw: pd.DataFrame, tau: int) -> int | None:
    """The round at which the server detects E1 > E2 in :func:`table` (its
    ``switch_round`` is when the switch takes effect, tau rounds after detection); None when the
    rule never fired."""
    if "switch_round" not in sw or not sw["switch_round"].notna().any():
        return None
    return int(sw["switch_round"].dropna().iloc[0]) - int(tau)


def table(hist: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Fig. 5: E1 (GI estimate) and E2 (stale update) vs the oracle over training (GI run)."""
    g = hist[(hist["method"] == "gi_staleness") & (hist["seed"] == seed)]
    cols = [
        "round",
        "err_gi_cos",
        "err_stale_cos",
        "err_gi_l1",
        "err_stale_l1",
        "gamma",
        "switch_round",
    ]
    cols = [c for c in cols if c in g.columns]
    return g[cols].dropna(subset=[c for c in cols if c.startswith("err_gi")] or None)
