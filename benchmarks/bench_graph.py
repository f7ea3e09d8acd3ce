"""Where a round of workload R1 goes with the engine's "graph" backend, on one GPU.

    python benchmarks/bench_graph.py [--device cuda] [--per-graph 1,10,50,150] [--repeats 3]

R1: FedAvg, 10 clients x 5 local epochs x 600 MNIST images, LeNet-5, batch 10 (300 local steps a
round). Times, each the minimum and median of `--repeats` interleaved calls with the GPU
synchronised around them:
- one round's local training (`train_clients`) with the eager wide step and with the graph
  backend at each number of steps per graph (flkit.engine.graphed.STEPS_PER_GRAPH): a run's first
  call, which records, and a later one, which replays that recording;
- the seconds the first call spends recording;
- the floor: the GPU time of one local step, replaying a recorded graph of 10 steps 30 times;
- one evaluation of the global model on the 10,000 test images (what a round adds to training).
Prints a table and writes it as JSON with `--out`. With `--device cpu` (no CUDA graphs) a stand-in
recorder calls the steps again instead of replaying them, which checks this script, not a speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):  # flkit from this checkout; gpu_check and paper_cost beside it
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gpu_check import r1_config, r1_sizes  # noqa: E402
from paper_cost import _sync  # noqa: E402

from flkit.engine import evaluate, graphed, train_clients  # noqa: E402
from flkit.engine.wide import wide_model  # noqa: E402
from flkit.experiment import Setup  # noqa: E402
from flkit.state import broadcast_state, model_state  # noqa: E402


class Timed:
    """A recorder that adds the seconds it spends recording to `seconds`."""

    def __init__(self, inner):
        self.inner, self.seconds = inner, 0.0

    def __call__(self, fn):
        t = time.perf_counter()
        out = self.inner(fn)
        self.seconds += time.perf_counter() - t
        return out


def _call_again(fn):
    return fn


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--per-graph", default="1,10,50,150")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="R1 at the GPU check's tiny sizes")
    ap.add_argument("--out", help="JSON file of the results")
    a = ap.parse_args(argv)
    per_graphs = [int(v) for v in a.per_graph.split(",")]
    sizes = r1_sizes(a.tiny)
    clients = sizes["clients"]
    cfg = r1_config(sizes, 10, a.device)
    setup = Setup.build(cfg)
    dev, d, model = setup.device, setup.data, setup.model
    recorder = graphed.RECORDERS.get(dev.type, _call_again)
    timed = Timed(recorder)
    graphed.RECORDERS[dev.type] = timed
    spec = cfg.local_spec()
    start = broadcast_state(model_state(model), clients)
    seeds = list(range(clients))

    def local(backend):
        _sync(dev)
        t = time.perf_counter()
        res = train_clients(
            model, start, d.x_train, d.y_train, setup.parts, spec, seeds, backend=backend
        )
        _sync(dev)
        return time.perf_counter() - t, res

    # each repeat, each variant: a first call (a graph variant records: the kept recordings are
    # dropped before it) and a second, steady call (it replays that recording), as a run's first
    # round and its later ones
    variants = ["wide"] + [f"graph/{p}" for p in per_graphs]
    times = {v: {"first": [], "steady": []} for v in variants}
    record_s = {v: [] for v in variants}
    ran = {}
    for r in range(a.repeats + 1):  # the first pass warms up (cuDNN, allocator), untimed
        for v in variants:
            if v != "wide":
                graphed.STEPS_PER_GRAPH = int(v.split("/")[1])
            timed.seconds = 0.0
            wide_model(model).__dict__.pop("graph_static", None)  # a run's first call records
            first, _ = local("wide" if v == "wide" else "graph")
            recorded = timed.seconds
            steady, res = local("wide" if v == "wide" else "graph")
            ran[v] = res.backend
            if r:
                times[v]["first"].append(first)
                times[v]["steady"].append(steady)
                record_s[v].append(recorded)

    # the floor: one recorded graph of 10 steps, replayed 30 times
    floor = None
    if dev.type == "cuda":
        keep = {}

        def keeper(fn):
            keep["replay"] = recorder(fn)
            return keep["replay"]

        graphed.RECORDERS[dev.type] = keeper
        graphed.STEPS_PER_GRAPH = 10
        local("graph")
        _sync(dev)
        t = time.perf_counter()
        for _ in range(30):
            keep["replay"]()
        _sync(dev)
        floor = (time.perf_counter() - t) / 300

    evals = []
    for _ in range(a.repeats + 1):
        _sync(dev)
        t = time.perf_counter()
        evaluate(model, None, d.x_test, d.y_test)
        _sync(dev)
        evals.append(time.perf_counter() - t)
    steps = int(res.steps[0])
    rows = {
        v: {
            "backend_ran": ran[v],
            "first_min_s": min(times[v]["first"]),
            "first_median_s": statistics.median(times[v]["first"]),
            "steady_min_s": min(times[v]["steady"]),
            "steady_median_s": statistics.median(times[v]["steady"]),
            "record_s_median": statistics.median(record_s[v]),
            "steady_ms_per_step_min": 1000 * min(times[v]["steady"]) / steps,
        }
        for v in variants
    }
    report = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "workload": {**{k: sizes[k] for k in ("clients", "epochs", "subset")}, "steps": steps},
        "repeats": a.repeats,
        "local_training": rows,
        "replay_floor_ms_per_step": None if floor is None else 1000 * floor,
        "evaluation_s_min": min(evals[1:]),
    }
    print(f"{report['device']}, {steps} local steps a round, {clients} clients")
    print(
        "| variant | ran | first call min / median s | recording s | later calls min / median s "
        "| ms per step |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for v, row in rows.items():
        print(
            f"| {v} | {row['backend_ran']} | "
            f"{row['first_min_s']:.4f} / {row['first_median_s']:.4f} "
            f"| {row['record_s_median']:.4f} | {row['steady_min_s']:.4f} / "
            f"{row['steady_median_s']:.4f} | {row['steady_ms_per_step_min']:.3f} |"
        )
    if floor is not None:
        print(f"replay floor: {1000 * floor:.3f} ms per local step")
    print(f"evaluation: {report['evaluation_s_min']:.4f} s")
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
