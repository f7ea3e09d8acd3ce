"""Release and autograde the workbook's notebooks with nbgrader.

Every call builds a throwaway nbgrader course folder (and gradebook database) in a temporary
directory: ``source/flkit/`` holds the instructor notebooks (the repository's own, with their
solutions and hidden tests), ``nbgrader generate_assignment`` writes the student version and
records the graded cells, ``autograde`` runs each student's submission with the hidden tests put
back, ``generate_feedback`` writes the HTML. All notebooks form one nbgrader assignment, ``flkit``.

Submissions are read from ``SUBMISSIONS_DIR/<student>/<notebook>.ipynb``. Whatever is wrong with
a submission is graded as far as possible and said in the ``note`` column of grades.csv: a missing
or unreadable notebook scores 0; deleted test cells are put back from the instructor version
(nbgrader's ``add_missing_cells``); reordered cells run in the student's order; a cell that raises
scores 0 for its exercise only; a cell that runs longer than ``cell_timeout`` seconds is
interrupted (nbgrader's per-cell timeout) and scores 0, the rest of the notebook still runs.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import presets
from ..reproduce import SOURCE_ROOT, discover, match_notebook
from ..utils import FlkitError

ASSIGNMENT = "flkit"
COLUMNS = ("student", "notebook", "exercise", "points", "max_points", "note")


def _select(notebooks_dir, only) -> dict[str, Path]:
    found = discover(notebooks_dir)
    if not found:
        raise FlkitError(f"no numbered notebooks found in {notebooks_dir or 'notebooks/'}")
    if not only:
        return found
    return {n: found[n] for n in dict.fromkeys(match_notebook(o, list(found)) for o in only)}


def _config(root: Path, cell_timeout: int):
    try:
        import nbgrader  # noqa: F401
    except ImportError as e:
        raise FlkitError(
            "flkit course needs nbgrader: pip install 'flkit[course]' (or nbgrader>=0.9)"
        ) from e
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = ASSIGNMENT
    c.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    c.Execute.timeout = int(cell_timeout)
    c.Execute.interrupt_on_timeout = True
    # on a busy machine a kernel's last outputs can arrive seconds after its reply: wait for them
    # instead of failing the whole notebook (nbgrader's default raises after 4 s)
    c.Execute.iopub_timeout = 60
    c.Execute.raise_on_iopub_timeout = False
    c.OverwriteCells.add_missing_cells = True
    return c


def _api(root: Path, cell_timeout: int = 120):
    c = _config(root, cell_timeout)  # first: it says how to install nbgrader when it is missing
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    return NbGraderAPI(coursedir=CourseDirectory(config=c), config=c)


def _generate(root: Path, notebooks: dict[str, Path], cell_timeout: int = 120):
    """A course folder at ``root`` with the instructor notebooks released (gradebook filled)."""
    src = root / "source" / ASSIGNMENT
    src.mkdir(parents=True)
    for name, path in notebooks.items():
        shutil.copy(path, src / f"{name}.ipynb")
    api = _api(root, cell_timeout)
    # nbgrader runs the `alembic` script of its own environment to create the gradebook
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    with _environment(
        PATH=path if bindir in path.split(os.pathsep) else bindir + os.pathsep + path
    ):
        res = api.generate_assignment(ASSIGNMENT)
    if not res["success"]:
        log = "\n".join((res.get("log") or "").strip().splitlines()[-15:])
        raise FlkitError(f"nbgrader generate_assignment failed:\n{log}")
    return api


def release(dest: str | Path, notebooks_dir=None, only=None) -> list[Path]:
    """Write the student version of the notebooks (no solutions, no hidden tests) into ``dest``."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise FlkitError(f"release folder {dest} exists and is not a folder")
    notebooks = _select(notebooks_dir, only)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(prefix="flkit-course-") as tmp:
        _generate(Path(tmp), notebooks)
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
    """{grade_id: what went wrong} from the autograded notebook's error outputs."""
    nb = _read(path) or {"cells": []}
    out = {}
    for c in nb["cells"]:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for o in c.get("outputs", []):
            if gid and o.get("output_type") == "error":
                if o.get("ename") in ("CellTimeoutError", "KeyboardInterrupt"):
                    out[gid] = f"interrupted after the {cell_timeout} s cell timeout"
                elif o.get("ename") == "AssertionError":
                    out[gid] = "test failed (see the feedback for the hint)"
                else:
                    out[gid] = f"raised {o.get('ename')}: {str(o.get('evalue'))[:120]}"
    return out


@contextlib.contextmanager
def _environment(**values):
    """Set environment variables for the grading kernels (they inherit them), then restore."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
) -> Path:
    """Autograde ``submissions/<student>/<notebook>.ipynb``; write ``out/grades.csv``,
    ``out/feedback/<student>/<notebook>.html`` and the executed notebooks
    ``out/autograded/<student>/<notebook>.ipynb``; return the path of grades.csv.

    ``out`` defaults to ``<submissions>-graded`` beside the submissions folder. The notebooks run
    at ``preset`` (default smoke: the exercises do not depend on the preset, and the other cells
    then take seconds) with one run cache shared by all students, ``out/run-cache``."""
    submissions = Path(submissions).resolve()
    students = _students(submissions)
    if int(cell_timeout) < 1:
        raise FlkitError(f"cell_timeout={cell_timeout!r} must be a whole number of seconds >= 1")
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
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="flkit-course-") as tmp:
        root = Path(tmp)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = {
            "FLKIT_PRESET": preset,
            "FLKIT_RUNS": out / "run-cache",
            "FLKIT_RUNS_DIR": root / "runs",
            "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(SOURCE_ROOT), *paths])),
        }
        with _environment(**env), warnings.catch_warnings():
            # nbgrader's gradebook warns about its own session handling on every autograde
            warnings.filterwarnings("ignore", message=".*not in session.*")
            api = _generate(root, notebooks, cell_timeout)
            for sdir in students:
                rows += _grade_student(api, root, sdir, notebooks, instructor, cell_timeout, out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r.student, r.notebook, r.exercise, r.points, r.max_points, r.note])
    return csv_path


def _grade_student(api, root, sdir, notebooks, instructor, cell_timeout, out) -> list[Row]:
    from nbgrader.api import Gradebook

    student = sdir.name
    dest = root / "submitted" / student / ASSIGNMENT
    dest.mkdir(parents=True)
    notes = {}
    for name in notebooks:
        path = sdir / f"{name}.ipynb"
        nb = _read(path) if path.is_file() else None
        if not path.is_file():
            notes[name] = "notebook missing from the submission: 0 points"
        elif nb is None:
            notes[name] = "notebook could not be read as a Jupyter notebook: 0 points"
        else:
            shutil.copy(path, dest / path.name)
            notes[name] = _structure_note(nb, instructor[name])
    if any((dest / f"{n}.ipynb").exists() for n in notebooks):
        res = api.autograde(ASSIGNMENT, student)
        if not res["success"]:
            log = (res.get("error") or "") + "\n" + (res.get("log") or "")
            why = [
                ln.strip() for ln in log.splitlines() if re.match(r"\s*\w+(Error|Exception)", ln)
            ]
            for n in notebooks:
                reason = f"autograde failed: {why[-1] if why else 'see nbgrader log'}"
                notes[n] = "; ".join(x for x in (notes[n], reason) if x)
        else:
            api.generate_feedback(ASSIGNMENT, student)
    rows = []
    with Gradebook(api.coursedir.db_url, ASSIGNMENT) as gb:
        for name in notebooks:
            graded = root / "autograded" / student / ASSIGNMENT / f"{name}.ipynb"
            errors = _cell_errors(graded, cell_timeout) if graded.exists() else {}
            try:
                nb = gb.find_submission_notebook(name, ASSIGNMENT, student)
                grades = {g.name: g for g in nb.grades}
            except Exception:  # noqa: BLE001 - no submission recorded: every exercise scores 0
                grades = {}
            order = _grade_ids(instructor[name])
            cells = gb.find_notebook(name, ASSIGNMENT).grade_cells
            for cell in sorted(cells, key=lambda c: order.index(c.name)):
                g = grades.get(cell.name)
                pts = float(g.score) if g is not None and g.score is not None else 0.0
                note = "; ".join(x for x in (notes[name], errors.get(cell.name, "")) if x)
                rows.append(Row(student, name, cell.name, pts, float(cell.max_score), note))
            if graded.exists():  # kept for the instructor: the executed notebook with outputs
                (out / "autograded" / student).mkdir(parents=True, exist_ok=True)
                shutil.copy(graded, out / "autograded" / student / graded.name)
            html = root / "feedback" / student / ASSIGNMENT / f"{name}.html"
            if html.exists():
                (out / "feedback" / student).mkdir(parents=True, exist_ok=True)
                shutil.copy(html, out / "feedback" / student / html.name)
    return rows
