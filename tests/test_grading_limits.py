"""Grading always ends: a submission that ignores the cell timeout's interrupt has its kernel
killed and is recorded as timed out, a notebook has a total time limit, a plain endless loop in an
answer cell is recorded as timed out (not as the NameError its check then raises), and a student's
notebook never reads the run cache another submission wrote."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("nbgrader")

ROOT = Path(__file__).resolve().parent.parent
PRIMER = ROOT / "notebooks" / "00_fl_primer.ipynb"

#: an answer that swallows the interrupt the cell timeout sends
STUBBORN = (
    "import time\n"
    "while True:\n"
    "    try:\n"
    "        time.sleep(0.5)\n"
    "    except KeyboardInterrupt:\n"
    "        pass\n"
)


def _with_answer(dest: Path, grade_id: str, source: str) -> None:
    """Notebook 00 (the instructor version: every answer right) with ``source`` put first in
    the answer cell ``grade_id``."""
    nb = json.loads(PRIMER.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            c["source"] = source + "".join(c["source"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb), encoding="utf-8")


def _grade(subs: Path, out: Path, *options: str, limit: float) -> dict:
    """``flkit course grade`` in a process of its own, stopped after ``limit`` seconds (the code
    this replaces never ended); {(student, exercise): row}."""
    cmd = [sys.executable, "-m", "flkit", "course", "grade", str(subs), "--out", str(out)]
    start = time.monotonic()
    try:
        subprocess.run(
            [*cmd, "--only", "00", "--jobs", "1", *options], cwd=ROOT, timeout=limit, check=True
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"grading did not end within {limit} s")
    print(f"graded in {time.monotonic() - start:.0f} s")
    with (out / "grades.csv").open(encoding="utf-8") as f:
        return {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}


@pytest.mark.slow
def test_a_submission_that_ignores_the_interrupt_is_killed_and_recorded(tmp_path):
    subs = tmp_path / "subs"
    _with_answer(subs / "stubborn" / PRIMER.name, "primer_a_answer", STUBBORN)
    _with_answer(subs / "loop" / PRIMER.name, "primer_a_answer", "while True:\n    pass\n")
    # a submission that plants a finished run in the cache its notebook writes to
    plant = (
        "import os\nos.makedirs(os.environ['FLKIT_RUNS'], exist_ok=True)\n"
        "open(os.path.join(os.environ['FLKIT_RUNS'], 'planted'), 'w').close()\n"
    )
    _with_answer(subs / "planter" / PRIMER.name, "primer_b_answer", plant)
    seen = (
        "import os\nassert not os.path.exists(os.path.join(os.environ['FLKIT_RUNS'], 'planted'))\n"
    )
    _with_answer(subs / "reader" / PRIMER.name, "primer_b_answer", seen)
    # a cell timeout long enough for the check cells' imports on a busy machine
    rows = _grade(subs, tmp_path / "out", "--cell-timeout", "30", limit=480)

    a, b, c = "primer_a_upload_bytes", "primer_b_weighted_average", "primer_c_fedavgm"
    # the stubborn cell: timed out, its kernel killed, the exercises after it not run
    assert float(rows["stubborn", a]["points"]) == 0
    assert rows["stubborn", a]["note"].startswith("timed out"), rows["stubborn", a]["note"]
    assert "killed" in rows["stubborn", a]["note"]
    for ex in (b, c):
        assert float(rows["stubborn", ex]["points"]) == 0
        assert "not run" in rows["stubborn", ex]["note"]
    # the plain loop: interrupted, "timed out" (not its check's NameError), the rest graded
    assert float(rows["loop", a]["points"]) == 0
    assert rows["loop", a]["note"].startswith("timed out"), rows["loop", a]["note"]
    assert "NameError" not in rows["loop", a]["note"]
    for ex in (b, c):
        assert float(rows["loop", ex]["points"]) == float(rows["loop", ex]["max_points"]) > 0
    # the planted run stays in the planter's own cache (its check cells pass: its answers stand)
    assert float(rows["reader", b]["points"]) == float(rows["reader", b]["max_points"])
    assert float(rows["planter", b]["points"]) == float(rows["planter", b]["max_points"])


@pytest.mark.slow
def test_a_notebook_past_its_total_time_limit_is_killed(tmp_path):
    subs = tmp_path / "subs"
    sleeper = "import time\ntime.sleep(10**6)\n"  # interruptible, but the cell limit is far
    _with_answer(subs / "sleeper" / PRIMER.name, "primer_b_answer", sleeper)
    options = ("--cell-timeout", "600", "--notebook-timeout", "25")
    rows = _grade(subs, tmp_path / "out", *options, limit=200)
    note = rows["sleeper", "primer_b_weighted_average"]["note"]
    assert "total time limit of 25 s" in note and note.startswith("timed out"), note
    assert float(rows["sleeper", "primer_c_fedavgm"]["points"]) == 0
    assert float(rows["sleeper", "primer_a_upload_bytes"]["points"]) == 1
