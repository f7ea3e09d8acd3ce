"""The cost guard: the estimate from the measured tables (hand sums), the question before a paper
run or one over an hour, --yes, the refusal without a terminal (exit status 2, the estimate
printed, nothing run), and the tables against the pages they come from."""

from __future__ import annotations

import importlib
import io
import re
from pathlib import Path

import pytest

from flkit.cli import main as cli_main
from flkit.reproduce import cost_guard
from flkit.reproduce.cost_guard import LONG_RUN_TIMES, PAPER_GPU_HOURS, confirm, estimate
from flkit.workbook.run_times import RUN_TIMES

ROOT = Path(__file__).resolve().parent.parent
ALL = sorted(RUN_TIMES)


class _Stdin(io.StringIO):
    def __init__(self, text: str = "", tty: bool = True):
        super().__init__(text)
        self.tty = tty
        self.reads = 0

    def isatty(self) -> bool:
        return self.tty

    def readline(self, *args):
        self.reads += 1
        return super().readline(*args)


# ------------------------------------------------------------------------------ the estimate
def test_paper_estimate_is_the_gpu_hour_table_times_the_runs():
    est = estimate("paper", {n: 3 for n in ALL})
    # 0.26 + 0.42 + 46.7 + 158 + 17.8 + 2800 = 3023.18 H200 hours per seed, three seeds
    assert est.seconds / 3600 == pytest.approx(9069.54)
    text = est.text()
    assert "02_feddip: at least 46.7 GPU hours x 3 runs" in text
    assert "03_fedast: at most 158 GPU hours x 3 runs" in text
    assert "05_staleness: about 2,800 GPU hours x 3 runs" in text
    assert "in all: 9,069.5 GPU hours (bounds as above)" in text
    assert "NVIDIA H200" in text


def test_cpu_estimate_sums_the_measured_run_times():
    est = estimate("cpu", {n: 1 for n in ALL})
    # 57 + 805.6 + 882 + 1079.8 + 680.0 + 1799.2 s
    assert est.seconds == pytest.approx(5303.6)
    assert "in all: 1 h 28 min" in est.text()
    two = estimate("cpu", {"02_feddip": 2})
    assert two.seconds == pytest.approx(2 * 14.7 * 60)
    assert "02_feddip: 14.7 min x 2 runs (measured 2026-11-27)" in two.text()


def test_long_estimate_sums_the_measured_notebooks():
    est = estimate("long", {n: 1 for n in ("01_stc_projection", "02_feddip", "03_fedast")})
    assert est.seconds == pytest.approx((102.7 + 24.5 + 61.7) * 60)
    assert not est.unknown


def test_long_estimate_names_the_untimed_notebook(monkeypatch):
    # a notebook whose settings changed since its last timing: None with that timing's date
    monkeypatch.setitem(cost_guard.LONG_RUN_TIMES, "02_feddip", (None, "2026-11-27"))
    est = estimate("long", {n: 1 for n in ("01_stc_projection", "02_feddip", "03_fedast")})
    assert est.seconds == pytest.approx((102.7 + 61.7) * 60)
    text = est.text()
    assert "02_feddip: not yet timed at the settings of 2026-11-27" in text
    assert "plus 02_feddip (no estimate)" in text


def test_a_preset_without_measurements_has_no_estimate():
    est = estimate("smoke", {n: 5 for n in ALL})
    assert est.seconds == 0 and not est.lines
    out = io.StringIO()
    assert confirm(est, "reproduce", stdin=_Stdin(tty=False), out=out) is None
    assert out.getvalue() == ""


# ------------------------------------------------------------------------------ the question
def _paper():
    return estimate("paper", {"00_fl_primer": 1})


def test_a_paper_run_asks_and_a_yes_starts_it():
    out, stdin = io.StringIO(), _Stdin("y\n")
    assert confirm(_paper(), "reproduce", stdin=stdin, out=out) is None
    assert "00_fl_primer: 0.26 GPU hours" in out.getvalue()
    assert "Start it? [y/N]" in out.getvalue() and stdin.reads == 1


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "maybe\n"])
def test_anything_but_yes_does_not_start(answer):
    out = io.StringIO()
    assert confirm(_paper(), "reproduce", stdin=_Stdin(answer), out=out) == 1
    assert out.getvalue().rstrip().endswith("not started")


def test_yes_skips_the_question():
    out, stdin = io.StringIO(), _Stdin("n\n")
    assert confirm(_paper(), "sweep", yes=True, stdin=stdin, out=out) is None
    assert stdin.reads == 0 and "starting (--yes)" in out.getvalue()
    assert "0.26 GPU hours" in out.getvalue()  # the estimate is still said


def test_without_a_terminal_a_costly_run_is_refused_with_its_estimate():
    out, stdin = io.StringIO(), _Stdin("y\n", tty=False)
    assert confirm(_paper(), "reproduce", stdin=stdin, out=out) == 2
    assert stdin.reads == 0
    assert "0.26 GPU hours" in out.getvalue() and "pass --yes" in out.getvalue()


def test_over_an_hour_asks_under_it_only_says():
    over = estimate("cpu", {"05_staleness": 3})  # 3 x 30.0 min
    assert confirm(over, "reproduce", stdin=_Stdin(tty=False), out=io.StringIO()) == 2
    under = estimate("cpu", {"05_staleness": 2})  # 60.0 min: not over an hour
    out = io.StringIO()
    assert confirm(under, "reproduce", stdin=_Stdin(tty=False), out=out) is None
    assert "05_staleness: 30.0 min x 2 runs" in out.getvalue()
    quiet = io.StringIO()
    assert confirm(under, "reproduce", quiet=True, stdin=_Stdin(tty=False), out=quiet) is None
    assert quiet.getvalue() == ""


# ------------------------------------------------------------------------------ through the CLI
@pytest.fixture
def no_runs(monkeypatch, tmp_path):
    """Notebook execution stood in for; returns the runs that would have been executed."""
    executed = []

    def fake_execute(runs, jobs=1, progress=True, executor=None):
        executed.extend(runs)
        return [
            {"notebook": r["notebook"], "seed": r["seed"], "preset": r["preset"]}
            | {"parameters": r["parameters"], "status": "ok", "error": None, "wall_time_s": 0}
            for r in runs
        ]

    execute = importlib.import_module("flkit.reproduce.execute")
    monkeypatch.setattr(execute, "execute", fake_execute)
    # no notebook executes, so nothing reads what a run pool would train (tests/test_pool.py)
    monkeypatch.setattr(execute, "plan_pool", lambda plan, pool=True, **settings: None)
    monkeypatch.setattr(importlib.import_module("flkit.reproduce.sweep"), "execute", fake_execute)
    monkeypatch.setenv("FLKIT_NOTEBOOKS", str(ROOT / "notebooks"))
    monkeypatch.chdir(tmp_path)
    return executed


COSTLY = [
    ["reproduce", "--preset", "paper", "--only", "00_fl_primer"],
    ["reproduce", "--preset", "cpu", "--seeds", "0", "1", "2", "--only", "05"],
    ["sweep", "00", "--preset", "paper", "--grid", "rounds=1,2"],
]


@pytest.mark.parametrize("argv", COSTLY, ids=" ".join)
def test_a_costly_command_without_a_terminal_refuses(argv, no_runs, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", _Stdin(tty=False))
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "estimated cost" in err and "pass --yes" in err
    assert not no_runs


@pytest.mark.parametrize("argv", COSTLY, ids=" ".join)
def test_a_costly_command_with_yes_runs(argv, no_runs, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", _Stdin(tty=False))
    assert cli_main([*argv, "--yes"]) == 0
    assert "starting (--yes)" in capsys.readouterr().err and no_runs


def test_a_costly_command_asks_on_a_terminal(no_runs, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", _Stdin("no\n"))
    assert cli_main(COSTLY[0]) == 1 and not no_runs
    monkeypatch.setattr("sys.stdin", _Stdin("yes\n"))
    assert cli_main(COSTLY[0]) == 0 and no_runs
    assert capsys.readouterr().err.count("Start it? [y/N]") == 2


def test_bad_arguments_are_refused_before_the_question(no_runs, monkeypatch, capsys):
    stdin = _Stdin("y\n")
    monkeypatch.setattr("sys.stdin", stdin)
    assert cli_main(["reproduce", "--preset", "paper", "--set", "nope=1"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "Start it" not in err and stdin.reads == 0


# ------------------------------------------------------------------------------ the sources
def _lease_table() -> dict[str, str]:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert "fourth lease" in cost_guard.PAPER_SOURCE
    section = text.split("\n## GPU check, fourth lease")
    assert len(section) == 2, "the GPU check's fourth lease section is gone from RESULTS.md"
    body = section[1].split("\n## ")[0]
    rows = re.findall(r"^\| (\d\d_\w+) \| \d+ \| [^|]+ \| ([^|]+) \|", body, flags=re.M)
    return dict(rows), body


def test_the_gpu_hours_are_those_of_the_results_page():
    cells, body = _lease_table()
    assert set(cells) == set(PAPER_GPU_HOURS) == set(RUN_TIMES)
    for name, cost in PAPER_GPU_HOURS.items():
        if name == "05_staleness":  # the table has it without its inversions
            assert cells[name].startswith("1.31 without the inversions")
            assert "about 2,800 H200 hours" in " ".join(body.split())
        else:
            assert cells[name].startswith(f"{cost.bound} {cost.hours:g}".strip()), name


def test_the_long_times_are_those_of_the_readme():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for name, (seconds, _) in LONG_RUN_TIMES.items():
        number = name[:2]
        if seconds is None:
            assert f"{number}'s has not been timed at its current settings" in readme
        else:
            assert re.search(rf"{number}'s[^.;]*? {seconds / 60:.1f} min", readme), name
