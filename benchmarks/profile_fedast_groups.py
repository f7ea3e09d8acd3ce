"""How FedAST's lazy trainer groups its requests, and whether grouping them otherwise would keep
the simulator's numbers: what batching across model versions would buy on a GPU, before building
it.

1. A timing-only run (no training, ``flkit.asyncfl.timing_run``) of notebook 03's costliest
   `paper` run (the heterogeneous four-task mix) for ``--horizon`` time units. At each training
   call it counts the requests the call trains (one task and model version: the group the
   trainer batches today) and all of that task's requests waiting to be trained, from every
   version (what a call batching across versions could take).
2. On the CPU, one group of requests per task of that run trained in one call against the same
   requests one at a time, float32: the largest difference of their updates (0 = batching leaves
   the numbers as they are).

    python benchmarks/profile_fedast_groups.py [--horizon 200] [--preset paper] \
        > benchmarks/results/fedast-groups-paper.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _p in (str(HERE.parent), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def costliest(preset_name: str) -> dict:
    """The run of notebook 03 at ``preset_name`` with the most distinct datasets (the check's)."""
    import paper_cost

    from flkit.workbook import presets

    runs = paper_cost.notebook_runs("03_fedast", presets.load("03_fedast", preset_name))
    return paper_cost.fedast_probe_config(runs)


def groups(cfg: dict, horizon: float) -> dict:
    """Per training call of a timing-only run: the group it trains and the task's waiting
    requests over every version."""
    from flkit import asyncfl
    from flkit.asyncfl.fedast import FedAST

    seen = []
    update_of = FedAST._update_of

    def counting(self, req):
        if req.id not in self.results:  # this arrival makes a training call
            waiting = [(v, len(g)) for (m, v), g in self.pending.items() if m == req.task]
            seen.append((len(self.pending.get((req.task, req.version), [])), waiting))
        return update_of(self, req)

    FedAST._update_of = counting
    try:
        res = asyncfl.timing_run(cfg, 0, horizon=horizon)
    finally:
        FedAST._update_of = update_of
    same = [g for g, _ in seen]
    every = [sum(n for _, n in w) for _, w in seen]
    return {
        "method": cfg["method"],
        "tasks": [t["dataset"] for t in cfg["tasks"]],
        "horizon": horizon,
        "simulated_time": float(res.total_time),
        "calls": len(seen),
        "requests_trained": sum(same),
        "group_mean": statistics.mean(same),
        "group_median": statistics.median(same),
        "waiting_mean": statistics.mean(every),
        "waiting_median": statistics.median(every),
        "versions_waiting_mean": statistics.mean(len(w) for _, w in seen),
    }


def batch_invariance(cfg: dict, clients=(3, 1, 3, 7, 0, 11, 5, 9)) -> dict:
    """Per task: the largest |difference| between the updates of ``clients`` trained in one
    call and one at a time (the same requests, so the same seeds), float32 on the CPU."""
    from flkit import asyncfl

    out = {}
    for task in [t["name"] for t in cfg["tasks"]]:
        one = asyncfl.EngineTrainer(cfg, seed=3, device="cpu")
        each = asyncfl.EngineTrainer(cfg, seed=3, device="cpu")
        batched = one.train(task, 0, list(clients))
        alone = [each.train(task, 0, [c])[0] for c in clients]
        out[task] = max(float((u.diff - v.diff).abs().max()) for u, v in zip(batched, alone))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--horizon", type=float, default=200.0)
    ap.add_argument("--preset", default="paper", help="the preset whose run is profiled")
    ap.add_argument("--invariance-preset", default="paper", help="the preset of the float check")
    a = ap.parse_args(argv)
    rep = {"groups": groups(costliest(a.preset), a.horizon)}
    rep["max_abs_diff_batched_vs_alone"] = batch_invariance(costliest(a.invariance_preset))
    print(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
