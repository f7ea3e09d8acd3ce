"""How long one request (download + local training + upload) takes at a client, in simulated time.

:func:`shifted_exponential` and :class:`ShiftedExponentialDelays` (speed groups, per-task ratios and
a local-step multiplier, as in FedAST); :class:`FixedDelays` for hand-checked traces. Nothing here
knows about training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..utils import FlkitError, check_range, numpy_rng

__all__ = [
    "SPEED_GROUP_FRACTIONS",
    "SPEED_GROUP_FACTORS",
    "LOCAL_STEPS_MULTIPLIER",
    "DELAY_RATIOS",
    "shifted_exponential",
    "assign_speed_groups",
    "DelayModel",
    "ShiftedExponentialDelays",
    "FixedDelays",
]

#: FedAST speed groups: 25 % slow, 50 % normal, 25 % fast ...
SPEED_GROUP_FRACTIONS = (0.25, 0.5, 0.25)
#: ... whose delays are multiplied by 1.3 / 1 / 0.7.
SPEED_GROUP_FACTORS = (1.3, 1.0, 0.7)
#: FedAST multiplies the per-step delay by the number of local steps (27).
LOCAL_STEPS_MULTIPLIER = 27.0
#: per-step delay ratio of each FedAST paper task; the normal-speed shift is ratio/2, the mean
#: ratio.
DELAY_RATIOS = {
    "mnist": 0.148,
    "fmnist": 0.240,
    "cifar10": 0.228,
    "shakespeare": 0.555,
    "cifar100": 2.071,
}


def shifted_exponential(
    shift: float, mean: float, size=None, *, rng: np.random.Generator | None = None, seed: int = 0
):
    """Draw ``shift + Exp(mean)``: minimum ``shift``, expected value ``shift + mean``.

    The FedAST paper writes X = beta + Exp(mean 2 beta) (so E[X] = 3 beta); its code uses
    ``shift = ratio / 2`` and ``mean = ratio``, i.e. beta = ratio / 2. Without ``rng`` a generator
    is made from the named stream ``(seed, "shifted_exponential")``."""
    check_range("shift", shift, 0)
    check_range("mean", mean, 0)
    if rng is None:
        rng = numpy_rng(seed, "shifted_exponential")
    return shift + mean * rng.standard_exponential(size)


def assign_speed_groups(
    num_clients: int, fractions: Sequence[float] = SPEED_GROUP_FRACTIONS, seed: int = 64
) -> np.ndarray:
    """Group index per client (0 = first group, e.g. slow), exact proportions.

    A random permutation of the clients (stream ``(seed, "speed_groups")``) is cut at
    ``floor(cumulative_fraction * N)`` like the official code, so the last group takes the
    rounding remainder. The assignment depends on ``seed`` only, so it can stay fixed across
    Monte Carlo runs whose run seed varies."""
    check_range("num_clients", num_clients, 1)
    fr = [float(f) for f in fractions]
    for f in fr:
        check_range("speed group fraction", f, 0, 1)
    if not math.isclose(sum(fr), 1.0, abs_tol=1e-9):
        raise FlkitError(
            f"speed group fractions={tuple(fractions)!r} sum to {sum(fr)}; they must sum to 1"
        )
    perm = numpy_rng(seed, "speed_groups").permutation(num_clients)
    groups = np.empty(num_clients, dtype=np.int64)
    cum, lo = 0.0, 0
    for g, f in enumerate(fr):
        cum += f
        hi = num_clients if g == len(fr) - 1 else int(cum * num_clients + 1e-9)
        groups[perm[lo:hi]] = g
        lo = hi
    return groups


class DelayModel:
    """Service time of one request: ``sample(task, client) -> float`` (>= 0).

    ``task`` and ``client`` are integer indices. Subclass and override :meth:`sample`."""

    def sample(self, task: int, client: int) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def mean(self, task: int, client: int) -> float:  # pragma: no cover - optional
        raise NotImplementedError


class ShiftedExponentialDelays(DelayModel):
    """FedAST delays: ``multiplier * factor_i * (shift_fraction * ratio_m + Exp(mean = ratio_m))``.

    - ``task_ratios``: per-task base ratio (per local step), e.g. MNIST 0.148, FMNIST 0.240.
    - ``multiplier``: number of local steps (27), a scalar or one value per task.
    - speed groups: ``group_fractions`` (25/50/25 %) with ``group_factors`` (1.3/1/0.7) applied to
      both shift and mean; assignment from ``group_seed`` only (fixed across runs by default).
    - exponential draws come from the named stream ``(seed, *stream)``; they are generated in
      blocks (cheap per event) and consumed in order, so a run is reproducible from its seed.

    Mean duration of client i for task m:
    ``multiplier * factor_i * ratio_m * (shift_fraction + 1)``.
    """

    def __init__(
        self,
        num_clients: int,
        task_ratios: Sequence[float],
        *,
        multiplier: float | Sequence[float] = LOCAL_STEPS_MULTIPLIER,
        shift_fraction: float = 0.5,
        group_fractions: Sequence[float] = SPEED_GROUP_FRACTIONS,
        group_factors: Sequence[float] = SPEED_GROUP_FACTORS,
        group_seed: int = 64,
        seed: int = 0,
        stream: tuple = ("delays",),
        block: int = 16384,
    ):
        check_range("num_clients", num_clients, 1)
        ratios = [float(r) for r in task_ratios]
        if not ratios:
            raise FlkitError("task_ratios is empty; give one delay ratio per task")
        for r in ratios:
            check_range("delay ratio", r, 0)
        mults = (
            [float(multiplier)] * len(ratios)
            if np.isscalar(multiplier)
            else [float(x) for x in multiplier]
        )
        if len(mults) != len(ratios):
            raise FlkitError(
                f"multiplier has {len(mults)} values for {len(ratios)} tasks; "
                "give one per task or a scalar"
            )
        for x in mults:
            check_range("delay multiplier", x, 0)
        check_range("shift_fraction", shift_fraction, 0)
        factors = [float(f) for f in group_factors]
        if len(factors) != len(group_fractions):
            raise FlkitError(
                f"group_factors has {len(factors)} values for {len(group_fractions)} speed groups"
            )
        for f in factors:
            check_range("speed group factor", f, 0)
        check_range("block", block, 1)
        self.num_clients = int(num_clients)
        self.ratios = ratios
        self.multipliers = mults
        self.shift_fraction = float(shift_fraction)
        self.groups = assign_speed_groups(num_clients, group_fractions, group_seed)
        self.factors = np.asarray(factors)[self.groups]  # per client
        self._shift = [
            (m * r * self.shift_fraction * self.factors).tolist() for r, m in zip(ratios, mults)
        ]
        self._scale = [(m * r * self.factors).tolist() for r, m in zip(ratios, mults)]
        self._rng = numpy_rng(seed, *stream)
        self._block = int(block)
        self._buf: list = []
        self._i = 0

    def sample(self, task: int, client: int) -> float:
        i = self._i
        buf = self._buf
        if i >= len(buf):
            buf = self._buf = self._rng.standard_exponential(self._block).tolist()
            i = 0
        self._i = i + 1
        return self._shift[task][client] + self._scale[task][client] * buf[i]

    def mean(self, task: int, client: int) -> float:
        return self._shift[task][client] + self._scale[task][client]

    def minimum(self, task: int, client: int) -> float:
        return self._shift[task][client]


class FixedDelays(DelayModel):
    """Deterministic delays, for hand-computed traces and experiments with scripted timing.

    ``durations`` is a number (every request), a callable ``f(task, client) -> float``, or a dict
    ``{(task, client): value_or_list}`` where a list is consumed one value per request (the last
    value repeats). ``default`` covers pairs missing from the dict."""

    def __init__(self, durations, default: float | None = None):
        self._const = self._fn = self._table = None
        if callable(durations):
            self._fn = durations
        elif isinstance(durations, dict):
            self._table = {}
            for key, v in durations.items():
                vals = [float(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
                if not vals:
                    raise FlkitError(f"FixedDelays entry {key!r} is empty")
                for x in vals:
                    check_range(f"delay for (task, client)={key!r}", x, 0)
                self._table[tuple(key)] = [vals, 0]
        else:
            check_range("delay", float(durations), 0)
            self._const = float(durations)
        if default is not None:
            check_range("default delay", default, 0)
        self.default = default

    def sample(self, task: int, client: int) -> float:
        if self._const is not None:
            return self._const
        if self._fn is not None:
            d = float(self._fn(task, client))
            if not d >= 0:
                raise FlkitError(
                    f"delay function returned {d!r} for task {task}, client {client}; "
                    "accepted: >= 0"
                )
            return d
        entry = self._table.get((task, client))
        if entry is None:
            if self.default is None:
                raise FlkitError(
                    f"no delay given for (task, client)=({task}, {client}) and no default"
                )
            return self.default
        vals, i = entry
        entry[1] = i + 1
        return vals[i] if i < len(vals) else vals[-1]
