"""What each notebook's `paper` preset costs: its runs as its paper folder lists them
(``study.runs``), one timed round per distinct (method, model, data, clients) on data tiled to the
official training-set size, and the GPU hours that follow (rounds x seconds per round, summed over
the runs). Used by the ``methods`` step of ``benchmarks/gpu_check.py``; ``--tiny`` there reads the
`smoke` presets."""

from __future__ import annotations

import dataclasses
import importlib
import math
import time


def _sync(device) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _flkit_error():
    from flkit.utils import FlkitError

    return FlkitError


def _presets():
    from flkit.workbook import presets

    return presets


def paper_notebooks() -> tuple[str, ...]:
    """Every notebook with a preset file, in order (each has a ``paper`` preset to cost)."""
    return tuple(_presets().notebooks())


def _study(slug: str):
    return importlib.import_module(f"flkit.papers.{slug}.study")


def notebook_runs(notebook: str, preset) -> list:
    """Every run that ``notebook`` makes at preset ``P`` with its seed 0: its paper folder's
    ``study.runs(P, [0])`` (:mod:`flkit.preset_runs`), RunConfigs; FedAST: (config dict,
    horizon) of every simulation, the horizon from :func:`fedast_horizon`."""
    if notebook not in paper_notebooks():
        raise _flkit_error()(
            f"unknown notebook {notebook!r}; accepted: {', '.join(paper_notebooks())}"
        )
    runs = _study(notebook.split("_", 1)[1]).runs(preset, [0])
    if notebook == "03_fedast":
        return [(cfg, fedast_horizon(cfg, seed)) for cfg, seed in runs]
    return runs


def fedast_horizon(cfg: dict, seed: int) -> float:
    """The simulated time FedAST run ``cfg`` is costed for: its ``max_time`` (a run that stops
    earlier, at its targets, is bounded above by it, so the estimate is an upper bound); a run
    with no ``max_time`` that stops after ``max_events`` arrivals (Fig. 3): the time of its last
    arrival in a timing-only run with ``seed`` (delays do not depend on training; option D is
    timed as option S, so this one is an estimate, not a bound)."""
    if cfg.get("max_time") is not None:
        return float(cfg["max_time"])
    if cfg.get("max_events") is None:
        raise _flkit_error()(
            f"FedAST run {cfg['method']!r} has max_time=None and max_events=None; accepted: a "
            "run with a time or an arrival limit (a run stopped only by its targets has no "
            "horizon to estimate)"
        )
    from flkit import asyncfl

    res = asyncfl.timing_run(cfg, seed, horizon=math.inf, max_events=int(cfg["max_events"]))
    return float(res.total_time)


def probe_key(cfg) -> tuple:
    """What sets the cost of a round: runs with equal keys share one timed probe."""
    return (
        cfg.method,
        cfg.dataset,
        cfg.model,
        repr(sorted(cfg.model_kwargs.items())),
        repr(sorted(cfg.dataset_kwargs.items())),
        cfg.num_clients,
        cfg.clients_per_round,
        cfg.local_epochs,
        cfg.local_steps,
        cfg.batch_size,
    )


def _tiled(ds, full_train: int | None):
    """``ds`` with its training set repeated up to ``full_train`` samples (groups too)."""
    import torch

    n = len(ds.y_train)
    if not full_train or n >= full_train:
        return ds
    idx = torch.arange(full_train, device=ds.y_train.device) % n
    groups = ds.train_groups
    return dataclasses.replace(  # a new object: the loader's cached one stays as it was
        ds,
        x_train=ds.x_train[idx],
        y_train=ds.y_train[idx],
        train_groups=None if groups is None else groups[idx.to(groups.device)],
    )


def time_round(cfg, device: str, tiny: bool, data_cache: dict) -> dict:
    """Seconds of one round (after a warm-up round) and of one evaluation, and peak memory."""
    import torch

    from flkit import data as data_mod
    from flkit import methods
    from flkit.data import provenance
    from flkit.experiment import Setup
    from flkit.state import model_state

    t_setup = time.perf_counter()
    dkey = (cfg.dataset, repr(sorted(cfg.dataset_kwargs.items())))
    if dkey not in data_cache:
        ds = data_mod.load(cfg.dataset, device=device, **cfg.dataset_kwargs)
        full = None if tiny else provenance.FULL_SIZES.get(cfg.dataset, (None, None))[0]
        if cfg.dataset_kwargs.get("split") == "pooled" and full:
            full = sum(provenance.FULL_SIZES[cfg.dataset])
        data_cache[dkey] = _tiled(ds, full)
    cfg = cfg.replace(device=device)
    setup = Setup.build(cfg, data_obj=data_cache[dkey])
    ctx = methods.RunContext(
        setup.model,
        setup.data.x_train,
        setup.data.y_train,
        setup.parts,
        cfg.local_spec(),
        cfg.seed,
        setup.data.num_classes,
        cfg.backend if cfg.backend != "auto" else "wide",
        cfg.clients_per_round,
    )
    method = methods.get(cfg.method)(ctx, **cfg.method_params)
    state = method.init_state(model_state(setup.model))
    _sync(device)
    setup_s = time.perf_counter() - t_setup  # data (once per dataset), partition, model, state
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for rnd in (1, 2):
        _sync(device)
        t0 = time.perf_counter()
        state, _ = method.round(state, method.select_clients(state, rnd), rnd)
        _sync(device)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    method.evaluate(state, setup.data.x_test, setup.data.y_test)
    _sync(device)
    eval_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None
    want = torch.device(device).type
    off = [path for path, t in state_tensors(state) if t.device.type != want]
    return {
        "method": cfg.method,
        "dataset": cfg.dataset,
        "model": cfg.model,
        "model_kwargs": dict(cfg.model_kwargs),
        "clients_per_round": cfg.clients_per_round,
        "train_samples": int(len(setup.data.y_train)),
        "setup_s": setup_s,
        "warmup_round_s": times[0],
        "round_s": times[1],
        "eval_s": eval_s,
        "eval_every": cfg.eval_every,
        "seconds_per_round": times[1] + eval_s / max(1, cfg.eval_every),
        "peak_mem_bytes": peak,
        "off_device": off[:20],  # state tensors not on the run's device (should be none)
    }


def state_tensors(x, path="state"):
    """(path, tensor) of every tensor in a method state (mappings, sequences, dataclasses)."""
    import dataclasses
    from collections.abc import Mapping

    import torch

    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, Mapping):
        for k, v in x.items():
            yield from state_tensors(v, f"{path}[{k!r}]")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from state_tensors(v, f"{path}[{i}]")
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from state_tensors(getattr(x, f.name), f"{path}.{f.name}")


def inversion_seconds_per_iter(device: str, size: int, iters: int) -> float:
    """Seconds per inversion iteration of one client at batch ``size`` (LeNet of notebook 05)."""
    import bench_inversion

    from flkit import models

    model = models.build("cnn_mnist", num_classes=10, in_channels=1).to(device)
    bench_inversion.one(model, 1, size, 1, torch_device(device))  # warm-up
    return bench_inversion.one(model, 1, size, iters, torch_device(device)) / iters


def torch_device(device: str):
    import torch

    return torch.device(device)


def time_fedast(cfg: dict, device: str, horizon: float) -> dict:
    """Seconds per simulated time unit of one FedAST run cut at ``horizon``: the scheduler's run
    (training, evaluations) timed apart from building it (data, partitions, models)."""
    from flkit.asyncfl.runner import build_schedule

    t0 = time.perf_counter()
    sched, trainer = build_schedule(dict(cfg, max_time=float(horizon)), 0, device)
    _sync(device)
    t1 = time.perf_counter()
    res = sched.run()
    _sync(device)
    run_s = time.perf_counter() - t1
    sim = max(float(res.total_time), 1e-9)
    return {
        "method": cfg["method"],
        "tasks": [t["dataset"] for t in cfg["tasks"]],
        "horizon": horizon,
        "simulated_time": sim,
        "trained": int(trainer.trained),
        "setup_s": t1 - t0,
        "wall_s": run_s,
        "seconds_per_time_unit": max(run_s, 1e-9) / sim,
    }


def estimate(runs, timed: dict, info: dict, gi_extra: float | None = None) -> None:
    """GPU hours = sum over runs of rounds x seconds per round (a run without its own probe
    takes the notebook's slowest probed round: the estimate is then marked incomplete), plus
    ``gi_extra`` seconds of inversion per round of a GI run (None: not timed, so incomplete)."""
    if not timed:
        info["gpu_hours"] = None
        info["complete"] = False
        return
    slowest = max(r["seconds_per_round"] for r in timed.values())
    total, missing, gi_untimed = 0.0, 0, False
    for c in runs:
        r = timed.get(probe_key(c))
        s = r["seconds_per_round"] if r else slowest
        missing += r is None
        if c.method == "gi_staleness":
            gi_untimed |= gi_extra is None
            s += gi_extra or 0.0
        total += c.rounds * s
    info["gpu_hours"] = total / 3600
    info["complete"] = missing == 0 and not gi_untimed
    if gi_untimed:
        info["without_inversion"] = True
    info["runs_without_probe"] = missing
