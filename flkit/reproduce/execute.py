"""Step 2 of ``flkit reproduce``: train the notebooks' runs in the run pool (:mod:`.pool`), then
run each (notebook, seed) with papermill on an executor (a local process pool, ``jobs`` at a
time, or Ray: :mod:`.executors`), each writing into ``<out>/<notebook>/seed<k>/``; a failing
notebook is recorded (error, failing cell) and the others still run. :func:`reproduce` chains
plan, pool, execute and render."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..store import save_text
from .executors import LocalExecutor, Progress, make_executor
from .plan import RUN_FILE, plan
from .pool import plan_pool, run_pool
from .render import failure_where, write_reports

__all__ = ["reproduce", "reproduce_runs", "execute"]


def execute(runs: list[dict], jobs: int = 1, progress: bool = True, executor=None) -> list[dict]:
    """Run every run on ``executor`` (default: a local pool of ``jobs`` processes); returns one
    info per run, in order. A run that failed, even one whose worker died, is recorded in its
    folder's run.json; the others go on."""
    executor = executor if executor is not None else LocalExecutor(jobs)
    total = len(runs)
    results: dict[int, dict] = {}
    bar = Progress([f"{r['notebook']} seed {r['seed']}" for r in runs], enabled=progress)
    events = executor.events(runs)
    try:
        for event in events:
            if event[0] == "cell":
                bar.cell(*event[1:])
                continue
            _, i, info = event
            results[i] = info
            run_json = Path(runs[i]["run_dir"]) / RUN_FILE
            if info["status"] != "ok" and not run_json.is_file():
                save_text(run_json, json.dumps(info, indent=2, default=str) + "\n")
            where = failure_where(info["error"]) if info["status"] != "ok" else ""
            bar.finished(i, info, "," + where if where else "")
    finally:
        # a stop (Stopped, an error here) ends the executor's runs now, not when the
        # exception is gone and the generator with it
        events.close()
        bar.close()
    return [results[i] for i in range(total)]


def reproduce_runs(
    preset="cpu",
    only=None,
    seeds=(0,),
    jobs=1,
    out="runs/",
    notebooks_dir=None,
    timeout=None,
    overrides=None,
    device=None,
    kernel_name="python3",
    allow_reduced_data=False,
    progress=True,
    executor="local",
    address=None,
    cpus_per_task=None,
    gpus_per_task=None,
    pool=True,
    pool_devices=None,
    runs_per_device=None,
):
    runner = make_executor(executor, jobs, address, preset, cpus_per_task, gpus_per_task)
    p = plan(
        preset=preset,
        only=only,
        seeds=seeds,
        jobs=jobs,
        out=out,
        notebooks_dir=notebooks_dir,
        timeout=timeout,
        overrides=overrides,
        device=device,
        kernel_name=kernel_name,
        allow_reduced_data=allow_reduced_data,
    )
    # the run pool (.pool), checked here: bad settings stop before any training
    pooled = plan_pool(
        p,
        pool,
        devices=pool_devices,
        per_device=runs_per_device,
        executor=executor,
        address=address,
        allow_reduced_data=allow_reduced_data,
        ray_resources=(getattr(runner, "cpus", 1), getattr(runner, "gpus", 0)),
    )
    if progress:
        print(
            f"flkit reproduce: {len(p['notebooks'])} notebook(s) x {len(p['seeds'])} seed(s) at "
            f"preset {preset!r} ({runner.describe()}), into {p['out']}",
            file=sys.stderr,
            flush=True,
        )
    t0 = time.perf_counter()
    try:
        runner.prepare(p["runs"])
        if pooled is not None:
            run_pool(pooled, progress)
            if pooled.ray:  # each notebook's task gets its runs into its node's cache
                runner.ship(pooled.root, pooled.folders, pooled.place)
        infos = execute(p["runs"], jobs, progress, runner)
    finally:
        runner.close()
    path = write_reports(p, infos, time.perf_counter() - t0)
    if progress:
        failed = [f"{r['notebook']} seed {r['seed']}" for r in infos if r["status"] != "ok"]
        print(
            f"flkit reproduce: {len(infos) - len(failed)}/{len(infos)} runs ok"
            + (f"; FAILED: {', '.join(failed)}" if failed else "")
            + f". Report: {path} and {path.with_suffix('.html')}",
            file=sys.stderr,
            flush=True,
        )
    return path, infos


def reproduce(
    preset: str = "cpu",
    only=None,
    seeds=(0,),
    jobs: int = 1,
    out="runs/",
    notebooks_dir=None,
    timeout: float | None = None,
    overrides: dict | None = None,
    device: str | None = None,
    kernel_name: str = "python3",
    allow_reduced_data: bool = False,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
    cpus_per_task: float | None = None,
    gpus_per_task: float | None = None,
    pool: bool = True,
    pool_devices: str | None = None,
    runs_per_device: int | None = None,
) -> Path:
    """Run notebooks at ``preset`` for every seed and write ``<out>/report.md`` (returned) and
    ``<out>/report.html``; a failing notebook is recorded and the others still run.

    only: notebook names (default: every notebook with a preset file in ``notebooks_dir``);
    seeds: integers, each passed as the notebook's ``seed`` parameter; jobs: notebooks run in
    parallel processes; timeout: seconds per cell (None: no limit); overrides: extra papermill
    parameters, each of which must be assigned in every selected notebook's parameters cell;
    device: passed as the ``device`` parameter; notebooks_dir: default ``default_notebooks_dir()``;
    executor: ``local`` (a process pool) or ``ray`` (one Ray task per run, on a local instance or
    on the cluster at ``address``, each asking for the preset's resources unless
    ``cpus_per_task`` / ``gpus_per_task`` say otherwise; see :mod:`.ray_executor`);
    allow_reduced_data: let a ``paper`` preset run on a reduced dataset copy (each kernel gets
    ``FLKIT_ALLOW_REDUCED_DATA=1``; :mod:`flkit.data.provenance`);
    pool: train every notebook's runs first in the run pool (:mod:`.pool`; ``pool_devices`` and
    ``runs_per_device`` on GPUs; on the CPU each run computes with the executors' thread count),
    then the notebooks, which read them from the run cache.
    All arguments are validated (FlkitError) before any notebook starts."""
    return reproduce_runs(
        preset=preset,
        only=only,
        seeds=seeds,
        jobs=jobs,
        out=out,
        notebooks_dir=notebooks_dir,
        timeout=timeout,
        overrides=overrides,
        device=device,
        kernel_name=kernel_name,
        allow_reduced_data=allow_reduced_data,
        progress=progress,
        executor=executor,
        address=address,
        cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task,
        pool=pool,
        pool_devices=pool_devices,
        runs_per_device=runs_per_device,
    )[0]
