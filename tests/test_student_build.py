"""The student build (`make student`, `flkit course student`): every numbered notebook without
its answers (no solution text, no hidden test) and still a valid nbgrader assignment: nbgrader's
own validator passes each notebook as built (cell types and the checksums of the locked cells),
fails a copy whose check cell was edited, and passes notebook 00 executed at `smoke`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from notebook_cells import NOTEBOOKS, ROOT, cells_of, nbgrader_of, source_of

pytest.importorskip("nbgrader")

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "require(")


def _hidden_lines(text: str) -> list[str]:
    """The code lines between the markers of every BEGIN/END block of ``text``."""
    out = []
    for kind in ("SOLUTION", "HIDDEN TESTS"):
        for block in text.split(f"### BEGIN {kind}")[1:]:
            body = block.split(f"### END {kind}")[0]
            out += [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return out


def test_every_notebook_is_built_without_its_answers(student_release):
    assert sorted(p.stem for p in student_release.glob("*.ipynb")) == sorted(NOTEBOOKS)
    for name, instructor in NOTEBOOKS.items():
        text = (student_release / f"{name}.ipynb").read_text(encoding="utf-8")
        for marker in MARKERS:
            assert marker not in text, f"{name}: {marker!r} in the student build"
        student = {c["id"]: source_of(c) for c in cells_of(student_release / f"{name}.ipynb")}
        answers = 0
        for cell in cells_of(instructor):
            if not nbgrader_of(cell).get("solution") and not nbgrader_of(cell).get("grade"):
                continue
            lines = _hidden_lines(source_of(cell))
            assert lines, f"{name}: a graded cell with nothing hidden"
            for line in lines:
                assert line not in student[cell["id"]], f"{name}: {line!r} is in the build"
            answers += bool(nbgrader_of(cell).get("solution"))
            if nbgrader_of(cell).get("solution"):
                assert "raise NotImplementedError" in student[cell["id"]]
        assert answers >= 3, name


def _validate(path: Path, execute: bool = False) -> dict:
    from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
    from nbgrader.validator import Validator

    steps = [CheckCellMetadata, ClearOutput] + ([Execute] if execute else [])
    return Validator(preprocessors=steps).validate(str(path))


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_nbgrader_validates_the_build(student_release, name):
    assert _validate(student_release / f"{name}.ipynb") == {}


def test_nbgrader_refuses_a_build_whose_check_was_edited(student_release, tmp_path):
    """The control: the same validation catches a locked check cell changed after the build."""
    nb = json.loads((student_release / "00_fl_primer.ipynb").read_text(encoding="utf-8"))
    check = next(
        c for c in nb["cells"] if nbgrader_of(c).get("grade") and nbgrader_of(c).get("locked")
    )
    check["source"] = source_of(check) + "\nprint('edited')\n"
    edited = tmp_path / "00_fl_primer.ipynb"
    edited.write_text(json.dumps(nb), encoding="utf-8")
    assert "changed" in _validate(edited)


@pytest.mark.slow
def test_nbgrader_validates_notebook_00_executed_at_smoke(student_release, tmp_path, monkeypatch):
    """nbgrader runs the whole student notebook: every cell runs, no check cell fails (an
    untouched answer reads "not attempted yet"; only the hidden tests, not released, fail it)."""
    monkeypatch.setenv("FLKIT_PRESET", "smoke")
    monkeypatch.setenv("FLKIT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "runs" / "cache"))
    copy = tmp_path / "00_fl_primer.ipynb"
    shutil.copy(student_release / "00_fl_primer.ipynb", copy)
    assert _validate(copy, execute=True) == {}


def test_make_student_runs_the_student_build():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    res = subprocess.run(
        ["make", "-n", "student"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert "-m flkit course student student" in res.stdout
    assert "/student/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
