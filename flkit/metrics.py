"""Small measures that several studies share: rounds to a target, oscillation, time gain."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .utils import FlkitError


def rounds_to(history: pd.DataFrame, target: float, column: str = "test_accuracy") -> int | None:
    """First round whose `column` reaches `target` (an accuracy in (0, 1]), or None when never."""
    if not 0 < target <= 1:
        raise FlkitError(f"target={target!r} must be an accuracy in (0, 1]")
    hit = history[history[column] >= target]
    return None if hit.empty else int(hit["round"].iloc[0])


def mean_abs_change(values: Iterable[float]) -> float:
    """Mean |v_t - v_{t-1}| over consecutive values (NaN with fewer than two): how much a curve
    oscillates between evaluations."""
    v = np.asarray([x for x in values if x == x], dtype=float)
    return float(np.abs(np.diff(v)).mean()) if len(v) >= 2 else float("nan")


def time_gain(t_baseline: float | None, t_method: float | None) -> float | None:
    """(T_baseline - T_method) / T_baseline x 100 (None when either did not finish)."""
    if t_baseline is None or t_method is None or not t_baseline > 0:
        return None
    return 100.0 * (t_baseline - t_method) / t_baseline
