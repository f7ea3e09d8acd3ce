"""`flkit course` on the command line: grade prints a line per submission as it finishes (and
none with --quiet), the grader reports each finished task to its caller, and `course student`
never overwrites notebooks already in its folder unless told to."""

from __future__ import annotations

from pathlib import Path

import pytest

from flkit.cli import main as cli_main
from flkit.course.autograde import Outcome, Task, grade_all


@pytest.fixture
def fake_grade(monkeypatch, tmp_path):
    """The grader stood in for: two submissions finish, one graded and one failed, reported
    through the progress callback the CLI passes."""
    import flkit.course.nbgrader_run as nbgrader_run

    def grade(*args, progress=None, **kwargs):
        done = [
            Outcome("ann", "00_fl_primer", scores={"a": 1.0, "b": 2.0}),
            Outcome("bob", "00_fl_primer", failure="autograde failed: SyntaxError"),
        ]
        for i, outcome in enumerate(done, 1):
            if progress is not None:
                progress(outcome, i, len(done))
        path = tmp_path / "grades.csv"
        path.write_text("student,notebook,exercise,points,max_points,note\nann,00,a,1.0,1.0,\n")
        return path

    monkeypatch.setattr(nbgrader_run, "grade", grade)


def test_grade_prints_a_line_per_submission(fake_grade, tmp_path, capsys):
    assert cli_main(["course", "grade", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "flkit course grade: 1/2 ann 00_fl_primer: graded, 3 points",
        "flkit course grade: 2/2 bob 00_fl_primer: autograde failed: SyntaxError",
    ]


@pytest.mark.parametrize("flag", ["--quiet", "-q", "--no-progress"])
def test_grade_quiet_prints_only_the_totals(fake_grade, tmp_path, capsys, flag):
    assert cli_main(["course", "grade", str(tmp_path), flag]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "ann: 1 / 1 points" in out.out


def test_the_grader_reports_each_finished_task(tmp_path):
    """Two tasks whose course folder is empty fail at once in their own processes: each is
    reported as it ends, with the count so far and the total."""
    seen = []
    tasks = [Task(str(tmp_path), s, "00_fl_primer", 10, 10.0) for s in ("ann", "bob")]
    outcomes = grade_all(tasks, jobs=2, on_done=lambda o, n, total: seen.append((o, n, total)))
    assert sorted(o.student for o, _, _ in seen) == ["ann", "bob"]
    assert [(n, total) for _, n, total in seen] == [(1, 2), (2, 2)]
    assert {id(o) for o, _, _ in seen} == {id(o) for o in outcomes}
    assert all("autograde failed" in o.failure for o in outcomes)


def test_student_refuses_a_folder_with_notebooks(monkeypatch, tmp_path, capsys):
    import flkit.course.nbgrader_run as nbgrader_run

    written = []
    monkeypatch.setattr(
        nbgrader_run, "release", lambda dest, nb=None, only=None: written.append(Path(dest)) or []
    )
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "00_fl_primer.ipynb").write_text("{}")  # a student's copy, answers in it
    assert cli_main(["course", "student", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "00_fl_primer.ipynb" in err and "--force" in err and not written
    assert cli_main(["course", "student", str(folder), "--force"]) == 0
    assert written == [folder]
    assert cli_main(["course", "student", str(tmp_path / "new")]) == 0  # a new folder
    assert written[-1] == tmp_path / "new"
    assert "make lab LAB=" in capsys.readouterr().out
