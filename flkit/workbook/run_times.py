"""Measured run time of each notebook at its ``cpu`` preset: the one source that the README, each
notebook's introduction and ``flkit reproduce --list`` show (a test checks that they agree).

Every entry is a measurement, never an estimate: seed 0, preset ``cpu``, the whole notebook run by
``flkit reproduce`` on the project's 2-core CPU machine, with the date; the conditions of the run
are in ``benchmarks/results/``. Re-measure after a change that moves a notebook's time and edit
the entry here; then ``python -m pytest tests/test_run_times.py`` lists every text that must
follow.
"""

from __future__ import annotations

from ..utils import FlkitError

HOW = "seed 0, `flkit reproduce`, 2 CPU cores"

# notebook: (seconds, date measured); (None, date) when the preset changed on that date and the
# new settings have not been timed yet: the texts then say so instead of showing a stale time.
RUN_TIMES: dict[str, tuple[float | None, str]] = {
    "00_fl_primer": (57, "2026-11-22"),
    "01_stc_projection": (805.6, "2026-11-27"),
    "02_feddip": (14.7 * 60, "2026-11-27"),
    "03_fedast": (1079.8, "2026-11-27"),
    "04_hidenseek": (680.0, "2026-11-29"),
    "05_staleness": (1799.2, "2026-11-27"),
}

__all__ = ["RUN_TIMES", "HOW", "duration", "sentence", "total"]


def duration(seconds: float) -> str:
    """'57 s', '7.7 min', '1 h 40 min': the form every text uses."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    h, m = divmod(round(seconds / 60), 60)
    return f"{h} h {m} min"


def sentence(notebook: str) -> str:
    """'`cpu` preset: 7.7 min (measured 2026-11-22; seed 0, `flkit reproduce`, 2 CPU cores)'."""
    if notebook not in RUN_TIMES:
        raise FlkitError(
            f"no measured run time for notebook {notebook!r}; accepted: {', '.join(RUN_TIMES)}"
        )
    seconds, date = RUN_TIMES[notebook]
    if seconds is None:
        return f"`cpu` preset: not yet timed at the settings of {date}"
    return f"`cpu` preset: {duration(seconds)} (measured {date}; {HOW})"


def total() -> str:
    """The sum over every timed notebook, e.g. '1 h 43 min', naming those not timed yet."""
    text = duration(sum(s for s, _ in RUN_TIMES.values() if s is not None))
    untimed = [name for name, (s, _) in RUN_TIMES.items() if s is None]
    if untimed:
        text += f" plus {', '.join(untimed)} (not yet timed)"
    return text
