"""FedAST's pure allocation and estimation rules (no state, no training): the refill rule K,
Realloc (paper and official), redistribution of freed requests, Sync client shares, and the
normalised dispersion behind the variance estimates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..utils import FlkitError, check_range

__all__ = [
    "k_rule",
    "realloc_paper",
    "realloc_official",
    "redistribute",
    "sync_shares",
    "client_units",
    "normalized_dispersion",
    "estimate_variance_paper",
    "estimate_variance_official",
    "round_half_up",
]


def k_rule(
    outstanding: int, requests: int, total_requests: int, total_outstanding: int, max_new: int = 2
) -> int:
    """Number of new requests after an arrival of task m.

    ``outstanding`` (the paper's A_m) is task m's outstanding count after decrementing the
    arrival, ``total_outstanding`` the total over all tasks (after that decrement); ``requests``
    and ``total_requests`` are R_m and sum R. The answer is min(R_m - A_m, sum R - sum A,
    max_new) if A_m < R_m, else 0; never negative."""
    if outstanding < requests:
        return max(0, min(requests - outstanding, total_requests - total_outstanding, max_new))
    return 0


def _active(n, active_mask):
    if active_mask is None:
        return [True] * n
    mask = [bool(a) for a in active_mask]
    if len(mask) != n:
        raise FlkitError(f"active_mask has {len(mask)} entries for {n} tasks")
    return mask


def _check_estimates(name, values):
    arr = [float(v) for v in values]
    for i, v in enumerate(arr):
        if not (math.isfinite(v) and v >= 0):
            raise FlkitError(f"{name}[{i}]={v!r} is outside the accepted range [0, inf) (finite)")
    return arr


def realloc_paper(
    sigma2_hat: Sequence[float], total_requests: int, active_mask=None, min_per_task: int = 1
) -> list:
    """Paper Realloc: R_m proportional to sqrt(sigma2_hat_m), integers summing to
    ``total_requests``.

    Rounding (our choice, the paper is silent): every active task first gets ``min_per_task``
    (a task with 0 requests could never progress), the rest is split proportionally to
    sqrt(sigma2_hat) by the largest-remainder method (ties to the lower index). All-zero
    estimates give an equal split. Inactive (finished) tasks get 0."""
    s = _check_estimates("sigma2_hat", sigma2_hat)
    act = _active(len(s), active_mask)
    idx = [i for i in range(len(s)) if act[i]]
    total_requests = int(total_requests)
    out = [0] * len(s)
    if not idx:
        return out
    check_range("total_requests", total_requests, min_per_task * len(idx))
    w = [math.sqrt(s[i]) for i in idx]
    if sum(w) <= 0:
        w = [1.0] * len(idx)
    for i in idx:
        out[i] = min_per_task
    rest = total_requests - min_per_task * len(idx)
    tot = sum(w)
    quotas = [rest * wi / tot for wi in w]
    floors = [int(math.floor(q)) for q in quotas]
    left = rest - sum(floors)
    order = sorted(range(len(idx)), key=lambda j: (-(quotas[j] - floors[j]), j))
    for j in order[:left]:
        floors[j] += 1
    for j, i in enumerate(idx):
        out[i] += floors[j]
    return out


def realloc_official(
    sigma: Sequence[float], total_requests: int, r: int = 32, active_mask=None
) -> list:
    """Official-code Realloc: quantised in units of ``r`` with a floor of ``r``.

    Every active task gets r; residual_m = floor(R_total * sigma_m / sum(sigma)) - r; the rest
    is handed out r at a time to the active task with the largest residual (ties: lower index),
    whose residual then drops by r. Inactive tasks get 0.
    Our choice where the code is silent: when R_total is not a multiple of r, the remainder
    (< r) goes to the task with the largest residual after the loop, so the total is preserved;
    when R_total < r * active the unit shrinks to floor(R_total / active); all-zero sigma counts
    as equal sigma."""
    s = _check_estimates("sigma", sigma)
    check_range("r", r, 1)
    act = _active(len(s), active_mask)
    idx = [i for i in range(len(s)) if act[i]]
    total_requests = int(total_requests)
    out = [0] * len(s)
    if not idx:
        return out
    check_range("total_requests", total_requests, len(idx))
    unit = min(int(r), total_requests // len(idx))
    sig = [s[i] if act[i] else 0.0 for i in range(len(s))]
    tot = sum(sig)
    if tot <= 0:
        sig = [1.0 if act[i] else 0.0 for i in range(len(s))]
        tot = float(len(idx))
    resid = {i: int(math.floor(total_requests * sig[i] / tot)) - unit for i in idx}
    for i in idx:
        out[i] = unit
    left = total_requests - unit * len(idx)

    def best():
        return max(idx, key=lambda i: (resid[i], -i))

    while left >= unit:
        i = best()
        out[i] += unit
        resid[i] -= unit
        left -= unit
    if left > 0:
        out[best()] += left
    return out


def redistribute(freed: int, targets: Sequence[int], active_mask, rng: np.random.Generator) -> list:
    """Shares of ``freed`` requests for the remaining tasks.

    share_j = floor(freed * R_j / sum R_active); leftover units go one at a time to uniformly
    random active tasks. Returns a list of shares (0 for inactive tasks)."""
    act = _active(len(targets), active_mask)
    idx = [i for i in range(len(targets)) if act[i]]
    out = [0] * len(targets)
    if not idx or freed <= 0:
        return out
    tot = sum(targets[i] for i in idx)
    for i in idx:
        out[i] = int(freed * targets[i] // tot) if tot > 0 else 0
    for _ in range(int(freed) - sum(out)):
        out[idx[int(rng.integers(len(idx)))]] += 1
    return out


def client_units(weights: Sequence[float], n_avail: int) -> list:
    """Sync weights in units of clients: n_m = max(min(w_m, 1), floor(n_avail w_m / sum w)), 0
    where w_m = 0. The official code replaces its weights by these counts before the first round,
    so a finished task frees its *clients* and the proportional redistribution is scale-free
    (identical tasks split a finished task's clients evenly, whatever the weights' scale)."""
    w = [float(x) for x in weights]
    tot = sum(w)
    if tot <= 0:
        return [0] * len(w)
    return [int(max(min(wi, 1.0), math.floor(n_avail * wi / tot))) if wi > 0 else 0 for wi in w]


def sync_shares(weights: Sequence[float], n_avail: int, rng: np.random.Generator) -> list:
    """Sync client shares: :func:`client_units` of the weights; the ``n_avail - sum n`` leftover
    slots go +1 each to tasks drawn uniformly with replacement among tasks with w_m > 0. Tasks
    with w_m = 0 get 0."""
    w = [float(x) for x in weights]
    n = client_units(w, n_avail)
    alive = [i for i, wi in enumerate(w) if wi > 0]
    left = n_avail - sum(n)
    if left > 0 and alive:
        for i in rng.choice(alive, size=left, replace=True):
            n[int(i)] += 1
    return n


def _flat(u, exclude_bias: bool):
    """An update as one float64 vector: array/tensor, or a dict name -> tensor."""
    if isinstance(u, dict):
        parts = [_flat(v, False) for k, v in u.items() if not (exclude_bias and "bias" in str(k))]
        return np.concatenate(parts) if parts else np.zeros(0)
    if hasattr(u, "detach"):
        u = u.detach().cpu().numpy()
    return np.asarray(u, dtype=np.float64).ravel()


def normalized_dispersion(updates: Sequence[Any], exclude_bias: bool = False) -> float:
    """sum_k ||u_k - mean||^2 / (K ||mean||^2) over updates (arrays, tensors or dicts of tensors).

    With ``exclude_bias`` dict entries whose name contains "bias" are skipped (official code).
    Returns inf when the mean update is zero."""
    if len(updates) < 1:
        raise FlkitError("normalized_dispersion needs at least 1 update; got 0")
    rows = np.stack([_flat(u, exclude_bias) for u in updates])
    mean = rows.mean(axis=0)
    den = float(mean @ mean) * len(updates)
    num = float(((rows - mean) ** 2).sum())
    if den == 0.0:
        return math.inf if num > 0 else 0.0
    return num / den


def estimate_variance_paper(
    updates, eta_c: float, eta_s: float, tau: float, dispersion: float | None = None
) -> float:
    """Algorithm 4: sigma2_hat = eta_c * eta_s * tau * normalised dispersion of ``updates``
    (V of them).

    Pass ``dispersion`` to reuse a value computed elsewhere (then ``updates`` is ignored)."""
    d = normalized_dispersion(updates) if dispersion is None else float(dispersion)
    return eta_c * eta_s * tau * d


def estimate_variance_official(
    updates, eta_c: float, eta_s: float, tau: float, dispersion: float | None = None
) -> float:
    """Official code's per-arrival estimate: (eta_s / (eta_c tau^2)) * dispersion / 2,
    dispersion over non-bias tensors (the intended square root is, by operator precedence, a
    halving). Pass ``dispersion`` to reuse a value computed elsewhere."""
    d = (
        normalized_dispersion(updates, exclude_bias=True)
        if dispersion is None
        else float(dispersion)
    )
    return eta_s / (eta_c * tau**2) * d / 2.0


def round_half_up(x: float) -> int:
    """0.5 rounds up (Python's round() rounds half to even)."""
    return int(math.floor(x + 0.5))
