"""The run configs of notebook 03's experiments (plain dicts for :func:`flkit.asyncfl.run`): the
settings every run of a preset shares, M identical tasks, Fig. 2's identical tasks on their own
pool, the heterogeneous task mix (checked before any data is loaded), Fig. 3's equal-arrival
points, the buffer and k sweeps' points, the regime ablation's preset and every run of the notebook
in one list (:func:`notebook_runs`). ``preset``: the notebook's preset (``preset.toml`` beside
this file)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from flkit import asyncfl
from flkit import models as _models
from flkit.utils import FlkitError, check_choice

from .numbers import LOAD

#: the FedAST variant of the identical-task experiments (Figs. 2 and 5): the paper runs identical
#: tasks with static allocation, option S (Realloc has no dispersion difference to act on)
IDENTICAL_FEDAST = "fedast_s"

__all__ = [
    "base",
    "task_dict",
    "lstm_width",
    "identical",
    "fig2_config",
    "check_mix",
    "heterogeneous",
    "active_config",
    "IDENTICAL_FEDAST",
    "buffer_config",
    "k_config",
    "regime_preset",
    "notebook_runs",
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
    if dataset == "shakespeare":
        width = lstm_width(preset)
        if width:
            t["model_flags"] = {"hidden_size": width}
    t.update(kw)
    return t


def lstm_width(preset) -> int:
    """The Shakespeare LSTM's hidden size at this preset (``preset['shakespeare_width']``; 0 or
    absent: the paper's 100). FlkitError for anything but an integer >= 0."""
    w = preset.get("shakespeare_width", 0)
    if isinstance(w, bool) or not isinstance(w, int) or w < 0:
        raise FlkitError(
            f"shakespeare_width={w!r}; accepted: an integer >= 1 (the LSTM's hidden size), or 0 "
            "for the paper's 100"
        )
    return w


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


def fig2_config(preset, method: str, n_tasks: int | None = None, **changes) -> dict:
    """Fig. 2's run: ``n_tasks`` (default ``preset['fig2_M']``) identical tasks of
    ``preset['fig2_dataset']`` at ``preset['fig2_target']``, timed with
    ``preset['fig2_delay_ratio']`` (0: the dataset's own delays; the cheap presets time a small
    learner as CIFAR-10, 0.228, so Sync-ST's round is the paper's), on its own pool:
    ``fig2_num_clients`` clients, ``fig2_total_requests`` requests in all and first-``fig2_k``
    (the paper: 1000, 384 and 30; a reduced pool keeps the load 1.28, R/b near 32 and k/n =
    30/50). Fig. 5 runs M = ``preset['Ms']`` tasks on the same pool, so its largest M is Fig. 2's
    run."""
    ratio = float(preset["fig2_delay_ratio"])
    pool = dict(num_clients=int(preset["fig2_num_clients"]), k=int(preset["fig2_k"]))
    return identical(
        preset,
        int(preset["fig2_M"] if n_tasks is None else n_tasks),
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


def buffer_config(preset, buffer: int) -> dict:
    """One point of the buffer sweep: the two tasks of ``preset['buffer_datasets']`` at
    ``preset['buffer_targets']``, option S, R = ``preset['buffer_requests']`` and b = ``buffer``
    per task, run to the targets or ``preset['buffer_time']``."""
    requests = int(preset["buffer_requests"])
    ds, targets = list(preset["buffer_datasets"]), list(preset["buffer_targets"])
    names = [d if ds.count(d) == 1 else f"{d}-{i + 1}" for i, d in enumerate(ds)]
    tasks = [
        task_dict(preset, names[i], d, float(targets[i]), requests, buffer=int(buffer))
        for i, d in enumerate(ds)
    ]
    return dict(
        method="fedast_s", tasks=tasks, **base(preset, max_time=float(preset["buffer_time"]))
    )


def k_config(preset, k: int) -> dict:
    """One point of the k sweep: Sync-ST on one task of ``preset['dataset']``, first-``k``."""
    cfg = identical(preset, 1, "sync_st", k=int(k))
    cfg["tasks"][0]["name"] = preset["dataset"]
    return cfg


def regime_preset(preset) -> dict:
    """``preset`` with the heterogeneous run's scale replaced by the ``regime_*`` keys (the regime
    ablation): N, sum R, the ratio r, Sync first-k and the main targets (the Sync-ST shares scaled
    with the available pool)."""
    ablated = dict(preset)

    def pool(p):
        return max(1, round(float(p["availability"]) * int(p["num_clients"])))

    # the Sync-ST shares are clients of the available pool: scaled with it
    scale = pool({**preset, "num_clients": preset["regime_num_clients"]}) / pool(preset)
    ablated["het_shares"] = [float(x) * scale for x in preset["het_shares"]]
    ablated.update(
        num_clients=int(preset["regime_num_clients"]),
        total_requests=int(preset["regime_total_requests"]),
        ratio=int(preset["regime_ratio"]),
        k=int(preset["regime_k"]),
        het_targets_main=[float(t) for t in preset["regime_het_targets"]],
    )
    return ablated


def experiment_configs(preset) -> list[tuple[str, dict]]:
    """Every trained simulation of notebook 03 at ``preset`` as ``(experiment, config)`` pairs,
    the dearest experiments first (the four-task mix runs, then Fig. 2, the buffer sweep, Fig. 5,
    Fig. 3, the k sweep). Experiments: ``mix`` (the heterogeneous runs, dynamic vs static and the
    ablation's setting), ``fig4``, ``fig2``, ``buffer``, ``fig5``, ``fig3``, ``k``. A run two
    experiments share (Fig. 5's largest M is Fig. 2) appears under each."""
    levels = list(preset["dvs_levels"])
    pairs = [("mix", heterogeneous(preset, "fedast_d", "main"))]
    pairs += [
        ("mix", heterogeneous(preset, m, lv)) for lv in levels for m in ("fedast_s", "fedast_d")
    ]
    pairs.append(
        ("fig4", heterogeneous(preset, "nobuffer", "main", max_time=float(preset["fig4_time"])))
    )
    pairs.append(("mix", heterogeneous(preset, "sync_st", "main")))
    ablated = regime_preset(preset)
    pairs += [("mix", heterogeneous(ablated, m)) for m in ("fedast_d", "sync_st")]
    pairs += [("fig2", fig2_config(preset, m)) for m in preset["fig2_methods"]]
    pairs += [
        ("buffer", buffer_config(preset, b))
        for b in sorted(map(int, preset["buffers"]), reverse=True)
    ]
    for n_tasks in sorted((int(m) for m in preset["Ms"]), reverse=True):
        pairs += [
            ("fig5", fig2_config(preset, m, n_tasks=n_tasks)) for m in (IDENTICAL_FEDAST, "sync_st")
        ]
    for per_task in sorted((int(r) for r in preset["active_requests"]), reverse=True):
        pairs += [("fig3", active_config(preset, per_task, m)) for m in ("fedast_d", "nobuffer")]
    pairs += [("k", k_config(preset, k)) for k in preset["ks"]]
    return pairs


def run_key(cfg: dict) -> str:
    """The identity of a simulation config (two configs with one key are the same run)."""
    return repr(asyncfl.FedASTRun.from_dict(cfg).validate().to_dict())


def notebook_runs(preset, seeds: Sequence[int]) -> list[tuple[dict, int]]:
    """Every trained simulation of notebook 03 at ``preset`` as ``(config, seed)`` pairs, without
    duplicates, in :func:`experiment_configs`' order (the dearest first): ``study.prefetch`` hands
    them to the ``jobs`` workers in this order, so the long runs start first and the short ones
    fill the gaps."""
    seeds = [int(s) for s in seeds]
    cfgs = [cfg for _, cfg in experiment_configs(preset)]
    out, seen = [], set()
    for cfg in cfgs:
        key = run_key(cfg)
        for s in seeds:
            tag = (key, s)
            if tag not in seen:
                seen.add(tag)
                out.append((cfg, s))
    return out
