"""`flkit reproduce` on the command line: --list-parameters (by hand on the fixture notebook, and
against papermill's own reading of every real notebook), and --preset X without --only, which
skips the notebooks that lack X with a line saying so."""

from __future__ import annotations

import importlib
import io
import re
from pathlib import Path

import pytest

from flkit.cli import main as cli_main
from flkit.reproduce import discover

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _rows(text: str) -> dict[str, list[str]]:
    """{name: [type, default, comment]} of a --list-parameters table (columns two spaces apart)."""
    lines = text.splitlines()
    assert lines[1].split() == ["name", "type", "default", "comment"]
    rows = {}
    for line in lines[2:]:
        cells = re.split(r"\s{2,}", line.strip(), maxsplit=3)
        rows[cells[0]] = cells[1:] + [""] * (4 - len(cells))
    return rows


def test_list_parameters_of_the_fixture_notebook(monkeypatch, capsys):
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURES / "presets"))
    argv = ["reproduce", "--list-parameters", "fixture_ok", "--preset", "smoke"]
    assert cli_main([*argv, "--notebooks", str(FIXTURES / "notebooks")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("parameters of fixture_ok (")
    preset_note = "None: $FLKIT_PRESET, else the preset file's default"
    assert _rows(out) == {
        "preset": ["str or None", "None", f"{preset_note} [set with --preset: smoke, cpu, paper]"],
        "seed": ["int", "0", "[set with --seeds]"],
        "device": ["str", '"cpu"', ""],
        # n overrides the preset key n, 200 at smoke
        "n": ["int or None", "None", "override of the preset's `n` [smoke: 200]"],
    }


def test_list_parameters_refuses_an_unknown_notebook_or_preset(capsys):
    assert cli_main(["reproduce", "--list-parameters", "99_nope"]) == 2
    err = capsys.readouterr().err
    assert "99_nope" in err and "00_fl_primer" in err
    assert cli_main(["reproduce", "--list-parameters", "00", "--preset", "long"]) == 2
    assert "unknown preset 'long'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(discover(ROOT / "notebooks")))
def test_list_parameters_reads_what_papermill_reads(name, capsys):
    """Names, defaults and comments as papermill's --help-notebook infers them."""
    papermill = pytest.importorskip("papermill")
    path = ROOT / "notebooks" / f"{name}.ipynb"
    expected = papermill.inspect_notebook(str(path))
    assert cli_main(["reproduce", "--list-parameters", name]) == 0
    rows = _rows(capsys.readouterr().out)
    assert list(rows) == list(expected)
    for key, row in rows.items():
        _, default, comment = row
        assert default == expected[key]["default"], key
        assert re.sub(r" ?\[[^\]]*\]$", "", comment) == expected[key]["help"], key


@pytest.fixture
def executed(monkeypatch):
    runs = []

    def fake_execute(plan_runs, jobs=1, progress=True, executor=None):
        runs.extend(plan_runs)
        return [
            {"notebook": r["notebook"], "seed": r["seed"], "preset": r["preset"]}
            | {"parameters": r["parameters"], "status": "ok", "error": None, "wall_time_s": 0}
            for r in plan_runs
        ]

    execute = importlib.import_module("flkit.reproduce.execute")
    monkeypatch.setattr(execute, "execute", fake_execute)
    # no notebook executes, so nothing reads what a run pool would train (tests/test_pool.py)
    monkeypatch.setattr(execute, "plan_pool", lambda plan, pool=True, **settings: None)
    monkeypatch.setenv("FLKIT_NOTEBOOKS", str(ROOT / "notebooks"))
    return runs


class _Yes(io.StringIO):
    """A terminal whose user answers yes to the cost guard's question."""

    def __init__(self):
        super().__init__("y\n")

    def isatty(self) -> bool:
        return True


def test_a_preset_some_notebooks_lack_skips_them(executed, tmp_path, capsys, monkeypatch):
    """long exists for 01 to 04 only: without --only those run, and 00 and 05 are named."""
    monkeypatch.setattr("sys.stdin", _Yes())  # four long notebooks take hours: it asks
    assert cli_main(["reproduce", "--preset", "long", "--out", str(tmp_path)]) == 0
    assert {r["notebook"] for r in executed} == {
        "01_stc_projection",
        "02_feddip",
        "03_fedast",
        "04_hidenseek",
    }
    assert all(r["preset"] == "long" for r in executed)
    err = capsys.readouterr().err
    assert "skipping 00_fl_primer, 05_staleness: no preset 'long'" in err


def test_a_notebook_named_with_only_must_have_the_preset(executed, tmp_path, capsys):
    argv = ["reproduce", "--preset", "long", "--only", "00", "--out", str(tmp_path)]
    assert cli_main(argv) == 2 and not executed
    err = capsys.readouterr().err
    assert "unknown preset 'long'" in err and "smoke, cpu, paper" in err


def test_a_preset_no_notebook_has_is_refused(executed, tmp_path, capsys):
    assert cli_main(["reproduce", "--preset", "fast", "--out", str(tmp_path)]) == 2
    assert not executed and "unknown preset 'fast'" in capsys.readouterr().err


def test_a_preset_every_notebook_has_skips_none(executed, tmp_path, capsys):
    assert cli_main(["reproduce", "--preset", "smoke", "--out", str(tmp_path)]) == 0
    assert len({r["notebook"] for r in executed}) == 6
    assert "skipping" not in capsys.readouterr().err
