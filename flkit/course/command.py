"""``flkit course release DIR`` and ``flkit course grade SUBMISSIONS_DIR``."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

NOTEBOOK_TIMEOUT = 1800  # nbgrader_run.NOTEBOOK_TIMEOUT, without importing nbgrader for --help

_EPILOG = """examples:
  flkit course release course/release           student notebooks (no solutions, no hidden tests)
  flkit course grade course/submissions         grades.csv + feedback/<student>/<notebook>.html
  flkit course grade subs --only 01 --out graded --cell-timeout 60 --jobs 2 --run all
  flkit course grade subs --notebook-timeout 600  each notebook's grading ends within 10 min

submissions layout: SUBMISSIONS_DIR/<student>/<notebook>.ipynb (the released file names).
See docs/TEACHING.md."""


def register_cli(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "course",
        help="release student notebooks and autograde submissions (nbgrader)",
        description="Course assignments with nbgrader: release the student version of the "
        "notebooks, autograde submitted notebooks.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="course_command", metavar="{release,grade}")
    r = sub.add_parser("release", help="write the student notebooks into DIR")
    r.add_argument("dir", type=Path, help="folder for the released notebooks")
    g = sub.add_parser("grade", help="autograde SUBMISSIONS_DIR/<student>/*.ipynb")
    g.add_argument("submissions", type=Path, help="folder of student folders")
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
        type=int,
        default=None,
        help="notebooks graded at a time, each in its own process (default: the number of CPUs)",
    )
    for q in (r, g):
        q.add_argument(
            "--only",
            nargs="+",
            metavar="NAME",
            help="only these notebooks (e.g. 01 or stc_projection); default: all",
        )
        q.add_argument(
            "--notebooks", type=Path, help="folder of instructor notebooks (default: notebooks/)"
        )
    r.set_defaults(func=cmd_release)
    g.set_defaults(func=cmd_grade)
    p.set_defaults(func=lambda args: p.print_help() or 2)
    return p


def cmd_release(args) -> int:
    from .nbgrader_run import release

    for path in release(args.dir, args.notebooks, args.only):
        print(f"released {path}")
    return 0


def cmd_grade(args) -> int:
    from .nbgrader_run import grade

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
