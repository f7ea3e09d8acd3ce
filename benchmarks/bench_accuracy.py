"""Accuracy target of issue 2: FedAvg, MNIST, LeNet-5, 100 clients Dirichlet(0.5), 10 per round,
1 local epoch, batch 50, lr 0.05, 50 rounds must reach >= 97% test accuracy.

    python benchmarks/bench_accuracy.py [--device cpu] [--seed 0]
Writes benchmarks/results/accuracy-<device>-seed<k>.json."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from flkit.experiment import RunConfig, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = RunConfig(
        method="fedavg",
        dataset="mnist",
        model="lenet5",
        num_clients=100,
        partition="dirichlet",
        partition_kwargs={"alpha": 0.5},
        clients_per_round=10,
        local_epochs=1,
        batch_size=50,
        lr=0.05,
        rounds=50,
        eval_every=5,
        seed=args.seed,
        device=args.device,
    )
    t = time.perf_counter()
    res = run(cfg, cache=False, progress=False)
    wall = time.perf_counter() - t
    h = res.history.dropna(subset=["test_accuracy"])
    out = {
        "config": cfg.key(),
        "final_accuracy": res.final(),
        "wall_seconds": wall,
        "curve": dict(zip(h["round"].astype(int).tolist(), h["test_accuracy"].round(4).tolist())),
    }
    print(json.dumps(out, indent=1))
    path = (
        Path(__file__).parent / "results" / f"accuracy-{cfg.key()['device']}-seed{args.seed}.json"
    )
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
