"""Schedules of gradual pruning: the cubic sparsity ramp and the incremental regularisation.

t is the 0-based global round (t = 0 .. T-1); in the formulas T is ``rounds``, the number of
rounds, and Q is ``segments``, the number of lambda segments (FedDIP's hyperparameter ``Q``).
"""

from __future__ import annotations

import math

from ..utils import FlkitError, check_choice, check_range
from .masks import check_sparsity

LAMBDA_VARIANTS = ("paper", "code")


def _check_round(t, rounds) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise FlkitError(f"rounds={rounds!r} must be an integer >= 1 (T, the number of rounds)")
    if isinstance(t, bool) or not isinstance(t, int):
        raise FlkitError(f"t={t!r} must be an integer round index in [0, {rounds}]")
    check_range("t", t, 0, rounds)


def cubic_sparsity(t: int, rounds: int, s0: float, s_final: float) -> float:
    """s_t = s_final + (s0 - s_final) * (1 - t/T)^3: s0 at t = 0, rising fast then levelling off
    towards s_final (Zhu & Gupta's gradual pruning, started from s0 > 0 in FedDIP)."""
    _check_round(t, rounds)
    s0 = check_sparsity("s0", s0)
    s_final = check_sparsity("s_final", s_final)
    if s0 > s_final:
        raise FlkitError(f"s0={s0!r} exceeds s_final={s_final!r}; accepted: 0 <= s0 <= s_final < 1")
    return s_final + (s0 - s_final) * (1.0 - t / rounds) ** 3


def check_lambda(lambda_max, segments) -> None:
    if (
        isinstance(lambda_max, bool)
        or not isinstance(lambda_max, (int, float))
        or math.isnan(float(lambda_max))
    ):
        raise FlkitError(f"lambda_max={lambda_max!r} must be a number >= 0")
    check_range("lambda_max", float(lambda_max), 0.0)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise FlkitError(f"Q={segments!r} must be an integer >= 1 (number of lambda segments)")


def incremental_lambda(
    t: int,
    rounds: int,
    lambda_max: float,
    segments: int,
    variant: str = "paper",
    lambda_0: float = 5e-4,
) -> float:
    """The regularisation coefficient of round t.

    variant="paper": the T rounds are cut into Q equal segments; segment i (0-based, rounds
      i*T/Q <= t < (i+1)*T/Q) has lambda = lambda_max * i / Q, so 0 in the first segment and
      lambda_max (Q-1)/Q in the last.
    variant="code": segments of floor(T/Q) rounds (at least 1; rounds past the Q-th segment stay in
      the last one); segment 0 has lambda 0, segment i >= 1 has
      lambda_0 + (lambda_max - lambda_0) * (i - 1) / (Q - 1) (Q = 1: always 0)."""
    _check_round(t, rounds)
    check_lambda(lambda_max, segments)
    check_choice("variant", variant, LAMBDA_VARIANTS)
    if variant == "paper":
        i = min(segments - 1, (t * segments) // rounds)
        return float(lambda_max) * i / segments
    seg = max(1, rounds // segments)
    i = min(segments - 1, t // seg)
    if i == 0:
        return 0.0
    return lambda_0 + (float(lambda_max) - lambda_0) * (i - 1) / (segments - 1)


def decayed_lr(lr0: float, t: int, decay: float) -> float:
    """eta_t = lr0 * decay^t (per global round, constant inside a round)."""
    check_range("lr_decay", decay, 0.0, 1.0, low_open=True)
    return lr0 * decay**t
