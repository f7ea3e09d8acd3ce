"""Asynchronous federated learning in simulated time: the simulator, the FedAST / Sync schedulers
and the FedAST trainer on real data.

Read in this order:

- ``delays``: how long a request takes at a client (shifted exponential with speed groups;
  fixed traces for tests);
- ``events``, ``clock``: the discrete-event core and the :class:`Simulator` (per-client FCFS
  queues, availability cap, model versions and staleness, synchronous first-k rounds); they know
  nothing of training;
- ``rules``, ``bandits``: the pure allocation / estimation / selection rules;
- ``schedule``: what the schedulers share, the :class:`Trainer` interface and :class:`SimResult`;
- ``fedast``, ``sync``: the schedulers, :class:`FedAST` (S/D, NoBuffer) and :class:`SyncST`
  (Sync-ST, Sync-UCB-ST, Sync-Bayes-ST);
- ``defaults``, ``tasks``, ``config``: :class:`FedASTRun`, the one configuration (a
  :class:`TaskConfig` per task, ``None`` fields from the paper's per-dataset settings);
- ``trainer``: :class:`EngineTrainer`, the Trainer on the batched engine;
- ``timing``: :class:`TimingTrainer`, the Trainer that trains nothing, and :func:`timing_run`: a
  run's timing alone, in seconds;
- ``runner``: :func:`run` (validated, cached, with progress), :func:`build_schedule`,
  :func:`centralised`.

The staleness experiments reuse ``delays`` and ``clock`` the same way.
"""

from __future__ import annotations

from ..metrics import time_gain
from .bandits import expected_improvement, ucb_scores
from .clock import (
    ARRIVED,
    CANCELLED,
    DISCARDED,
    QUEUED,
    EventQueue,
    Request,
    RoundResult,
    Simulator,
)
from .config import FedASTRun
from .defaults import DATASET_DEFAULTS, METHOD_LABELS, METHODS, SERVER_LR, TARGETS
from .delays import (
    DELAY_RATIOS,
    LOCAL_STEPS_MULTIPLIER,
    SPEED_GROUP_FACTORS,
    SPEED_GROUP_FRACTIONS,
    DelayModel,
    FixedDelays,
    ShiftedExponentialDelays,
    assign_speed_groups,
    shifted_exponential,
)
from .fedast import FedAST, run_fedast
from .parallel import run_many
from .rules import (
    client_units,
    estimate_variance_official,
    estimate_variance_paper,
    k_rule,
    normalized_dispersion,
    realloc_official,
    realloc_paper,
    redistribute,
    sync_shares,
)
from .runner import build_schedule, centralised, run
from .schedule import EVENT_COLUMNS, SimResult, Trainer
from .sync import SyncST, run_sync
from .tasks import ResolvedTask, TaskConfig
from .timing import TimingTrainer, timing_config, timing_run
from .trainer import EngineTrainer, Update

__all__ = [
    "ARRIVED",
    "CANCELLED",
    "DATASET_DEFAULTS",
    "DELAY_RATIOS",
    "DISCARDED",
    "EVENT_COLUMNS",
    "LOCAL_STEPS_MULTIPLIER",
    "METHODS",
    "METHOD_LABELS",
    "QUEUED",
    "SERVER_LR",
    "SPEED_GROUP_FACTORS",
    "SPEED_GROUP_FRACTIONS",
    "TARGETS",
    "DelayModel",
    "EngineTrainer",
    "EventQueue",
    "FedAST",
    "FedASTRun",
    "FixedDelays",
    "Request",
    "RoundResult",
    "ResolvedTask",
    "ShiftedExponentialDelays",
    "SimResult",
    "Simulator",
    "SyncST",
    "TaskConfig",
    "TimingTrainer",
    "Trainer",
    "Update",
    "assign_speed_groups",
    "build_schedule",
    "centralised",
    "estimate_variance_official",
    "estimate_variance_paper",
    "expected_improvement",
    "k_rule",
    "normalized_dispersion",
    "realloc_official",
    "realloc_paper",
    "redistribute",
    "run",
    "run_many",
    "run_fedast",
    "run_sync",
    "shifted_exponential",
    "sync_shares",
    "client_units",
    "time_gain",
    "timing_config",
    "timing_run",
    "ucb_scores",
]
