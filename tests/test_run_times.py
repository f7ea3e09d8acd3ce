"""One measured run time per notebook (flkit/workbook/run_times.py), shown in the README, in each
notebook's introduction (the duration alone) and by `flkit reproduce --list`."""

from __future__ import annotations

import json
import re
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


def intro_time(notebook: str) -> str:
    """What a notebook's introduction says of its `cpu` time: the duration without the date and
    conditions of the measurement, which a student does not need (they stay in the README's list
    and in benchmarks/results/)."""
    seconds, _ = run_times.RUN_TIMES[notebook]
    return "`cpu`: not yet timed" if seconds is None else f"`cpu`: {run_times.duration(seconds)}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_intro_shows_the_measured_time(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    intro = "".join(nb["cells"][0]["source"])
    assert intro_time(name) in intro
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


# A paper README may state its notebook's `cpu` time ("measured at 30.0 min") where it reasons
# about the budget; the figure must then be the one run_times.py holds.
MEASURED_AT = re.compile(r"measured\s+at\s+(\d+\s+h\s+\d+\s+min|\d+(?:\.\d+)?\s+(?:min|s))\b")


def _quotes_disagreeing(text: str, notebook: str) -> list[str]:
    seconds, _ = run_times.RUN_TIMES[notebook]
    want = None if seconds is None else run_times.duration(seconds)
    return [q for q in (re.sub(r"\s+", " ", m) for m in MEASURED_AT.findall(text)) if q != want]


def test_paper_readmes_quote_the_measured_time():
    checked = 0
    for toml in sorted((ROOT / "flkit" / "papers").glob("*/preset.toml")):
        meta = re.search(r'^notebook = "(.+)\.ipynb"', toml.read_text(encoding="utf-8"), re.M)
        notebook = meta.group(1)
        if notebook not in run_times.RUN_TIMES:
            continue  # the template
        text = (toml.parent / "README.md").read_text(encoding="utf-8")
        bad = _quotes_disagreeing(text, notebook)
        assert not bad, (
            f"{toml.parent.name}/README.md quotes {bad} as measured; run_times.py holds "
            f"{run_times.sentence(notebook)}"
        )
        checked += len(MEASURED_AT.findall(text))
    assert checked, "no paper README quotes a measured time: the check reads nothing"


def test_a_stale_quote_is_caught(monkeypatch):
    monkeypatch.setattr(run_times, "RUN_TIMES", {"05_x": (40.4 * 60, "2026-11-27")})
    text = "it was measured at 30.0 min, within\nthe budget; later measured at\n40.4 min"
    assert _quotes_disagreeing(text, "05_x") == ["30.0 min"]
    monkeypatch.setattr(run_times, "RUN_TIMES", {"05_x": (None, "2026-11-27")})
    assert _quotes_disagreeing("measured at 1 h 5 min", "05_x") == ["1 h 5 min"]
