"""The `long` cut rule of notebook 03 (README, "The `long` cut rule", as amended), as code: the
readings of its two probes (:func:`long_main_targets`, :func:`long_high_targets`) and the cuts, in
the README's order, applied until an estimate of the notebook's wall time fits
(:data:`LONG_CUTS`, :func:`long_cuts`).

The first probe is one FedAST(D) run of the four-task mix with every task at the paper's main
target (:func:`.study.long_main_probe`). T is the latest time among the tasks that reached theirs;
every task that did not gets as its main target the highest multiple of 0.05 its test accuracy
reached by T, and a high target 0.03 above, so that it finishes about when the others do instead
of running every heterogeneous run to ``max_time``. T comes from
the tasks that reached their targets, not from a plateau below a target: a main target at the
plateau would put its high level above anything the probe reached, and every run would stretch to
the plateau's slow end.

A task stops training at its main target, so the first probe cannot time the high level. The second
probe runs the mix at the high targets (:func:`.study.long_high_probe`); a task that misses its high
target there gets the highest multiple of 0.01 strictly above its main target that it reached, or,
with none, no high level (the dynamic vs static comparison keeps one level for it). T_high is the
time at which every task with a high level has reached it.

Both readings read one FedAST(D) run, so no comparison of methods enters them.

The cuts are data (:class:`Cut`): the number the README gives the cut, what it changes (the
preset key, the uncut value, the cut value) and the README's own words for it, so a test can check
that the README and this list name the same cuts in the same order."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flkit.utils import FlkitError, check_real

__all__ = [
    "MAIN_STEP",
    "HIGH_STEP",
    "HIGH_ABOVE",
    "FIRST_PROBE",
    "SECOND_PROBE",
    "long_main_targets",
    "long_high_targets",
    "Cut",
    "LONG_CUTS",
    "AIM_MINUTES",
    "BUDGET_MINUTES",
    "long_cuts",
]

#: a lowered main target is a multiple of this
MAIN_STEP = 0.05
#: a lowered high target is a multiple of this
HIGH_STEP = 0.01
#: the high level of dynamic vs static sits this far above the main one, as in Table 3
HIGH_ABOVE = 0.03
# a small tolerance when a level is read as a count of steps: 0.30 / 0.05 is 5.999... in floating
# point, and 0.30 reached must count as 6 steps
_EPS = 1e-9

#: the first probe's reading as recorded in the README ("The amended rule's first reading"): one
#: FedAST(D) run of `long`'s mix at the paper's main targets, seed 0, 600 time units (``times``
#: and ``T`` rounded to 0.1, ``best`` to 0.001, as the README gives them)
FIRST_PROBE = {
    "T": 232.2,
    "set_by": "fmnist",
    "times": {"mnist": 129.8, "fmnist": 232.2},
    "best": {"cifar10": 0.373, "shakespeare": 0.363},
    "main": {"mnist": 0.93, "fmnist": 0.82, "cifar10": 0.35, "shakespeare": 0.35},
    "high": {"mnist": 0.96, "fmnist": 0.85, "cifar10": 0.38, "shakespeare": 0.38},
}

#: the second probe's reading as recorded in the README ("The amended rule's readings"): one
#: FedAST(D) run of `long`'s mix at the high targets, seed 0, 600 time units (times rounded to 0.1,
#: ``best`` to 0.0001); FMNIST missed 0.85 and was lowered to 0.84
SECOND_PROBE = {
    "T_high": 477.1,
    "set_by": "mnist",
    "times": {"mnist": 477.1, "fmnist": 460.3, "cifar10": 280.2, "shakespeare": 358.0},
    "best": {"fmnist": 0.8496},
    "high": {"mnist": 0.96, "fmnist": 0.84, "cifar10": 0.38, "shakespeare": 0.38},
    "lowered": ["fmnist"],
}


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


def _steps(value: float, step: float) -> int:
    """How many whole ``step``s ``value`` holds (the highest multiple of ``step`` at most
    ``value`` is this times ``step``)."""
    return math.floor(value / step + _EPS)


def _level(steps: int, step: float) -> float:
    return round(steps * step, 10)


def _check_run(rows: list[dict], completion: Mapping, targets: Mapping[str, Mapping]) -> None:
    """The checks both readings make before reading: ``completion`` names the run's tasks, each
    mapping of ``targets`` ({argument name: {task: level}}) names the same tasks with levels in
    (0, 1], the history has no other task, every time is None or a finite number >= 0."""
    tasks = list(completion)
    if not tasks:
        raise FlkitError(
            f"completion={dict(completion)!r}; accepted: the run's SimResult.completion_time, "
            "{task: time to its target, or None}, with at least one task"
        )
    for arg, levels in targets.items():
        unknown = [t for t in levels if t not in completion]
        if unknown:
            raise FlkitError(
                f"{arg} names unknown task {unknown[0]!r}; accepted: the run's tasks {tasks}"
            )
        absent = [t for t in tasks if t not in levels]
        if absent:
            raise FlkitError(
                f"{arg}={dict(levels)!r} gives no level for {absent}; accepted: one level per "
                f"task of the run, {tasks}"
            )
        for t, v in levels.items():
            check_real(f"{arg}[{t!r}]", v, low=0, low_open=True, high=1)
    stray = [t for t in dict.fromkeys(r.get("task") for r in rows) if t not in completion]
    if stray:
        raise FlkitError(
            f"the history has task {stray[0]!r}, which completion does not; accepted: the "
            f"history and completion time of one run, tasks {tasks}"
        )
    for name, t in completion.items():
        if t is not None:
            check_real(f"completion time of {name!r}", t, low=0)


def long_main_targets(
    history,
    completion: Mapping[str, float | None],
    paper_targets: Mapping[str, float],
    step: float = MAIN_STEP,
    high_above: float = HIGH_ABOVE,
) -> dict:
    """The first probe's reading: each task's main and high target at `long`.

    ``completion`` is the probe's ``SimResult.completion_time`` ({task: the time the simulator
    finished it at its target, None where it never did}) and ``paper_targets`` the main target each
    task ran at ({task: level}, the paper's). T is the latest completion time. A task that reached
    its target keeps it. A task that did not gets the highest multiple of ``step`` that its
    evaluated test accuracy in ``history`` (``SimResult.history`` or its frame: rows with
    ``task``, ``sim_time`` and ``accuracy``, None or NaN where not evaluated) reached at or before
    T, at most its paper target. Every task's high target is ``high_above`` above its main one.

    FlkitError, before any reading: no task in ``completion``; ``paper_targets`` naming a task the
    run does not have or missing one of its tasks; a target not in (0, 1]; a history task that
    ``completion`` lacks; a time that is not None or a finite number >= 0; ``step`` not positive;
    ``high_above`` negative.
    FlkitError after reading: no task reached its target (T is undefined: the probe's horizon was
    too short), or a task that did not reached no multiple of ``step`` by T (the rule gives it no
    target; the message gives its best).

    Returns {"T", "set_by" (the task whose time is T), "times" ({task: time to target} of the tasks
    that reached), "best" ({task: best test accuracy by T} of those that did not), "main" and
    "high" ({task: level} of every task)}."""
    step = check_real("step", step, low=0, low_open=True)
    high_above = check_real("high_above", high_above, low=0)
    rows = _rows(history)
    _check_run(rows, completion, {"paper_targets": paper_targets})

    times = {n: float(t) for n, t in completion.items() if t is not None}
    if not times:
        end = max((float(r["sim_time"]) for r in rows), default=0.0)
        raise FlkitError(
            f"no task reached its target in the probe (its last server update at t = {end:.4g}): "
            "T is undefined, the probe's horizon was too short; run it again with a longer horizon"
        )
    set_by = max(times, key=times.get)
    t_all = times[set_by]
    main: dict[str, float] = {}
    high: dict[str, float] = {}
    best: dict[str, float] = {}
    for name in completion:
        if name in times:
            main[name] = float(paper_targets[name])
            high[name] = round(main[name] + high_above, 10)
            continue
        by_t = [acc for t, acc in _evaluated(rows, name) if t <= t_all]
        best[name] = max(by_t, default=0.0)
        level = min(_level(_steps(best[name], step), step), float(paper_targets[name]))
        if level <= 0:
            raise FlkitError(
                f"{name!r} reached no multiple of {step:g} by T = {t_all:.4g} (its best test "
                f"accuracy by then: {best[name]:.4g}): the rule gives no target for it"
            )
        main[name] = level
        high[name] = round(level + high_above, 10)
    return {"T": t_all, "set_by": set_by, "times": times, "best": best, "main": main, "high": high}


def long_high_targets(
    history,
    completion: Mapping[str, float | None],
    main_targets: Mapping[str, float],
    high_targets: Mapping[str, float],
    step: float = HIGH_STEP,
) -> dict:
    """The second probe's reading: each task's high target at `long` and T_high.

    The probe ran every task at ``high_targets`` ({task: level}); ``main_targets`` are the first
    reading's. ``completion`` is the probe's ``SimResult.completion_time``; ``history`` its
    history (as for :func:`long_main_targets`). A task that reached its high target keeps it, timed
    by ``completion``. A task that did not gets the highest multiple of ``step`` strictly above its
    main target that its evaluated test accuracy reached anywhere in the probe, timed by the first
    evaluation at that level; with none, its high level is None (the dynamic vs static comparison
    keeps one level for it). T_high is the latest of those times (None when no task has a high
    level).

    FlkitError, before any reading: no task in ``completion``; ``main_targets`` or
    ``high_targets`` naming a task the run does not have or missing one of its tasks; a level not
    in (0, 1]; a high target not above its main target; a history task that ``completion`` lacks;
    a time that is not None or a finite number >= 0; ``step`` not positive.

    Returns {"T_high", "set_by" (the task whose time is T_high, or None), "times" ({task: time to
    its high level} of the tasks that have one), "best" ({task: best test accuracy in the probe}
    of those that missed their high target), "high" ({task: level or None} of every task),
    "lowered" (the tasks whose high target was lowered), "one_level" (the tasks left with
    none)}."""
    step = check_real("step", step, low=0, low_open=True)
    rows = _rows(history)
    _check_run(rows, completion, {"main_targets": main_targets, "high_targets": high_targets})
    for t, level in high_targets.items():
        if level <= main_targets[t]:
            raise FlkitError(
                f"high_targets[{t!r}]={level!r}; accepted: a level above its main target "
                f"{main_targets[t]!r}"
            )

    times: dict[str, float] = {}
    best: dict[str, float] = {}
    high: dict[str, float | None] = {}
    lowered, one_level = [], []
    for name, done in completion.items():
        if done is not None:
            high[name] = float(high_targets[name])
            times[name] = float(done)
            continue
        curve = _evaluated(rows, name)
        best[name] = max((acc for _, acc in curve), default=0.0)
        # the first multiple of step strictly above the main target, and the highest reached
        first = _steps(float(main_targets[name]), step) + 1
        top = _steps(best[name], step)
        if top < first:
            high[name] = None
            one_level.append(name)
            continue
        high[name] = min(_level(top, step), float(high_targets[name]))
        times[name] = next(t for t, acc in curve if _steps(acc, step) >= top)
        lowered.append(name)
    set_by = max(times, key=times.get) if times else None
    return {
        "T_high": times[set_by] if set_by is not None else None,
        "set_by": set_by,
        "times": times,
        "best": best,
        "high": high,
        "lowered": lowered,
        "one_level": one_level,
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
