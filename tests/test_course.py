"""Course assignments: graded exercises in every numbered notebook, the checkers' verdicts, and
the autograder on the instructor versions (full marks), the blank releases (zero, and they run to
the end), a wrong answer (exactly that exercise's points lost, the checker's hint in the feedback)
and broken submissions (graded with a note). What the release leaves out of each notebook is
tested on the same student build in tests/test_student_build.py."""

from __future__ import annotations

import ast
import csv
import json
import shutil
from pathlib import Path

import pytest
from notebook_cells import NOTEBOOKS, cells_of, nbgrader_of, source_of

from flkit.course import Verdict, check_choice, check_number, require
from flkit.utils import FlkitError


# ------------------------------------------------------------------------------ the checkers' core
def test_check_number_verdicts(capsys):
    def stub():
        raise NotImplementedError

    assert check_number(lambda: 12.0, 12.0, "x")
    assert "right" in capsys.readouterr().out
    v = check_number(lambda: 3.0, 12.0, "x", mistakes={"divide by 4": 3.0})
    assert v.passed is False and "divide by 4" in capsys.readouterr().out
    v = check_number(stub, 12.0, "x")
    out = capsys.readouterr().out
    assert v.passed is None and "not attempted yet" in out and "12" not in out  # answer hidden
    assert check_number(lambda: "twelve", 12.0, "x").passed is False
    with pytest.raises(FlkitError, match="function"):
        check_number(12.0, 12.0, "x")


def test_check_choice_and_require():
    choices = {"small": "why small", "large": "why not large"}
    assert check_choice(lambda: " Small ", "small", choices, verbose=False)
    v = check_choice(lambda: "large", "small", choices, verbose=False)
    assert not v and "why not large" in v.text()
    assert "answer one of" in check_choice(lambda: "x", "small", choices, verbose=False).text()
    require(check_choice, lambda: "small", "small", choices)  # right: no error
    with pytest.raises(AssertionError, match="why not large"):
        require(check_choice, lambda: "large", "small", choices)
    with pytest.raises(AssertionError, match="not attempted"):
        require(lambda: Verdict(None, reference="ref"))
    with pytest.raises(AssertionError):
        require(lambda: False)  # a bool verdict
    with pytest.raises(AssertionError):
        require(lambda: "FAIL  case\nnot right yet")  # a text verdict


# ------------------------------------------------------------------------------ notebook structure
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_three_graded_exercises_per_notebook(name):
    cells = cells_of(NOTEBOOKS[name])
    sols = [c for c in cells if nbgrader_of(c).get("solution")]
    tests = [c for c in cells if nbgrader_of(c).get("grade")]
    assert len(tests) >= 3, f"{name}: {len(tests)} graded exercises, at least 3 required"
    assert len(sols) >= 3
    for c in sols:
        src = source_of(c)
        assert "### BEGIN SOLUTION" in src and "### END SOLUTION" in src, nbgrader_of(c)["grade_id"]
    for c in tests:
        src, meta = source_of(c), nbgrader_of(c)
        assert meta["points"] > 0 and meta["locked"], meta["grade_id"]
        visible, _, hidden = src.partition("### BEGIN HIDDEN TESTS")
        assert hidden and "### END HIDDEN TESTS" in hidden, f"{meta['grade_id']}: no hidden test"
        assert "require(" in hidden and "check" in visible, meta["grade_id"]
    ids = [nbgrader_of(c)["grade_id"] for c in cells if nbgrader_of(c)]
    assert len(ids) == len(set(ids)), "grade ids must be unique"


def _defined_names(src: str) -> set[str]:
    tree = ast.parse(src)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_later_cells_never_use_the_answers(name):
    """Only the graded check cells call what a student writes, so a half-done notebook runs on."""
    cells = cells_of(NOTEBOOKS[name])
    answers = set().union(
        *(_defined_names(source_of(c)) for c in cells if nbgrader_of(c).get("solution"))
    )
    for c in cells:
        if c["cell_type"] != "code" or nbgrader_of(c):
            continue
        used = {n.id for n in ast.walk(ast.parse(source_of(c))) if isinstance(n, ast.Name)}
        assert not used & answers, f"a non-graded cell uses {sorted(used & answers)}"


# ------------------------------------------------------------------------- cells the grading runs
def _code(src: str, grade_id: str | None = None, **nbgrader) -> dict:
    meta = {"nbgrader": {"grade_id": grade_id, **nbgrader}} if grade_id else {}
    return {"cell_type": "code", "source": src, "metadata": meta, "outputs": [], "id": src[:8]}


def test_names_bound_and_read():
    from flkit.course.exercise_cells import names

    assert names("import numpy as np\nx = np.ones(3)\ny = x + z") == ({"np", "x", "y"}, {"z"})
    assert names("P['k'] = 1") == ({"P"}, {"P"})  # a change of P needs the P made before
    assert names("def f(a):\n    return a + b\n") == ({"f"}, {"b"})  # a is the argument
    assert names("[v for v in w]") == (set(), {"w"})
    # names bound inside a function are its own; the cell's later lines read the outer ones
    assert names("def g():\n    data = 1\n    return data\nh(data)") == ({"g"}, {"h", "data"})
    assert names("%matplotlib inline") is None


def test_skip_unneeded_keeps_what_the_exercises_need():
    """By hand: the check uses the answer, the answer uses `b`, `b` uses `a`; `c` is used only
    by a cell the student added (so it runs); `plot(c)`, `e` and `e2` serve no exercise."""
    from flkit.course.exercise_cells import SKIPPED, skip_unneeded

    library = ["a = 1", "b = a + 1", "c = train()", "plot(c)", "e = 5"]
    answer = _code("def f():\n    return b\n", "ans", solution=True)
    check = _code("r = f()\n### BEGIN HIDDEN TESTS\nassert g(r)\n### END HIDDEN TESTS", "t")
    instructor = {"cells": [*map(_code, library), answer, check, _code("e2 = e")]}
    student = json.loads(json.dumps(instructor))
    student["cells"][5]["source"] = "def f():\n    return b + 0\n"  # the student's answer
    student["cells"][6]["source"] = "r = f()\n"  # as released: the hidden tests removed
    student["cells"].insert(6, _code("mine = c * 2"))  # a cell the student added
    assert skip_unneeded(student, instructor) == 3
    ran = [source_of(c) for c in student["cells"] if source_of(c) != SKIPPED]
    answer_src = source_of(student["cells"][5])
    assert ran == ["a = 1", "b = a + 1", "c = train()", answer_src, "mine = c * 2", "r = f()\n"]
    skipped = [c for c in student["cells"] if source_of(c) == SKIPPED]
    assert [c["id"] for c in skipped] == ["plot(c)", "e = 5", "e2 = e"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in skipped)
    # a cell that does not parse may read anything: the notebook then runs in full
    magic = {"cells": [*map(_code, library), _code("%time e"), answer]}
    assert skip_unneeded(json.loads(json.dumps(magic)), magic) == 0


# ------------------------------------------------------------------------------ release
def test_release_refuses_a_file_as_folder(tmp_path):
    from flkit.course.nbgrader_run import release

    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(FlkitError, match="not a folder"):
        release(f)


def test_grade_refuses_bad_folders(tmp_path):
    from flkit.course.nbgrader_run import grade

    with pytest.raises(FlkitError, match="does not exist"):
        grade(tmp_path / "missing")
    with pytest.raises(FlkitError, match="no student folder"):
        grade(tmp_path)
    (tmp_path / "ann").mkdir()
    with pytest.raises(FlkitError, match="cell_timeout"):
        grade(tmp_path, cell_timeout=0)
    for bad in (0, float("nan"), float("inf"), "60"):
        with pytest.raises(FlkitError, match="notebook_timeout"):
            grade(tmp_path, notebook_timeout=bad)
    for jobs in (0, 1.5, True):
        with pytest.raises(FlkitError, match="jobs"):
            grade(tmp_path, jobs=jobs)
    with pytest.raises(FlkitError, match="'some'; accepted: exercises, all"):
        grade(tmp_path, run="some")
    with pytest.raises(FlkitError, match="smoke"):  # the message lists the accepted presets
        grade(tmp_path, preset="fast")
    with pytest.raises(FlkitError, match="00_fl_primer"):
        grade(tmp_path, only=["99"])


# ------------------------------------------------------------------------------ autograding
def _wrong_answer(src: Path, dest: Path) -> None:
    """Notebook 00 with a wrong answer to exercise (a) (the parameter count, not the bytes)."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        if nbgrader_of(c).get("grade_id") == "primer_a_answer":
            c["source"] = "def upload_bytes():\n    return 199210\n"
    dest.write_text(json.dumps(nb), encoding="utf-8")


def _broken(src: Path, dest: Path) -> None:
    """Notebook 00 as a careless student leaves it: (a)'s check cell deleted, (b)'s check moved
    before its answer, and (c) looping forever (asleep, so that the loop does not take a core
    from the notebooks graded beside it until the cell timeout)."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if nbgrader_of(c).get("grade_id") != "primer_a_upload_bytes"]
    i = next(k for k, c in enumerate(cells) if nbgrader_of(c).get("grade_id") == "primer_b_answer")
    cells[i], cells[i + 1] = cells[i + 1], cells[i]
    for c in cells:
        if nbgrader_of(c).get("grade_id") == "primer_c_answer":
            loop = "while True:\n            __import__('time').sleep(0.1)"
            c["source"] = source_of(c).replace("### BEGIN SOLUTION", loop)
    nb["cells"] = cells
    dest.write_text(json.dumps(nb), encoding="utf-8")


def _submissions(released_dir: Path, subs: Path, students) -> Path:
    """``subs/<student>/``: the instructor versions, the blank releases, a wrong answer, a broken
    notebook and an unreadable one (a student gets 0 for the notebooks missing from the folder)."""
    primer = NOTEBOOKS["00_fl_primer"]
    for student in students:
        (subs / student).mkdir(parents=True)
    for path in NOTEBOOKS.values():
        if "instructor" in students:
            shutil.copy(path, subs / "instructor" / path.name)
        if "blank" in students:
            shutil.copy(released_dir / path.name, subs / "blank" / path.name)
    if "wrong" in students:
        _wrong_answer(primer, subs / "wrong" / primer.name)
    if "broken" in students:
        _broken(primer, subs / "broken" / primer.name)
        (subs / "broken" / "01_stc_projection.ipynb").write_text("{not json")
    return subs


@pytest.fixture(scope="module")
def graded(student_release, tmp_path_factory):
    """One grading call as an instructor makes it (only the cells the exercises need run), shared
    by the tests below: every kind of submission, two notebooks at a time, at the default cell
    timeout."""
    from flkit.course.nbgrader_run import grade

    tmp = tmp_path_factory.mktemp("graded")
    subs = _submissions(student_release, tmp / "subs", ("instructor", "blank", "wrong", "broken"))
    return tmp / "out", _csv(grade(subs, tmp / "out", jobs=2))


@pytest.fixture(scope="module")
def graded_all(student_release, tmp_path_factory):
    """The blank releases and a wrong answer graded with every cell run (``run="all"``), with a
    long cell timeout: nothing here loops, and on a loaded CI machine a cell of 05's own
    experiments has run past 300 s (the code before this fixture timed out there)."""
    from flkit.course.nbgrader_run import grade

    tmp = tmp_path_factory.mktemp("graded-all")
    subs = _submissions(student_release, tmp / "subs", ("blank", "wrong"))
    out = tmp / "out"
    return out, _csv(grade(subs, out, jobs=2, run="all", cell_timeout=900, notebook_timeout=3600))


def _csv(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _rows(rows, student, notebook=None):
    return [r for r in rows if r["student"] == student and notebook in (None, r["notebook"])]


@pytest.mark.slow
def test_instructor_versions_get_full_marks(graded):
    _, rows = graded
    mine = _rows(rows, "instructor")
    assert len(mine) >= 3 * len(NOTEBOOKS)
    assert all(float(r["points"]) == float(r["max_points"]) > 0 for r in mine), [
        r for r in mine if float(r["points"]) != float(r["max_points"])
    ]
    assert list(rows[0]) == ["student", "notebook", "exercise", "points", "max_points", "note"]


@pytest.mark.slow
def test_blank_releases_score_zero_and_run_to_the_end(graded, graded_all):
    assert len(_rows(graded[1], "blank")) == len(_rows(graded[1], "instructor"))
    out, rows = graded_all
    mine = _rows(rows, "blank")
    assert len(mine) == len(_rows(graded[1], "instructor"))
    assert all(float(r["points"]) == 0 for r in mine)
    for name in NOTEBOOKS:  # every cell ran; only graded check cells hold errors
        cells = cells_of(out / "autograded" / "blank" / f"{name}.ipynb")
        for c in cells:
            if c["cell_type"] != "code":
                continue
            assert c.get("execution_count") is not None, f"{name}: a cell did not run"
            errors = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
            assert not errors or nbgrader_of(c).get("grade"), f"{name}: {errors[0].get('ename')}"
    feedback = (out / "feedback" / "blank" / "00_fl_primer.html").read_text(encoding="utf-8")
    assert "not attempted yet" in feedback


@pytest.mark.slow
def test_a_wrong_answer_loses_exactly_its_points_with_the_hint(graded):
    out, rows = graded
    mine = {r["exercise"]: r for r in _rows(rows, "wrong", "00_fl_primer")}
    assert float(mine["primer_a_upload_bytes"]["points"]) == 0
    for ex in ("primer_b_weighted_average", "primer_c_fedavgm"):
        assert float(mine[ex]["points"]) == float(mine[ex]["max_points"]) > 0
    html = (out / "feedback" / "wrong" / "00_fl_primer.html").read_text(encoding="utf-8")
    assert "a float32 parameter takes 4 bytes" in html  # the checker's hint
    missing = _rows(rows, "wrong", "01_stc_projection")
    assert missing and all(float(r["points"]) == 0 for r in missing)
    assert all("missing" in r["note"] for r in missing)


@pytest.mark.slow
def test_broken_submissions_are_graded_with_a_note(graded):
    _, rows = graded
    mine = {r["exercise"]: r for r in _rows(rows, "broken", "00_fl_primer")}
    note = mine["primer_b_weighted_average"]["note"]
    assert "deleted" in note and "reordered" in note
    # (a)'s check was put back and its answer is right; (c) looped and was interrupted
    assert float(mine["primer_a_upload_bytes"]["points"]) == 1
    assert float(mine["primer_c_fedavgm"]["points"]) == 0
    assert "timeout" in mine["primer_c_fedavgm"]["note"]
    unreadable = _rows(rows, "broken", "01_stc_projection")
    assert unreadable and all("could not be read" in r["note"] for r in unreadable)


@pytest.mark.slow
def test_sequential_grading_gives_the_parallel_grades(student_release, graded, tmp_path):
    """jobs=1 (one process, one notebook after another) against the shared jobs=2 grading: the
    same rows, points and notes, for a submission with full, zero and partial marks."""
    from flkit.course.nbgrader_run import grade

    out, rows = graded
    subs = tmp_path / "subs"
    for student in ("blank", "wrong"):
        (subs / student).mkdir(parents=True)
    primer = NOTEBOOKS["00_fl_primer"]
    _wrong_answer(primer, subs / "wrong" / primer.name)
    shutil.copy(student_release / primer.name, subs / "blank" / primer.name)
    seq = _csv(grade(subs, tmp_path / "graded", only=["00"], jobs=1))
    par = [r for r in rows if r["student"] in ("blank", "wrong") and r["notebook"] == primer.stem]
    assert len(seq) == 6 and {float(r["points"]) for r in seq} == {0.0, 2.0, 3.0}
    assert seq == par


@pytest.mark.slow
def test_skipping_the_unneeded_cells_keeps_every_grade(graded, graded_all):
    """run="exercises" (the default) against run="all": the same rows, points and notes, while
    the default skipped cells (05's training among them) and run="all" skipped none."""
    from flkit.course.exercise_cells import SKIPPED

    (out, rows), (out_all, rows_all) = graded, graded_all
    mine = [r for r in rows if r["student"] in ("blank", "wrong")]
    assert mine == rows_all and {float(r["points"]) for r in mine} == {0.0, 2.0, 3.0}
    for folder, skipped in ((out, True), (out_all, False)):
        cells = cells_of(folder / "autograded" / "blank" / "05_staleness.ipynb")
        assert any(source_of(c) == SKIPPED for c in cells) is skipped
    kept = cells_of(out / "autograded" / "instructor" / "05_staleness.ipynb")
    assert not any("study.compare" in source_of(c) for c in kept)


def test_cli_passes_jobs_and_run_to_the_grader(tmp_path, monkeypatch, capsys):
    import flkit.course.nbgrader_run as nbgrader_run
    from flkit.cli import main

    seen = []

    def fake_grade(*args, **kwargs):
        seen.append(args)
        path = tmp_path / "grades.csv"
        path.write_text("student,notebook,exercise,points,max_points,note\nann,00,a,1.0,2.0,\n")
        return path

    monkeypatch.setattr(nbgrader_run, "grade", fake_grade)
    assert main(["course", "grade", str(tmp_path), "--jobs", "3", "--run", "all"]) == 0
    assert seen[-1][-3:] == (3, "all", 1800) and "ann: 1 / 2 points" in capsys.readouterr().out
    assert main(["course", "grade", str(tmp_path), "--notebook-timeout", "90"]) == 0
    assert seen[-1][-3:] == (1, "exercises", 90)  # the --jobs default of every command
    with pytest.raises(SystemExit):
        main(["course", "grade", str(tmp_path), "--run", "some"])
