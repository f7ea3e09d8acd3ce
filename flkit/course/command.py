"""``flkit course student [DIR]``, ``flkit course release DIR`` and ``flkit course grade
SUBMISSIONS_DIR``."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from ..utils import add_quiet_argument

NOTEBOOK_TIMEOUT = 1800  # nbgrader_run.NOTEBOOK_TIMEOUT, without importing nbgrader for --help
#: reproduce.command.JOBS, without importing the notebook runner for --help: one notebook graded
#: at a time unless --jobs says more (the grades never depend on it; a shared machine stays usable)
JOBS = 1
#: where ``flkit course student`` writes, at the project root (git-ignored): `make lab LAB=student`
STUDENT_DIR = "student"

_EPILOG = """examples:
  flkit course student                          the notebooks without answers in student/
  flkit course release course/release           student notebooks (no solutions, no hidden tests)
  flkit course grade course/submissions         grades.csv + feedback/<student>/<notebook>.html
  flkit course grade subs --only 01 --out graded --cell-timeout 60 --jobs 2 --run all
  flkit course grade subs --notebook-timeout 600  each notebook's grading ends within 10 min

student is for self-study (open student/ with `make lab LAB=student`; each exercise's check cell
says right, wrong with a hint, or not attempted); release is what an instructor hands out, to
collect and grade. Both are nbgrader's release step; the repository's notebooks/ hold the answers.
submissions layout: SUBMISSIONS_DIR/<student>/<notebook>.ipynb (the released file names).
See docs/TEACHING.md."""


def _add_selection(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="only these notebooks (e.g. 01 or stc_projection); default: all",
    )
    q.add_argument(
        "--notebooks",
        type=Path,
        help="folder of instructor notebooks, with the answers (default: notebooks/)",
    )


def register_cli(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "course",
        help="student notebooks without answers, for study or a course, and autograding",
        description="The notebooks' graded exercises with nbgrader: a student copy for "
        "self-study, the student version released for a course, and autograding of the "
        "submitted notebooks.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="course_command", metavar="{student,release,grade}")
    st = sub.add_parser(
        "student",
        help="write the notebooks without answers into student/ for self-study",
        description="Write the student version of the notebooks (nbgrader's release step: "
        "answer cells emptied, hidden tests removed) into DIR, for study on your own: open it "
        "with `make lab LAB=student`. The check cells still say right, wrong with a hint, or "
        "not attempted.",
    )
    st.add_argument(
        "dir",
        type=Path,
        nargs="?",
        default=None,
        help=f"folder for the student notebooks (default: {STUDENT_DIR}/ at the project root)",
    )
    st.add_argument(
        "--force",
        action="store_true",
        help="overwrite the notebooks already in the folder, and the answers written in them "
        "(default: off, a folder that holds notebooks is refused)",
    )
    r = sub.add_parser(
        "release",
        help="write the student notebooks into DIR, to hand out for a course",
        description="Write the student version of the notebooks (answer cells emptied, hidden "
        "tests removed; nbgrader's generate_assignment) into DIR, to hand out; collect the "
        "students' copies and grade them with `flkit course grade`.",
    )
    r.add_argument("dir", type=Path, help="folder for the released notebooks")
    g = sub.add_parser(
        "grade",
        help="autograde SUBMISSIONS_DIR/<student>/*.ipynb",
        description="Autograde every submitted notebook with nbgrader: grades.csv, nbgrader's "
        "feedback HTML per student and notebook, and the executed notebooks; one line per "
        "graded submission as it finishes.",
    )
    g.add_argument(
        "submissions",
        type=Path,
        help="folder of student folders, each holding that student's notebooks",
    )
    g.add_argument(
        "--out",
        type=Path,
        help="folder for grades.csv, feedback/ and autograded/ (default: SUBMISSIONS-graded "
        "beside the submissions folder)",
    )
    g.add_argument(
        "--preset",
        default="smoke",
        help="preset the notebooks run at while grading (default: %(default)s)",
    )
    g.add_argument(
        "--cell-timeout",
        type=int,
        default=120,
        help="seconds before a cell is interrupted; a cell that does not stop then has its "
        "kernel killed (default: %(default)s)",
    )
    g.add_argument(
        "--notebook-timeout",
        type=float,
        default=NOTEBOOK_TIMEOUT,
        help="total seconds one notebook's grading may take; its kernel is then killed and the "
        "exercises not graded by then score 0, 'timed out' (default: %(default)s)",
    )
    g.add_argument(
        "--run",
        choices=("exercises", "all"),
        default="exercises",
        help="run only the cells the exercises need (default), or every cell of the notebooks "
        "(slower; the same grades, and autograded/ then shows every result)",
    )
    g.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=JOBS,
        metavar="N",
        help="how many notebooks are graded at a time, each in its own process (default: "
        "%(default)s; the grades never depend on it)",
    )
    add_quiet_argument(g, "no line per graded submission, only the totals (default: off)")
    for q in (st, r, g):
        _add_selection(q)
    st.set_defaults(func=cmd_student)
    r.set_defaults(func=cmd_release)
    g.set_defaults(func=cmd_grade)
    p.set_defaults(func=lambda args: p.print_help() or 2)
    return p


def cmd_student(args) -> int:
    from ..paths import anchored
    from ..utils import FlkitError
    from .nbgrader_run import release

    dest = args.dir if args.dir is not None else anchored(STUDENT_DIR)
    held = sorted(p.name for p in dest.glob("*.ipynb")) if dest.is_dir() else []
    if held and not args.force:
        # a student's answers live in these copies: a rebuild must not wipe them unasked
        raise FlkitError(
            f"{dest} holds notebooks already ({', '.join(held)}), perhaps with your answers; "
            "accepted: an empty or new folder, or --force to overwrite them"
        )
    paths = release(dest, args.notebooks, args.only)
    for path in paths:
        print(f"wrote {path}")
    print(
        f"{len(paths)} notebook(s) without answers in {dest}; open them with "
        f"`make lab LAB={dest}` (or `jupyter lab {dest}`)"
    )
    return 0


def cmd_release(args) -> int:
    from .nbgrader_run import release

    for path in release(args.dir, args.notebooks, args.only):
        print(f"released {path}")
    return 0


def cmd_grade(args) -> int:
    from .nbgrader_run import grade

    def progress(outcome, done: int, total: int) -> None:
        if outcome.failure:
            how = outcome.failure
        else:
            how = f"graded, {sum(outcome.scores.values()):g} points"
        print(
            f"flkit course grade: {done}/{total} {outcome.student} {outcome.notebook}: {how}",
            file=sys.stderr,
            flush=True,
        )

    path = grade(
        args.submissions,
        args.out,
        args.notebooks,
        args.only,
        args.preset,
        args.cell_timeout,
        args.jobs,
        args.run,
        args.notebook_timeout,
        progress=None if args.quiet else progress,
    )
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    totals: dict[str, list[float]] = {}
    for r in rows:
        t = totals.setdefault(r["student"], [0.0, 0.0])
        t[0] += float(r["points"])
        t[1] += float(r["max_points"])
    for student, (got, most) in totals.items():
        print(f"{student}: {got:g} / {most:g} points")
    print(f"grades: {path}; feedback: {path.parent / 'feedback'}")
    return 0
