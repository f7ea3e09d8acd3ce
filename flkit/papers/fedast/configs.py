"""The run configs of notebook 03's experiments (plain dicts for :func:`flkit.asyncfl.run`): the
settings every run of a preset shares, M identical tasks, Fig. 2's identical tasks on their own
pool, the heterogeneous task mix (checked before any data is loaded) and Fig. 3's equal-arrival
points. ``preset``: the notebook's preset (``preset.toml`` beside this file)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from flkit import asyncfl
from flkit import models as _models
from flkit.utils import FlkitError, check_choice

from .numbers import LOAD

__all__ = [
    "base",
    "task_dict",
    "identical",
    "fig2_config",
    "check_mix",
    "heterogeneous",
    "active_config",
]


def base(preset, **changes) -> dict:
    """Run-level settings shared by every experiment of a preset."""
    d = dict(
        num_clients=int(preset["num_clients"]),
        availability=float(preset["availability"]),
        k=int(preset["k"]),
        ratio=int(preset["ratio"]),
        realloc_rule=str(preset["realloc_rule"]),
        version0=str(preset["version0"]),
        realloc_unit=int(preset["realloc_unit"]) or None,
        eval_subset=int(preset["eval_subset"]) if preset["eval_subset"] > 0 else None,
        max_time=float(preset["max_time"]),
    )
    d.update(changes)
    return d


def task_dict(preset, name, dataset, target, requests, buffer=None, weight=1.0, **kw) -> dict:
    t = dict(
        name=name,
        dataset=dataset,
        target=target,
        requests=int(requests),
        buffer=buffer,
        weight=float(weight),
    )
    sub = preset.get(f"{dataset}_train_subset", 0)
    if sub:
        t["train_subset"] = int(sub)
    model = preset.get(f"{dataset}_model", "")
    if model:
        t["model"] = model
    t.update(kw)
    return t


def identical(
    preset,
    n_tasks: int,
    method: str,
    dataset: str | None = None,
    total_requests: int | None = None,
    target: float | None = None,
    delay_ratio: float | None = None,
    **changes,
) -> dict:
    """M identical tasks (same dataset and partition), sum R split equally, b = ceil(R / ratio);
    ``delay_ratio`` times them as another dataset (None: the dataset's own)."""
    dataset = dataset or preset["dataset"]
    total = int(total_requests if total_requests is not None else preset["total_requests"])
    requests = max(1, total // n_tasks)
    tgt = float(preset["target"]) if target is None else target
    extra = {} if delay_ratio is None else {"delay_ratio": float(delay_ratio)}
    tasks = [
        task_dict(preset, f"{dataset}-{i + 1}", dataset, tgt, requests, **extra)
        for i in range(n_tasks)
    ]
    return dict(method=method, tasks=tasks, **base(preset, **changes))


def fig2_config(preset, method: str, **changes) -> dict:
    """Fig. 2's run: ``preset['fig2_M']`` identical tasks of ``preset['fig2_dataset']`` at
    ``preset['fig2_target']``, timed with ``preset['fig2_delay_ratio']`` (0: the dataset's own
    delays; the cheap presets time a small learner as CIFAR-10, 0.228, so Sync-ST's round is the
    paper's), on its own pool: ``fig2_num_clients`` clients, ``fig2_total_requests`` requests in
    all and first-``fig2_k`` (the paper: 1000, 384 and 30; a reduced pool keeps the load 1.28, R/b
    near 32 and k/n = 30/50)."""
    ratio = float(preset["fig2_delay_ratio"])
    pool = dict(num_clients=int(preset["fig2_num_clients"]), k=int(preset["fig2_k"]))
    return identical(
        preset,
        int(preset["fig2_M"]),
        method,
        dataset=preset["fig2_dataset"],
        total_requests=int(preset["fig2_total_requests"]),
        target=float(preset["fig2_target"]),
        delay_ratio=ratio if ratio > 0 else None,
        **{**pool, **changes},
    )


def check_mix(preset) -> None:
    """The heterogeneous task mix of ``preset`` is valid (FlkitError naming the value and the
    accepted ones, before any data is loaded): every dataset and model known, one positive delay
    ratio and one Sync-ST client share per task, and the shares summing to the available pool
    (round(availability * num_clients) clients per round)."""
    ds = list(preset["het_datasets"])
    for d in ds:
        check_choice("dataset of the task mix", d, asyncfl.DATASET_DEFAULTS)
        model = preset.get(f"{d}_model", "")
        if model:
            check_choice(f"{d}_model of the task mix", model, _models.MODELS)
    n = len(ds)
    for key in ("het_delay_ratios", "het_shares", "het_targets_main", "het_targets_high"):
        if len(preset[key]) != n:
            raise FlkitError(
                f"{key} has {len(preset[key])} entries for {n} tasks {ds}; accepted: one per task"
            )
    for d, r in zip(ds, preset["het_delay_ratios"]):
        if not float(r) > 0:
            raise FlkitError(
                f"het_delay_ratios: {r!r} for task {d!r}; accepted: a positive per-step delay "
                "ratio (the paper's: mnist 0.148, fmnist 0.24, cifar10 0.228, shakespeare 0.555)"
            )
    pool = max(1, round(float(preset["availability"]) * int(preset["num_clients"])))
    shares = [float(x) for x in preset["het_shares"]]
    if any(x < 0 for x in shares) or abs(sum(shares) - pool) > 1e-9:
        raise FlkitError(
            f"het_shares {shares} sum to {sum(shares):g}; accepted: non-negative Sync-ST clients "
            f"per task summing to the available pool, {pool} (paper: 100/84/48/68 of 300)"
        )


def heterogeneous(
    preset, method: str, level: str = "main", datasets: Sequence[str] | None = None, **changes
) -> dict:
    """The heterogeneous task mix (checked by :func:`check_mix`): one task per dataset of
    ``preset['het_datasets']`` timed by ``preset['het_delay_ratios']``, sum R split equally,
    Sync-ST client shares ``preset['het_shares']`` (clients of the available pool), targets from
    ``preset['het_targets_<level>']``."""
    check_mix(preset)
    check_choice("level", level, ("main", "high"))
    ds = list(datasets or preset["het_datasets"])
    targets = list(preset[f"het_targets_{level}"])
    shares = list(preset["het_shares"])
    requests = max(1, int(preset["total_requests"]) // len(ds))
    names = [d if ds.count(d) == 1 else f"{d}-{i + 1}" for i, d in enumerate(ds)]
    ratios = list(preset["het_delay_ratios"])
    tasks = [
        task_dict(
            preset,
            names[i],
            d,
            float(targets[i]),
            requests,
            weight=float(shares[i]),
            delay_ratio=float(ratios[i]),
        )
        for i, d in enumerate(ds)
    ]
    return dict(method=method, tasks=tasks, **base(preset, **changes))


def active_config(preset, requests: int, method: str) -> dict:
    """Fig. 3 run: ``preset['active_tasks']`` identical tasks with R requests each, no target, run
    until ``preset['active_arrivals']`` updates per task have arrived (``active_tasks`` times that
    many in all), so every point of the sweep has the same number of arrivals whatever R: the gap
    between FedAST and NoBuffer then compares how far the same amount of client work got, not how
    fast it arrived. Availability is raised with R so the load sum R / N_avail stays at most the
    paper's (:data:`~.numbers.LOAD`)."""
    n_tasks = int(preset["active_tasks"])
    avail = min(1.0, max(1, math.ceil(n_tasks * requests / LOAD)) / int(preset["num_clients"]))
    cfg = identical(
        preset,
        n_tasks,
        method,
        dataset=preset["active_dataset"],
        total_requests=n_tasks * requests,
        availability=avail,
        max_time=None,
        max_events=n_tasks * int(preset["active_arrivals"]),
    )
    cfg["tasks"] = [dict(t, target=None) for t in cfg["tasks"]]
    return cfg
