"""Simulator speed without training: events (request arrivals) per second.

    python benchmarks/bench_sim.py [--events 300000]

Measures (1) the bare discrete-event core driven like FedAST (pop an arrival, bump the task's
version every b arrivals, dispatch one new request through the availability check), with and
without the event log, and (2) the full FedAST scheduler (option S and D/official) with the
timing-only trainer (``flkit.asyncfl.TimingTrainer``), at the paper's demo scale (N = 1000, 300
available, 4 tasks x 96 requests, b = 3).
Target: >= 100,000 events/s for the core on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from flkit.asyncfl import (  # noqa: E402
    FedASTRun,
    ShiftedExponentialDelays,
    Simulator,
    TaskConfig,
    TimingTrainer,
    run_fedast,
)

RATIOS = [0.148, 0.240, 0.228, 0.555]


def bench_core(n_events: int, record: bool, seed: int = 0) -> float:
    delays = ShiftedExponentialDelays(1000, RATIOS, seed=seed)
    sim = Simulator(1000, delays, num_tasks=4, max_busy=300, seed=seed, record=record)
    for m in range(4):
        for _ in range(96):
            sim.dispatch(m, sim.draw_client())
    buf = [0, 0, 0, 0]
    outstanding = [96, 96, 96, 96]
    t0 = time.perf_counter()
    pop, send = sim.pop, sim.dispatch_random
    for _ in range(n_events):
        req = pop()
        m = req.task
        outstanding[m] -= 1
        buf[m] += 1
        if buf[m] >= 3:
            buf[m] = 0
            sim.advance_version(m)
        for _k in range(min(96 - outstanding[m], 2)):  # K rule refill
            if send(m) is not None:
                outstanding[m] += 1
    dt = time.perf_counter() - t0
    return n_events / dt


class ConstantDispersionTrainer(TimingTrainer):
    """Option D's Realloc reads a dispersion per task, which placeholder updates lack: a constant
    one keeps Realloc's bookkeeping and reallocations running, the work this benchmark times."""

    def dispersion(self, task, updates):
        return 1.0


def bench_fedast(n_events: int, option: str, record: bool = True) -> float:
    tasks = [
        TaskConfig(n, dataset=n, target=1.0, requests=96, buffer=3, lr=0.1, test_every=4)
        for n in ("mnist", "fmnist", "cifar10", "shakespeare")
    ]
    method = {"S": "fedast_s", "D": "fedast_d"}[option]
    cfg = FedASTRun(method, tuple(tasks), max_events=n_events, record_events=record)
    t0 = time.perf_counter()
    trainer = TimingTrainer() if option == "S" else ConstantDispersionTrainer()
    res = run_fedast(cfg, trainer)
    dt = time.perf_counter() - t0
    return res.stats["events"] / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000)
    args = ap.parse_args()
    n = args.events
    rows = [
        ("sim core, no log", bench_core(n, record=False)),
        ("sim core, event log", bench_core(n, record=True)),
        ("FedAST(S) scheduler, timing trainer", bench_fedast(n, "S")),
        ("FedAST(D) official, timing trainer", bench_fedast(n, "D")),
    ]
    for name, eps in rows:
        print(f"{name:40s} {eps:12,.0f} events/s")


if __name__ == "__main__":
    main()
