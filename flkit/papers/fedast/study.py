"""Sweeps and comparisons behind notebook 03 (FedAST). Every run goes through
:func:`flkit.asyncfl.run`, so each is cached on disk by its configuration hash.

All functions take the notebook's preset (``P`` there, ``preset`` here; ``preset.toml`` beside this
file) and return plain pandas DataFrames (what is read from a finished simulation is in
``tables.py``); figures read those frames and never re-run training."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from flkit import asyncfl
from flkit.preset_runs import distinct, use_threads
from flkit.preset_runs import seeds_of as preset_seeds
from flkit.utils import check_choice

from .configs import (
    IDENTICAL_FEDAST,
    active_config,
    base,
    buffer_config,
    check_mix,
    fig2_config,
    heterogeneous,
    identical,
    k_config,
    lstm_width,
    notebook_runs,
    regime_preset,
)
from .numbers import LOAD, NUMBERS
from .tables import final_test_loss, staleness, summarize

__all__ = [
    "seeds_of",
    "use_threads",
    "describe",
    "VERSION0_TEXT",
    "evaluation_line",
    "test_size",
    "run_all",
    "base",
    "identical",
    "fig2_config",
    "check_mix",
    "heterogeneous",
    "compare_methods",
    "fig2_compare",
    "fig5_compare",
    "notebook_runs",
    "runs",
    "prefetch",
    "active_config",
    "active_sweep",
    "largest_active_runs",
    "centralised",
    "buffer_config",
    "buffer_sweep",
    "k_config",
    "buffer_load",
    "buffer_line",
    "k_sweep",
    "het_compare",
    "fig4_nobuffer",
    "dynamic_vs_static",
    "regime_preset",
    "ablation_line",
]


# ------------------------------------------------------------------------------ setup
def seeds_of(preset, seed: int = 0) -> list[int]:
    """The Monte Carlo seeds: ``seed``, ``seed + 1``, ... (``preset['num_seeds']`` of them)."""
    return preset_seeds(preset, seed, key="num_seeds")


def describe(preset) -> str:
    """Markdown: what runs at this preset beside the paper's setting."""
    paper = NUMBERS
    n_avail = round(preset["availability"] * preset["num_clients"])
    return (
        f"**What runs at this preset (`{preset.name}`)** versus the paper: N = "
        f"{preset['num_clients']} clients (paper {paper['num_clients']}), "
        f"{preset['availability']:.0%} available → N_avail = {n_avail} (paper "
        f"{paper['available']}), Σ R = {preset['total_requests']} active requests (paper "
        f"{paper['total_requests_demo']}; the load Σ R / N_avail ≈ {LOAD:g} is kept), R/b ratio "
        f"{preset['ratio']} (paper {paper['ratio_code']}), Sync first-k = {preset['k']} (k/N_avail "
        f"= {preset['k'] / n_avail:.2g}; paper {paper['sync_k']} of {paper['available']}), main "
        f"dataset `{preset['dataset']}` with target {preset['target']:.2f}, {preset['num_seeds']} "
        f"Monte Carlo seed(s) (paper {paper['monte_carlo_runs']}). Unchanged: the delay model "
        "(shifted exponential, per-task ratios, speed groups 25/50/25 % × 1.3/1/0.7, × 27 local "
        "steps), 27 local steps of batch 32, learning rates, 300 samples per client (Dirichlet α "
        f"= 0.1). FMNIST model: `{preset['fmnist_model'] or 'lenet5_fedast'}`, CIFAR-10 model: "
        f"`{preset['cifar10_model'] or 'cnn_cifar10'}`. Heterogeneous mix: "
        f"{' + '.join(preset['het_datasets'])}, Sync-ST shares {preset['het_shares']} (paper "
        f"100/84/48/68 of 300). Fig. 2: {preset['fig2_M']} identical `{preset['fig2_dataset']}` "
        f"tasks, option S (Fig. 5: M = {list(preset['Ms'])} on the same pool). Shakespeare LSTM "
        f"hidden size {lstm_width(preset) or 100} (paper 100). Version 0: `{preset['version0']}` "
        f"({VERSION0_TEXT[preset['version0']]}). {evaluation_line(preset)}"
    )


#: what each ``version0`` option means (the official code aliases version 0 of each model)
VERSION0_TEXT = {
    "paper": "the paper's description: every request trains from the model version it was sent "
    "with; the official code's version 0 aliases the live model instead",
    "official": "the official code: version 0 aliases the live model, so the first requests "
    "train from the model current when they arrive",
}


def test_size(dataset: str) -> int:
    """Items in the full test set of ``dataset`` (the final accuracies are measured on it)."""
    from flkit import data as _data

    check_choice("dataset", dataset, asyncfl.DATASET_DEFAULTS)
    return int(_data.identity(dataset)["test"])


def evaluation_line(preset) -> str:
    """How accuracies are measured at this preset, with the binomial standard error of a
    periodic check (at accuracy 0.5, the largest)."""
    n = int(preset["eval_subset"])
    if n <= 0:
        return "Every test runs on the full test set."
    return (
        f"Periodic tests (the curves) run on a fixed stratified subset of {n} test items, binomial "
        f"SE at most {0.5 / n**0.5:.3f}; target crossings are confirmed, and final accuracies "
        "measured, on the full test set."
    )


# ------------------------------------------------------------------------------ studies
def run_all(preset, items, device="auto", progress=True) -> list:
    """The results of ``(config, seed)`` items, in order; the runs not yet cached run in
    ``preset['jobs']`` worker processes (:func:`flkit.asyncfl.run_many`: ``jobs`` changes the wall
    time, never a number)."""
    return asyncfl.run_many(
        [(c, int(s)) for c, s in items],
        jobs=int(preset["jobs"]),
        device=device,
        progress=progress,
        threads=int(preset["threads"]) or None,
    )


def _runs(preset, configs: dict, seeds: Iterable[int], device="auto", progress=True):
    """[(label, seed, result)] for every config of ``configs`` ({label: config}) and seed."""
    keys = [(label, int(s)) for label in configs for s in seeds]
    results = run_all(preset, [(configs[lab], s) for lab, s in keys], device, progress)
    return [(lab, s, res) for (lab, s), res in zip(keys, results)]


def compare_methods(
    preset,
    task_counts: Sequence[int],
    methods: Sequence[str],
    seeds: Sequence[int],
    device="auto",
    dataset: str | None = None,
    progress=True,
    config=None,
) -> tuple[pd.DataFrame, dict]:
    """Time to target of M identical tasks per method (Figs. 2 and 5). ``config(M, method)``: the
    run's config (default :func:`identical` on ``dataset``).

    Returns (frame with one row per (M, method, seed): all_done, mean_task_time, trained, wall
    seconds; {(M, method, seed): SimResult})."""
    if config is None:

        def config(n_tasks, m):
            return identical(preset, n_tasks, m, dataset=dataset)

    rows, results = [], {}
    cfgs = {(n_tasks, m): config(n_tasks, m) for n_tasks in task_counts for m in methods}
    for (n_tasks, label), s, res in _runs(preset, cfgs, seeds, device, progress):
        sm = summarize(res)
        rows.append(
            {
                "M": n_tasks,
                "method": label,
                "label": asyncfl.METHOD_LABELS[asyncfl.FedASTRun(label, ()).method],
                "seed": s,
                "all_done": sm["all_done"],
                "mean_task_time": sm["mean_task_time"],
                "trained": sm["trained"],
                "wall_seconds": sm["wall_seconds"],
                "final_accuracy": float(np.mean(list(sm["final_accuracy"].values()))),
            }
        )
        results[(n_tasks, label, s)] = res
    return pd.DataFrame(rows), results


def fig2_compare(preset, seeds: Sequence[int], device="auto", progress=True):
    """Fig. 2: every method of ``preset['fig2_methods']`` on :func:`fig2_config`'s identical
    tasks; what :func:`compare_methods` returns (keyed by M = ``preset['fig2_M']``)."""
    return compare_methods(
        preset,
        [int(preset["fig2_M"])],
        list(preset["fig2_methods"]),
        seeds,
        device,
        progress=progress,
        config=lambda n_tasks, m: fig2_config(preset, m),
    )


def fig5_compare(preset, seeds: Sequence[int], device="auto", progress=True):
    """Fig. 5: FedAST(S) (:data:`~.claims.IDENTICAL_FEDAST`) and Sync-ST on M =
    ``preset['Ms']`` identical tasks on Fig. 2's pool (:func:`fig2_config`), so the largest M is
    Fig. 2's run (read from the run cache) and in its timing regime; what
    :func:`compare_methods` returns."""
    return compare_methods(
        preset,
        [int(m) for m in preset["Ms"]],
        [IDENTICAL_FEDAST, "sync_st"],
        seeds,
        device,
        progress=progress,
        config=lambda n_tasks, m: fig2_config(preset, m, n_tasks=n_tasks),
    )


def active_sweep(
    preset, requests: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Fig. 3: ``preset['active_tasks']`` identical tasks run without a target until
    ``preset['active_arrivals']`` updates per task have arrived (:func:`active_config`); final
    mean test accuracy vs active requests per task, FedAST (b = ceil(R/r)) vs NoBuffer (b = 1).
    Availability is raised with R so the load sum R / N_avail stays at most the paper's."""
    n_tasks = int(preset["active_tasks"])
    cfgs = {
        (per_task, m): active_config(preset, per_task, m)
        for per_task in requests
        for m in ("fedast_d", "nobuffer")
    }
    rows = []
    for (per_task, method), s, res in _runs(preset, cfgs, seeds, device, progress):
        acc = res.stats.get("final_accuracy", {})
        st = staleness(res)
        rows.append(
            {
                "requests": per_task,
                "active": n_tasks * per_task,
                "method": method,
                "label": asyncfl.METHOD_LABELS[method],
                "seed": s,
                "final_accuracy": float(np.mean(list(acc.values()))),
                "final_test_loss": final_test_loss(res),
                "mean_staleness": float(st.staleness.mean()) if len(st) else 0.0,
                "buffer": 1
                if method == "nobuffer"
                else max(1, -(-per_task // int(preset["ratio"]))),
            }
        )
    return pd.DataFrame(rows)


def largest_active_runs(preset, seed: int, device="auto") -> dict:
    """{method label: result} of FedAST and NoBuffer at the largest R of the Fig. 3 sweep (one
    seed), for the staleness histogram beside the sweep."""
    requests = max(preset["active_requests"])
    return {
        asyncfl.METHOD_LABELS[m]: asyncfl.run(
            active_config(preset, requests, m), seed=seed, device=device, progress=False
        )
        for m in ("fedast_d", "nobuffer")
    }


def centralised(preset, seed: int, device="auto") -> float:
    """Fig. 3's reference: test accuracy of one model trained by plain SGD on the pooled client
    data of the main dataset for ``preset['central_steps']`` steps
    (:func:`flkit.asyncfl.centralised`)."""
    task = dict(
        name="central",
        dataset=preset["dataset"],
        model=preset.get(preset["dataset"] + "_model") or None,
    )
    return asyncfl.centralised(task, preset["central_steps"], seed=seed, device=device)


def buffer_load(preset) -> float:
    """Load sum R / N_avail of the buffer sweep: two tasks of ``preset['buffer_requests']`` on the
    preset's own available clients (paper: 2 x 175 / 300 = 1.17)."""
    n_avail = max(1, round(float(preset["availability"]) * int(preset["num_clients"])))
    return len(preset["buffer_datasets"]) * int(preset["buffer_requests"]) / n_avail


def buffer_line(preset) -> str:
    """The buffer sweep's load and horizon beside the paper's Fig. 8 setting, in one line."""
    n_avail = round(preset["availability"] * preset["num_clients"])
    return (
        f"load {len(preset['buffer_datasets'])} x {preset['buffer_requests']} / {n_avail} "
        f"available = {buffer_load(preset):.3g} (paper 2 x 175 / 300 = 1.17); horizon t = "
        f"{preset['buffer_time']:g}"
    )


def buffer_sweep(
    preset, buffers: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 8/9: two tasks (``preset['buffer_datasets']``), option S, R =
    ``preset['buffer_requests']`` per task on the preset's clients and availability (no rescaling:
    the paper's fixed setting is N = 1000, 300 available, R = 175, load 1.17), buffer b swept. Each
    run stops when both tasks reach their targets or at ``preset['buffer_time']``; a task that did
    not reach its target by then has ``reached`` False and no time to target. ``final_accuracy``: at
    the task's last test."""
    requests = int(preset["buffer_requests"])
    horizon = float(preset["buffer_time"])
    cfgs = {int(b): buffer_config(preset, b) for b in buffers}
    rows = []
    for b, s, res in _runs(preset, cfgs, seeds, device, progress):
        for name in res.tasks:
            t = res.completion_time[name]
            rows.append(
                {
                    "buffer": b,
                    "ratio": requests / b,
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
    preset, ks: Sequence[int], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 10-12: Sync-ST on one task, first-k swept: time and rounds to target, final accuracy
    (accuracy at the end of the run: at the target crossing or at max_time)."""
    cfgs = {int(k): k_config(preset, k) for k in ks}
    rows = []
    for k, s, res in _runs(preset, cfgs, seeds, device, progress):
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
    preset,
    seeds: Sequence[int],
    methods=("fedast_d", "sync_st"),
    level: str = "main",
    device="auto",
    progress=True,
    **changes,
) -> tuple[pd.DataFrame, dict]:
    """Figs. 6/7: heterogeneous tasks; per-task completion times per method and seed
    (``changes``: run-level settings replaced, e.g. ``max_time``)."""
    cfgs = {m: heterogeneous(preset, m, level, **changes) for m in methods}
    rows, results = [], {}
    for m, s, res in _runs(preset, cfgs, seeds, device, progress):
        results[(m, s)] = res
        for name, t in res.completion_time.items():
            rows.append(
                {"method": m, "label": asyncfl.METHOD_LABELS[m], "seed": s, "task": name, "time": t}
            )
    return pd.DataFrame(rows), results


def fig4_nobuffer(preset, seeds: Sequence[int], device="auto", progress=True) -> dict:
    """Fig. 4: {seed: FedAST-NoBuffer on the heterogeneous tasks (main targets)}, run up to
    ``preset['fig4_time']``, a horizon past FedAST's finishing times (both curves span the same
    time)."""
    horizon = float(preset["fig4_time"])
    _, res = het_compare(preset, seeds, ("nobuffer",), "main", device, progress, max_time=horizon)
    return {s: res[("nobuffer", s)] for s in (int(x) for x in seeds)}


def ablation_line(preset, ablated, paper_regime: dict) -> str:
    """What the regime ablation's preset ``ablated`` changes from ``preset``, in one line."""
    keys = ("num_clients", "total_requests", "ratio", "k", "het_targets_main")
    names = ("N", "sum R", "r", "k", "targets")

    def setting(p):
        return ", ".join(f"{n} = {p[k]}" for n, k in zip(names, keys))

    return (
        f"after: {setting(ablated)} (before: {setting(preset)}); paper-setting round length "
        f"{paper_regime['sync_round_length']:.3g}"
    )


def runs(preset, seeds: Sequence[int]) -> list[tuple[dict, int]]:
    """Every simulation the notebook trains at ``preset``, once for each notebook seed of
    ``seeds`` (each runs :func:`seeds_of` it), as :func:`flkit.asyncfl.run`'s ``(config, seed)``
    pairs, dearest first (:func:`notebook_runs`, what :func:`prefetch` trains;
    :mod:`flkit.preset_runs`). Pairs, not RunConfigs: a FedAST run is a
    :class:`~flkit.asyncfl.FedASTRun` and a seed, run by :mod:`flkit.asyncfl.runner`. Not listed:
    the interactive demo's settings (drawn in the demo's cell, on the CPU at one thread, seconds
    each) and Fig. 3's centralised reference (:func:`centralised`, one short SGD run)."""
    return distinct(pair for s in seeds for pair in notebook_runs(preset, seeds_of(preset, s)))


def prefetch(preset, seeds: Sequence[int], device="auto", progress=True) -> int:
    """Runs every simulation of :func:`notebook_runs` not yet in the run cache in
    ``preset['jobs']`` worker processes, dearest first, so both cores stay busy; the sections
    then read their runs from the cache. Changes the wall time, never a number (a run's result
    depends only on its config, seed, device type and CPU threads, ``preset['threads']``).
    Returns the number of runs."""
    items = notebook_runs(preset, seeds)
    run_all(preset, items, device, progress)
    return len(items)


def dynamic_vs_static(
    preset, levels: Sequence[str], seeds: Sequence[int], device="auto", progress=True
) -> pd.DataFrame:
    """Figs. 21-26: FedAST(D) vs FedAST(S) (equal R per task) on the heterogeneous tasks at the
    given target levels; one row per (level, method, seed) with the all-done time."""
    cfgs = {
        (lv, m): heterogeneous(preset, m, lv) for lv in levels for m in ("fedast_d", "fedast_s")
    }
    rows = []
    for (level, m), s, res in _runs(preset, cfgs, seeds, device, progress):
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
