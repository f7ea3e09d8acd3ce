"""Release plus autograde of every notebook at `smoke` (issue 14's target: within 5 minutes on
2 cores).

    python benchmarks/bench_course.py [--student instructor|blank] [--jobs N] [--run exercises|all]
                                      [--out FILE]

One call = `flkit course release` of all notebooks, then `flkit course grade` of one student who
submitted every notebook (the instructor versions by default, so every exercise runs to its
end), in a fresh run cache (nothing trained before), `--jobs` notebooks at a time (default: the
number of CPUs, as `flkit course grade`), running only the cells the exercises need (`--run
all`: every cell). Prints the seconds of each step and the CPU seconds of
the whole call (user + sys, the grading processes and kernels included) and appends them to
benchmarks/results/course-smoke.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from flkit.course.nbgrader_run import RUN, grade, release
from flkit.reproduce import discover

RESULTS = Path(__file__).resolve().parent / "results" / "course-smoke.json"


def _cpu_seconds() -> float:
    """user + sys of this process and every finished child (grading workers, kernels)."""
    use = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(u.ru_utime + u.ru_stime for u in use)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--student", default="instructor", choices=("instructor", "blank"))
    ap.add_argument("--jobs", type=int, default=None, help="default: the number of CPUs")
    ap.add_argument("--run", default="exercises", choices=RUN)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-course-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        release(tmp / "release")
        t_release = time.perf_counter() - t0
        subs = tmp / "subs" / args.student
        subs.mkdir(parents=True)
        for name, path in discover().items():
            src = path if args.student == "instructor" else tmp / "release" / f"{name}.ipynb"
            shutil.copy(src, subs / f"{name}.ipynb")
        t0 = time.perf_counter()
        csv_path = grade(tmp / "subs", tmp / "graded", jobs=args.jobs, run=args.run)
        t_grade = time.perf_counter() - t0
        with csv_path.open(encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    row = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "student": args.student,
        "notebooks": len(discover()),
        "exercises": len(rows),
        "points": sum(float(r["points"]) for r in rows),  # full marks: every notebook ran
        "max_points": sum(float(r["max_points"]) for r in rows),
        "release_s": round(t_release, 1),
        "grade_s": round(t_grade, 1),
        "total_s": round(t_release + t_grade, 1),
        "cpu_s": round(_cpu_seconds(), 1),
        "jobs": args.jobs or os.cpu_count(),
        "cpus": os.cpu_count(),
        "run": args.run,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(row))
    old = json.loads(args.out.read_text()) if args.out.exists() else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(old + [row], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
