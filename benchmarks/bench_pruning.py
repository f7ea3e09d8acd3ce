"""Seconds per round of local training: dense vs masked (FedDIP's straight-through mask plus the
layer-wise L2 penalty, and plain masked training as SNIP/FedDST run it) on the batched engine.

Workload: the cpu preset of notebook 02 (Fashion-MNIST, LeNet-5, 5 clients x 300 samples x 1
epoch, batch 32). Writes benchmarks/results/pruning-<device>.json and prints a table.

    python benchmarks/bench_pruning.py [--device cpu] [--repeats 5] [--backend auto]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from flkit import data, models
from flkit.engine import LocalSpec, train_clients
from flkit.engine.train import default_backend
from flkit.prune import (
    erk_mask,
    global_magnitude_mask,
    layer_l2_penalty,
    mask_grads,
    masked,
    prunable_names,
    straight_through,
)
from flkit.state import broadcast_state, model_state
from flkit.utils import resolve_device


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args(argv)
    dev = resolve_device(a.device)
    ds = data.load("fmnist", device=dev, normalize="none", train_subset=a.clients * a.samples)
    torch.manual_seed(0)
    net = models.build("lenet5").to(dev)
    names = prunable_names(net)
    start = broadcast_state(model_state(net), a.clients)
    parts = [torch.arange(i * a.samples, (i + 1) * a.samples, device=dev) for i in range(a.clients)]
    spec = LocalSpec(lr=0.1, batch_size=a.batch, epochs=1, weight_decay=5e-4)
    shapes = {n: tuple(p.shape) for n, p in net.named_parameters() if n in names}
    mask95 = global_magnitude_mask({n: model_state(net)[n] for n in names}, 0.95)
    erk = erk_mask(shapes, 0.05, torch.Generator().manual_seed(0), device=dev)
    variants = {
        "dense (FedAvg)": {},
        "straight-through mask (DPF/FedDP)": {"param_transform": straight_through(mask95)},
        "straight-through + L2 penalty (FedDIP)": {
            "param_transform": straight_through(mask95),
            "extra_loss": layer_l2_penalty(1e-3, mask95, names),
        },
        "masked training (SNIP/FedDST, ERK)": {
            "param_transform": masked(erk),
            "grad_transform": mask_grads(erk),
        },
    }
    backend = default_backend(net, a.backend)
    times = {label: [] for label in variants}
    for r in range(a.repeats + 1):  # interleaved: A B C D, A B C D, ... (load drifts hit all)
        for label, hooks in variants.items():
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            train_clients(
                net,
                start,
                ds.x_train,
                ds.y_train,
                parts,
                spec,
                list(range(a.clients)),
                backend=backend,
                **hooks,
            )
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if r:  # the first round of calls warms up
                times[label].append(time.perf_counter() - t)
    out = {label: statistics.median(ts) for label, ts in times.items()}
    minimum = {label: min(ts) for label, ts in times.items()}
    dense = out["dense (FedAvg)"]
    print(f"device {dev}, backend {backend}, torch threads {torch.get_num_threads()}")
    print("| local training | s / round (median) | min | vs dense (median) |\n|---|---|---|---|")
    for label, s in out.items():
        print(f"| {label} | {s:.3f} | {minimum[label]:.3f} | {s / dense:.2f}x |")
    res = {
        "device": str(dev),
        "backend": backend,
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "repeats": a.repeats,
        "seconds_per_round": out,
        "seconds_per_round_min": minimum,
        "ratio_vs_dense": {k: v / dense for k, v in out.items()},
    }
    folder = Path(__file__).resolve().parent / "results"
    folder.mkdir(exist_ok=True)
    (folder / f"pruning-{dev.type}.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
