"""The one divergence rule of every training loop: :func:`flkit.experiment.run`, the FedAST /
Sync-ST runner (:func:`flkit.asyncfl.runner.run`, and a schedule from
:func:`flkit.asyncfl.runner.build_schedule`), its centralised reference
(:func:`flkit.asyncfl.runner.centralised`) and the gradient inversion
(:func:`flkit.inversion.invert`, which the staleness method runs every round).

- A loss that is not finite (NaN, +-inf) stops the loop at once: :class:`flkit.utils.FlkitError`
  naming the loss, its value and where it happened (round, server update, iteration). Nothing
  after it means anything, and nothing is cached as finished.
- A finite loss above ``FACTOR`` times its start (the first value the loop recorded for that
  loss) marks the run diverged from that point on (:class:`Divergence`): the loop goes on (so a
  run that does not diverge computes exactly what it computed without the rule), and the runner
  records the mark in the run's history and result and warns (:class:`DivergedWarning`) whenever
  it returns the run, trained or read from its cache: a diverged run is never served as a normal
  finished one.

Why ``FACTOR = 1e3``: the losses watched are cross-entropies (ln C at the start, 2.3 for ten
classes) and the inversion's L1 distance between two updates. An honest run's loss moves within a
few times its start (a learning-rate spike, client drift, stale updates; the cached smoke runs
we looked at stay within 1.3 times theirs), while a run whose weights blow up grows its loss by many
orders of magnitude within a few rounds (1e21 in the run that made this rule). A thousandfold
rise is far from the first and reached early by the second: a cross-entropy of 2,300 means
logits thousands apart on the wrong class, which no learning run goes through.

What the rule cannot see: a run that explodes within its first recorded value has no sane start
(its later losses are compared with an already huge one); such runs go on growing and are caught
later, or turn non-finite and stop.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from .utils import FlkitError

__all__ = [
    "FACTOR",
    "Divergence",
    "DivergedWarning",
    "LossWatch",
    "check_finite",
    "judge",
    "earliest",
    "warn",
    "watch_rows",
    "judge_history",
    "mark_history",
    "non_finite",
    "stored_history",
    "conclude",
]

#: a loss above FACTOR x its start marks the run diverged (see the module's docstring for why)
FACTOR = 1e3
#: the start used when the first loss is 0 (a model that fits already): any rise above
#: FACTOR x this tiny number is then a real departure from a perfect fit, not float noise
ZERO_START = 1e-6


class DivergedWarning(UserWarning):
    """A run (trained now or read from its cache) diverged: its numbers mean nothing."""


@dataclass(frozen=True)
class Divergence:
    """Where a loss first rose above ``limit`` = FACTOR x its start."""

    what: str  # "training loss", "test loss", "Disparity"
    at: int  # the round (server update, iteration) it first did
    value: float
    start: float
    limit: float
    unit: str = "round"

    def describe(self) -> str:
        return (
            f"its {self.what} rose to {self.value:.3g} at {self.unit} {self.at}, above "
            f"{FACTOR:g} x its start {self.start:.3g} (the divergence limit {self.limit:.3g})"
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Divergence:
        return cls(**d)


def limit_of(start: float) -> float:
    return FACTOR * (abs(start) if start != 0 else ZERO_START)


def check_finite(value, what: str, where: str, advice: str = "") -> float:
    """``value`` as a float; FlkitError naming ``what``, the value and ``where`` when it is NaN or
    infinite."""
    v = float(value)
    if not math.isfinite(v):
        raise FlkitError(
            f"the run diverged: its {what} is {v} at {where}; it is stopped there and nothing "
            f"is cached as finished{f' ({advice})' if advice else ''}"
        )
    return v


class LossWatch:
    """One loss of one loop, seen value by value: :meth:`see` raises on a non-finite value and
    sets :attr:`diverged` the first time a value exceeds the limit of the series' start."""

    def __init__(self, what: str, unit: str = "round", advice: str = ""):
        self.what, self.unit, self.advice = what, unit, advice
        self.start: float | None = None
        self.diverged: Divergence | None = None

    def see(self, at: int, value, where: str | None = None) -> float:
        """Record ``value`` at step ``at``; ``where`` names the step in the error (default
        "<unit> <at>")."""
        v = check_finite(value, self.what, where or f"{self.unit} {at}", self.advice)
        if self.start is None:
            self.start = v
        elif self.diverged is None and v > limit_of(self.start):
            self.diverged = Divergence(
                self.what, int(at), v, self.start, limit_of(self.start), self.unit
            )
        return v


def judge(series: Iterable[tuple[int, float | None]], what: str, unit: str = "round"):
    """The rule applied to a recorded series of ``(step, value)`` (a run read back from its
    cache): the :class:`Divergence` of the first value above the limit, or None. Missing values
    (None, NaN: a round that was not evaluated) are skipped; a stored run never holds a non-finite
    loss, since the rule stops such a run before it is cached."""
    watch = LossWatch(what, unit)
    for at, value in series:
        if value is None or not math.isfinite(float(value)):
            continue
        watch.see(at, value)
        if watch.diverged is not None:
            return watch.diverged
    return None


def earliest(found: Iterable[Divergence | None]) -> Divergence | None:
    """The divergence seen first of several losses (None when none diverged)."""
    found = [d for d in found if d is not None]
    return min(found, key=lambda d: d.at) if found else None


def warn(run: str, found: Divergence | None, stacklevel: int = 3) -> None:
    """A DivergedWarning naming ``run`` and where it diverged; nothing when ``found`` is None."""
    if found is None:
        return
    warnings.warn(
        f"{run} diverged: {found.describe()}; its results mean nothing (a smaller learning rate "
        "usually keeps it stable)",
        DivergedWarning,
        stacklevel=stacklevel,
    )


# -------------------------------------------------------------- histories: one row per round
def watch_rows(losses: dict[str, str], rows: list[dict], advice: str = "") -> dict[str, LossWatch]:
    """A watch per loss column (``{column: name in messages}``), fed with ``rows`` already
    recorded (a run resumed from its checkpoint sees its earlier rounds first, so its start is
    round 1's loss, as in a run never stopped). NaN is a round that did not evaluate that loss."""
    watches = {c: LossWatch(what, "round", advice) for c, what in losses.items()}
    for row in rows:
        for c, w in watches.items():
            if row.get(c) == row.get(c):
                w.see(row["round"], row[c])
    return watches


def judge_history(history, losses: dict[str, str]) -> Divergence | None:
    """:func:`judge` of each loss column of a history table (a DataFrame with ``round``): the
    earliest divergence, or None."""
    return earliest(
        judge(zip(history["round"], history[c]), what) for c, what in losses.items() if c in history
    )


def mark_history(history, found: Divergence | None) -> None:
    """A diverged run's history says so: a ``diverged`` column, True from the round its loss
    passed the limit, and ``attrs["diverged"]``. A run that did not diverge gets no column, so
    its stored history stays as it was."""
    history.attrs["diverged"] = None if found is None else found.to_dict()
    if found is not None:
        history["diverged"] = history["round"] >= found.at


def non_finite(history, losses: dict[str, str], eval_every: int, rounds: int) -> str:
    """The first non-finite loss of a stored history table ("" when none): the rule stops such a
    run before it is cached, so only a run cached before the rule holds one. A test loss is
    computed every ``eval_every`` rounds and at the last of ``rounds`` (NaN elsewhere: "not
    evaluated")."""
    import numpy as np

    evaluated = (history["round"] % eval_every == 0) | (history["round"] == rounds)
    for c, what in losses.items():
        if c not in history:
            continue
        rows = history if c == "train_loss" else history[evaluated]
        bad = rows[~np.isfinite(rows[c].astype(float))]
        if len(bad):
            return f"a {what} of {bad[c].iloc[0]} at round {bad['round'].iloc[0]}"
    return ""


def stored_history(history, losses: dict[str, str], eval_every: int, rounds: int):
    """A history table read back from a run cache, judged by the rule: ValueError when it holds
    a non-finite loss (:func:`non_finite`: such a run is never served), else its divergence
    (:func:`judge_history`, so a run cached before the rule is judged too), marked in it
    (:func:`mark_history`)."""
    bad = non_finite(history, losses, eval_every, rounds)
    if bad:
        raise ValueError(f"it holds {bad}, which the divergence rule never caches")
    found = judge_history(history, losses)
    mark_history(history, found)
    return found


def conclude(history, watches: dict[str, LossWatch]) -> Divergence | None:
    """The earliest divergence the watches saw, marked in the run's history table."""
    found = earliest(w.diverged for w in watches.values())
    mark_history(history, found)
    return found
