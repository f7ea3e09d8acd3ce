"""Same-version batched training vs one request at a time (FedAST's EngineTrainer), MNIST MLP, CPU.

All requests dispatched with the same (task, model version) start from the same weights, so the
EngineTrainer trains them in one `train_clients` call. This measures that against calling it once
per request (the same seeds, so the same updates), for K requests per batch.

    FLKIT_MIRROR=/path/to/mirror .venv/bin/python benchmarks/bench_fedast_batching.py \
        --threads 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from flkit import asyncfl


def bench(n_requests: int, threads: int, backend: str, reps: int) -> dict:
    torch.set_num_threads(threads)
    cfg = asyncfl.FedASTRun.from_dict(
        dict(
            method="fedast_s",
            num_clients=200,
            tasks=[
                dict(name="mnist", dataset="mnist", requests=n_requests, buffer=1, max_rounds=1)
            ],
        )
    ).validate()
    tr = asyncfl.EngineTrainer(cfg, seed=0, device="cpu", backend=backend)
    clients = list(range(n_requests))
    tr.train("mnist", 0, clients[:2])  # warm-up
    tr.train("mnist", 0, [0])
    best_b = best_s = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        tr.train("mnist", 0, clients, ordinals=list(range(n_requests)))
        best_b = min(best_b, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for j, c in enumerate(clients):
            tr.train("mnist", 0, [c], ordinals=[j])
        best_s = min(best_s, time.perf_counter() - t0)
    return {
        "K": n_requests,
        "threads": threads,
        "backend": backend,
        "batched_s": best_b,
        "one_by_one_s": best_s,
        "speedup": best_s / best_b,
        "ms_per_request_batched": 1000 * best_b / n_requests,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--backends", nargs="+", default=["wide", "vmap", "loop"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    for th in a.threads:
        for be in a.backends:
            for n_requests in a.K:
                r = bench(n_requests, th, be, a.reps)
                rows.append(r)
                print(
                    json.dumps(
                        {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
                    ),
                    flush=True,
                )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(
                {"rows": rows, "load": os.getloadavg(), "torch": torch.__version__}, f, indent=2
            )


if __name__ == "__main__":
    main()
