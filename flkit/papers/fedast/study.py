"""Sweeps and comparisons behind notebook 03 (FedAST). Every run goes through
:func:`flkit.asyncfl.run`, so each is cached on disk by its configuration hash.

All functions take the notebook's preset dict ``P`` (``preset.toml`` beside this file) and
return plain pandas DataFrames (what is read from a finished simulation is in ``tables.py``);
figures read those frames and never re-run training.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from flkit import asyncfl as F
from flkit.utils import FlkitError

from .tables import final_test_loss, staleness, summarize

__all__ = [
    "run_all",
    "base",
    "identical",
    "heterogeneous",
    "compare_methods",
    "active_sweep",
    "buffer_sweep",
    "buffer_load",
    "k_sweep",
    "het_compare",
    "fig4_nobuffer",
    "dynamic_vs_static",
    "regime_preset",
]


# ------------------------------------------------------------------------------ configs
def base(P, **changes) -> dict:
    """Run-level settings shared by every experiment of a preset."""
    d = dict(
        num_clients=int(P["num_clients"]),
        availability=float(P["availability"]),
        k=int(P["k"]),
        ratio=int(P["ratio"]),
        realloc_rule=str(P["realloc_rule"]),
        eval_subset=int(P["eval_subset"]) if P["eval_subset"] > 0 else None,
        max_time=float(P["max_time"]),
    )
    d.update(changes)
    return d


def _task(P, name, dataset, target, requests, buffer=None, weight=1.0, **kw) -> dict:
    t = dict(
        name=name,
        dataset=dataset,
        target=target,
        requests=int(requests),
        buffer=buffer,
        weight=float(weight),
    )
    sub = P.get(f"{dataset}_train_subset", 0)
    if sub:
        t["train_subset"] = int(sub)
    model = P.get(f"{dataset}_model", "")
    if model:
        t["model"] = model
    t.update(kw)
    return t


def identical(
    P,
    M: int,
    method: str,
    dataset: str | None = None,
    total_requests: int | None = None,
    target: float | None = None,
    **changes,
) -> dict:
    """M identical tasks (same dataset and partition), sum R split equally, b = ceil(R / ratio)."""
    dataset = dataset or P["dataset"]
    total = int(total_requests if total_requests is not None else P["total_requests"])
    R = max(1, total // M)
    tgt = float(P["target"]) if target is None else target
    tasks = [_task(P, f"{dataset}-{i + 1}", dataset, tgt, R) for i in range(M)]
    return dict(method=method, tasks=tasks, **base(P, **changes))


def heterogeneous(
    P, method: str, level: str = "main", datasets: Sequence[str] | None = None, **changes
) -> dict:
    """The heterogeneous run: one task per dataset of ``P['het_datasets']``, sum R split equally,
    Sync weights from ``P['het_weights']``, targets from ``P['het_targets_<level>']``."""
    ds = list(datasets or P["het_datasets"])
    targets = list(P[f"het_targets_{level}"])
    weights = list(P["het_weights"])
    R = max(1, int(P["total_requests"]) // len(ds))
    names = [d if ds.count(d) == 1 else f"{d}-{i + 1}" for i, d in enumerate(ds)]
    ratios = list(P.get("het_delay_ratios", [])) or [None] * len(ds)
    tasks = [
        _task(
            P,
            names[i],
            d,
            float(targets[i]),
            R,
            weight=float(weights[i]),
            **({"delay_ratio": float(ratios[i])} if ratios[i] else {}),
        )
        for i, d in enumerate(ds)
    ]
    return dict(method=method, tasks=tasks, **base(P, **changes))


# ------------------------------------------------------------------------------ studies
def run_all(P, items, device="auto", progress=True) -> list:
    """The results of ``(config, seed)`` items, in order; the runs not yet cached run in
    ``P['jobs']`` worker processes (:func:`flkit.asyncfl.run_many`: ``jobs`` changes the wall time,
    never a number)."""
    return F.run_many(
        [(c, int(s)) for c, s in items],
        jobs=int(P["jobs"]),
        device=device,
        progress=progress,
        threads=int(P["threads"]) or None,
    )


def _runs(P, configs: dict, seeds: Iterable[int], device="auto", progress=True):
    """[(label, seed, result)] for every config of ``configs`` ({label: config}) and seed."""
    keys = [(label, int(s)) for label in configs for s in seeds]
    results = run_all(P, [(configs[lab], s) for lab, s in keys], device, progress)
    return [(lab, s, res) for (lab, s), res in zip(keys, results)]


def compare_methods(
    P,
    Ms: Sequence[int],
    methods: Sequence[str],
    seeds: Sequence[int],
    device="auto",
    dataset: str | None = None,
    progress=True,
) -> tuple[pd.DataFrame, dict]:
    """Time to target of M identical tasks per method (Figs. 2 and 5).

    Returns (frame with one row per (M, method, seed): all_done, mean_task_time, trained, wall
    seconds; {(M, method, seed): SimResult})."""
    rows, results = [], {}
    cfgs = {(M, m): identical(P, M, m, dataset=dataset) for M in Ms for m in methods}
    for (M, label), s, res in _runs(P, cfgs, seeds, device, progress):
        sm = summarize(res)
        rows.append(
            {
                "M": M,
                "method": label,
                "label": F.METHOD_LABELS[F.FedASTRun(label, ()).method],
                "seed": s,
                "all_done": sm["all_done"],
                "mean_task_time": sm["mean_task_time"],
                "trained": sm["trained"],
                "wall_seconds": sm["wall_seconds"],
                "final_accuracy": float(np.mean(list(sm["final_accuracy"].values()))),
            }
        )
        results[(M, label, s)] = res
    return pd.DataFrame(rows), results


def active_config(P, R: int, method: str) -> dict:
    """Fig. 3 run: ``P['active_tasks']`` identical tasks with R requests each, no target, run for
    ``P['active_time']``; availability raised with R so the load sum R / N_avail stays <= 1.28."""
    M = int(P["active_tasks"])
    avail = min(1.0, max(1, math.ceil(M * R / 1.28)) / int(P["num_clients"]))
    cfg = identical(
        P, M, method, total_requests=M * R, availability=avail, max_time=float(P["active_time"])
    )
    cfg["tasks"] = [dict(t, target=None) for t in cfg["tasks"]]
    return cfg


def active_sweep(
    P, requests: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Fig. 3: ``P['active_tasks']`` identical tasks run for ``P['active_time']`` simulated time
    without a target; final mean test accuracy vs active requests per task, FedAST (b = ceil(R/r))
    vs NoBuffer (b = 1). Availability is raised with R so the load sum R / N_avail stays <= 1.28."""
    M = int(P["active_tasks"])
    cfgs = {(R, m): active_config(P, R, m) for R in requests for m in ("fedast_d", "nobuffer")}
    rows = []
    for (R, method), s, res in _runs(P, cfgs, seeds, device, progress):
        acc = res.stats.get("final_accuracy", {})
        st = staleness(res)
        rows.append(
            {
                "requests": R,
                "active": M * R,
                "method": method,
                "label": F.METHOD_LABELS[method],
                "seed": s,
                "final_accuracy": float(np.mean(list(acc.values()))),
                "final_test_loss": final_test_loss(res),
                "mean_staleness": float(st.staleness.mean()) if len(st) else 0.0,
                "buffer": 1 if method == "nobuffer" else max(1, -(-R // int(P["ratio"]))),
            }
        )
    return pd.DataFrame(rows)


def buffer_load(P) -> float:
    """Load sum R / N_avail of the buffer sweep: two tasks of ``P['buffer_requests']`` on the
    preset's own available clients (paper: 2 x 175 / 300 = 1.17)."""
    n_avail = max(1, round(float(P["availability"]) * int(P["num_clients"])))
    return len(P["buffer_datasets"]) * int(P["buffer_requests"]) / n_avail


def buffer_sweep(
    P, buffers: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 8/9: two tasks (``P['buffer_datasets']``), option S, R = ``P['buffer_requests']`` per
    task on the preset's clients and availability (no rescaling: the paper's fixed setting is
    N = 1000, 300 available, R = 175, load 1.17), buffer b swept. Each run stops when both tasks
    reach their targets or at ``P['buffer_time']``; a task that did not reach its target by then
    has ``reached`` False and no time to target. ``final_accuracy``: at the task's last test."""
    R = int(P["buffer_requests"])
    ds = list(P["buffer_datasets"])
    targets = list(P["buffer_targets"])
    horizon = float(P["buffer_time"])
    names = [d if ds.count(d) == 1 else f"{d}-{i + 1}" for i, d in enumerate(ds)]
    cfgs = {
        int(b): dict(
            method="fedast_s",
            tasks=[
                _task(P, names[i], d, float(targets[i]), R, buffer=int(b)) for i, d in enumerate(ds)
            ],
            **base(P, max_time=horizon),
        )
        for b in buffers
    }
    rows = []
    for b, s, res in _runs(P, cfgs, seeds, device, progress):
        for name in res.tasks:
            t = res.completion_time[name]
            rows.append(
                {
                    "buffer": b,
                    "ratio": R / b,
                    "task": name,
                    "seed": s,
                    "reached": t is not None,
                    "time_to_target": t,
                    "horizon": horizon,
                    "final_accuracy": res.stats.get("final_accuracy", {}).get(name),
                }
            )
    return pd.DataFrame(rows)


def k_sweep(
    P, ks: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 10-12: Sync-ST on one task, first-k swept: time and rounds to target, final accuracy
    (accuracy at the end of the run: at the target crossing or at max_time)."""
    cfgs = {}
    for k in ks:
        cfg = identical(P, 1, "sync_st", k=int(k))
        cfg["tasks"][0]["name"] = P["dataset"]
        cfgs[int(k)] = cfg
    rows = []
    for k, s, res in _runs(P, cfgs, seeds, device, progress):
        name = res.tasks[0]
        h = pd.DataFrame(res.history)
        t = res.completion_time[name]
        rows.append(
            {
                "k": k,
                "seed": s,
                "time_to_target": t,
                "rounds_to_target": int(h["round"].max()) if t is not None else None,
                "rounds": int(h["round"].max()) if len(h) else 0,
                "round_length": (res.total_time / h["round"].max()) if len(h) else None,
                "final_accuracy": res.stats.get("final_accuracy", {}).get(name),
            }
        )
    return pd.DataFrame(rows)


def het_compare(
    P,
    seeds: Sequence[int],
    methods=("fedast_d", "sync_st"),
    level: str = "main",
    device="auto",
    progress=True,
    **changes,
) -> tuple[pd.DataFrame, dict]:
    """Figs. 6/7: heterogeneous tasks; per-task completion times per method and seed
    (``changes``: run-level settings replaced, e.g. ``max_time``)."""
    cfgs = {m: heterogeneous(P, m, level, **changes) for m in methods}
    rows, results = [], {}
    for m, s, res in _runs(P, cfgs, seeds, device, progress):
        results[(m, s)] = res
        for name, t in res.completion_time.items():
            rows.append(
                {"method": m, "label": F.METHOD_LABELS[m], "seed": s, "task": name, "time": t}
            )
    return pd.DataFrame(rows), results


def fig4_nobuffer(P, seeds: Sequence[int], device="auto", progress=True) -> dict:
    """Fig. 4: {seed: FedAST-NoBuffer on the heterogeneous tasks (main targets)}, run up to
    ``P['fig4_time']``, a horizon past FedAST's finishing times (both curves span the same time)."""
    horizon = float(P["fig4_time"])
    _, res = het_compare(P, seeds, ("nobuffer",), "main", device, progress, max_time=horizon)
    return {s: res[("nobuffer", s)] for s in (int(x) for x in seeds)}


def regime_preset(P) -> dict:
    """P with the heterogeneous run's scale replaced by the ``regime_*`` keys (the regime
    ablation): N, sum R, the ratio r, Sync first-k and the main targets."""
    Q = dict(P)
    Q.update(
        num_clients=int(P["regime_num_clients"]),
        total_requests=int(P["regime_total_requests"]),
        ratio=int(P["regime_ratio"]),
        k=int(P["regime_k"]),
        het_targets_main=[float(t) for t in P["regime_het_targets"]],
    )
    return Q


def dynamic_vs_static(
    P, levels: Sequence[str], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 21-26: FedAST(D) vs FedAST(S) (equal R per task) on the heterogeneous tasks at the
    given target levels; one row per (level, method, seed) with the all-done time."""
    cfgs = {(lv, m): heterogeneous(P, m, lv) for lv in levels for m in ("fedast_d", "fedast_s")}
    rows = []
    for (level, m), s, res in _runs(P, cfgs, seeds, device, progress):
        sm = summarize(res)
        rows.append(
            {
                "level": level,
                "method": m,
                "seed": s,
                "all_done": sm["all_done"],
                "reallocations": res.stats.get("reallocations", 0),
                "allocations": res.allocations[-1]["requests"] if res.allocations else None,
            }
        )
    return pd.DataFrame(rows)


def demo(
    M: int,
    requests: int,
    buffer: int,
    seed: int = 0,
    num_clients: int = 100,
    device="cpu",
    method: str = "fedast_s",
):
    """The interactive demo: M synthetic tasks (logistic regression, delay ratios of MNIST /
    FMNIST /
    CIFAR-10 / Shakespeare in turn) with R requests and buffer b each; fast enough for a slider."""
    ratios = [0.148, 0.24, 0.228, 0.555]
    n_avail = max(M, math.ceil(M * requests / 1.28))
    if M * requests > num_clients:
        raise FlkitError(
            f"M x requests = {M * requests} is more than the {num_clients} clients can serve"
        )
    tasks = [
        dict(
            name=f"task {i + 1}",
            dataset="synthetic",
            target=0.45,
            requests=int(requests),
            buffer=int(buffer),
            samples_per_client=64,
            delay_ratio=ratios[i % 4],
        )
        for i in range(M)
    ]
    cfg = dict(
        method=method,
        tasks=tasks,
        num_clients=num_clients,
        availability=min(1.0, n_avail / num_clients),
        max_time=3000.0,
    )
    return F.run(cfg, seed=seed, device=device, progress=False)
