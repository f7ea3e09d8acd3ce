"""One measured run time per notebook (flkit/workbook/run_times.py), shown the same way in the
README, in each notebook's introduction and by `flkit reproduce --list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flkit.reproduce import main as reproduce_main
from flkit.utils import FlkitError
from flkit.workbook import run_times

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("0*.ipynb"))


def test_every_notebook_has_a_measured_time():
    assert NOTEBOOKS and set(NOTEBOOKS) == set(run_times.RUN_TIMES)
    for seconds, date in run_times.RUN_TIMES.values():
        assert seconds is None or seconds > 0
        assert len(date) == 10 and date.startswith("20")


def test_an_untimed_notebook_says_so(monkeypatch):
    monkeypatch.setattr(
        run_times, "RUN_TIMES", {"00_a": (120.0, "2026-11-01"), "01_b": (None, "2026-11-27")}
    )
    assert run_times.sentence("01_b") == "`cpu` preset: not yet timed at the settings of 2026-11-27"
    assert run_times.total() == "2.0 min plus 01_b (not yet timed)"


def test_duration_forms():
    assert run_times.duration(57) == "57 s"
    assert run_times.duration(7.7 * 60) == "7.7 min"
    assert run_times.duration(5799) == "1 h 37 min"  # 96.65 min
    with pytest.raises(FlkitError, match="06_nope"):
        run_times.sentence("06_nope")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_intro_shows_the_measured_time(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    intro = "".join(nb["cells"][0]["source"])
    assert run_times.sentence(name) in intro
    assert "about 10 minutes" not in intro and "about 15 minutes" not in intro


def test_readme_shows_every_measured_time():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in NOTEBOOKS:
        assert f"- `{name}`: {run_times.sentence(name)}" in readme
    assert f"Sum over every notebook: {run_times.total()}." in readme


def test_reproduce_list_shows_every_measured_time(capsys):
    assert reproduce_main(["reproduce", "--list", "--notebooks", str(ROOT / "notebooks")]) == 0
    out = capsys.readouterr().out
    for name in NOTEBOOKS:
        assert run_times.sentence(name) in out
