"""Does the run pool pay on this CPU? Two comparisons (``--compare``):

- ``threads`` (default): runs packed as one-thread workers, one per core, at once (A) against the
  same runs one after another at two threads each (B): whether ``FLKIT_THREADS=1`` pays on a
  2-core machine. The two compute other runs (a CPU run's floats depend on its thread count).
- ``pool``: a notebook's runs at the thread count they have in ``flkit reproduce`` (the count its
  preset pins, else ``FLKIT_THREADS`` or torch's default), the pool on every core (A) against the
  same runs one after another (B), as a notebook that trains its runs in its kernel does with
  ``--no-pool`` (03's notebook runs its simulations in worker processes of its own). The runs
  are the same, so what each computed (a training's history, less its wall-clock columns, and
  final weights; a simulation's result) must be equal bit for bit in A and B, and the benchmark
  checks that it is.

A run a notebook times (``study.timed``; 04's Table 1 runs) goes alone in ``flkit reproduce``; here
it is packed like any other, since the benchmark measures packing, not that run's times. Both go
through the pool's own workers (B: one worker, A: one per core, each serving run after run, so
process start-up and data loading count alike in A and B); every repetition trains into fresh, empty
run caches; A and B alternate (A B A B ...) so that a change in the machine's load hits both. Prints
the minimum and the median wall time of each and their ratio, and with ``--out`` writes them as
JSON.

    python benchmarks/bench_pool.py                                   # 02's first two cpu runs
    python benchmarks/bench_pool.py --compare pool --notebook 04_hidenseek --runs 4
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

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # flkit from this checkout

from flkit.experiment import computed_history  # noqa: E402
from flkit.reproduce.plan import run_threads  # noqa: E402
from flkit.reproduce.pool import Pool, PoolPlan  # noqa: E402
from flkit.reproduce.pool_jobs import notebook_jobs  # noqa: E402
from flkit.reproduce.pool_slots import Slots, cpu_cores, packs  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402


def jobs_of(notebook: str, preset: str, count: int, threads: int | None) -> list:
    """The first ``count`` runs of ``notebook`` at ``preset`` (notebook seed 0; trainings or
    FedAST simulations), at ``threads`` torch threads each, or (None) at the count ``flkit
    reproduce`` gives them."""
    # packed even where timed: what packing costs or gains is measured here, not a run's times
    jobs = [
        dataclasses.replace(j, timed=False)
        for j in notebook_jobs(notebook, preset, [0], {}, run_threads())
    ]
    if len(jobs) < count:
        raise FlkitError(f"{notebook} at {preset} has {len(jobs)} runs; accepted: --runs <= that")
    if threads is None:
        return jobs[:count]
    return [dataclasses.replace(j, threads=threads) for j in jobs[:count]]


def fingerprint(job, root: Path) -> tuple:
    """What a run computed, less its wall-clock times: a training's history.csv without its
    ``*_seconds`` columns and its final weights' bytes; a simulation's result.json without its
    ``*_seconds`` statistics."""
    folder = job.folder(root)
    if job.kind == "simulation":
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        result["stats"] = {k: v for k, v in result["stats"].items() if not k.endswith("_seconds")}
        return (result,)
    history = computed_history(folder)
    state = torch.load(folder / "final_state.pt", map_location="cpu", weights_only=False)
    weights = {k: v.numpy().tobytes() for k, v in state.items() if torch.is_tensor(v)}
    return history, weights


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
    ap.add_argument("--compare", choices=("threads", "pool"), default="threads")
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
    if a.compare == "threads":
        packed = jobs_of(a.notebook, a.preset, a.runs, 1)  # A: one thread each, one per core
        serial = jobs_of(a.notebook, a.preset, a.runs, 2)  # B: two threads each, one at a time
        serial_cores = 2
        names = ("packed, 1 thread each", "one after another, 2 threads each")
    else:
        packed = serial = jobs_of(a.notebook, a.preset, a.runs, None)  # their own thread count
        threads = packed[0].threads
        if not packs(threads, cores):
            raise FlkitError(
                f"{a.notebook}'s runs compute with {threads} threads, so {cores} cores hold one "
                f"at a time and the pool has nothing to pack; accepted: a notebook whose preset "
                f"pins fewer threads, or FLKIT_THREADS <= {cores // 2}"
            )
        serial_cores = threads  # one at a time, as the notebook trains them with --no-pool
        names = (f"the pool on {cores} cores", f"one after another ({threads} thread(s) each)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    scratch = Path(tempfile.mkdtemp(prefix="flkit-bench-pool-"))
    for j in packed + serial:  # the data decoded and checksummed once, before any timing
        j.folder(scratch / "warm")
    times = {"A": [], "B": []}
    same = None
    try:
        for rep in range(a.reps):
            for mode, jobs, use in (("A", packed, cores), ("B", serial, serial_cores)):
                root = scratch / f"{mode}{rep}"
                times[mode].append(timed(jobs, use, root))
                if a.compare == "pool" and rep == 0:  # the same runs: the same numbers
                    printed = [fingerprint(j, root) for j in jobs]
                    if mode == "A":
                        first = printed
                    else:
                        same = printed == first
                        if not same:
                            bad = [j.label() for j, x, y in zip(jobs, first, printed) if x != y]
                            raise FlkitError(f"packed and alone differ for {', '.join(bad)}")
                shutil.rmtree(root)
                print(f"rep {rep + 1}/{a.reps} {mode}: {times[mode][-1]:.1f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = {
        "compare": a.compare,
        "notebook": a.notebook,
        "preset": a.preset,
        "runs": [j.label() for j in packed],
        "threads": {"A": packed[0].threads, "B": serial[0].threads},
        "reps": a.reps,
        "cores": cores,
        "machine": platform.node(),
        "load_average_at_start": load,
        "A": names[0],
        "B": names[1],
        "A_s": times["A"],
        "B_s": times["B"],
        "same_numbers": same,
    }
    for mode in ("A", "B"):
        out[f"{mode}_min_s"] = min(times[mode])
        out[f"{mode}_median_s"] = statistics.median(times[mode])
    out["speedup_median"] = out["B_median_s"] / out["A_median_s"]
    out["speedup_min"] = out["B_min_s"] / out["A_min_s"]
    print(
        f"A ({names[0]}): min {out['A_min_s']:.1f} s, median {out['A_median_s']:.1f} s"
        f"\nB ({names[1]}): min {out['B_min_s']:.1f} s, median {out['B_median_s']:.1f} s"
        f"\nB / A: {out['speedup_median']:.2f} (medians), {out['speedup_min']:.2f} (minima)"
        + ("" if same is None else "\nwhat every run computed: equal in A and B")
    )
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
