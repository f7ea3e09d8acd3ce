"""The simulator without training: what a run's timing alone decides.

When requests are sent and arrive, how stale they are, how long a synchronous round waits and how
many requests each task gets follow from the delays, the client queues, the availability cap, R, b
and k, not from any model. :class:`TimingTrainer` is the :class:`~flkit.asyncfl.Trainer` that trains
nothing, and :func:`timing_run` runs a configuration with it: seconds where training takes hours,
for regime indicators, cost counts, schedule figures and the simulator's benchmark.

No target is ever reached (evaluation is 0), so a timing run goes to its horizon. Option D's
Realloc moves requests by the dispersion of real updates, which a timing run has none of:
:func:`timing_config` runs FedAST option D as option S with b = ceil(R / r), the timing option D has
until its first reallocation. NoBuffer keeps its option D, and with it D's handling of a finished
task's requests (not re-sent, as S would); its Realloc is off (``placeholder_updates``), so it
keeps its first allocation.
"""

from __future__ import annotations

from dataclasses import replace

from .config import FedASTRun
from .fedast import run_fedast
from .schedule import SimResult
from .sync import run_sync

__all__ = ["TimingTrainer", "timing_config", "timing_run"]


class TimingTrainer:
    """A trainer that trains nothing: updates are placeholders, aggregation only counts versions,
    evaluation is 0 (no target is ever reached). What a run then records is its timing alone.

    Subclass it to record what the scheduler asks for (the clients it trains, the tests); a
    subclass that defines ``dispersion(task, updates)`` turns Realloc back on."""

    #: the updates are placeholders: Realloc has no dispersion to measure and stays off
    placeholder_updates = True

    def __init__(self):
        self.v: dict = {}

    def train(self, task, version, client_ids, *args, **kw):
        return [None] * len(client_ids)

    def aggregate(self, task, updates):
        self.v[task] = self.v.get(task, 0) + 1
        return self.v[task]

    def evaluate(self, task):
        return 0.0

    def loss(self, task, update):
        return 0.0


def timing_config(config, horizon: float, max_events: int | None = None) -> FedASTRun:
    """``config`` as a timing-only run to ``horizon`` (or ``max_events`` arrivals): the same pool,
    tasks, delays, R, b and k; FedAST option D becomes option S with b = ceil(R / r) (module doc),
    no targets."""
    cfg = FedASTRun.from_dict(config)
    method = "fedast_s" if cfg.method == "fedast_d" else cfg.method
    fixed_buffer = not cfg.is_sync and method != "nobuffer"
    tasks = tuple(
        replace(t, target=None, **({"buffer": cfg.buffer(t)} if fixed_buffer else {}))
        for t in cfg.tasks
    )
    return cfg.replace(method=method, tasks=tasks, max_time=float(horizon), max_events=max_events)


def timing_run(
    config,
    seed: int = 0,
    horizon: float = 300.0,
    max_events: int | None = None,
    trainer: TimingTrainer | None = None,
) -> SimResult:
    """One timing-only run of ``config`` (:func:`timing_config`) with ``trainer`` (default a
    fresh :class:`TimingTrainer`; pass a subclass to record what the scheduler asks for)."""
    cfg = timing_config(config, horizon, max_events).validate()
    runner = run_sync if cfg.is_sync else run_fedast
    return runner(cfg, TimingTrainer() if trainer is None else trainer, seed=int(seed))
