"""HideNseek costs on the engine: seconds per round of sign-supermask local training vs dense FedAvg
(same model, clients, data and batch plan), and the server's 100-iteration SynFlow pruning of VGG9.

    python benchmarks/bench_hidenseek.py [--device cpu] [--threads 1] [--repeats 3]

Workloads: HAR MLP (1152-512-256-128-6), 3 clients x 5 epochs x their HAR data (batch 32), and
VGG9 on MNIST-shaped data, 4 clients x 1 epoch x 128 samples (batch 32). Writes
benchmarks/results/hidenseek-<device>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from flkit import models
from flkit.engine import LocalSpec, train_clients
from flkit.prune import default_prunable, scaled_grads, supermask_transform, synflow_group_mask
from flkit.state import broadcast_state, model_state
from flkit.utils import resolve_device


def _round_seconds(model, x, y, parts, spec, hooks, repeats):
    start = broadcast_state(model_state(model), len(parts))
    seeds = list(range(len(parts)))
    train_clients(model, start, x, y, parts, spec, seeds, **hooks)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        train_clients(model, start, x, y, parts, spec, seeds, **hooks)
        if x.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times)


def supermask_hooks(model):
    """HideNseek's hooks: every weight but the classifier's is a latent sign score."""
    names = [n for n, p in model.named_parameters() if n.endswith("weight") and p.dim() > 1]
    head = names[-1]
    frozen = {n: p.detach() for n, p in model.named_parameters() if n in names[:-1]}
    scales = {
        n: (0.001 if n.startswith(head.rsplit(".", 1)[0]) else 0.0)
        for n, _ in model.named_parameters()
        if n not in frozen
    }
    return {
        "param_transform": supermask_transform(frozen, None, "sign"),
        "grad_transform": scaled_grads(scales),
    }


def workload(name, device):
    torch.manual_seed(0)
    if name == "har_mlp":
        model = models.build("mlp_har").to(device)
        n, shape, k, epochs = 250, (1152,), 3, 5
    else:
        model = models.build("vgg9", num_classes=10).to(device)
        n, shape, k, epochs = 128, (1, 28, 28), 4, 1
    x = torch.randn(k * n, *shape, device=device)
    y = torch.randint(0, model.num_classes, (k * n,), device=device)
    parts = [torch.arange(i * n, (i + 1) * n, device=device) for i in range(k)]
    spec = LocalSpec(lr=0.01, batch_size=32, epochs=epochs, momentum=0.9)
    return model, x, y, parts, spec, shape


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workloads", nargs="+", default=["har_mlp", "vgg9_mnist"])
    ap.add_argument("--no-pruning", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    out = {"device": str(device), "threads": args.threads, "torch": torch.__version__, "rows": []}
    for name in args.workloads:
        model, x, y, parts, spec, shape = workload(name, device)
        dense = _round_seconds(model, x, y, parts, spec, {}, args.repeats)
        sign = _round_seconds(model, x, y, parts, spec, supermask_hooks(model), args.repeats)
        out["rows"].append(
            {"workload": name, "fedavg_s": dense, "supermask_s": sign, "ratio": sign / dense}
        )
        print(
            f"{name:12s} FedAvg {dense:7.3f} s/round  sign supermask {sign:7.3f} s/round  "
            f"ratio {sign / dense:.2f}"
        )
    model = models.build("vgg9", num_classes=10).to(device)
    for dtype in () if args.no_pruning else (torch.float32, torch.float64):
        t0 = time.perf_counter()
        synflow_group_mask(model, (1, 28, 28), 0.8, default_prunable(model), 100, dtype=dtype)
        secs = time.perf_counter() - t0
        out["rows"].append({"workload": f"vgg9_synflow_100it_{str(dtype)[6:]}", "seconds": secs})
        print(f"VGG9 server pruning, 100 iterations, {str(dtype)[6:]}: {secs:.2f} s")
    path = Path(__file__).parent / "results" / f"hidenseek-{device.type}.json"
    path.write_text(json.dumps(out, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
