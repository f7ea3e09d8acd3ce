"""Start-up of `flkit run` against the naive per-client loop, as whole processes, interleaved.

Workload R1 (FedAvg, 10 clients x 5 local epochs x 600 MNIST images, LeNet-5, evaluation every
round) at one batch size over a few rounds. Each command runs as its own process, in turn
(A B A B ...), after one untimed warm-up each:

  flkit  python -m flkit run fedavg ... --cache <fresh folder> --no-progress  (backend auto)
  naive  python benchmarks/naive_fedavg.py --batch-size B --rounds R
  torch  python -c "import torch"  (the floor: the interpreter and torch, which both pay)

A process's start-up is the time from its spawn to the start of its first round, which the process
records itself (flkit: ``rounds_started_unix`` in the run folder's meta.json; the naive loop: the
same value printed). Also given: the wall time less the time its rounds took (flkit:
``wall_seconds`` of meta.json; the naive loop: its printed ``seconds_per_round`` times R), which
adds what comes after the last round (flkit writes its run folder there): an upper bound, and the
only figure for a checkout that records no start time. The floor's start-up is the time from its
spawn to the end of ``import torch``: what either command does beyond it is its own start-up work.
Since the machine's speed drifts during a series, flkit's start-up is also compared with the naive
loop's of the same round of the rotation: the median of those pair-by-pair differences, and in how
many pairs flkit's was at most the loop's.

Every flkit run gets a fresh run cache, so it trains instead of loading; the machine folder
(decoded datasets, backend choices; ``flkit.paths.machine_dir``), one scratch folder for the
series, is filled by the warm-up, as on a user's machine after its first run. ``--cold`` gives
every flkit run a fresh machine folder too (it then decodes, hashes and measures its backend).
``--flkit-root DIR`` runs another checkout's flkit (its own package, the same Python), e.g. the
code before a change, as a third command in the rotation. ``--epochs 1 --rounds 1 --repeats 1``
checks that the harness works (not a measurement).

    python benchmarks/bench_startup.py --batch-size 50 --rounds 3 --repeats 3
    python benchmarks/bench_startup.py --flkit-root /tmp/before --repeats 3

Writes benchmarks/results/startup-b<B>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def flkit_command(batch: int, rounds: int, epochs: int, cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "flkit",
        "run",
        "fedavg",
        "--dataset",
        "mnist",
        "--model",
        "lenet5",
        "--clients",
        "10",
        "--clients-per-round",
        "10",
        "--partition",
        "iid",
        "--train-subset",
        "6000",
        "--local-epochs",
        str(epochs),
        "--batch-size",
        str(batch),
        "--lr",
        "0.05",
        "--rounds",
        str(rounds),
        "--seed",
        "0",
        "--cache",
        str(cache),
        "--no-progress",
    ]


def naive_command(batch: int, rounds: int, epochs: int) -> list[str]:
    return [
        sys.executable,
        str(HERE / "naive_fedavg.py"),
        "--batch-size",
        str(batch),
        "--rounds",
        str(rounds),
        "--epochs",
        str(epochs),
    ]


FLOOR = "import time; import torch; print(f'imported_unix {time.time():.6f}')"


def floor_command() -> list[str]:
    return [sys.executable, "-c", FLOOR]


def _timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, str, float]:
    spawned, t = time.time(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, done.stdout, spawned


def child_env(scratch: Path) -> dict:
    """The environment of every timed process: this series' machine folder, and Python's bytecode
    cache on, as in a user's installation. With PYTHONDONTWRITEBYTECODE set (some shells and
    containers set it) every process compiles each module it imports from source, and a run
    imports more of the checkout than the naive loop does: the warm-up writes the .pyc files."""
    env = dict(os.environ, FLKIT_MACHINE_DIR=str(scratch / "machine"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_flkit(checkout: Path, args, scratch: Path, env: dict) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=scratch))
    run_env = dict(env)
    if args.cold:
        run_env["FLKIT_MACHINE_DIR"] = tempfile.mkdtemp(prefix="machine-", dir=scratch)
    cmd = flkit_command(args.batch_size, args.rounds, args.epochs, cache)
    wall, out, spawned = _timed(cmd, checkout, run_env)
    (meta,) = cache.glob("*/meta.json")
    meta = json.loads(meta.read_text())
    rounds = meta["wall_seconds"]
    first = meta.get("rounds_started_unix")
    startup = None if first is None else first - spawned
    return {"wall": wall, "rounds": rounds, "startup": startup, "upper": wall - rounds}


def run_naive(args, env: dict) -> dict:
    wall, out, spawned = _timed(naive_command(args.batch_size, args.rounds, args.epochs), ROOT, env)
    per_round = float(re.search(r"seconds_per_round ([0-9.]+)", out).group(1))
    first = float(re.search(r"rounds_started_unix ([0-9.]+)", out).group(1))
    rounds = per_round * args.rounds
    return {"wall": wall, "rounds": rounds, "startup": first - spawned, "upper": wall - rounds}


def run_floor(env: dict) -> dict:
    wall, out, spawned = _timed(floor_command(), ROOT, env)
    first = float(re.search(r"imported_unix ([0-9.]+)", out).group(1))
    return {"wall": wall, "rounds": 0.0, "startup": first - spawned, "upper": wall}


def pairs(rows: dict, a: str = "flkit", b: str = "naive") -> dict:
    """``a``'s start-up less ``b``'s, run by run of the rotation (the i-th run of each was timed
    in the same turn): the median difference and in how many turns ``a`` was at most ``b``."""
    diffs = [ra["startup"] - rb["startup"] for ra, rb in zip(rows[a], rows[b], strict=True)]
    if not diffs:
        raise ValueError(f"no runs of {a!r} and {b!r} to pair")
    return {
        "differences": diffs,
        "median_difference": statistics.median(diffs),
        "at_most": sum(d <= 0 for d in diffs),
        "pairs": len(diffs),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5, help="local epochs (R1: 5)")
    ap.add_argument("--repeats", type=int, default=3, help="counted runs per command (default 3)")
    ap.add_argument("--cold", action="store_true", help="a fresh machine cache for every run")
    ap.add_argument(
        "--flkit-root", type=Path, default=None, help="another checkout's flkit as a third command"
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON file (default: results/...)")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.rounds < 1:
        raise SystemExit("--repeats and --rounds must be >= 1")
    if args.flkit_root is not None and not (args.flkit_root / "flkit" / "cli.py").is_file():
        raise SystemExit(f"--flkit-root {args.flkit_root}: no flkit/cli.py there")
    scratch = Path(tempfile.mkdtemp(prefix="flkit-startup-"))
    load_before = os.getloadavg()[0]
    # one machine folder for the whole series, filled by the warm-up runs: a user's machine after
    # its first run (the user's own runs/machine is left alone)
    env = child_env(scratch)
    commands = {"flkit": lambda: run_flkit(ROOT, args, scratch, env)}
    commands["naive"] = lambda: run_naive(args, env)
    commands["torch"] = lambda: run_floor(env)
    if args.flkit_root is not None:
        commands["flkit@root"] = lambda: run_flkit(args.flkit_root.resolve(), args, scratch, env)
    for run in commands.values():  # warm-up: page cache, .pyc files, machine cache
        run()
    rows = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, run in commands.items():
            rows[name].append(run())

    def median(runs, k):
        values = [r[k] for r in runs if r[k] is not None]
        return statistics.median(values) if values else None

    keys = ("wall", "rounds", "startup", "upper")
    summary = {name: {k: median(runs, k) for k in keys} for name, runs in rows.items()}
    paired = pairs(rows)
    floor = summary["torch"]["startup"]
    result = {
        "workload": f"R1 batch {args.batch_size}, {args.rounds} rounds",
        "cold": args.cold,
        # the timed processes write and use .pyc files whatever the shell says (child_env)
        "shell_had_pythondontwritebytecode": "PYTHONDONTWRITEBYTECODE" in os.environ,
        "repeats": args.repeats,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
        "median": summary,
        "runs": rows,
        "startup_ratio_flkit_over_naive": summary["flkit"]["startup"] / summary["naive"]["startup"],
        "flkit_minus_naive": paired,
        "above_torch_import": {n: summary[n]["startup"] - floor for n in ("flkit", "naive")},
    }
    print(
        f"{'command':<12} {'wall s':>8} {'rounds s':>9} {'start-up s':>11} "
        f"{'wall-rounds s':>14}   (medians)"
    )
    for name, s in summary.items():
        up = "-" if s["startup"] is None else f"{s['startup']:.2f}"
        print(f"{name:<12} {s['wall']:>8.2f} {s['rounds']:>9.2f} {up:>11} {s['upper']:>14.2f}")
    for name in summary:
        lows = [r["startup"] for r in rows[name] if r["startup"] is not None]
        if lows:
            print(f"{name:<12} start-up min {min(lows):.2f} s over {len(lows)} runs")
    print(f"start-up ratio flkit / naive: {result['startup_ratio_flkit_over_naive']:.2f}")
    above = result["above_torch_import"]
    print(
        f"start-up above the torch import (medians): flkit {above['flkit']:.3f} s, naive "
        f"{above['naive']:.3f} s"
    )
    print(
        f"flkit less naive, turn by turn: median {paired['median_difference']:+.3f} s; flkit at "
        f"most the loop's in {paired['at_most']} of {paired['pairs']} turns"
    )
    out = args.out or HERE / "results" / f"startup-b{args.batch_size}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
