"""The cost guard of ``flkit reproduce`` and ``flkit sweep``: what the runs will cost, said before
any starts, and a question before a costly one.

The estimate comes from measurements only: each notebook's time at ``cpu``
(:mod:`flkit.workbook.run_times`), at ``long`` (:data:`LONG_RUN_TIMES`) and the GPU hours of its
``paper`` preset as the GPU check estimated them on an NVIDIA H200 (:data:`PAPER_GPU_HOURS`;
``benchmarks/paper_cost.py`` computes them: one timed round per kind of run, times the rounds of
every run the notebook makes). A notebook or preset without a measurement is named as such, never
guessed. The estimate is per run at the preset's own settings; ``--set`` or ``--grid`` overrides
can move it either way.

A ``paper`` run, or any run estimated over :data:`ASK_ABOVE_S`, asks before it starts. ``--yes``
answers for the user; without a terminal on stdin there is no one to ask, so such a run is refused
with exit status 2 (as bad arguments are) and the estimate says why.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..workbook.run_times import RUN_TIMES, duration

__all__ = [
    "ASK_ABOVE_S",
    "LONG_RUN_TIMES",
    "PAPER_GPU_HOURS",
    "PAPER_SOURCE",
    "GpuHours",
    "Estimate",
    "estimate",
    "confirm",
    "NotStartedError",
]

#: a run estimated longer than this (seconds of run time in all) is asked about before it starts
ASK_ABOVE_S = 3600.0

#: measured time of each notebook at ``long``, as run_times.RUN_TIMES: (seconds or None when not
#: timed at the current settings, date); seed 0, ``flkit reproduce``, alone on 2 CPU cores
LONG_RUN_TIMES: dict[str, tuple[float | None, str]] = {
    "01_stc_projection": (102.7 * 60, "2026-11-28"),
    "02_feddip": (24.5 * 60, "2026-11-29"),
    "03_fedast": (61.7 * 60, "2026-11-27"),
    "04_hidenseek": (47.1 * 60, "2026-11-28"),
}


@dataclass(frozen=True)
class GpuHours:
    """One notebook's ``paper`` preset in H200 hours; ``bound`` says how the number reads."""

    hours: float
    bound: str = ""  # "" (an estimate), "at least", "at most" or "about"
    note: str = ""

    def text(self) -> str:
        number = f"{self.hours:,.0f}" if self.hours >= 100 else f"{self.hours:.3g}"
        return " ".join(x for x in (self.bound, number, "GPU hours") if x)


PAPER_SOURCE = "benchmarks/RESULTS.md, GPU check, fourth lease (one NVIDIA H200, 2026-11-28)"
#: GPU hours of each notebook's ``paper`` preset on one H200 (one run: every seed the preset
#: itself runs), from the table of :data:`PAPER_SOURCE`
PAPER_GPU_HOURS: dict[str, GpuHours] = {
    "00_fl_primer": GpuHours(0.26),
    "01_stc_projection": GpuHours(0.42),
    "02_feddip": GpuHours(46.7, "at least", "33 of its 216 runs without a timed round"),
    "03_fedast": GpuHours(158, "at most", "every simulation run to its time limit"),
    "04_hidenseek": GpuHours(17.8),
    "05_staleness": GpuHours(
        2800,
        "about",
        "its gradient inversions by the cost model, not measured at R = 256; 1.31 without them",
    ),
}


@dataclass
class Estimate:
    """What ``runs`` runs of each notebook cost at ``preset``: ``seconds`` of run time in all
    (wall time on one CPU or GPU, the measured notebooks only; 0 when none is measured)."""

    preset: str
    runs: dict[str, int]
    seconds: float = 0.0
    lines: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    gpu: bool = False

    @property
    def known(self) -> bool:
        return bool(self.lines) and len(self.unknown) < len(self.runs)

    def text(self, jobs: int = 1, overrides: bool = False) -> str:
        """The estimate as the guard prints it: one line per notebook, then the total."""
        where = "one NVIDIA H200 per run" if self.gpu else "2 CPU cores per run"
        out = [f"estimated cost at preset {self.preset!r} ({where}):"]
        out += [f"  {line}" for line in self.lines]
        if self.known:
            total = f"{self.seconds / 3600:,.1f} GPU hours" if self.gpu else duration(self.seconds)
            rest = f" plus {', '.join(self.unknown)} (no estimate)" if self.unknown else ""
            bounds = " (bounds as above)" if self._bounded() else ""
            out.append(f"  in all: {total}{bounds}{rest}")
            if jobs > 1:
                out.append(f"  with --jobs {jobs}: at best 1/{jobs} of that in wall time")
        if overrides:
            out.append("  (at the preset's own settings: --set / --grid values may change it)")
        return "\n".join(out)

    def _bounded(self) -> bool:
        return self.gpu and any(PAPER_GPU_HOURS[n].bound for n in self.runs if n in PAPER_GPU_HOURS)


def _times(preset: str) -> dict[str, tuple[float | None, str]]:
    return {"cpu": RUN_TIMES, "long": LONG_RUN_TIMES}.get(preset, {})


def estimate(preset: str, runs: dict[str, int]) -> Estimate:
    """The cost of ``runs`` (``{notebook: number of runs}``, e.g. seeds x grid points) at
    ``preset``; a preset without measurements (``smoke``, a user's own) gives an empty estimate."""
    est = Estimate(preset, dict(runs), gpu=preset == "paper")
    for name, n in runs.items():
        times = "" if n == 1 else f" x {n} runs"
        if est.gpu:
            cost = PAPER_GPU_HOURS.get(name)
            if cost is None:
                est.unknown.append(name)
                est.lines.append(f"{name}: no GPU estimate")
                continue
            est.seconds += cost.hours * 3600 * n
            note = f" ({cost.note})" if cost.note else ""
            est.lines.append(f"{name}: {cost.text()}{times}{note}")
            continue
        seconds, date = _times(preset).get(name, (None, ""))
        if seconds is None:
            est.unknown.append(name)
            if date:  # a measured notebook whose settings changed since
                est.lines.append(f"{name}: not yet timed at the settings of {date}")
            continue
        est.seconds += seconds * n
        est.lines.append(f"{name}: {duration(seconds)}{times} (measured {date})")
    if est.gpu and est.lines:
        est.lines.append(f"source: {PAPER_SOURCE}; on a CPU many times longer")
    return est


class NotStartedError(Exception):
    """A costly run that was not started; ``status`` is the exit status to stop with."""

    def __init__(self, status: int):
        super().__init__(f"not started (exit status {status})")
        self.status = status


def _asks(est: Estimate) -> bool:
    return est.preset == "paper" or est.seconds > ASK_ABOVE_S


def confirm(
    est: Estimate,
    command: str,
    yes: bool = False,
    jobs: int = 1,
    overrides: bool = False,
    quiet: bool = False,
    stdin=None,
    out=None,
) -> int | None:
    """Say ``est`` and, for a costly run, ask on ``stdin`` (default sys.stdin); None to go on,
    else the exit status to stop with: 2 when no one can be asked, 1 when the answer is no.

    A run that does not ask prints its estimate unless ``quiet``; one that asks always does."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stderr if out is None else out
    asks = _asks(est)
    if not est.lines or (quiet and not asks):
        return None
    print(f"flkit {command}: {est.text(jobs, overrides)}", file=out, flush=True)
    if not asks:
        return None
    why = "a paper run" if est.preset == "paper" else f"over {duration(ASK_ABOVE_S)}"
    if yes:
        print(f"flkit {command}: {why}; starting (--yes)", file=out, flush=True)
        return None
    if not getattr(stdin, "isatty", lambda: False)():
        print(
            f"flkit {command}: not started: {why}, and stdin is no terminal to ask on; "
            "pass --yes to start it",
            file=out,
            flush=True,
        )
        return 2
    print(f"flkit {command}: {why}. Start it? [y/N] ", end="", file=out, flush=True)
    answer = stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return None
    print(f"flkit {command}: not started", file=out, flush=True)
    return 1
