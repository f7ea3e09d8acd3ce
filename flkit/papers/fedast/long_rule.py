"""The `long` cut rule of notebook 03 (README, "The `long` cut rule"), as code: the reading of the
CIFAR-10 probe (:func:`long_cifar_target`) and the cuts, in the README's order, applied until an
estimate of the notebook's wall time fits (:data:`LONG_CUTS`, :func:`long_cuts`).

The probe is one FedAST(D) run of the four-task mix with CIFAR-10 at the paper's 0.63
(:func:`.study.long_cifar_probe`). The other three tasks stop at their main targets; the latest of
their times is T, the time the mix's other tasks need. CIFAR-10's main target is then the level its
test accuracy reached by T, rounded down to a multiple of ``step``, so that CIFAR-10 finishes about
when the others do instead of running every heterogeneous run to ``max_time``.

The cuts are data (:class:`Cut`): the number the README gives the cut, what it changes (the
preset key, the uncut value, the cut value) and the README's own words for it, so a test can check
that the README and this list name the same cuts in the same order."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flkit.utils import FlkitError, check_real

__all__ = [
    "CIFAR_TASK",
    "CIFAR_STEP",
    "CIFAR_CAP",
    "HIGH_ABOVE",
    "long_cifar_target",
    "Cut",
    "LONG_CUTS",
    "AIM_MINUTES",
    "BUDGET_MINUTES",
    "long_cuts",
]

#: the probed task's name in the mix (the task names of ``configs.heterogeneous`` are the datasets)
CIFAR_TASK = "cifar10"
#: CIFAR-10's main target is a multiple of this
CIFAR_STEP = 0.05
#: and at most the paper's main target (Table 3), reached or not
CIFAR_CAP = 0.63
#: the high level of dynamic vs static sits this far above the main one, as in Table 3
HIGH_ABOVE = 0.03


def _rows(history) -> list[dict]:
    """The rows of a run's history: ``SimResult.history`` (a list of dicts) or its DataFrame."""
    if hasattr(history, "to_dict"):
        return history.to_dict("records")
    return list(history)


def _evaluated(rows: list[dict], task: str) -> list[tuple[float, float]]:
    """(sim_time, accuracy) of every evaluation of ``task``, in time order (NaN and None: no
    evaluation at that server update)."""
    out = []
    for r in rows:
        acc = r.get("accuracy")
        if r.get("task") == task and acc is not None and acc == acc:
            out.append((float(r["sim_time"]), float(acc)))
    return sorted(out)


def long_cifar_target(
    history,
    completion: Mapping[str, float | None],
    cifar: str = CIFAR_TASK,
    step: float = CIFAR_STEP,
    cap: float = CIFAR_CAP,
    high_above: float = HIGH_ABOVE,
) -> dict:
    """CIFAR-10's target levels from the probe: ``completion`` is the run's own
    ``SimResult.completion_time`` of the tasks that set T (MNIST, FMNIST and Shakespeare: the time
    the simulator finished each at its target, None where it never did); T is the latest of them.
    ``history`` (``SimResult.history`` or its frame: rows with ``task``, ``sim_time`` and
    ``accuracy``, None where not evaluated) gives CIFAR-10's curve: its best periodic test accuracy
    at or before T gives its main target, ``cap`` when it reached ``cap``, else the highest multiple
    of ``step`` it reached; the high target is ``high_above`` more.

    FlkitError, before any reading: no task in ``completion``, a task the run does not have
    (naming the tasks it has), ``cifar`` among ``completion``, a time that is not None or a finite
    number >= 0, ``step`` or ``cap`` not positive, ``high_above`` negative. FlkitError after
    reading: some task never reached its target in the run (T is undefined: the probe's horizon was
    too short; the message names the tasks), or CIFAR-10 reached no multiple of ``step`` by T (the
    rule then gives no target; the message gives its best).

    Returns {"T", "times" ({task: time to target}), "best" (CIFAR-10's best accuracy by T),
    "target", "high"}."""
    step = check_real("step", step, low=0, low_open=True)
    cap = check_real("cap", cap, low=0, low_open=True)
    high_above = check_real("high_above", high_above, low=0)
    rows = _rows(history)
    present = list(dict.fromkeys(r.get("task") for r in rows))
    if not completion:
        raise FlkitError(
            f"completion={dict(completion)!r}; accepted: the completion time of every task that "
            f"sets T (tasks in the run: {present})"
        )
    for name in [*completion, cifar]:
        if name not in present:
            raise FlkitError(f"unknown task {name!r}; accepted: the run's tasks {present}")
    if cifar in completion:
        raise FlkitError(
            f"completion names {cifar!r}, the probed task; accepted: the other tasks of the run, "
            f"{[t for t in present if t != cifar]}"
        )
    for name, t in completion.items():
        if t is not None:
            check_real(f"completion time of {name!r}", t, low=0)

    times = {n: float(t) for n, t in completion.items() if t is not None}
    missed = [n for n, t in completion.items() if t is None]
    if missed:
        end = max((float(r["sim_time"]) for r in rows), default=0.0)
        raise FlkitError(
            f"tasks {missed} never reached their targets in the probe (its last server update at "
            f"t = {end:.4g}): T is undefined, the probe's horizon was too short; run it again "
            "with a longer horizon"
        )
    t_all = max(times.values())
    by_t = [acc for t, acc in _evaluated(rows, cifar) if t <= t_all]
    best = max(by_t, default=0.0)
    if best >= cap:
        level = cap
    else:
        # a small tolerance: 0.30 / 0.05 is 5.999... in floating point
        level = round(math.floor(best / step + 1e-9) * step, 10)
    if level <= 0:
        raise FlkitError(
            f"{cifar!r} reached no multiple of {step:g} by T = {t_all:.4g} (its best test accuracy "
            f"by then: {best:.4g}): the rule gives no target for it"
        )
    return {
        "T": t_all,
        "times": times,
        "best": best,
        "target": level,
        "high": round(level + high_above, 10),
    }


# ------------------------------------------------------------------------------ the cuts
@dataclass(frozen=True)
class Cut:
    """One change of a cut: preset ``key`` from ``before`` (the uncut `long` value) to ``after``;
    ``number``: the cut's number in the README's list; ``words``: how the README names it."""

    number: int
    key: str
    before: object
    after: object
    words: str


#: the README's cuts 2 to 7 in order (cut 1, every run in one batch over the jobs, changes no
#: number: it is how the notebook runs). ``shakespeare_width`` 0 is the preset's spelling of the
#: paper's 100.
LONG_CUTS = (
    Cut(2, "shakespeare_width", 0, 32, "hidden size 100 → 32"),
    Cut(3, "fig4_time", 200.0, 100.0, "`fig4_time` 200 → 100"),
    Cut(4, "active_arrivals", 400, 200, "`active_arrivals` 400 → 200"),
    Cut(5, "buffers", [1, 2, 5], [1, 2, 8], "buffer sweep {1, 2, 5} → `cpu`'s {1, 2, 8}"),
    Cut(5, "ks", [5, 10, 30], [2, 10, 60], "k sweep {5, 10, 30} → `cpu`'s {2, 10, 60}"),
    Cut(6, "Ms", [2, 4, 6], [2, 6], "M {2, 4, 6} → {2, 6}"),
    Cut(7, "central_steps", 3000, 1500, "`central_steps` 3,000 → 1,500"),
)
#: the cuts stop once the estimate is at most this (minutes)
AIM_MINUTES = 100.0
#: with every cut made, `long` is offered only if the estimate is at most this (minutes)
BUDGET_MINUTES = 120.0


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and list(a) == list(b)
    return a == b


def long_cuts(
    estimate: Callable[[dict], float],
    preset,
    aim: float = AIM_MINUTES,
    budget: float = BUDGET_MINUTES,
    cuts=LONG_CUTS,
) -> dict:
    """The cut rule on ``preset`` (the uncut `long` preset): ``estimate(preset dict)`` -> wall
    minutes is taken on the preset as it stands (cut 1, the batching, is how it runs), then after
    each further cut in order (a cut with several keys is made whole), on a copy; it stops at the
    first estimate at most ``aim``.

    FlkitError, before any estimate: a cut's key absent from ``preset`` or not at its uncut value
    (the rule was written for the uncut `long` preset), ``aim`` or ``budget`` not positive.

    Returns {"steps": [(cut number, minutes), ...] (the first is cut 1's), "overrides" ({key: cut
    value} of the cuts made), "preset" (the cut copy), "minutes" (the last estimate), "offered"
    (the last estimate is at most ``budget``)}."""
    aim = check_real("aim", aim, low=0, low_open=True)
    budget = check_real("budget", budget, low=0, low_open=True)
    for cut in cuts:
        if cut.key not in preset:
            raise FlkitError(
                f"cut {cut.number}: key {cut.key!r} is not in the preset; accepted: a `long` "
                f"preset with {[c.key for c in cuts]}"
            )
        if not _same(preset[cut.key], cut.before):
            raise FlkitError(
                f"cut {cut.number}: {cut.key}={preset[cut.key]!r}; accepted: the uncut `long` "
                f"value {cut.before!r} (the rule is written for the uncut preset)"
            )
    current = dict(preset)
    minutes = float(estimate(dict(current)))
    steps = [(1, minutes)]
    overrides: dict = {}
    numbers = list(dict.fromkeys(c.number for c in cuts))
    for number in numbers:
        if minutes <= aim:
            break
        for cut in cuts:
            if cut.number == number:
                value = list(cut.after) if isinstance(cut.after, list) else cut.after
                current[cut.key] = value
                overrides[cut.key] = value
        minutes = float(estimate(dict(current)))
        steps.append((number, minutes))
    return {
        "steps": steps,
        "overrides": overrides,
        "preset": current,
        "minutes": minutes,
        "offered": minutes <= budget,
    }
