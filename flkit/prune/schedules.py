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


def last_update(rounds: int, every: int, first: int = 0) -> int:
    """The last round index of the updates at t = first, first + every, first + 2 every, ... that
    falls inside the run (t <= rounds - 1); ``first`` = -1 is an update before round 1."""
    for name, v, low in (("rounds", rounds, 1), ("R", every, 1), ("first", first, -1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise FlkitError(f"{name}={v!r} must be an integer >= {low}")
    return first + every * ((rounds - 1 - first) // every)


def check_landing(rounds: int, every: int, s0: float, s_final: float, first: int = 0) -> None:
    """FlkitError unless the updates every ``every`` rounds from ``first`` can ramp the sparsity
    from s0 to s_final inside ``rounds`` rounds: at least one update after the first is needed
    (unless s0 = s_final), and the nearest ``every`` that has one is named."""
    if s0 >= s_final or last_update(rounds, every, first) > first:
        return
    longest = rounds - 1 - first
    if longest < 1:
        raise FlkitError(
            f"rounds={rounds} leaves no mask update after the first, so the sparsity cannot ramp "
            f"from s0={s0!r} to sparsity={s_final!r}; accepted: rounds >= {first + 2}, or "
            "s0 = sparsity"
        )
    raise FlkitError(
        f"R={every} cannot land on the target sparsity {s_final!r} within T={rounds} rounds: its "
        f"only mask update is the first one (at s0={s0!r}); accepted: R <= {longest} (the "
        f"nearest that lands: R = {longest})"
    )


def ramp_sparsity(t: int, rounds: int, every: int, s0: float, s_final: float, first: int = 0):
    """Sparsity of the mask update at round t when masks are updated every ``every`` rounds from
    ``first``: Zhu & Gupta's gradual pruning, whose cubic ramp ends at the last update,
    s_t = s_final + (s0 - s_final) (1 - (t - first) / (t_end - first))^3 for t <= t_end
    (t_end = :func:`last_update`), s_final after it. So the last update lands on s_final exactly
    for every ``every``; with every = 1 and first = 0 it is eq. 11 with T - 1 in place of T."""
    check_landing(rounds, every, s0, s_final, first)
    if isinstance(t, bool) or not isinstance(t, int) or not first <= t <= rounds - 1:
        raise FlkitError(f"t={t!r} must be an integer round index in [{first}, {rounds - 1}]")
    end = last_update(rounds, every, first)
    if t >= end:
        return float(check_sparsity("s_final", s_final))
    return cubic_sparsity(t - first, end - first, s0, s_final)


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


def check_segments(rounds: int, segments: int) -> None:
    """FlkitError when T is below Q: a lambda segment must hold at least one round."""
    if rounds < segments:
        raise FlkitError(
            f"T={rounds} rounds is below Q={segments} lambda segments (a segment must hold at "
            f"least one round); accepted: Q <= {rounds}, or T >= {segments}"
        )


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
    check_segments(rounds, segments)
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
