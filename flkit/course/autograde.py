"""Autograde submissions one (student, notebook) at a time, ``jobs`` of them in parallel.

Each task runs nbgrader's ``autograde`` and ``generate_feedback`` in a course folder of its own
(``<root>/work/<student>/<notebook>/``): a copy of the released course's gradebook and instructor
source plus the one submitted notebook. Parallel tasks therefore never write to the same sqlite
gradebook (there is no concurrent writer to serialise and no lock to wait on), and a task that
fails leaves the other tasks' grades intact; the parent collects each task's scores. Every task
runs in a process of its own (spawned: no forked kernel-manager state), ``jobs`` at a time, with
a run cache and a machine folder of its own (``FLKIT_RUNS``/``FLKIT_RUNS_DIR``/
``FLKIT_MACHINE_DIR`` in its course folder): what one submission writes there is never read by
another's notebook or by the instructor's runs.

Grading always ends: the kernel of a cell that does not stop at its timeout is killed, and so is
a notebook's kernel at its total time limit (:mod:`.kernel_limits`). Should a task still run
``MARGIN`` seconds past that limit (nbgrader itself stuck), its process and its kernel's process
group are killed and the notebook is recorded as timed out; the other tasks go on.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .course_dir import ASSIGNMENT, course_api, environment

#: seconds a task may run past its notebook's time limit (nbgrader's own set-up, the feedback)
#: before its process is killed
MARGIN = 120.0


@dataclass(frozen=True)
class Task:
    root: str  # the course folder that generate_assignment filled
    student: str
    notebook: str
    cell_timeout: int
    notebook_timeout: float = 1800.0

    @property
    def folder(self) -> Path:
        """The task's own course folder."""
        return Path(self.root) / "work" / self.student / self.notebook


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
    own = task.folder
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
        api = course_api(own, task.cell_timeout, task.notebook_timeout, own / "kernel.pgid")
        # the kernel inherits a run cache and a machine folder (decoded data) of this task's
        # own, whatever the environment says: a submission poisons no one else's data
        runs = own / "runs"
        with environment(
            FLKIT_RUNS_DIR=runs, FLKIT_RUNS=runs / "cache", FLKIT_MACHINE_DIR=runs / "machine"
        ):
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


def _work(task: Task) -> None:
    """Grade ``task`` in a worker process; its outcome goes to ``outcome.json`` in its folder."""
    out = grade_one(task)
    tmp = task.folder / "outcome.json.tmp"
    tmp.write_text(json.dumps(asdict(out)), encoding="utf-8")
    os.replace(tmp, task.folder / "outcome.json")


def _kill(task: Task, proc) -> None:
    """Kill a task's process and its kernel's process group (the kernel runs in its own)."""
    proc.kill()
    proc.join()
    try:
        os.killpg(int((task.folder / "kernel.pgid").read_text(encoding="utf-8")), signal.SIGKILL)
    except (OSError, ValueError):  # no kernel started, or it is gone already
        pass


def _collect(task: Task, proc) -> Outcome:
    try:
        return Outcome(**json.loads((task.folder / "outcome.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        why = f"autograde failed: the grading process ended with exit code {proc.exitcode}"
        return Outcome(task.student, task.notebook, failure=why)


def grade_all(tasks: list[Task], jobs: int, poll: float = 0.2, on_done=None) -> list[Outcome]:
    """:func:`grade_one` of every task, ``jobs`` at a time, each in a process of its own that is
    killed ``MARGIN`` seconds after its notebook's time limit; outcomes in the order of
    ``tasks``. ``on_done(outcome, finished so far, len(tasks))`` as each task ends."""
    ctx = mp.get_context("spawn")
    waiting, running, done = list(tasks), {}, {}
    while waiting or running:
        while waiting and len(running) < jobs:
            task = waiting.pop(0)
            proc = ctx.Process(target=_work, args=(task,), daemon=True)
            proc.start()
            running[task] = (proc, time.monotonic() + task.notebook_timeout + MARGIN)
        for task, (proc, deadline) in list(running.items()):
            if not proc.is_alive():
                proc.join()
                done[task] = _collect(task, proc)
            elif time.monotonic() > deadline:
                _kill(task, proc)
                why = (
                    f"timed out: grading ran past the notebook's total time limit of "
                    f"{task.notebook_timeout:g} s and was stopped"
                )
                done[task] = Outcome(task.student, task.notebook, failure=why)
            else:
                continue
            del running[task]
            if on_done is not None:
                on_done(done[task], len(done), len(tasks))
        time.sleep(poll)
    return [done[t] for t in tasks]
