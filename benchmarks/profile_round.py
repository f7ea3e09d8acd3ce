"""Where the time of a whole FedAvg round goes: the run loop split into its phases.

Reference workload (issue 16): FedAvg, 10 clients x 5 local epochs x 600 MNIST samples, LeNet-5,
evaluation on the 10k test set every round, a fresh run cache. Each phase is timed by wrapping the
library function that does it (wall clock and process CPU time, which is steadier on a shared
machine); "local training" is the engine's local steps, everything else in a round is overhead.
Set-up and the measured choice of backend happen once per run and are reported apart.

    python benchmarks/profile_round.py --batch-size 10 --rounds 5 [--backend auto]

Writes benchmarks/results/profile-<batch>.json and prints a table (seconds per round).
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

import flkit.engine.train as tr
import flkit.engine.wide as wd
import flkit.experiment as ex
import flkit.methods.base as mb
import flkit.store as st
from flkit.compress import DenseCodec

TOTALS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
ONCE = ("setup (data, partition, model)", "backend choice (once per run)")
ACTIVE: list[str] = []


def timed(phase: str, fn):
    """fn, with its wall and CPU time added to TOTALS[phase] (time inside a nested timed phase
    counts for the inner one only)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        w0, c0 = time.perf_counter(), time.process_time()
        ACTIVE.append(phase)
        try:
            return fn(*args, **kwargs)
        finally:
            ACTIVE.pop()
            dw, dc = time.perf_counter() - w0, time.process_time() - c0
            TOTALS[phase][0] += dw
            TOTALS[phase][1] += dc
            if ACTIVE:  # take it out of the enclosing phase
                TOTALS[ACTIVE[-1]][0] -= dw
                TOTALS[ACTIVE[-1]][1] -= dc

    return wrapper


def patch(obj, name, phase):
    setattr(obj, name, timed(phase, getattr(obj, name)))


def install():
    patch(ex.Setup, "build", "setup (data, partition, model)")
    patch(mb.Method, "select_clients", "client sampling")
    patch(mb, "broadcast_state", "broadcast")
    patch(mb, "train_clients", "local training")
    patch(wd, "WideModel", "engine set-up (wide model)")
    patch(tr, "batch_plan", "engine set-up (batch plans)")
    if hasattr(ex, "resolve_backend"):  # absent before issue 16
        patch(ex, "resolve_backend", "backend choice (once per run)")
    patch(DenseCodec, "message_bits", "byte counting")
    patch(mb.Method, "downlink_bits", "byte counting")
    for cls in mb.Method.__subclasses__():
        if "aggregate" in vars(cls):
            patch(cls, "aggregate", "aggregation")
    patch(mb.Method, "evaluate", "evaluation")
    patch(mb.Method, "eval_metrics", "evaluation")
    patch(st, "save_torch", "checkpoint and result writes")
    patch(st, "save_frame", "checkpoint and result writes")
    patch(st, "save_json", "checkpoint and result writes")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    a = ap.parse_args(argv)

    install()
    cfg = ex.RunConfig(
        method="fedavg",
        dataset="mnist",
        model="lenet5",
        num_clients=10,
        clients_per_round=10,
        partition="iid",
        dataset_kwargs={"train_subset": 6000},
        local_epochs=5,
        batch_size=a.batch_size,
        lr=0.05,
        rounds=a.rounds,
        seed=0,
        backend=a.backend,
    )
    with tempfile.TemporaryDirectory() as tmp:
        w0, c0 = time.perf_counter(), time.process_time()
        res = ex.run(cfg, out_dir=tmp, progress=False)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    once = {k: TOTALS.pop(k, [0.0, 0.0]) for k in ONCE}
    setup = [sum(v[0] for v in once.values()), sum(v[1] for v in once.values())]
    loop_wall, loop_cpu = wall - setup[0], cpu - setup[1]
    named = sum(v[0] for v in TOTALS.values())
    named_cpu = sum(v[1] for v in TOTALS.values())
    TOTALS["run loop, rest (history rows, progress)"] = [loop_wall - named, loop_cpu - named_cpu]
    r = a.rounds
    train = TOTALS["local training"]
    rows = {k: {"wall_s": v[0] / r, "cpu_s": v[1] / r} for k, v in sorted(TOTALS.items())}
    out = {
        "batch_size": a.batch_size,
        "rounds": r,
        "backend": res.history.attrs.get("backend", cfg.backend),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "final_accuracy": res.final(),
        "once_per_run_s": {k: {"wall": v[0], "cpu": v[1]} for k, v in once.items()},
        "round_s": {"wall": loop_wall / r, "cpu": loop_cpu / r},
        "outside_training_fraction": {
            "wall": 1 - train[0] / loop_wall,
            "cpu": 1 - train[1] / loop_cpu,
        },
        "phases_per_round": rows,
    }
    print(f"batch {a.batch_size}, {r} rounds, backend {out['backend']}, threads {out['threads']}")
    print(f"{'phase':45s} {'wall s/round':>12s} {'cpu s/round':>12s}")
    for k, v in rows.items():
        print(f"{k:45s} {v['wall_s']:12.4f} {v['cpu_s']:12.4f}")
    print(f"{'round (loop only)':45s} {loop_wall / r:12.4f} {loop_cpu / r:12.4f}")
    for k, v in once.items():
        print(f"once per run: {k:32s} {v[0]:12.4f} {v[1]:12.4f}")
    f = out["outside_training_fraction"]
    print(f"outside local training: {f['wall']:.1%} of wall, {f['cpu']:.1%} of cpu")
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"profile-b{a.batch_size}-{out['threads']}threads.json"
    path.write_text(json.dumps(out, indent=2))
    print("written", path)


if __name__ == "__main__":
    main()
