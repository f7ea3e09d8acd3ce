"""The regime readings each claim of notebook 03 carries (``report.claim(regime=...)``) beyond the
heterogeneous claims' (:data:`.regime.CLAIMS`): the timing-only indicators of the experiment the
claim runs on, from the notebook's :func:`.regime.timing_table` (Figs. 2, 3, 4, 5 and dynamic vs
static), the buffer sweep's load and the k sweep's span, each against the paper setting's."""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError, check_choice
from flkit.workbook.verdict import Indicator, at_least, at_most, within

from .regime import TIMING_INDICATORS, TIMING_TOLERANCE

__all__ = [
    "TIMING_CLAIMS",
    "timing_readings",
    "PAPER_BUFFER_LOAD",
    "PAPER_K_SHARE",
    "buffer_readings",
    "k_readings",
]

#: the timing-only indicators each claim of the notebook depends on: claim -> (experiment of
#: :func:`.regime.timing_table`, indicator keys). Fig. 5's largest M is Fig. 2's run (same
#: pool), Fig. 4 runs on the four-task mix, dynamic vs static needs Realloc's room and the mix's
#: staleness
TIMING_CLAIMS = {
    "fig2": ("identical", ("sync_round_length", "updates_per_sync_round", "staleness_mean")),
    "fig5": ("identical", ("sync_round_length", "updates_per_sync_round", "staleness_mean")),
    "fig3": ("fig3", ("staleness_mean", "nobuffer_staleness_mean")),
    "fig4": ("heterogeneous", ("fedast_rate", "staleness_mean")),
    "dynamic": ("heterogeneous", ("realloc_room", "staleness_mean")),
}


def timing_readings(timing: pd.DataFrame | None, claim: str) -> list:
    """Readings for ``report.claim(regime=...)`` of the timing indicators ``claim`` depends on
    (:data:`TIMING_CLAIMS`), from the rows of :func:`.regime.timing_table`: ours against the
    paper setting's, rule within :data:`TIMING_TOLERANCE`. ``timing`` None: no readings (a
    caller without the table)."""
    check_choice("claim", claim, TIMING_CLAIMS)
    if timing is None:
        return []
    experiment, keys = TIMING_CLAIMS[claim]
    rows = timing[timing.experiment == experiment].set_index("key")
    out = []
    for key in keys:
        if key not in rows.index:
            raise FlkitError(
                f"timing indicator {key!r} of experiment {experiment!r} is not in the timing "
                f"table; present: {list(rows.index)}"
            )
        row = rows.loc[key]
        ind = Indicator(
            f"{experiment}_{key}",
            f"{TIMING_INDICATORS[key]} ({experiment}, timing only)",
            float(row["paper"]),
            within(TIMING_TOLERANCE),
        )
        out.append(ind.read(None if pd.isna(row["ours"]) else float(row["ours"])))
    return out


#: the paper's buffer-sweep load (Fig. 8: 2 x 175 requests on 300 available clients)
PAPER_BUFFER_LOAD = 2 * 175 / 300
#: the paper's first-k as a share of the available clients (30 of 300)
PAPER_K_SHARE = 30 / 300


def buffer_readings(preset) -> list:
    """The buffer sweep's regime: its load sum R / N_avail within :data:`TIMING_TOLERANCE` of
    the paper's 1.17 (staleness and queueing depend on it, the buffer is what is swept)."""
    n_avail = max(1, round(float(preset["availability"]) * int(preset["num_clients"])))
    load = len(preset["buffer_datasets"]) * int(preset["buffer_requests"]) / n_avail
    ind = Indicator(
        "buffer_load",
        "buffer sweep's load sum R / N_avail",
        round(PAPER_BUFFER_LOAD, 3),
        within(TIMING_TOLERANCE),
    )
    return [ind.read(load)]


def k_readings(preset) -> list:
    """The k sweep's regime: the swept first-k, as a share of the available clients, brackets
    the paper's chosen 30 / 300 (smallest at most, largest at least 0.1)."""
    n_avail = max(1, round(float(preset["availability"]) * int(preset["num_clients"])))
    ks = [int(k) for k in preset["ks"]]
    low = Indicator("k_share_min", "smallest swept k / N_avail", PAPER_K_SHARE, at_most(0.1))
    high = Indicator("k_share_max", "largest swept k / N_avail", PAPER_K_SHARE, at_least(0.1))
    return [low.read(min(ks) / n_avail), high.read(max(ks) / n_avail)]
