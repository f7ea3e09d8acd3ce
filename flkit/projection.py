"""Conflict projection at the server (FedFV, Wang et al. 2021; STC-PA Algorithms 2-3).

All functions work on *flat* update vectors: one row per client over the whole model (every tensor
flattened and concatenated), because FedFV's dot products and norms are over the whole model.

* :func:`project_internal` -- MitigateInternalConflict: among this round's m clients, project each
  non-kept client's update onto the normal plane of every conflicting client's update, in
  loss-ascending order; average.
* :func:`project_external` -- MitigateExternalConflict: remove from the aggregate its conflict with
  the remembered updates of clients whose last participation was 1..τ rounds ago.
* :func:`rescale_to_mean_norm` -- keep the direction, take the norm of the plain mean (FedFV).

Sign convention: updates are pseudo-gradients g = w_before − w_after; projections are invariant to
a global sign flip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .utils import FlkitError, check_choice, check_range

__all__ = [
    "keep_count",
    "InternalInfo",
    "ExternalInfo",
    "project_internal",
    "project_external",
    "rescale_to_mean_norm",
    "EXTERNAL_VARIANTS",
]

EXTERNAL_VARIANTS = ("paper", "easyfl-later")


def _check_alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or math.isnan(float(alpha)):
        raise FlkitError(f"alpha={alpha!r} must be a number in the accepted range [0, 1]")
    check_range("alpha", float(alpha), 0.0, 1.0)
    return float(alpha)


def keep_count(m: int, alpha: float) -> int:
    """Number of highest-loss clients left unprojected: m − ceil((m − 1)(1 − α)), 0 when α = 0.

    This is the FedFV code's rule (``order[ceil((m-1)*(1-alpha)):]``); for m = 10 it keeps
    0/1/2/5/10 clients at α = 0/0.1/0.2/0.5/1 and 2 at α = 0.15. (m − 1)(1 − α) is rounded to
    9 decimals before the ceiling so float noise (1 − 0.7 = 0.30000000000000004) does not drop a
    client."""
    alpha = _check_alpha(alpha)
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise FlkitError(f"m={m!r} (number of clients) must be an integer >= 1")
    if alpha == 0:
        return 0
    return m - int(math.ceil(round((m - 1) * (1 - alpha), 9)))


@dataclass
class InternalInfo:
    """What :func:`project_internal` did."""

    kept: int  # number of clients left unprojected
    kept_indices: list[int]  # their row indices (the highest losses)
    order: list[int]  # row indices sorted by loss ascending (stable)
    projections: int  # number of projection steps applied (conflicts found)
    projected: Tensor  # [m, d] the h_k (kept rows equal the inputs)
    last_conflict: dict = field(default_factory=dict)  # k -> last j that h_k was projected against


@dataclass
class ExternalInfo:
    """What :func:`project_external` did."""

    applied: bool  # False when τ = 0 or t < τ
    rounds: list[int]  # rounds t − i visited, in order
    projections: int  # number of rounds whose g_con was projected out
    conflicting_clients: list  # client ids that entered a g_con


def project_internal(grads: Tensor, losses, alpha: float = 0.1, return_info: bool = False):
    """MitigateInternalConflict (STC-PA Algorithm 2 / FedFV).

    ``grads``: [m, d] the clients' (compressed) updates, one flat row per client;
    ``losses``: [m] their losses (FedFV: the received global model's loss on the client's training
    data before local training); ``alpha``: fraction of highest-loss clients kept unprojected
    (:func:`keep_count`).

    Steps: order the clients by loss ascending (stable for ties); keep the last
    :func:`keep_count` (m, α) of that order unchanged; for every other client k start from
    h_k = g_k and for j in loss-ascending order, j ≠ k: if h_k · g_j < 0 then
    h_k ← h_k − (h_k · g_j)/‖g_j‖² · g_j (running h_k, original g_j; a g_j of norm 0 is skipped).
    Return the plain mean (1/m) Σ h_k as a [d] tensor, and with ``return_info=True`` also an
    :class:`InternalInfo` (kept count, order, the h_k, ...).

    Bad input (alpha outside [0, 1], grads not [m, d], losses of another length, m = 0) raises
    :class:`~flkit.utils.FlkitError`."""
    alpha = _check_alpha(alpha)
    if not isinstance(grads, Tensor) or grads.dim() != 2:
        raise FlkitError(
            f"grads must be a [m, d] tensor (one flat row per client); got "
            f"{tuple(grads.shape) if isinstance(grads, Tensor) else type(grads).__name__}"
        )
    m = grads.shape[0]
    if m == 0:
        raise FlkitError("grads has no clients (m = 0); need at least one")
    losses = torch.as_tensor(losses, dtype=torch.float64).reshape(-1).cpu()
    if losses.numel() != m:
        raise FlkitError(f"losses has {losses.numel()} entries but grads has {m} rows")
    if torch.isnan(losses).any():
        raise FlkitError(f"losses contain NaN: {losses.tolist()}")

    order = torch.sort(losses, stable=True).indices.tolist()
    n_keep = keep_count(m, alpha)
    kept = order[m - n_keep :] if n_keep else []
    kept_set = set(kept)
    sq_norms = (grads * grads).sum(dim=1)
    h = grads.clone()
    projections = 0
    last_conflict = {}
    for k in range(m):
        if k in kept_set:
            continue
        hk = grads[k].clone()
        for j in order:
            if j == k or sq_norms[j] <= 0:
                continue
            dot = torch.dot(hk, grads[j])
            if dot < 0:
                hk = hk - (dot / sq_norms[j]) * grads[j]
                projections += 1
                last_conflict[k] = j
        h[k] = hk
    g = h.mean(dim=0)
    if return_info:
        return g, InternalInfo(
            kept=n_keep,
            kept_indices=sorted(kept),
            order=order,
            projections=projections,
            projected=h,
            last_conflict=last_conflict,
        )
    return g


def project_external(
    g: Tensor, history: Mapping, t: int, tau: int, variant: str = "paper", return_info: bool = False
):
    """MitigateExternalConflict (STC-PA Algorithm 3 / FedFV).

    ``g``: [d] the aggregate after internal projection; ``history``: client id ->
    (last compressed update [d], round of its latest participation) — a round of ``None`` or
    −inf means "never", and such entries are ignored; ``t``: current round; ``tau``: rounds of
    history.

    ``variant="paper"`` (default; first easyFL release): for i = τ, τ−1, ..., 1 (oldest first),
    sum into g_con the remembered updates of clients with last round exactly t − i whose dot
    product with the current g is negative; if g_con ≠ 0 and g · g_con < 0, set
    g ← g − (g · g_con)/‖g_con‖² · g_con. ``variant="easyfl-later"``: i = τ−1, ..., 0 (includes
    this round's clients, drops round t − τ). Nothing happens when τ = 0 or t < τ.
    Returns g (a new tensor), plus an :class:`ExternalInfo` with ``return_info=True``."""
    check_choice("variant", variant, EXTERNAL_VARIANTS)
    if isinstance(tau, bool) or not isinstance(tau, int):
        raise FlkitError(f"tau={tau!r} must be an integer >= 0")
    check_range("tau", tau, 0)
    if isinstance(t, bool) or not isinstance(t, int):
        raise FlkitError(f"t={t!r} (current round) must be an integer")
    if not isinstance(g, Tensor) or g.dim() != 1:
        raise FlkitError(
            f"g must be a flat [d] tensor; got "
            f"{tuple(g.shape) if isinstance(g, Tensor) else type(g).__name__}"
        )
    if not isinstance(history, Mapping):
        raise FlkitError(
            f"history must be a dict client_id -> (update, last_round); got "
            f"{type(history).__name__}"
        )
    g = g.clone()
    info = ExternalInfo(applied=False, rounds=[], projections=0, conflicting_clients=[])
    if tau == 0 or t < tau:
        return (g, info) if return_info else g
    info.applied = True
    lags = range(tau, 0, -1) if variant == "paper" else range(tau - 1, -1, -1)
    by_round: dict[int, list] = {}
    for cid, entry in history.items():
        try:
            upd, last = entry
        except (TypeError, ValueError):
            raise FlkitError(f"history[{cid!r}] must be a pair (update, last_round)") from None
        if upd is None or last is None or (isinstance(last, float) and math.isinf(last)):
            continue
        if upd.shape != g.shape:
            raise FlkitError(
                f"history[{cid!r}] update has shape {tuple(upd.shape)}, expected {tuple(g.shape)}"
            )
        by_round.setdefault(int(last), []).append((cid, upd))
    for i in lags:
        r = t - i
        info.rounds.append(r)
        g_con = torch.zeros_like(g)
        for cid, upd in by_round.get(r, []):
            upd = upd.to(device=g.device, dtype=g.dtype)
            if torch.dot(g, upd) < 0:
                g_con = g_con + upd
                info.conflicting_clients.append(cid)
        sq = torch.dot(g_con, g_con)
        if sq > 0:
            dot = torch.dot(g, g_con)
            if dot < 0:
                g = g - (dot / sq) * g_con
                info.projections += 1
    return (g, info) if return_info else g


def rescale_to_mean_norm(g: Tensor, grads: Tensor) -> Tensor:
    """g / ‖g‖ · ‖(1/m) Σ_i grads_i‖: the corrected direction with the plain mean's magnitude
    (FedFV; STC-PA Algorithm 4 line 20). ``grads``: [m, d]. A zero g is returned unchanged (zeros).

    Computed as g · (‖mean‖ / ‖g‖), so when g *is* the plain mean (α = 1, τ = 0) the factor is
    exactly 1 and the result equals the mean bit for bit."""
    if not isinstance(grads, Tensor) or grads.dim() != 2 or grads.shape[0] == 0:
        raise FlkitError(
            f"grads must be a non-empty [m, d] tensor; got "
            f"{tuple(grads.shape) if isinstance(grads, Tensor) else type(grads).__name__}"
        )
    if not isinstance(g, Tensor) or g.shape != grads.shape[1:]:
        raise FlkitError(
            f"g must have shape {tuple(grads.shape[1:])} (one row of grads); got "
            f"{tuple(g.shape) if isinstance(g, Tensor) else type(g).__name__}"
        )
    g_norm = torch.linalg.vector_norm(g)
    if g_norm == 0:
        return g.clone()
    target = torch.linalg.vector_norm(grads.mean(dim=0))
    return g * (target / g_norm)
