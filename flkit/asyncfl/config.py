"""The one configuration of a simulated FedAST experiment.

:class:`FedASTRun` holds the method, the client pool, the scheduler's knobs and one
:class:`TaskConfig` per task; ``None`` fields take the dataset's defaults
(:data:`DATASET_DEFAULTS`). ``validate()`` checks everything, before any data is loaded; the
schedulers (:class:`flkit.asyncfl.FedAST`, :class:`flkit.asyncfl.SyncST`) take the validated
``FedASTRun`` itself and read each task's resolved numbers from :meth:`FedASTRun.resolved_tasks`.

Cache keys: :meth:`FedASTRun.to_dict` is part of every cached run's key. The knobs of
``_KEYED_WHEN_CHANGED`` enter it only when set away from their default, so a run cached by a
config that had no such knob (its key has no entry for it) is still found.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

from ..engine import LocalSpec
from ..utils import FlkitError, check_choice, check_range
from .defaults import ALIASES, DATASET_DEFAULTS, METHODS, SERVER_LR
from .delays import (
    LOCAL_STEPS_MULTIPLIER,
    SPEED_GROUP_FACTORS,
    SPEED_GROUP_FRACTIONS,
    ShiftedExponentialDelays,
)
from .rules import round_half_up
from .tasks import ResolvedTask, TaskConfig

__all__ = ["TaskConfig", "FedASTRun", "ResolvedTask"]


#: scheduler knobs with their defaults, in a cache key only when changed: keys written without
#: them stay valid
_KEYED_WHEN_CHANGED = dict(
    delay_multiplier=LOCAL_STEPS_MULTIPLIER,
    shift_fraction=0.5,
    group_fractions=SPEED_GROUP_FRACTIONS,
    group_factors=SPEED_GROUP_FACTORS,
    max_new=2,
    max_events=None,
    record_events=True,
    sync_max_rounds=None,
    ucb_gamma=0.99,
    bods_alpha=0.25,
    bods_candidates=75,
    extra_candidates=5,
    version0="paper",
    realloc_unit=None,
)


@dataclass(frozen=True)
class FedASTRun:
    """A whole simulated experiment: method, tasks, client pool and scheduler knobs.

    ``method``: one of :data:`METHODS` (aliases: fedast = fedast_d, sync = sync_st).
    ``k``: Sync first-k (None = no straggler mitigation, same as ``sync_st_nomit``).
    ``option``: FedAST option for ``nobuffer`` ("S" static, "D" with Realloc).
    ``max_time``: stop at this simulated time (None: run until every task reaches its target;
    then every task needs a target or max_rounds). ``eval_subset``: test samples for periodic
    evaluations (None: the full test set; crossings are always confirmed on the full set).

    FedAST knobs: ``ratio`` r = R/b, ``realloc_rule`` ("official" or "paper"), ``window`` V
    (estimates kept per task), ``period_factor`` (Realloc period = floor(period_factor * sum R)
    arrivals), ``warmup_rounds`` (official trigger: every task has more server updates),
    ``max_new`` (at most this many new requests per arrival), ``max_events`` (stop after this many
    events). Sync knobs: ``sync_test_every`` (rounds between evaluations), ``sync_max_rounds``,
    ``ucb_gamma`` (UCB discount), ``bods_alpha`` / ``bods_candidates`` / ``extra_candidates``
    (Sync-Bayes-ST). ``version0``: "paper" (every request trains from the model version it was
    sent with) or "official" (the official code's version 0 is the live model itself, so a request
    sent at time 0 trains from the model current when it is trained: after the first aggregation,
    no longer the initial one). ``realloc_unit``: the official Realloc's allocation unit and
    per-task floor (None: ``ratio``, as the official code; a reduced pool can keep the unit's share
    of sum R, 32 / 384 in the paper, while b keeps r). Delays: a request of task m at a client takes
    ``shift_fraction * ratio_m + Exp(ratio_m)`` per local step times ``delay_multiplier`` (the
    task's dataset may set its own), times the client's speed-group factor (``group_factors``,
    groups of sizes ``group_fractions`` drawn with ``group_seed``)."""

    method: str
    tasks: tuple
    num_clients: int = 1000
    availability: float = 0.3
    k: int | None = 30
    ratio: int = 32
    realloc_rule: str = "official"
    option: str = "D"
    max_time: float | None = None
    eval_subset: int | None = None
    data_seed: int = 10
    group_seed: int = 64
    dtype: str = "float32"
    window: int = 8
    period_factor: float = 0.75
    warmup_rounds: int = 8
    sync_test_every: int = 1
    delay_multiplier: float = LOCAL_STEPS_MULTIPLIER
    shift_fraction: float = 0.5
    group_fractions: tuple = SPEED_GROUP_FRACTIONS
    group_factors: tuple = SPEED_GROUP_FACTORS
    max_new: int = 2
    max_events: int | None = None
    record_events: bool = True
    sync_max_rounds: int | None = None
    ucb_gamma: float = 0.99
    bods_alpha: float = 0.25
    bods_candidates: int = 75
    extra_candidates: int = 5
    version0: str = "paper"
    realloc_unit: int | None = None

    def __post_init__(self):
        method = ALIASES.get(self.method, self.method)
        object.__setattr__(self, "method", method)
        tasks = tuple(TaskConfig(**t) if isinstance(t, Mapping) else t for t in self.tasks)
        object.__setattr__(self, "tasks", tasks)
        for f in ("group_fractions", "group_factors"):
            object.__setattr__(self, f, tuple(getattr(self, f)))

    # ---------------------------------------------------------------- validation
    def validate(self) -> FedASTRun:
        """Check every field (FlkitError naming the value and the accepted ones); returns self."""
        check_choice("method", self.method, METHODS + tuple(ALIASES))
        if not self.tasks:
            raise FlkitError("tasks is empty; give at least one task")
        for t in self.tasks:
            if not isinstance(t, TaskConfig):
                raise FlkitError(
                    f"tasks must hold TaskConfig objects or dicts; got {type(t).__name__}"
                )
            t.validate()
        names = [t.name for t in self.tasks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise FlkitError(f"task names must be unique; repeated: {', '.join(dup)}")
        check_range("num_clients", self.num_clients, 1)
        check_range(
            "availability (fraction of available clients)", self.availability, 0, 1, low_open=True
        )
        if self.k is not None:
            check_range("k (first-k)", self.k, 1)
        check_range("ratio (R/b)", self.ratio, 1)
        check_choice("realloc_rule", self.realloc_rule, ("paper", "official"))
        check_choice("option", self.option, ("S", "D"))
        check_choice("version0", self.version0, ("paper", "official"))
        if self.realloc_unit is not None:
            check_range("realloc_unit", self.realloc_unit, 1)
        if self.max_time is not None:
            check_range("max_time", self.max_time, 0, low_open=True)
        if self.eval_subset is not None:
            check_range("eval_subset", self.eval_subset, 1)
        check_choice("dtype", self.dtype, ("float32", "float64"))
        self._validate_delays()
        self._validate_fedast() if not self.is_sync else self._validate_sync()
        stops = self.sync_max_rounds if self.is_sync else self.max_events
        if self.max_time is None and stops is None:
            open_ended = [t.name for t in self.tasks if t.target is None and t.max_rounds is None]
            if open_ended:
                raise FlkitError(
                    f"tasks {open_ended} have neither a target nor max_rounds and "
                    "max_time is None; the run would never end. Give a target in "
                    "(0, 1], max_rounds or max_time"
                )
        return self

    def _validate_delays(self):
        check_range("delay_multiplier", self.delay_multiplier, 0)
        check_range("shift_fraction", self.shift_fraction, 0)
        if len(self.group_factors) != len(self.group_fractions):
            raise FlkitError("group_factors and group_fractions must have the same length")
        for f in self.group_factors:
            check_range("speed group factor", f, 0)
        for t in self.tasks:
            check_range(
                f"delay_ratio of task {t.name!r}", t.delay_ratio_or_default(), 0, low_open=True
            )

    def _validate_fedast(self):
        check_range("window", self.window, 2)
        check_range("period_factor", self.period_factor, 0, low_open=True)
        check_range("warmup_rounds", self.warmup_rounds, 0)
        check_range("max_new", self.max_new, 1)
        if self.max_events is not None:
            check_range("max_events", self.max_events, 1)
        for t in self.tasks:
            check_range(f"requests of task {t.name!r}", t.requests, 1, self.num_clients)
        tot = sum(t.requests for t in self.tasks)
        if tot > self.num_clients:
            raise FlkitError(
                f"total active requests sum(requests)={tot} is outside the accepted "
                f"range [{len(self.tasks)}, {self.num_clients}] (at most one per "
                "client of the pool)"
            )

    def _validate_sync(self):
        check_range("sync_test_every", self.sync_test_every, 1)
        if self.sync_max_rounds is not None:
            check_range("sync_max_rounds", self.sync_max_rounds, 1)
        check_range("ucb_gamma", self.ucb_gamma, 0, 1, low_open=True, high_open=True)
        check_range("bods_alpha", self.bods_alpha, 0, 1)
        check_range("bods_candidates", self.bods_candidates, 1)
        check_range("extra_candidates", self.extra_candidates, 0)
        if sum(t.weight for t in self.tasks) <= 0:
            raise FlkitError("the task weights sum to 0; at least one task needs weight > 0")
        if self.n_avail < sum(1 for t in self.tasks if t.weight > 0):
            raise FlkitError(
                f"availability gives {self.n_avail} clients per round, fewer than "
                f"the {len(self.tasks)} tasks; accepted: at least one client per task"
            )

    # ---------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict:
        d = asdict(self)
        # a task without model flags keeps the key it had before the field existed
        d["tasks"] = [
            {k: v for k, v in asdict(t).items() if k != "model_flags" or v is not None}
            for t in self.tasks
        ]
        for k, default in _KEYED_WHEN_CHANGED.items():
            if d[k] == default or (isinstance(default, tuple) and tuple(d[k]) == default):
                del d[k]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> FedASTRun:
        if isinstance(d, FedASTRun):
            return d
        if not isinstance(d, Mapping):
            raise FlkitError(f"config must be a dict or FedASTRun; got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise FlkitError(f"unknown config key(s) {bad}; accepted: {', '.join(sorted(known))}")
        tasks = []
        tknown = {f.name for f in fields(TaskConfig)}
        for t in d.get("tasks", ()):
            if isinstance(t, Mapping):
                badt = sorted(set(t) - tknown)
                if badt:
                    raise FlkitError(
                        f"unknown task key(s) {badt}; accepted: {', '.join(sorted(tknown))}"
                    )
                tasks.append(TaskConfig(**t))
            else:
                tasks.append(t)
        return cls(**{**dict(d), "tasks": tuple(tasks)})

    def replace(self, **changes) -> FedASTRun:
        return replace(self, **changes)

    # ---------------------------------------------------------------- resolved per-task values
    def server_lr(self, t: TaskConfig) -> float:
        if t.server_lr is not None:
            return float(t.server_lr)
        return SERVER_LR[
            "sync" if self.is_sync else ("nobuffer" if self.method == "nobuffer" else "fedast")
        ]

    def client_lr(self, t: TaskConfig) -> float:
        return float(t.lr if t.lr is not None else t.default("sync_lr" if self.is_sync else "lr"))

    def weight_decay(self, t: TaskConfig) -> float:
        if t.weight_decay is not None:
            return float(t.weight_decay)
        return float(t.default("sync_weight_decay" if self.is_sync else "weight_decay"))

    def buffer(self, t: TaskConfig) -> int:
        if self.method == "nobuffer":
            return 1
        return (
            int(t.buffer)
            if t.buffer is not None
            else max(1, -(-int(t.requests) // int(self.ratio)))
        )

    def local_spec(self, t: TaskConfig) -> LocalSpec:
        d = DATASET_DEFAULTS[t.dataset]
        return LocalSpec(
            lr=self.client_lr(t),
            batch_size=d["batch_size"],
            epochs=d["epochs"],
            steps=d["steps"],
            momentum=0.0,
            weight_decay=self.weight_decay(t),
            drop_last=d["epochs"] is not None or bool(d.get("fresh_batches")),
            fresh_batches=bool(d.get("fresh_batches")),
        )

    def tau(self, t: TaskConfig) -> int:
        d = DATASET_DEFAULTS[t.dataset]
        if d["steps"] is not None:
            return int(d["steps"])
        return int(d["epochs"]) * (int(t.samples_per_client) // int(d["batch_size"]))

    # ---------------------------------------------------------------- what the schedulers read
    @property
    def is_sync(self) -> bool:
        return self.method.startswith("sync")

    @property
    def n_avail(self) -> int:
        """Available clients: round(availability * num_clients), at least 1."""
        return max(1, round_half_up(self.availability * self.num_clients))

    @property
    def fedast_option(self) -> str:
        """ "S" (static allocation) or "D" (Realloc) for the FedAST methods."""
        return {"fedast_d": "D", "fedast_s": "S"}.get(self.method, self.option)

    @property
    def no_buffer(self) -> bool:
        return self.method == "nobuffer"

    @property
    def sync_selector(self) -> str:
        return {"sync_ucb": "ucb", "sync_bayes": "bayes"}.get(self.method, "random")

    @property
    def sync_k(self) -> int | None:
        """First-k of the Sync methods (None: keep every selected client)."""
        return None if self.method == "sync_st_nomit" else self.k

    @property
    def time_limit(self) -> float:
        return math.inf if self.max_time is None else float(self.max_time)

    def resolved_tasks(self) -> list[ResolvedTask]:
        """Each task's numbers with the dataset defaults filled in."""
        return [
            ResolvedTask(
                name=t.name,
                target=t.target,
                delay_ratio=t.delay_ratio_or_default(),
                delay_multiplier=(
                    self.delay_multiplier
                    if t.default("delay_multiplier") is None
                    else float(t.default("delay_multiplier"))
                ),
                requests=int(t.requests),
                buffer=self.buffer(t),
                test_every=int(
                    t.test_every if t.test_every is not None else t.default("test_every")
                ),
                eta_c=self.client_lr(t),
                eta_s=self.server_lr(t),
                tau=self.tau(t),
                weight=float(t.weight),
                max_rounds=t.max_rounds,
            )
            for t in self.tasks
        ]

    def delay_model(self, seed: int) -> ShiftedExponentialDelays:
        """The shifted-exponential delays of this run (speed groups by ``group_seed``, draws by
        the run ``seed``)."""
        tasks = self.resolved_tasks()
        return ShiftedExponentialDelays(
            self.num_clients,
            [t.delay_ratio for t in tasks],
            multiplier=[t.delay_multiplier for t in tasks],
            shift_fraction=self.shift_fraction,
            group_fractions=self.group_fractions,
            group_factors=self.group_factors,
            group_seed=self.group_seed,
            seed=seed,
        )
