"""Release and autograde the workbook's notebooks with nbgrader.

Every call builds a throwaway nbgrader course folder (and gradebook database) in a temporary
directory: ``source/flkit/`` holds the instructor notebooks (the repository's own, with their
solutions and hidden tests), ``nbgrader generate_assignment`` writes the student version and
records the graded cells (:mod:`.course_dir`); ``autograde`` runs each submitted notebook with the
hidden tests put back and ``generate_feedback`` writes the HTML, ``jobs`` notebooks at a time
(:mod:`.autograde`). All notebooks form one nbgrader assignment, ``flkit``.

Submissions are read from ``SUBMISSIONS_DIR/<student>/<notebook>.ipynb``. Whatever is wrong with
a submission is graded as far as possible and said in the ``note`` column of grades.csv: a missing
or unreadable notebook scores 0; deleted test cells are put back from the instructor version
(nbgrader's ``add_missing_cells``); reordered cells run in the student's order; a cell that raises
scores 0 for its exercise only; a cell that runs longer than ``cell_timeout`` seconds is
interrupted (nbgrader's per-cell timeout) and scores 0, the rest of the notebook still runs; a cell
that does not stop when interrupted has its kernel killed, and so has a notebook that runs longer
than ``notebook_timeout`` seconds in all: its exercises from that cell on score 0, "timed out"
(:mod:`.kernel_limits`).

A submission cannot grade itself: its hidden tests call checkers kept from before it ran, with
what it changed put back (:mod:`.seal`, :mod:`.hidden_tests`; a note names what it changed), and
a notebook whose own cells reach into the interpreter has its points withheld for review
(:mod:`.tampering`). docs/TEACHING.md says what that does and does not protect against.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import secrets
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..reproduce import SOURCE_ROOT, discover, match_notebook
from ..utils import FlkitError, check_choice
from ..workbook import presets
from .autograde import Task, grade_all
from .course_dir import ASSIGNMENT, environment, generate
from .exercise_cells import skip_unneeded
from .hidden_tests import seal_cell, seal_hidden_tests
from .seal import REPORT
from .student_version import INSTRUCTOR_MARKERS  # a release never writes over a file with one
from .tampering import findings

COLUMNS = ("student", "notebook", "exercise", "points", "max_points", "note")
#: what the grading runs: only the cells the exercises need (:mod:`.exercise_cells`), or all
RUN = ("exercises", "all")
#: default total time limit of one notebook's grading, in seconds
NOTEBOOK_TIMEOUT = 1800


def _select(notebooks_dir, only) -> dict[str, Path]:
    found = discover(notebooks_dir)
    if not found:
        raise FlkitError(f"no numbered notebooks found in {notebooks_dir or 'notebooks/'}")
    if not only:
        return found
    return {n: found[n] for n in dict.fromkeys(match_notebook(o, list(found)) for o in only)}


def _check_release_target(dest: Path, notebooks: dict[str, Path]) -> None:
    """Refuse, before any work, a release that could destroy an instructor notebook: a folder
    that is, lies inside or holds the notebooks' own folder (the default ``notebooks/`` included),
    or a file in ``dest`` that holds solutions or hidden tests (only git would bring it back)."""
    target = dest.resolve()
    for source in sorted({p.parent.resolve() for p in notebooks.values()}):
        if target == source:
            how = "is"
        elif source in target.parents:
            how = "lies inside"
        elif target in source.parents:
            how = "holds"
        else:
            continue
        raise FlkitError(
            f"release folder {dest} ({target}) {how} the instructor notebooks' folder {source}: "
            "the student versions would sit beside or over the notebooks with their solutions; "
            "give a folder outside it, e.g. course/release"
        )
    for name in notebooks:
        path = dest / f"{name}.ipynb"
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
        except (OSError, UnicodeDecodeError):
            text = ""
        found = [m for m in INSTRUCTOR_MARKERS if m in text]
        if found:
            raise FlkitError(
                f"{path} holds {' and '.join(repr(m) for m in found)}: it is an instructor "
                "notebook, and a release never writes over one; give another release folder, "
                "or move that file away"
            )


def release(dest: str | Path, notebooks_dir=None, only=None) -> list[Path]:
    """Write the student version of the notebooks (no solutions, no hidden tests) into ``dest``.

    Refused (FlkitError, before anything is written) when ``dest`` is, lies inside or holds the
    instructor notebooks' folder, or holds a notebook of that name with solutions or hidden
    tests; an earlier release there is replaced."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise FlkitError(f"release folder {dest} exists and is not a folder")
    notebooks = _select(notebooks_dir, only)
    _check_release_target(dest, notebooks)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(prefix="flkit-course-") as tmp:
        generate(Path(tmp), notebooks)
        for name in notebooks:
            target = dest / f"{name}.ipynb"
            shutil.copy(Path(tmp) / "release" / ASSIGNMENT / f"{name}.ipynb", target)
            out.append(target)
    return out


# ------------------------------------------------------------------------------ grading
@dataclass
class Row:
    student: str
    notebook: str
    exercise: str
    points: float
    max_points: float
    note: str = ""


def _grade_ids(nb: dict) -> list[str]:
    return [
        c["metadata"]["nbgrader"]["grade_id"]
        for c in nb.get("cells", [])
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    ]


def _structure_note(submitted: dict, instructor: dict) -> str:
    """What the student changed in the graded cells' layout (deleted, reordered)."""
    want, got = _grade_ids(instructor), _grade_ids(submitted)
    notes = []
    missing = [g for g in want if g not in got]
    if missing:
        notes.append(
            f"cells {', '.join(missing)} were deleted: test cells were put back from the "
            "instructor version, a deleted answer cell scores 0"
        )
    kept = [g for g in got if g in want]
    if kept != [g for g in want if g in kept]:
        notes.append("cells were reordered: graded in the student's order")
    return "; ".join(notes)


def _read(path: Path) -> dict | None:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return nb if isinstance(nb, dict) and isinstance(nb.get("cells"), list) else None


def _cell_errors(path: Path, cell_timeout: int) -> dict[str, str]:
    """{grade_id: what went wrong} from the autograded notebook's error outputs.

    A timeout in a cell that is not graded (an answer cell) is the note of the next graded cell:
    that exercise timed out, whatever its check then raised."""
    from .kernel_limits import NOT_RUN, TIMEOUT  # imports nbgrader: only once it has graded

    nb = _read(path) or {"cells": []}
    out, carried = {}, ""
    for c in nb["cells"]:
        meta = c.get("metadata", {}).get("nbgrader", {})
        gid, why = meta.get("grade_id"), ""
        for o in c.get("outputs", []):
            if o.get("output_type") != "error":
                continue
            ename, evalue = o.get("ename"), str(o.get("evalue") or "")
            if ename == TIMEOUT and evalue:
                why = f"timed out: {evalue}"
            elif ename in (TIMEOUT, "KeyboardInterrupt"):
                why = why or f"timed out: interrupted after the {cell_timeout} s cell timeout"
            elif why.startswith("timed out"):
                continue
            elif ename == NOT_RUN:
                why = evalue
            elif ename == "AssertionError":
                why = "test failed (see the feedback for the hint)"
            else:
                why = f"raised {ename}: {evalue[:120]}"
        if not meta.get("grade"):
            carried = why if why.startswith("timed out") else carried
            continue
        if carried and not why.startswith("timed out"):
            why = carried
        carried = ""
        if gid and why:
            out[gid] = why
    return out


def _students(submissions: Path) -> list[Path]:
    if not submissions.is_dir():
        raise FlkitError(f"submissions folder {submissions} does not exist or is not a folder")
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise FlkitError(
            f"{submissions} holds no student folder; expected {submissions}/<student>/<notebook>"
            ".ipynb"
        )
    return students


def grade(
    submissions: str | Path,
    out: str | Path | None = None,
    notebooks_dir=None,
    only=None,
    preset: str = "smoke",
    cell_timeout: int = 120,
    jobs: int | None = None,
    run: str = "exercises",
    notebook_timeout: float = NOTEBOOK_TIMEOUT,
    progress=None,
) -> Path:
    """Autograde ``submissions/<student>/<notebook>.ipynb``; write ``out/grades.csv``,
    ``out/feedback/<student>/<notebook>.html`` and the executed notebooks
    ``out/autograded/<student>/<notebook>.ipynb``; return the path of grades.csv.

    ``out`` defaults to ``<submissions>-graded`` beside the submissions folder. The notebooks run
    at ``preset`` (default smoke: the exercises do not depend on the preset, and the other cells
    then take seconds), each (student, notebook) with an empty run cache of its own.

    A cell is interrupted after ``cell_timeout`` seconds and its kernel killed if it does not
    stop; a notebook's kernel is killed after ``notebook_timeout`` seconds in all (default 1800);
    grades.csv says "timed out" for the exercises that lost their points that way.

    ``run="exercises"`` (default) skips the workbook's own cells that no exercise needs (its
    figures and tables, the smoke training): the grades are those of ``run="all"``, which runs
    every cell (the executed notebooks in ``out/autograded`` then show every result).

    ``jobs`` (default: the number of CPUs) notebooks are graded at a time, each (student,
    notebook) in its own process and course folder (:mod:`.autograde`); the grades do not depend
    on ``jobs``. With ``jobs > 1`` each kernel gets ``cpus // jobs`` torch threads
    (``FLKIT_THREADS``, unless already set). ``progress(outcome, done, total)`` is called as each
    (student, notebook) finishes (:func:`.autograde.grade_all`)."""
    submissions = Path(submissions).resolve()
    students = _students(submissions)
    if isinstance(cell_timeout, bool) or not isinstance(cell_timeout, int) or cell_timeout < 1:
        raise FlkitError(f"cell_timeout={cell_timeout!r} must be a whole number of seconds >= 1")
    if (
        isinstance(notebook_timeout, bool)
        or not isinstance(notebook_timeout, (int, float))
        or not notebook_timeout >= 1
        or notebook_timeout == float("inf")
    ):
        raise FlkitError(
            f"notebook_timeout={notebook_timeout!r} must be a finite number of seconds >= 1 "
            f"(default {NOTEBOOK_TIMEOUT})"
        )
    check_choice("run", run, RUN)
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FlkitError(f"jobs={jobs!r} is not accepted; give a whole number >= 1 (or None: CPUs)")
    out = Path(out) if out is not None else submissions.with_name(submissions.name + "-graded")
    out = out.resolve()
    notebooks = _select(notebooks_dir, only)
    for name in notebooks:
        if preset not in presets.available(name):
            raise FlkitError(
                f"preset {preset!r} is not one of {name}'s presets: "
                f"{', '.join(presets.available(name))}"
            )
    instructor = {n: _read(p) for n, p in notebooks.items()}
    # the graded copies: hidden tests that call the sealed require, named by a token no
    # submission can know in advance
    token = f"_flkit_grader_{secrets.token_hex(8)}"
    grading = {n: copy.deepcopy(nb) for n, nb in instructor.items()}
    sealed = {n: seal_hidden_tests(grading[n], token, n) for n in notebooks}
    with tempfile.TemporaryDirectory(prefix="flkit-course-") as tmp:
        root = Path(tmp)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = {
            "FLKIT_PRESET": preset,
            "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(SOURCE_ROOT), *paths])),
        }
        if jobs > 1 and not os.environ.get("FLKIT_THREADS"):
            # parallel kernels share the cores instead of each taking all of them
            env["FLKIT_THREADS"] = max(1, (os.cpu_count() or 1) // jobs)
        with environment(**env):
            generate(root, notebooks, cell_timeout, contents=grading)
            seal = {n: seal_cell(token, sealed[n]) for n in notebooks}
            notes = {s.name: _submit(root, s, notebooks, instructor, run, seal) for s in students}
            tasks = [
                Task(str(root), s.name, n, cell_timeout, float(notebook_timeout))
                for s in students
                for n in notebooks
                if (root / "submitted" / s.name / ASSIGNMENT / f"{n}.ipynb").exists()
            ]
            done = grade_all(tasks, jobs, on_done=progress)
            outcomes = {(o.student, o.notebook): o for o in done}
        rows = _rows(root, students, notebooks, instructor, notes, outcomes, cell_timeout, out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r.student, r.notebook, r.exercise, r.points, r.max_points, r.note])
    return csv_path


def _submit(root: Path, sdir: Path, notebooks, instructor, run: str, seal) -> dict[str, tuple]:
    """Copy a student's readable notebooks into the course folder (with the cells no exercise
    needs skipped unless ``run == "all"``, and the seal cell first); {notebook: (note, what its
    own cells do to reach past their answers)}."""
    dest = root / "submitted" / sdir.name / ASSIGNMENT
    dest.mkdir(parents=True)
    notes = {}
    for name in notebooks:
        path = sdir / f"{name}.ipynb"
        nb = _read(path) if path.is_file() else None
        if not path.is_file():
            notes[name] = ("notebook missing from the submission: 0 points", [])
        elif nb is None:
            notes[name] = ("notebook could not be read as a Jupyter notebook: 0 points", [])
        else:
            notes[name] = (_structure_note(nb, instructor[name]), _findings(nb, instructor[name]))
            if run == "exercises":
                skip_unneeded(nb, instructor[name])
            nb["cells"].insert(0, copy.deepcopy(seal[name]))
            (dest / path.name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return notes


def _findings(nb: dict, instructor: dict) -> list[str]:
    """What the submission's own code cells do to reach past their answers (:mod:`.tampering`).
    Locked and check cells are left out: nbgrader puts the instructor's back before grading."""

    def src(c) -> str:
        s = c.get("source", "")
        return s if isinstance(s, str) else "".join(s)

    def meta(c) -> dict:
        return c.get("metadata", {}).get("nbgrader", {}) or {}

    cells = [
        (meta(c).get("grade_id") or str(i + 1), src(c))
        for i, c in enumerate(nb.get("cells", []))
        if c.get("cell_type") == "code"
        and not meta(c).get("locked")
        and not (meta(c).get("grade") and not meta(c).get("solution"))
    ]
    library = [
        src(c)
        for c in instructor.get("cells", [])
        if c.get("cell_type") == "code" and not meta(c).get("solution")
    ]
    return findings(cells, library)


def _flag_note(flags: list[str]) -> str:
    if not flags:
        return ""
    more = f" (and {len(flags) - 3} more)" if len(flags) > 3 else ""
    return (
        f"points withheld for review: the submission's own code reaches into the interpreter, "
        f"where it could change its grades: {'; '.join(flags[:3])}{more}"
    )


def _tampering(path: Path | None) -> str:
    """The seal's last report of what the submission changed (put back before each check)."""
    said = ""
    for c in (_read(path) or {"cells": []})["cells"] if path else []:
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                text = o.get("text", "")
                text = text if isinstance(text, str) else "".join(text)
                said = next((ln for ln in text.splitlines() if ln.startswith(REPORT)), said)
    if not said:
        return ""
    return (
        f"tampering: the submission changed {said[len(REPORT) :].strip()}; the graded checks "
        "ran with the originals put back"
    )


def _rows(root, students, notebooks, instructor, notes, outcomes, cell_timeout, out) -> list[Row]:
    """One row per (student, notebook, exercise), in the instructor's exercise order; the
    executed notebooks and feedback copied into ``out``."""
    from nbgrader.api import Gradebook

    rows = []
    db = f"sqlite:///{root / 'gradebook.db'}"
    with warnings.catch_warnings(), Gradebook(db, ASSIGNMENT) as gb:
        warnings.filterwarnings("ignore", message=".*not in session.*")  # see .autograde
        cells = {n: gb.find_notebook(n, ASSIGNMENT).grade_cells for n in notebooks}
        for sdir in students:
            student = sdir.name
            for name in notebooks:
                o = outcomes.get((student, name))
                graded = Path(o.autograded) if o and o.autograded else None
                errors = _cell_errors(graded, cell_timeout) if graded else {}
                structure, flags = notes[student][name]
                parts = (structure, _flag_note(flags), _tampering(graded), o.failure if o else "")
                head = "; ".join(x for x in parts if x)
                order = _grade_ids(instructor[name])
                for cell in sorted(cells[name], key=lambda c: order.index(c.name)):
                    # points withheld: code that reaches the interpreter can grade itself
                    pts = o.scores.get(cell.name, 0.0) if o and not flags else 0.0
                    note = "; ".join(x for x in (head, errors.get(cell.name, "")) if x)
                    rows.append(Row(student, name, cell.name, pts, float(cell.max_score), note))
                for src, sub in ((graded, "autograded"), (o and o.feedback, "feedback")):
                    if src:  # kept for the instructor: the executed notebook, the feedback
                        (out / sub / student).mkdir(parents=True, exist_ok=True)
                        shutil.copy(src, out / sub / student / Path(src).name)
    return rows
