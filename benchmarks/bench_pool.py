"""Does the run pool pay on this CPU? Two runs packed as two one-thread workers at once (A)
against the same two runs one after another at two threads each (B), the way ``flkit reproduce``
trains with and without ``--no-pool`` on a 2-core machine.

Both go through the pool's own workers (a fresh process per run, so process start-up and data
loading count alike in A and B); every repetition trains into fresh, empty run caches; A and B
alternate (A B A B ...) so that a change in the machine's load hits both. Prints the minimum and
the median wall time of each and their ratio, and with ``--out`` writes them as JSON.

    python benchmarks/bench_pool.py                                   # 02's first two cpu runs
    python benchmarks/bench_pool.py --notebook 00_fl_primer --preset smoke --reps 3  # a check

Run it alone on the machine: anything else running changes both numbers."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # flkit from this checkout

from flkit.reproduce.pool import Pool, PoolPlan  # noqa: E402
from flkit.reproduce.pool_jobs import notebook_jobs  # noqa: E402
from flkit.reproduce.pool_slots import Slots, cpu_cores  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402


def jobs_of(notebook: str, preset: str, count: int, threads: int) -> list:
    """The first ``count`` runs of ``notebook`` at ``preset`` (notebook seed 0), at ``threads``
    torch threads each."""
    jobs = [j for j in notebook_jobs(notebook, preset, [0], {}, threads) if j.kind == "run"]
    if len(jobs) < count:
        raise FlkitError(f"{notebook} at {preset} has {len(jobs)} runs; accepted: --runs <= that")
    return [dataclasses.replace(j, threads=threads) for j in jobs[:count]]


def timed(jobs: list, cores: int, root: Path) -> float:
    """Wall seconds of the pool training ``jobs`` into the empty cache ``root`` on ``cores``."""
    plan = PoolPlan(jobs, Slots(cores), root, log_dir=root / "logs")
    t0 = time.perf_counter()
    for event in Pool(plan).events():
        if event[0] == "done" and event[2]["status"] != "ok":
            raise FlkitError(f"{jobs[event[1]].label()} failed: {event[2]['error']}")
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebook", default="02_feddip")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--runs", type=int, default=2, help="runs per measurement (default: 2)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of A and B (>= 3)")
    ap.add_argument("--out", default=None, help="write the measurements here as JSON")
    a = ap.parse_args(argv)
    if a.reps < 3:
        raise FlkitError(f"--reps {a.reps}; accepted: 3 or more (a minimum and a median)")
    if a.runs < 2:
        raise FlkitError(f"--runs {a.runs}; accepted: 2 or more (something to pack)")
    cores = cpu_cores()
    if cores < 2:
        raise FlkitError(f"this machine gives the process {cores} core; accepted: 2 or more")
    packed = jobs_of(a.notebook, a.preset, a.runs, 1)  # A: one thread each, two at once
    serial = jobs_of(a.notebook, a.preset, a.runs, 2)  # B: two threads each, one at a time
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    scratch = Path(tempfile.mkdtemp(prefix="flkit-bench-pool-"))
    for j in packed + serial:  # the data decoded and checksummed once, before any timing
        j.folder(scratch / "warm")
    times = {"A": [], "B": []}
    try:
        for rep in range(a.reps):
            for mode, jobs in (("A", packed), ("B", serial)):
                root = scratch / f"{mode}{rep}"
                times[mode].append(timed(jobs, 2, root))
                shutil.rmtree(root)
                print(f"rep {rep + 1}/{a.reps} {mode}: {times[mode][-1]:.1f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = {
        "notebook": a.notebook,
        "preset": a.preset,
        "runs": [j.label() for j in packed],
        "reps": a.reps,
        "cores": cores,
        "machine": platform.node(),
        "load_average_at_start": load,
        "A_packed_1_thread_s": times["A"],
        "B_serial_2_threads_s": times["B"],
    }
    for mode in ("A", "B"):
        out[f"{mode}_min_s"] = min(times[mode])
        out[f"{mode}_median_s"] = statistics.median(times[mode])
    out["speedup_median"] = out["B_median_s"] / out["A_median_s"]
    out["speedup_min"] = out["B_min_s"] / out["A_min_s"]
    print(
        f"A (packed, 1 thread each): min {out['A_min_s']:.1f} s, median {out['A_median_s']:.1f} s"
        f"\nB (one after another, 2 threads): min {out['B_min_s']:.1f} s, median "
        f"{out['B_median_s']:.1f} s\nB / A: {out['speedup_median']:.2f} (medians), "
        f"{out['speedup_min']:.2f} (minima)"
    )
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
