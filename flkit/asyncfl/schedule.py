"""What the FedAST / Sync schedulers share: the :class:`Trainer` interface they call, the
resolved per-task settings (:class:`TaskSpec`), the scheduler settings (:class:`FedASTConfig`,
:class:`SyncConfig`, built from the user's :class:`flkit.asyncfl.config.FedASTRun` or by hand
in tests), and the outcome of a run (:class:`SimResult`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from ..utils import FlkitError, check_choice, check_range
from .delays import (DELAY_RATIOS, LOCAL_STEPS_MULTIPLIER, SPEED_GROUP_FACTORS,
                     SPEED_GROUP_FRACTIONS, ShiftedExponentialDelays)
from .rules import round_half_up

__all__ = ["Trainer", "TaskSpec", "FedASTConfig", "SyncConfig", "SimResult", "EVENT_COLUMNS",
           "evaluate_task", "check_trainer"]


# the training interface
# ============================================================================================
@runtime_checkable
class Trainer(Protocol):
    """What the schedulers need from training. ``task`` is the task name (``TaskSpec.name``).

    Required
    - ``train(task, version, client_ids) -> list`` — one update per entry of ``client_ids``
      (same order; a client may appear twice), each trained from the stored model ``version``.
    - ``aggregate(task, updates) -> int | None`` — apply the mean of ``updates`` to the *current*
      model of ``task`` (FedAST: x <- x + eta_s * mean(diffs)); returns the new version (must be
      the old one + 1) or None.
    - ``evaluate(task) -> float`` — test accuracy of the current model in [0, 1]; or
      ``(accuracy, {"test_loss": ..., ...})``, whose extra numbers go into the history row.

    Optional
    - ``dispersion(task, updates) -> float`` — normalised dispersion
      ``sum_k ||u_k - mean||^2 / (len * ||mean||^2)`` (default: :func:`normalized_dispersion`;
      the official rule excludes bias tensors).
    - ``loss(task, update) -> float`` — reported local training loss (Sync-UCB-ST only).
    - ``release(task, version)`` — the scheduler no longer needs that stored version.
    """

    def train(self, task: str, version: int, client_ids: list) -> list: ...

    def aggregate(self, task: str, updates: list) -> int | None: ...

    def evaluate(self, task: str) -> float: ...



# ============================================================================================
# configuration
# ============================================================================================
@dataclass
class TaskSpec:
    """One task (model) trained simultaneously with the others.

    ``dataset`` selects the delay ratio from :data:`DELAY_RATIOS` (default: ``name``) unless
    ``delay_ratio`` is given. ``requests``/``buffer`` are FedAST's initial R_m and b_m;
    ``weight`` is the Sync client-share weight w_m; ``test_every`` the FedAST test period in
    server updates; eta_c, eta_s, tau scale the Realloc estimates; ``target=None`` never stops
    on accuracy; ``max_rounds`` stops the task after that many server updates."""
    name: str
    target: float | None = None
    dataset: str | None = None
    delay_ratio: float | None = None
    delay_multiplier: float | None = None
    requests: int = 96
    buffer: int = 3
    test_every: int = 4
    eta_c: float = 0.1
    eta_s: float = 0.1
    tau: float = 27
    weight: float = 1.0
    max_rounds: int | None = None

    def resolved_ratio(self) -> float:
        if self.delay_ratio is not None:
            return float(self.delay_ratio)
        key = self.dataset or self.name
        check_choice("task dataset (for its delay ratio)", key, DELAY_RATIOS)
        return DELAY_RATIOS[key]


@dataclass
class _Common:
    tasks: Sequence[TaskSpec] = ()
    num_clients: int = 1000
    availability: float = 0.3
    seed: int = 0
    group_seed: int = 64
    delay_multiplier: float = LOCAL_STEPS_MULTIPLIER
    shift_fraction: float = 0.5
    group_fractions: tuple = SPEED_GROUP_FRACTIONS
    group_factors: tuple = SPEED_GROUP_FACTORS
    max_time: float = math.inf
    record_events: bool = True

    @property
    def n_avail(self) -> int:
        """Available clients: round(availability * num_clients), at least 1."""
        return max(1, round_half_up(self.availability * self.num_clients))

    def _validate_common(self):
        if not self.tasks:
            raise FlkitError("tasks is empty; give at least one TaskSpec")
        for t in self.tasks:
            if not isinstance(t, TaskSpec):
                raise FlkitError(f"tasks must hold TaskSpec objects; got {type(t).__name__}")
        names = [t.name for t in self.tasks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise FlkitError(f"task names must be unique; repeated: {', '.join(dup)}")
        check_range("num_clients", self.num_clients, 1)
        check_range("availability", self.availability, 0, 1, low_open=True)
        check_range("delay_multiplier", self.delay_multiplier, 0)
        check_range("shift_fraction", self.shift_fraction, 0)
        for f in self.group_factors:
            check_range("speed group factor", f, 0)
        if len(self.group_factors) != len(self.group_fractions):
            raise FlkitError("group_factors and group_fractions must have the same length")
        check_range("max_time", self.max_time, 0, low_open=True)
        for t in self.tasks:
            t.resolved_ratio()  # unknown dataset names raise here
            check_range(f"delay_ratio of task {t.name!r}", t.resolved_ratio(), 0)
            if t.delay_multiplier is not None:
                check_range(f"delay_multiplier of task {t.name!r}", t.delay_multiplier, 0)
            if t.target is not None:
                check_range(f"target of task {t.name!r}", t.target, 0, 1, low_open=True)
            check_range(f"test_every of task {t.name!r}", t.test_every, 1)
            if t.max_rounds is not None:
                check_range(f"max_rounds of task {t.name!r}", t.max_rounds, 1)
            check_range(f"eta_c of task {t.name!r}", t.eta_c, 0, low_open=True)
            check_range(f"eta_s of task {t.name!r}", t.eta_s, 0, low_open=True)
            check_range(f"tau of task {t.name!r}", t.tau, 0, low_open=True)
            check_range(f"weight of task {t.name!r}", t.weight, 0)

    def delay_model(self) -> ShiftedExponentialDelays:
        return ShiftedExponentialDelays(
            self.num_clients, [t.resolved_ratio() for t in self.tasks],
            multiplier=[self.delay_multiplier if t.delay_multiplier is None else t.delay_multiplier for t in self.tasks],
            shift_fraction=self.shift_fraction, group_fractions=self.group_fractions,
            group_factors=self.group_factors, group_seed=self.group_seed, seed=self.seed)


@dataclass
class FedASTConfig(_Common):
    """FedAST run settings (defaults: the official demo)."""
    option: str = "D"
    realloc_rule: str = "official"
    no_buffer: bool = False
    ratio: int = 32               # r = R/b
    window: int = 8               # V (official: estimates over the 7 most recent)
    period_factor: float = 0.75   # c_period = floor(period_factor * sum R^(0)) * active tasks
    warmup_rounds: int = 8        # official trigger: every task has > warmup_rounds server updates
    max_new: int = 2              # K <= max_new
    max_events: int | None = None

    def __post_init__(self):
        self._validate_common()
        check_choice("option", self.option, ("S", "D"))
        check_choice("realloc_rule", self.realloc_rule, ("paper", "official"))
        check_range("ratio", self.ratio, 1)
        check_range("window", self.window, 2)
        check_range("period_factor", self.period_factor, 0, low_open=True)
        check_range("warmup_rounds", self.warmup_rounds, 0)
        check_range("max_new", self.max_new, 1)
        if self.max_events is not None:
            check_range("max_events", self.max_events, 1)
        for t in self.tasks:
            check_range(f"buffer of task {t.name!r}", t.buffer, 1)
            check_range(f"requests of task {t.name!r}", t.requests, 1, self.num_clients)
        tot = sum(t.requests for t in self.tasks)
        if tot > self.num_clients:
            raise FlkitError(f"total active requests sum(requests)={tot} is outside the accepted range "
                             f"[{len(self.tasks)}, {self.num_clients}] (at most one per client of the pool)")


@dataclass
class SyncConfig(_Common):
    """Synchronous simultaneous-training baselines."""
    k: int | None = 30            # first-k; None = no straggler mitigation (keep all)
    selector: str = "random"      # random (Sync-ST) | ucb (Sync-UCB-ST) | bayes (Sync-Bayes-ST)
    test_every: int = 1           # rounds between evaluations
    max_rounds: int | None = None
    ucb_gamma: float = 0.99
    bods_alpha: float = 0.25
    bods_candidates: int = 75
    extra_candidates: int = 5

    def __post_init__(self):
        self._validate_common()
        check_choice("selector", self.selector, ("random", "ucb", "bayes"))
        if self.k is not None:
            check_range("k", self.k, 1)
        check_range("test_every", self.test_every, 1)
        if self.max_rounds is not None:
            check_range("max_rounds", self.max_rounds, 1)
        check_range("ucb_gamma", self.ucb_gamma, 0, 1, low_open=True, high_open=True)
        check_range("bods_alpha", self.bods_alpha, 0, 1)
        check_range("bods_candidates", self.bods_candidates, 1)
        check_range("extra_candidates", self.extra_candidates, 0)
        if sum(t.weight for t in self.tasks) <= 0:
            raise FlkitError("the task weights sum to 0; at least one task needs weight > 0")
        if self.n_avail < sum(1 for t in self.tasks if t.weight > 0):
            raise FlkitError(f"availability gives {self.n_avail} clients per round, fewer than the "
                             f"{len(self.tasks)} tasks; accepted: at least one client per task")


# ============================================================================================
# results
# ============================================================================================
EVENT_COLUMNS = ("time", "task", "client", "version", "staleness", "kind")


@dataclass
class SimResult:
    """Outcome of one simulated run.

    - ``events``: rows ``(time, task_index, client, version, staleness, kind)``; kinds from the
      simulator (dispatch, drop, arrive, cancel, discard) plus aggregate, complete, stop, realloc.
    - ``history``: one dict per server update: task, round, sim_time, accuracy (None when not
      evaluated), buffer, requests (R), active (A), mean_staleness.
    - ``completion_time``: task -> time its target was reached (None if not reached).
    """
    method: str
    tasks: list
    events: list
    history: list
    completion_time: dict
    total_time: float
    stats: dict = field(default_factory=dict)
    allocations: list = field(default_factory=list)

    @property
    def all_completed(self) -> bool:
        return all(v is not None for v in self.completion_time.values())

    def events_frame(self):
        import pandas as pd
        df = pd.DataFrame([list(e) for e in self.events], columns=list(EVENT_COLUMNS))
        # rows without a task (aggregations, reallocations) hold None, which pandas turns into NaN
        df["task"] = pd.Series([self.tasks[int(t)] if t is not None and t == t else None for t in df["task"]],
                               dtype=object, index=df.index)
        return df

    def history_frame(self):
        import pandas as pd
        return pd.DataFrame(self.history)


# ============================================================================================
# FedAST
# ============================================================================================
def evaluate_task(trainer, task: str) -> tuple[float, dict]:
    """The trainer's evaluation as (accuracy, extra history columns)."""
    res = trainer.evaluate(task)
    if isinstance(res, tuple):
        return float(res[0]), dict(res[1])
    return float(res), {}



def check_trainer(trainer) -> None:
    """The trainer has the three required calls of :class:`Trainer`."""
    for meth in ("train", "aggregate", "evaluate"):
        if not callable(getattr(trainer, meth, None)):
            raise FlkitError(f"trainer lacks the required method {meth}(); "
                             "see flkit.asyncfl.Trainer")
