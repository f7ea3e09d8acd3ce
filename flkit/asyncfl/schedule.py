"""What the FedAST / Sync schedulers share: the :class:`Trainer` interface they call and the
outcome of a run (:class:`SimResult`). Their settings are a :class:`flkit.asyncfl.FedASTRun`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..utils import FlkitError

__all__ = ["Trainer", "SimResult", "EVENT_COLUMNS", "evaluate_task", "check_trainer"]


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
    - ``placeholder_updates = True`` — the updates are stand-ins (a timing run): option D's
      Realloc has nothing to measure and is off, unless ``dispersion`` is given.
    """

    def train(self, task: str, version: int, client_ids: list) -> list: ...

    def aggregate(self, task: str, updates: list) -> int | None: ...

    def evaluate(self, task: str) -> float: ...


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
        df["task"] = pd.Series(
            [self.tasks[int(t)] if t is not None and t == t else None for t in df["task"]],
            dtype=object,
            index=df.index,
        )
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
            raise FlkitError(
                f"trainer lacks the required method {meth}(); see flkit.asyncfl.Trainer"
            )
