"""The throwaway nbgrader course folder every release and grading call works in.

``generate(root, notebooks)`` lays out ``root/source/flkit/`` (the instructor notebooks, with
their solutions and hidden tests) and runs nbgrader's ``generate_assignment``, which writes the
student version into ``root/release/flkit/`` and records the graded cells in
``root/gradebook.db``. All notebooks form one nbgrader assignment, ``flkit``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ..utils import FlkitError, environment

ASSIGNMENT = "flkit"


def release_config():
    """nbgrader's configuration as the release step applies it (its preprocessors' defaults:
    nothing here changes how solutions and hidden tests are cleared); FlkitError when nbgrader
    is missing. :func:`config` builds on it, and so does the book's student version of the
    graded cells (:mod:`.student_version`)."""
    try:
        import nbgrader  # noqa: F401
    except ImportError as e:
        raise FlkitError(
            "flkit course and the book need nbgrader: pip install 'flkit[course]' "
            "(or nbgrader>=0.9)"
        ) from e
    from traitlets.config import Config

    return Config()


def config(root: Path, cell_timeout: int, notebook_timeout: float = 0, pid_file: str = ""):
    c = release_config()  # first: it says how to install nbgrader when it is missing
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader import preprocessors as pp

    from .kernel_limits import LimitedExecute

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
    # nbgrader's autograde steps with its Execute replaced by one that kills a kernel which does
    # not stop at its cell timeout and bounds the notebook's total time (.kernel_limits)
    c.Autograde.autograde_preprocessors = [
        LimitedExecute,
        pp.IgnorePattern,
        ClearMetadataPreprocessor,
        pp.LimitOutput,
        pp.SaveAutoGrades,
        pp.AssignLatePenalties,
        pp.CheckCellMetadata,
    ]
    c.LimitedExecute.notebook_timeout = float(notebook_timeout)
    c.LimitedExecute.pid_file = str(pid_file)
    return c


def course_api(root: Path, cell_timeout: int = 120, notebook_timeout: float = 0, pid_file=""):
    """nbgrader's API on the course folder ``root``: cells interrupted after ``cell_timeout``
    seconds (their kernel killed if they do not stop), the notebook's kernel killed after
    ``notebook_timeout`` seconds in all (0: no total limit), its process group in ``pid_file``."""
    c = config(
        root, cell_timeout, notebook_timeout, pid_file
    )  # first: it says how to install nbgrader when it is missing
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    return NbGraderAPI(coursedir=CourseDirectory(config=c), config=c)


def generate(
    root: Path, notebooks: dict[str, Path], cell_timeout: int = 120, contents: dict | None = None
):
    """A course folder at ``root`` with the instructor notebooks released (gradebook filled).

    ``contents``: {name: notebook JSON} to use instead of a notebook's file (the grading copy,
    whose hidden tests call the sealed checks). Nothing is executed: nbgrader only removes the
    solutions and hidden tests and records the graded cells."""
    src = root / "source" / ASSIGNMENT
    src.mkdir(parents=True)
    for name, path in notebooks.items():
        if contents and name in contents:
            (src / f"{name}.ipynb").write_text(json.dumps(contents[name]), encoding="utf-8")
        else:
            shutil.copy(path, src / f"{name}.ipynb")
    api = course_api(root, cell_timeout)
    # nbgrader runs the `alembic` script of its own environment to create the gradebook
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    with environment(PATH=path if bindir in path.split(os.pathsep) else bindir + os.pathsep + path):
        res = api.generate_assignment(ASSIGNMENT)
    if not res["success"]:
        log = "\n".join((res.get("log") or "").strip().splitlines()[-15:])
        raise FlkitError(f"nbgrader generate_assignment failed:\n{log}")
    return api
