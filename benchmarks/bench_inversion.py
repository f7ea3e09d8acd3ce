"""Gradient-inversion throughput: iterations per second of the LeNet (cnn_mnist, 21,840 params)
unroll of 5 full-batch steps, and batched inversion of 10 clients vs 10 one after another.

    python benchmarks/bench_inversion.py [--device cpu] [--threads 1] [--sizes 64 256] [--iters 5]
        [--repeats 3]

The batched-vs-sequential test interleaves the two (batched, sequential, batched, ...) so that a
drift of a shared machine's speed hits both alike, and reports the min and median of each and of
the per-pair ratio. Writes benchmarks/results/inversion-<device>.json and prints a table."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from flkit import models
from flkit.engine import LocalSpec
from flkit.inversion import InversionSpec, init_data, invert
from flkit.state import broadcast_state, model_state
from flkit.utils import resolve_device


def one(model, k, r, iters, device, backend="auto"):
    local = LocalSpec(lr=0.01, batch_size=r, steps=5)
    start = {n: v.to(device) for n, v in broadcast_state(model_state(model), k).items()}
    g = torch.Generator().manual_seed(0)
    target = {n: (1e-3 * torch.randn(v.shape, generator=g)).to(device) for n, v in start.items()}
    spec = InversionSpec(size=r, iters=iters, lr=0.1, topk=0.05)
    x0, y0 = init_data(k, spec, (1, 28, 28), 10, 0, list(range(k)), device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    invert(model, start, target, local, spec, x0, y0, backend=backend)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument(
        "--batch-size", type=int, default=64, help="R of the batched-vs-sequential test"
    )
    ap.add_argument("--repeats", type=int, default=3, help="interleaved batched/sequential pairs")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = resolve_device(a.device)
    torch.manual_seed(0)
    model = models.build("cnn_mnist", num_classes=10, in_channels=1).to(device)
    one(model, 1, 8, 2, device)  # warm-up
    out = {"device": str(device), "threads": a.threads, "torch": torch.__version__, "its": {}}
    for r in a.sizes:
        out["its"][r] = a.iters / one(model, 1, r, a.iters, device)
        print(f"R={r}: {out['its'][r]:.2f} inversion iterations/s (1 client)", flush=True)
    r = a.batch_size
    batched, seq = [], []
    for _ in range(a.repeats):
        batched.append(one(model, 10, r, a.iters, device))
        seq.append(sum(one(model, 1, r, a.iters, device) for _ in range(10)))
    ratios = [s_ / b for s_, b in zip(seq, batched)]
    out.update(
        batch_R=r,
        repeats=a.repeats,
        batched_s=batched,
        sequential_s=seq,
        speedup_min=min(ratios),
        speedup_median=statistics.median(ratios),
    )
    print(
        f"10 clients, R={r}, {a.iters} iterations, {a.repeats} interleaved repeats: batched "
        f"min {min(batched):.2f} s median {statistics.median(batched):.2f} s; sequential min "
        f"{min(seq):.2f} s median {statistics.median(seq):.2f} s; speedup per pair min "
        f"{min(ratios):.2f}x median {statistics.median(ratios):.2f}x"
    )
    path = Path(__file__).parent / "results" / f"inversion-{device.type}.json"
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
