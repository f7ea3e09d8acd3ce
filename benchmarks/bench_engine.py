"""Seconds per FedAvg round: the per-client torch.optim.SGD loop vs the batched engine.

Reference workload (issue 2): 10 clients x 5 local epochs x 600 MNIST samples, LeNet-5, batch 10
and batch 50. Writes benchmarks/results/engine-<device>.json and prints a table.

    python benchmarks/bench_engine.py [--device cpu] [--threads 2] [--repeats 2] \
        [--backends wide vmap]
    python benchmarks/bench_engine.py --device cuda     # + the compiled wide step (CUDA graphs)

On a GPU each row also gives rounds per second of local training (`<backend>_rounds_per_s`),
the achieved fraction of the GPU's fp32 peak (`<backend>_peak_fraction`, from the conv and
linear FLOPs: forward + 2x backward) and the speed-up over the naive loop on the same GPU
(`<backend>_speedup`). The peak comes from --peak-tflops or the table FP32_PEAK_TFLOPS.
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
from flkit.engine.reference import train_clients_reference
from flkit.state import broadcast_state, model_state
from flkit.utils import resolve_device


def flops_per_sample(model, shape, device):
    """Forward multiply-adds x 2 of one sample (conv/linear only), for the fraction of peak."""
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        if isinstance(mod, torch.nn.Conv2d):
            total += (
                2
                * out.numel()
                * mod.in_channels
                // mod.groups
                * mod.kernel_size[0]
                * mod.kernel_size[1]
            )
        elif isinstance(mod, torch.nn.Linear):
            total += 2 * out.numel() * mod.in_features

    hs = [m.register_forward_hook(hook) for m in model.modules()]
    model(torch.zeros(1, *shape, device=device))
    for h in hs:
        h.remove()
    return total


# fp32 (non-tensor-core) peak of the GPUs we may be lent, TFLOP/s, from the vendors' data sheets
FP32_PEAK_TFLOPS = {"H100 SXM": 66.9, "H100 PCIe": 51.2, "H100": 66.9, "H200": 66.9, "A100": 19.5}


def fp32_peak(name: str) -> float | None:
    for key, peak in FP32_PEAK_TFLOPS.items():  # most specific first
        if key.replace(" ", "").lower() in name.replace(" ", "").lower():
            return peak
    return None


def time_round(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batches", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--backends", nargs="+", default=None, help="default: wide vmap (+ compiled)")
    ap.add_argument("--peak-tflops", type=float, help="the device's fp32 peak (default: table)")
    ap.add_argument("--skip-loop", action="store_true")
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument(
        "--interleaved",
        action="store_true",
        help="time the backends in turn (A B C A B C ...) and record min and median of each",
    )
    ap.add_argument(
        "--out", type=Path, help="JSON path (default results/engine-<device>-<n>threads)"
    )
    args = ap.parse_args()
    if args.interleaved and args.repeats < 3:
        raise SystemExit(f"--repeats {args.repeats} with --interleaved; accepted: 3 or more")
    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    if args.backends is None:
        args.backends = ["wide", "vmap"] + (["compiled", "graph"] if dev.type == "cuda" else [])
    ds = data.load("mnist", device=dev)
    torch.manual_seed(0)
    model = models.build(args.model).to(dev)
    k = args.clients
    idx = [torch.arange(i * 600, (i + 1) * 600, device=dev) for i in range(k)]
    start = broadcast_state(model_state(model), k)
    rows = []
    for bsz in args.batches:
        spec = LocalSpec(lr=args.lr, batch_size=bsz, epochs=args.epochs)
        seeds = list(range(k))
        row = {"batch_size": bsz}
        for b in args.backends:  # build / compile for this shape outside the timings
            warm = LocalSpec(lr=0.05, batch_size=bsz, steps=2)
            train_clients(model, start, ds.x_train, ds.y_train, idx, warm, seeds, backend=b)
        if not args.skip_loop:
            row["loop_s"] = time_round(
                lambda spec=spec, seeds=seeds: train_clients_reference(
                    model, start, ds.x_train, ds.y_train, idx, spec, seeds
                ),
                args.repeats,
            )
        if args.interleaved:
            times = {b: [] for b in args.backends}
            for _ in range(args.repeats):
                for b in args.backends:
                    times[b].append(
                        time_round(
                            lambda spec=spec, seeds=seeds, b=b: train_clients(
                                model, start, ds.x_train, ds.y_train, idx, spec, seeds, backend=b
                            ),
                            1,
                        )
                    )
            for b, ts in times.items():
                row[f"{b}_all_s"] = ts
                row[f"{b}_min_s"] = min(ts)
                row[f"{b}_median_s"] = statistics.median(ts)
        for b in [] if args.interleaved else args.backends:
            row[f"{b}_s"] = time_round(
                lambda spec=spec, seeds=seeds, b=b: train_clients(
                    model, start, ds.x_train, ds.y_train, idx, spec, seeds, backend=b
                ),
                args.repeats,
            )
            if "loop_s" in row:
                row[f"{b}_ratio"] = row[f"{b}_s"] / row["loop_s"]
        if dev.type == "cuda":
            fl = (
                3 * flops_per_sample(model, ds.input_shape, dev) * 600 * args.epochs * k
            )  # fwd + 2x bwd
            peak = args.peak_tflops or fp32_peak(torch.cuda.get_device_name(dev))
            for b in args.backends:
                row[f"{b}_rounds_per_s"] = 1 / row.get(f"{b}_s", row.get(f"{b}_median_s"))
                row[f"{b}_tflops"] = fl / row[f"{b}_s"] / 1e12
                row[f"{b}_peak_fraction"] = row[f"{b}_tflops"] / peak if peak else None
                if "loop_s" in row:
                    row[f"{b}_speedup"] = row["loop_s"] / row[f"{b}_s"]
        rows.append(row)
        print(json.dumps(row))
    out = (
        args.out
        or Path(__file__).parent / "results" / f"engine-{dev.type}-{args.threads}threads.json"
    )
    out.parent.mkdir(exist_ok=True)
    meta = {
        "device": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else platform.processor() or "cpu",
        "threads": args.threads,
        "torch": torch.__version__,
        "clients": k,
        "epochs": args.epochs,
        "samples_per_client": 600,
        "model": args.model,
        "lr": args.lr,
        "timing": f"interleaved, {args.repeats} rounds each"
        if args.interleaved
        else f"best of {args.repeats}",
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print("written", out)


if __name__ == "__main__":
    main()
