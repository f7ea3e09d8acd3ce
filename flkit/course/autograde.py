"""Autograde submissions one (student, notebook) at a time, ``jobs`` of them in parallel.

Each task runs nbgrader's ``autograde`` and ``generate_feedback`` in a course folder of its own
(``<root>/work/<student>/<notebook>/``): a copy of the released course's gradebook and instructor
source plus the one submitted notebook. Parallel tasks therefore never write to the same sqlite
gradebook (there is no concurrent writer to serialise and no lock to wait on), and a task that
fails leaves the other tasks' grades intact; the parent collects each task's scores. With
``jobs > 1`` the tasks run in separate processes (spawned: no forked kernel-manager state);
``jobs == 1`` runs them in this process, one after another. Both paths run the same
:func:`grade_one`, and both give the same points (``tests/test_course.py``).
"""

from __future__ import annotations

import multiprocessing as mp
import re
import shutil
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .course_dir import ASSIGNMENT, course_api


@dataclass(frozen=True)
class Task:
    root: str  # the course folder that generate_assignment filled
    student: str
    notebook: str
    cell_timeout: int


@dataclass
class Outcome:
    student: str
    notebook: str
    scores: dict[str, float] = field(default_factory=dict)  # {grade_id: points}
    failure: str = ""  # why nbgrader could not grade the notebook ("" when it could)
    autograded: str | None = None  # the executed notebook
    feedback: str | None = None  # its feedback HTML


def _failure(res: dict) -> str:
    log = (res.get("error") or "") + "\n" + (res.get("log") or "")
    why = [ln.strip() for ln in log.splitlines() if re.match(r"\s*\w+(Error|Exception)", ln)]
    return f"autograde failed: {why[-1] if why else 'see nbgrader log'}"


def grade_one(task: Task) -> Outcome:
    """Autograde ``<root>/submitted/<student>/flkit/<notebook>.ipynb`` in a course folder of
    its own."""
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(task.root)
    own = root / "work" / task.student / task.notebook
    sub = own / "submitted" / task.student / ASSIGNMENT
    sub.mkdir(parents=True)
    shutil.copytree(root / "source", own / "source")
    shutil.copy(root / "gradebook.db", own / "gradebook.db")
    name = f"{task.notebook}.ipynb"
    shutil.copy(root / "submitted" / task.student / ASSIGNMENT / name, sub / name)
    out = Outcome(task.student, task.notebook)
    with warnings.catch_warnings():
        # nbgrader's gradebook warns about its own session handling on every autograde
        warnings.filterwarnings("ignore", message=".*not in session.*")
        api = course_api(own, task.cell_timeout)
        res = api.autograde(ASSIGNMENT, task.student)
        if res["success"]:
            api.generate_feedback(ASSIGNMENT, task.student)
        else:
            out.failure = _failure(res)
        with Gradebook(api.coursedir.db_url, ASSIGNMENT) as gb:
            try:
                nb = gb.find_submission_notebook(task.notebook, ASSIGNMENT, task.student)
                out.scores = {g.name: float(g.score) for g in nb.grades if g.score is not None}
            except MissingEntry:  # nothing recorded: every exercise scores 0
                pass
    graded = own / "autograded" / task.student / ASSIGNMENT / name
    html = own / "feedback" / task.student / ASSIGNMENT / f"{task.notebook}.html"
    out.autograded = str(graded) if graded.exists() else None
    out.feedback = str(html) if html.exists() else None
    return out


def grade_all(tasks: list[Task], jobs: int) -> list[Outcome]:
    """:func:`grade_one` of every task, ``jobs`` at a time; outcomes in the order of ``tasks``."""
    if jobs == 1 or len(tasks) <= 1:
        return [grade_one(t) for t in tasks]
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
        futures = [pool.submit(grade_one, t) for t in tasks]
        outcomes = []
        for t, fut in zip(tasks, futures):
            try:
                outcomes.append(fut.result())
            except Exception as e:  # noqa: BLE001 - the worker died: grade the rest, say why
                why = f"autograde failed: {type(e).__name__}: {str(e)[:120]}"
                outcomes.append(Outcome(t.student, t.notebook, failure=why))
    return outcomes
