"""What each notebook's `paper` preset costs: its runs as its paper folder lists them
(``study.runs``), one timed round per distinct (method, model, data, clients) on data tiled to the
official training-set size, and the GPU hours that follow (rounds x seconds per round, summed over
the runs). Used by the ``methods`` step of ``benchmarks/gpu_check.py``; ``--tiny`` there reads the
`smoke` presets. :func:`packed_hours` turns those hours, one run at a time, into a GPU's
wall-clock hours when the run pool packs runs on it, from the packing factor that
``benchmarks/packing.py`` measures."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import sys
import time
from pathlib import Path


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


def notebook_timed(notebook: str, preset) -> set[str]:
    """The identities (:func:`flkit.preset_runs.identity`) of the runs of :func:`notebook_runs`
    whose wall-clock times the notebook reads (``study.timed``): the pool runs each alone on its
    device, so they cost their hours unpacked."""
    from flkit.preset_runs import identity

    study = _study(notebook.split("_", 1)[1])
    if not hasattr(study, "timed"):
        return set()
    return {identity(r) for r in study.timed(preset, [0])}


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


def gi_seconds_per_round(preset, s_iter: float) -> float:
    """Inversion seconds a GI round of ``preset`` adds: its expected stale clients (clients per
    round x stale share), each inverted for all ``gi_iters`` iterations at ``s_iter`` seconds
    (an upper bound: the method inverts a round's stale clients in one batch, and the switch
    back to plain aggregation ends inversions)."""
    stale = preset["clients_per_round"] * preset["num_stale"] / preset["num_clients"]
    return stale * int(preset["gi_iters"]) * s_iter


def fedast_probe_config(runs) -> dict:
    """The FedAST run timed for all of them: the one with the most distinct datasets (the paper's
    costliest mix of models). ``runs``: :func:`notebook_runs`' (config, horizon) pairs."""
    return max((c for c, _ in runs), key=lambda c: len({t["dataset"] for t in c["tasks"]}))


def fedast_hours(runs, seconds_per_time_unit: float) -> float:
    """GPU hours of FedAST ``runs`` ((config, horizon) pairs), each to its horizon."""
    return sum(h for _, h in runs) * seconds_per_time_unit / 3600


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


class RoundProbe:
    """One run of ``cfg`` built for timing: its data (tiled to the official size unless
    ``tiny``; kept in ``data_cache`` for the next probe of that data), partition, model, method
    and state, on ``device``; :meth:`rounds` trains some of its rounds."""

    def __init__(self, cfg, device: str, tiny: bool, data_cache: dict):
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
        self.cfg = cfg = cfg.replace(device=device)
        self.device = device
        self.setup = setup = Setup.build(cfg, data_obj=data_cache[dkey])
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
        self.method = methods.get(cfg.method)(ctx, **cfg.method_params)
        self.state = self.method.init_state(model_state(setup.model))
        self.round_no = 0
        _sync(device)
        self.setup_s = time.perf_counter() - t_setup  # data (once), partition, model, state

    def rounds(self, n: int) -> float:
        """Seconds of the next ``n`` rounds, the device synchronised before and after."""
        _sync(self.device)
        t0 = time.perf_counter()
        for _ in range(n):
            self.round_no += 1
            sel = self.method.select_clients(self.state, self.round_no)
            self.state, _ = self.method.round(self.state, sel, self.round_no)
        _sync(self.device)
        return time.perf_counter() - t0


def time_round(cfg, device: str, tiny: bool, data_cache: dict) -> dict:
    """Seconds of one round (after a warm-up round) and of one evaluation, and peak memory."""
    import torch

    probe = RoundProbe(cfg, device, tiny, data_cache)
    cfg, setup, method = probe.cfg, probe.setup, probe.method
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = [probe.rounds(1), probe.rounds(1)]
    t0 = time.perf_counter()
    method.evaluate(probe.state, setup.data.x_test, setup.data.y_test)
    _sync(device)
    eval_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None
    want = torch.device(device).type
    off = [path for path, t in state_tensors(probe.state) if t.device.type != want]
    return {
        "key": [str(part) for part in probe_key(cfg)],
        "method": cfg.method,
        "dataset": cfg.dataset,
        "model": cfg.model,
        "model_kwargs": dict(cfg.model_kwargs),
        "clients_per_round": cfg.clients_per_round,
        "train_samples": int(len(setup.data.y_train)),
        "setup_s": probe.setup_s,
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


def inversion_seconds_per_iter(device: str, size: int, iters: int, backend: str = "auto") -> float:
    """Seconds per inversion iteration of one client at batch ``size`` (LeNet of notebook 05),
    over ``iters`` iterations after a warm-up call (with ``backend="graph"`` they include the
    eager warm-up iterations and the recording: give it enough to amortise them)."""
    import bench_inversion

    from flkit import models

    model = models.build("cnn_mnist", num_classes=10, in_channels=1).to(device)
    dev = torch_device(device)
    bench_inversion.one(model, 1, size, 1, dev, backend)  # warm-up
    return bench_inversion.one(model, 1, size, iters, dev, backend) / iters


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


def estimate(runs, timed: dict, info: dict, gi_extra: float | None = None, alone=()) -> None:
    """GPU hours = sum over runs of rounds x seconds per round (a run without its own probe
    takes the notebook's slowest probed round: the estimate is then marked incomplete), plus
    ``gi_extra`` seconds of inversion per round of a GI run (None: not timed, so incomplete).
    Of those hours, ``alone_gpu_hours`` are the ones :func:`packed_hours` does not pack: the
    runs whose identity is in ``alone`` (the notebook's timed runs, :func:`notebook_timed`) and
    the GI runs' inversions (their packing is not measured; counted one at a time)."""
    if not timed:
        info["gpu_hours"] = None
        info["complete"] = False
        return
    from flkit.preset_runs import identity

    slowest = max(r["seconds_per_round"] for r in timed.values())
    total, unpacked, missing, gi_untimed = 0.0, 0.0, 0, False
    for c in runs:
        r = timed.get(probe_key(c))
        s = r["seconds_per_round"] if r else slowest
        missing += r is None
        if alone and identity(c) in alone:
            unpacked += c.rounds * s
        if c.method == "gi_staleness":
            gi_untimed |= gi_extra is None
            s += gi_extra or 0.0
            unpacked += c.rounds * (gi_extra or 0.0)
        total += c.rounds * s
    info["gpu_hours"] = total / 3600
    info["alone_gpu_hours"] = unpacked / 3600
    info["complete"] = missing == 0 and not gi_untimed
    if gi_untimed:
        info["without_inversion"] = True
    info["runs_without_probe"] = missing


def packed_hours(info: dict, factor: float | None) -> float | None:
    """A GPU's wall-clock hours for a notebook's runs with the run pool packing them: the hours
    one run at a time (``info["gpu_hours"]``, :func:`estimate`) less those that go alone
    (``alone_gpu_hours``), divided by the packing ``factor`` (the packed runs' rounds per second
    over one run's alone, ``benchmarks/packing.py``), plus the alone hours. ``factor`` None (not
    measured): the hours one at a time. None when there is no estimate."""
    hours = info.get("gpu_hours")
    if hours is None:
        return None
    if factor is None:
        return hours
    if not factor > 0:
        raise _flkit_error()(f"packing factor {factor!r}; accepted: a number > 0 or None")
    alone = info.get("alone_gpu_hours", 0.0)
    return (hours - alone) / factor + alone


def packed_estimates(methods: dict | None, packing: dict | None) -> dict:
    """Per notebook of a GPU check's ``methods`` result: its GPU hours one run at a time, the
    packing factor and runs per device the ``packing`` result measured for it (None: not
    measured), and :func:`packed_hours`; ``"total"``: the sums over the notebooks with an
    estimate, and which have none."""
    notebooks = (methods or {}).get("notebooks", {})
    measured = (packing or {}).get("notebooks", {})
    out: dict = {"notebooks": {}}
    one = packed = 0.0
    missing = []
    for nb, info in notebooks.items():
        m = measured.get(nb, {})
        f = m.get("factor")
        row = {
            "gpu_hours": info.get("gpu_hours"),
            "alone_gpu_hours": info.get("alone_gpu_hours"),
            "factor": f,
            "k": m.get("k") if f is not None else None,
            "packed_gpu_hours": packed_hours(info, f),
            "complete": bool(info.get("complete")) and f is not None,
        }
        out["notebooks"][nb] = row
        if row["gpu_hours"] is None:
            missing.append(nb)
            continue
        one += row["gpu_hours"]
        packed += row["packed_gpu_hours"]
    out["total"] = {"gpu_hours": one, "packed_gpu_hours": packed, "without_estimate": missing}
    return out


# ------------------------------------------------------------------------------- from a report
def _fields(notebook: str, cfg) -> str:
    """What a report's probe records of the run it timed (reports before the ``key`` field)."""
    kw = json.dumps(dict(cfg.model_kwargs), sort_keys=True)
    return json.dumps([notebook, cfg.method, cfg.dataset, cfg.model, kw, cfg.clients_per_round])


def _probe_fields(p: dict) -> str:
    kw = json.dumps(p.get("model_kwargs", {}), sort_keys=True)
    return json.dumps(
        [p["notebook"], p["method"], p["dataset"], p["model"], kw, p["clients_per_round"]]
    )


def recost(reports: list[dict], notebooks=None) -> dict:
    """Each notebook's `paper` estimate (:func:`estimate`; FedAST: seconds per simulated time
    unit times its horizons) for the runs its paper folder lists today, from the probes that GPU
    check ``reports`` hold (a later report's probe replaces an earlier one's): the measurements
    are kept apart from the run lists, so a changed preset is costed again without a GPU. A
    probe matches a run by its ``key`` (:func:`probe_key`), or in older reports by notebook,
    method, data, model, model options and clients per round where those name one kind of run
    only; a run without a match takes the slowest probe and leaves the estimate incomplete. A GI
    run's inversions come from a report's ``inversion_s_per_iter`` at the preset's size (absent:
    ``without_inversion``)."""
    from flkit.workbook import presets

    by_key, by_fields, per_unit, per_iter, factors = {}, {}, None, {}, {}
    for rep in reports:
        res = ((rep.get("steps") or {}).get("methods") or {}).get("result") or {}
        for p in res.get("probes", []):
            if "seconds_per_time_unit" in p:
                per_unit = p["seconds_per_time_unit"]
            elif "key" in p:
                by_key[(p["notebook"], tuple(p["key"]))] = p
            else:
                by_fields[_probe_fields(p)] = p
        for nb, info in (res.get("notebooks") or {}).items():
            if "inversion_s_per_iter" in info:
                per_iter[nb] = (info["inversion_s_per_iter"], info.get("inversion_size"))
        pk = ((rep.get("steps") or {}).get("packing") or {}).get("result") or {}
        for nb, row in (pk.get("notebooks") or {}).items():
            if "factor" in row:
                factors[nb] = (row["factor"], row["k"])
    out = {}
    for nb in notebooks or paper_notebooks():
        preset = presets.load(nb, "paper")
        runs = notebook_runs(nb, preset)
        info = out[nb] = {"runs": len(runs)}
        if nb == "03_fedast":
            info["complete"] = False  # one probe for every run, and runs stop at their targets
            info["gpu_hours"] = None
            if per_unit is not None:
                info["probed"] = 1
                info["gpu_hours"] = fedast_hours(runs, per_unit)
            continue
        kinds: dict = {}
        for c in runs:
            kinds.setdefault(_fields(nb, c), set()).add(probe_key(c))
        probes = {}
        for c in runs:
            k = probe_key(c)
            p = by_key.get((nb, tuple(str(part) for part in k)))
            if p is None and len(kinds[_fields(nb, c)]) == 1:
                p = by_fields.get(_fields(nb, c))
            if p is not None:
                probes[k] = p
        info["probed"] = len(probes)
        gi = None
        if nb in per_iter and any(c.method == "gi_staleness" for c in runs):
            s_iter, size = per_iter[nb]
            if size in (None, int(preset["gi_size"])):
                gi = gi_seconds_per_round(preset, s_iter)
        estimate(runs, probes, info, gi, notebook_timed(nb, preset))
        if nb in factors:
            info["factor"], info["k"] = factors[nb]
    return out


#: the GPU checks whose probes cost the `paper` presets in the README's table (benchmarks/results)
PUBLISHED = ("gpu-nvidia-h200-lease4.json", "gpu-nvidia-h200-lease4-fedast.json")


def _hours(x) -> str:
    return "-" if x is None else f"{x:,.2f}" if x < 10 else f"{x:,.0f}"


def _status(nb: str, info: dict) -> str:
    if info.get("gpu_hours") is None:
        return "no probe"
    if nb == "03_fedast":
        return "at most: every run to its horizon, while runs stop at their targets"
    parts = []
    if info.get("runs_without_probe"):
        parts.append(f"{info['runs_without_probe']} runs without a probe (costed at the slowest)")
    if info.get("without_inversion"):
        parts.append("without the GI runs' inversions (not timed at the preset's size)")
    return "; ".join(parts) or "complete"


def table(costs: dict) -> str:
    """The Markdown table of :func:`recost`'s estimates: per notebook its runs, its GPU hours one
    run at a time, the part its timed runs take alone, and packed where a factor was measured."""
    lines = [
        "| notebook | runs | GPU hours, one run at a time | of them alone (timed runs, inversions) "
        "| GPU hours, packed | estimate |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for nb, info in costs.items():
        f = info.get("factor")
        packed = (
            "not measured"
            if f is None
            else f"{_hours(packed_hours(info, f))} ({f:.2f}x, {info['k']} per GPU)"
        )
        alone = info.get("alone_gpu_hours")
        lines.append(
            f"| {nb} | {info['runs']} | {_hours(info.get('gpu_hours'))} | "
            f"{'-' if not alone else _hours(alone)} | {packed} | {_status(nb, info)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse

    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(
        description="Cost every notebook's `paper` preset, as its paper folder lists its runs "
        "today, from the probes of GPU check reports; print the Markdown table."
    )
    ap.add_argument(
        "reports",
        nargs="*",
        default=[str(here / "results" / name) for name in PUBLISHED],
        help="gpu_check JSON reports, later ones replacing earlier probes (default: the "
        "README's, " + ", ".join(PUBLISHED) + ")",
    )
    a = ap.parse_args(argv)
    missing = [path for path in a.reports if not Path(path).is_file()]
    if missing:
        ap.error(f"report(s) {', '.join(missing)} not found; accepted: gpu_check JSON files")
    reports = [json.loads(Path(path).read_text()) for path in a.reports]
    print(table(recost(reports)), end="")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # flkit from this checkout
    sys.exit(main())
