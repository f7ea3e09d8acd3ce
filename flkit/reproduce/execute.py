"""Step 2 of ``flkit reproduce``: run each (notebook, seed) with papermill in its own process
(``jobs`` at a time), each writing into ``<out>/<notebook>/seed<k>/``; a failing notebook is
recorded (error, failing cell) and the others still run. :func:`reproduce` chains plan, execute
and render."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
import time
from pathlib import Path

from ..results import RESULTS_FILE
from ..store import save_text
from .plan import RUN_FILE, SOURCE_ROOT, cell_source, notebook_cells, plan
from .render import failure_where, write_reports

__all__ = ["reproduce", "reproduce_runs", "execute"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _clean_run_dir(run_dir: Path, notebook: str) -> None:
    """Remove what a previous run left in this run's folder (so stale results never show)."""
    if not run_dir.is_dir():
        return
    for f in run_dir.iterdir():
        if f.is_file() and (
            f.name in (RESULTS_FILE, RUN_FILE, f"{notebook}.ipynb") or f.suffix == ".png"
        ):
            f.unlink()


def _run_one(run: dict) -> dict:
    """Execute one (notebook, seed) with papermill; never raises. Runs in a worker process."""
    import logging

    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    logging.getLogger("papermill").setLevel(logging.WARNING)
    run_dir = Path(run["run_dir"])
    _clean_run_dir(run_dir, run["notebook"])
    run_dir.mkdir(parents=True, exist_ok=True)
    output = run_dir / f"{run['notebook']}.ipynb"
    pkg_root = str(SOURCE_ROOT)
    os.environ["FLKIT_REPORT_DIR"] = str(run_dir)
    if run.get("threads") and not os.environ.get("FLKIT_THREADS"):
        os.environ["FLKIT_THREADS"] = str(run["threads"])  # the kernel inherits it
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([pkg_root] + paths)
    info = {
        "notebook": run["notebook"],
        "seed": run["seed"],
        "preset": run["preset"],
        "parameters": run["parameters"],
        "status": "ok",
        "error": None,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "output_notebook": output.name,
    }
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(
            run["input"],
            str(output),
            parameters=run["parameters"],
            kernel_name=run["kernel_name"],
            progress_bar=False,
            cwd=str(Path(run["input"]).parent),
            execution_timeout=run["timeout"],
        )
    except PapermillExecutionError as e:
        info["status"] = "failed"
        info["error"] = _error_info(e.ename, e.evalue, e.traceback, e.cell_index, output)
    except BaseException as e:  # kernel died, timeout, bad notebook: record, keep going
        info["status"] = "failed"
        info["error"] = _error_info(type(e).__name__, str(e), None, None, output)
        if isinstance(e, KeyboardInterrupt):
            raise
    info["wall_time_s"] = round(time.perf_counter() - t0, 3)
    info["results"] = RESULTS_FILE if (run_dir / RESULTS_FILE).is_file() else None
    try:
        save_text(run_dir / RUN_FILE, json.dumps(info, indent=2, default=str) + "\n")
    except OSError:
        pass
    return info


def _error_info(ename, evalue, traceback, cell_index, output: Path) -> dict:
    tb = _ANSI.sub("", "\n".join(traceback or []))
    tb_lines = tb.splitlines()
    err = {
        "ename": str(ename),
        "evalue": _ANSI.sub("", str(evalue)).strip()[:2000],
        "traceback": "\n".join(tb_lines[-40:]),
        "cell_index": cell_index,
        "cell_source": None,
        "execution_count": None,
    }
    if output.is_file():  # the failing cell is the one holding an error output
        try:
            cells = [c for c in notebook_cells(output) if c.get("cell_type") == "code"]
            for cell in cells:
                if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                    err["cell_source"] = cell_source(cell)[:4000]
                    err["execution_count"] = cell.get("execution_count")
                    break
        except (OSError, ValueError):
            pass
    return err


def execute(runs: list[dict], jobs: int, progress: bool) -> list[dict]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    def log(msg):
        if progress:
            print(msg, file=sys.stderr, flush=True)

    results: dict[int, dict] = {}
    total = len(runs)
    # parallel notebooks share the cores instead of each taking all of them
    # (see utils.configure_threads)
    threads = max(1, (os.cpu_count() or 1) // min(jobs, total)) if jobs > 1 else None
    runs = [{**r, "threads": threads} for r in runs]
    with ProcessPoolExecutor(
        max_workers=min(jobs, total), mp_context=mp.get_context("spawn")
    ) as pool:
        futures = {}
        for i, run in enumerate(runs):
            futures[pool.submit(_run_one, run)] = i
        for fut in as_completed(futures):
            i = futures[fut]
            run = runs[i]
            try:
                info = fut.result()
            except (BrokenProcessPool, Exception) as e:  # the worker itself died
                info = {
                    "notebook": run["notebook"],
                    "seed": run["seed"],
                    "preset": run["preset"],
                    "parameters": run["parameters"],
                    "status": "failed",
                    "wall_time_s": None,
                    "results": None,
                    "output_notebook": None,
                    "error": {
                        "ename": type(e).__name__,
                        "evalue": str(e),
                        "traceback": "",
                        "cell_index": None,
                        "cell_source": None,
                        "execution_count": None,
                    },
                }
            results[i] = info
            if info["status"] == "ok":
                log(
                    f"[{len(results)}/{total}] {run['notebook']} seed {run['seed']}: ok "
                    f"in {info['wall_time_s']:.1f} s"
                )
            else:
                e = info["error"]
                where = "," + failure_where(e) if failure_where(e) else ""
                log(
                    f"[{len(results)}/{total}] {run['notebook']} seed {run['seed']}: FAILED "
                    f"({e['ename']}: {e['evalue'][:200]}{where})"
                )
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
    progress=True,
):
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
    )
    if progress:
        print(
            f"flkit reproduce: {len(p['notebooks'])} notebook(s) x {len(p['seeds'])} seed(s) at "
            f"preset {preset!r}, {jobs} job(s), into {p['out']}",
            file=sys.stderr,
            flush=True,
        )
    t0 = time.perf_counter()
    infos = execute(p["runs"], jobs, progress)
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
    progress: bool = True,
) -> Path:
    """Run notebooks at ``preset`` for every seed and write ``<out>/report.md`` (returned) and
    ``<out>/report.html``; a failing notebook is recorded and the others still run.

    only: notebook names (default: every notebook with a preset file in ``notebooks_dir``);
    seeds: integers, each passed as the notebook's ``seed`` parameter; jobs: notebooks run in
    parallel processes; timeout: seconds per cell (None: no limit); overrides: extra papermill
    parameters, each of which must be assigned in every selected notebook's parameters cell;
    device: passed as the ``device`` parameter; notebooks_dir: default ``default_notebooks_dir()``.
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
        progress=progress,
    )[0]
