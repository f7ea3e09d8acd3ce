"""Small measures that several studies share: rounds to a target, oscillation, time gain, and the
per-client accuracy of a run's global model."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import torch

from .utils import FlkitError

if TYPE_CHECKING:  # histories arrive as frames; importing pandas is left to who builds them
    import pandas as pd


def client_accuracy(per_class_acc: torch.Tensor, parts, y, num_classes) -> torch.Tensor:
    """Per-client accuracy = sum_c pi_i(c) * acc_c, with pi_i client i's label distribution.

    Deterministic and keeps all training data; a class the global model never saw in the test set
    counts as accuracy 0 for clients holding it."""
    acc = torch.nan_to_num(per_class_acc, nan=0.0)
    out = []
    for ix in parts:
        pi = torch.bincount(y[ix], minlength=num_classes).float()
        out.append(float((pi / pi.sum() * acc).sum()))
    return torch.tensor(out)


def evaluate_round(ds, parts, method, state: dict, per_client: bool) -> dict:
    """A round's evaluation row of the global model on ``ds``'s test set: accuracy and loss, and
    with ``per_client`` the mean, std and variance over clients of their accuracy (each client's
    class mix of ``parts`` weighting the per-class accuracy; ``_client_acc`` holds them all)."""
    if not per_client:
        acc, loss = method.evaluate(state, ds.x_test, ds.y_test)
        return {"test_accuracy": acc, "test_loss": loss}
    acc, loss, per_class = method.evaluate(state, ds.x_test, ds.y_test, per_class=ds.num_classes)
    ca = client_accuracy(per_class, parts, ds.y_train, ds.num_classes)
    return {
        "test_accuracy": acc,
        "test_loss": loss,
        "client_acc_mean": float(ca.mean()),
        "client_acc_std": float(ca.std(unbiased=False)),
        "client_acc_var": float(ca.var(unbiased=False)),
        "_client_acc": ca,
    }


def binomial_se(accuracy: float, n: int) -> float:
    """Binomial standard error of an accuracy measured on ``n`` test items:
    sqrt(p (1 - p) / n). FlkitError for p outside [0, 1] or n < 1."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise FlkitError(f"n={n!r} test items; accepted: an integer >= 1")
    p = float(accuracy)
    if not 0.0 <= p <= 1.0:
        raise FlkitError(f"accuracy={accuracy!r}; accepted: a number in [0, 1]")
    return math.sqrt(p * (1.0 - p) / int(n))


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
