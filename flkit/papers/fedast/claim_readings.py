"""The regime readings each claim of notebook 03 carries (``report.claim(regime=...)``): the
timing-only indicators of the experiment the claim runs on, from the notebook's
:func:`.timing_only.timing_table` (Figs. 2-6 and dynamic vs static), the buffer sweep's load and
the k sweep's span, each against the paper setting's (``regime.REGIME``)."""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError, check_choice

from .regime import REGIME, TIMING_CLAIMS, measure

__all__ = ["timing_readings", "buffer_readings", "k_readings"]


def timing_readings(timing: pd.DataFrame | None, claim: str) -> list:
    """``REGIME.readings`` of ``claim`` (a key of :data:`.regime.TIMING_CLAIMS`) from the rows
    of :func:`.timing_only.timing_table`; ``timing`` None: no readings (a caller without the
    table)."""
    check_choice("claim", claim, TIMING_CLAIMS)
    if timing is None:
        return []
    experiment, keys = TIMING_CLAIMS[claim]
    ours = measure(timing=timing)
    missing = [k for k in keys if f"{experiment}_{k}" not in ours]
    if missing:
        present = list(timing[timing.experiment == experiment].key)
        raise FlkitError(
            f"timing indicator(s) {', '.join(map(repr, missing))} of experiment {experiment!r} "
            "are not in the timing "
            f"table; present: {present}"
        )
    return REGIME.readings(ours, claim)


def buffer_readings(preset) -> list:
    """The buffer sweep's regime: its load sum R / N_avail against the paper's 1.17."""
    return REGIME.readings(measure(preset=preset), "buffer")


def k_readings(preset) -> list:
    """The k sweep's regime: the swept first-k, as a share of the available clients, brackets
    the paper's 30 / 300."""
    return REGIME.readings(measure(preset=preset), "k")
