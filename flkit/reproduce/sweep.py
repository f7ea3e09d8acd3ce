"""``flkit sweep``: one notebook over a grid of its parameters and several seeds.

Every (grid point, seed) runs on the executors of ``flkit reproduce``; each grid point gets
``<out>/<point>/`` (its runs and its own report.md/.html) and :mod:`.sweep_render` writes one
combined ``<out>/sweep.md`` / ``sweep.html`` / ``sweep.json``: per grid point, every number as
mean ± std over seeds and every claim with the seeds in which it holds.

Resume: a run whose folder already holds an ``ok`` run.json for the same parameters (and its
results.json) is not run again, so a sweep interrupted halfway is finished by running the same
command; failed runs are retried."""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import sys
import time
from pathlib import Path

from ..utils import FlkitError
from ..workbook.results import RESULTS_FILE
from .command import (
    add_executor_arguments,
    add_kernel_arguments,
    add_run_arguments,
    ask,
    run_alone,
    run_kwargs,
)
from .cost_guard import NotStartedError
from .execute import execute
from .executors import make_executor
from .plan import (
    RESERVED_PARAMETERS,
    RUN_FILE,
    default_notebooks_dir,
    discover,
    match_notebook,
    notebook_parameters,
    plan,
)
from .render import write_reports
from .stopping import Stopped, stop_on_signals, stopped_message
from .sweep_render import write_sweep_report

__all__ = ["parse_grid", "grid_points", "point_label", "finished_info", "sweep", "register_cli"]


def parse_grid(items) -> dict[str, list]:
    """``["tau=10,40,100", "lr=0.1,0.2"]`` -> ``{"tau": [10, 40, 100], "lr": [0.1, 0.2]}``
    (values are Python literals, else plain strings)."""
    grid: dict[str, list] = {}
    for item in items or []:
        key, sep, values = str(item).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise FlkitError(f"--grid {item!r} is not KEY=V1,V2,...; accepted e.g. tau=10,40,100")
        parts = [v.strip() for v in values.split(",")]
        if not any(parts):
            raise FlkitError(
                f"--grid {item!r} gives no values for {key!r}; accepted: KEY=V1,V2,..."
            )
        if not all(parts):
            raise FlkitError(
                f"--grid {item!r} has an empty value (two commas, or one at an end); accepted: "
                "KEY=V1,V2,... with every value given"
            )
        if key in grid:
            raise FlkitError(f"--grid key {key!r} is given twice; accepted: each key once")
        vals = []
        for v in parts:
            try:
                vals.append(ast.literal_eval(v))
            except (ValueError, SyntaxError):
                vals.append(v)
        if len({repr(v) for v in vals}) < len(vals):
            raise FlkitError(f"--grid {item!r} repeats a value; accepted: distinct values")
        grid[key] = vals
    return grid


def grid_points(grid: dict[str, list]) -> list[dict]:
    """Every combination, the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def point_label(point: dict) -> str:
    """A folder name for one grid point, e.g. ``tau=10,lr=0.1``."""
    text = ",".join(f"{k}={v}" for k, v in point.items())
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", text)


def finished_info(run: dict) -> dict | None:
    """The run.json of a run already done with the same parameters, else None."""
    run_dir = Path(run["run_dir"])
    try:
        info = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = info.get("parameters") == json.loads(json.dumps(run["parameters"], default=str))
    if info.get("status") != "ok" or not same or not (run_dir / RESULTS_FILE).is_file():
        return None
    return info


def _check_grid(grid: dict, params: dict, name: str, overrides: dict) -> None:
    if not grid:
        raise FlkitError(
            "the grid is empty; accepted: one or more --grid KEY=V1,V2,... "
            "(e.g. --grid tau=10,40,100)"
        )
    accepted = [p for p in params if p not in RESERVED_PARAMETERS]
    for key in grid:
        if key in RESERVED_PARAMETERS:
            raise FlkitError(f"--grid key {key!r} is set by sweep itself; use --{key}s")
        if key in overrides:
            raise FlkitError(f"--grid key {key!r} is also given with --set; give it once")
        if key not in params:
            from ..workbook.presets import unknown_choice

            raise FlkitError(
                unknown_choice("grid key", key, accepted, where=f" for notebook {name!r}")
            )


def sweep(
    notebook: str,
    grid: dict,
    preset: str = "cpu",
    seeds=(0,),
    jobs: int = 1,
    out="runs/sweep",
    notebooks_dir=None,
    timeout=None,
    overrides: dict | None = None,
    device: str | None = None,
    kernel_name: str = "python3",
    allow_reduced_data: bool = False,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
    cpus_per_task=None,
    gpus_per_task=None,
    confirm=None,
):
    """Run ``notebook`` at every grid point for every seed; returns (path of sweep.md, infos).

    grid: ``{key: [values]}`` over the names the notebook's parameters cell assigns; the other
    arguments are those of :func:`.execute.reproduce`. Every argument is checked before any run
    starts; runs already finished in ``out`` are not run again. ``confirm(notebook, runs to do)``
    is called after the checks, before any run: it stops the sweep by raising."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else default_notebooks_dir()
    found = discover(folder) if folder.is_dir() else {}
    name = match_notebook(notebook, sorted(found)) if found else notebook
    overrides = dict(overrides or {})
    if name in found:
        _check_grid(grid, notebook_parameters(found[name]), name, overrides)
    elif not grid:
        _check_grid(grid, {}, name, overrides)
    runner = make_executor(executor, jobs, address, preset, cpus_per_task, gpus_per_task)
    out = Path(out)
    points = []
    for point in grid_points(grid):
        label = point_label(point)
        p = plan(
            preset=preset,
            only=[name],
            seeds=seeds,
            jobs=jobs,
            out=out / label,
            notebooks_dir=folder,
            timeout=timeout,
            overrides={**overrides, **point},
            device=device,
            kernel_name=kernel_name,
            allow_reduced_data=allow_reduced_data,
        )
        points.append({"point": point, "label": label, "plan": p})
    runs = [r for pt in points for r in pt["plan"]["runs"]]
    done = {i: info for i, r in enumerate(runs) if (info := finished_info(r)) is not None}
    todo = [i for i in range(len(runs)) if i not in done]
    if confirm is not None and todo:
        confirm(name, len(todo))  # nothing has started yet: a raise leaves nothing to clean up
    if progress:
        print(
            f"flkit sweep: {name} at preset {preset!r}, {len(points)} grid point(s) x "
            f"{len(points[0]['plan']['seeds'])} seed(s) = {len(runs)} run(s); {len(done)} "
            f"already done, {len(todo)} to run ({runner.describe()}), into {out.resolve()}",
            file=sys.stderr,
            flush=True,
        )
    t0 = time.perf_counter()
    if todo:
        try:
            runner.prepare([runs[i] for i in todo])
            new = execute([runs[i] for i in todo], jobs, progress, runner)
        finally:
            runner.close()
        done.update(zip(todo, new))
    wall = time.perf_counter() - t0
    infos = [done[i] for i in range(len(runs))]
    k = 0
    for pt in points:
        n = len(pt["plan"]["runs"])
        pt["infos"] = infos[k : k + n]
        k += n
        write_reports(pt["plan"], pt["infos"], wall)
    path = write_sweep_report(
        out.resolve(),
        {
            "notebook": name,
            "preset": preset,
            "grid": grid,
            "seeds": points[0]["plan"]["seeds"],
            "overrides": overrides,
            "executor": runner.describe(),
            "wall_time_s": wall,
            "resumed": len(done) - len(todo),
        },
        points,
    )
    if progress:
        failed = sum(1 for r in infos if r["status"] != "ok")
        print(
            f"flkit sweep: {len(infos) - failed}/{len(infos)} runs ok. Report: {path}",
            file=sys.stderr,
            flush=True,
        )
    return path, infos


_DESCRIPTION = """\
Run one notebook at every point of a grid of its parameters (--grid, the names its parameters
cell assigns: `flkit reproduce --list-parameters NOTEBOOK` lists them) for every seed, on the
executors of `flkit reproduce`. Each grid point gets <out>/<point>/ with its runs and its own
report.md/.html; <out>/sweep.md, sweep.html and sweep.json put the points side by side: every
number as mean ± std over seeds and every claim with the seeds in which it holds.
All arguments are checked before any run starts."""

_EPILOG = """\
examples:
  flkit sweep 05_staleness --preset smoke --grid tau=10,40,100 --seeds 0 1 2
  flkit sweep 02_feddip --preset smoke --grid rounds=2,4 --jobs 2
  flkit sweep 00 --preset smoke --grid alpha=0.1,1.0 --grid rounds=2,3 --executor ray --jobs 4

Running the same command again finishes an interrupted sweep: runs already done are kept.
cost: as `flkit reproduce`: before a paper sweep, or one estimated over an hour (all its runs at
the preset's measured time), the estimate is printed and the command asks; --yes skips it.
exit status: 0 when every run succeeded, 1 when a run failed or the question was answered no,
2 for bad arguments or a costly sweep refused without a terminal to ask on,
128 + the signal's number when stopped by SIGTERM (kill) or SIGINT (Ctrl-C): every notebook's
kernel is ended, and a new sweep resumes their training from its checkpoints."""


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``sweep`` sub-command; its handler is ``args.func(args) -> exit status``."""
    p = subparsers.add_parser(
        "sweep",
        help="run one notebook over a grid of its parameters and seeds, one combined report",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("notebook", help="the notebook, e.g. 05_staleness (or 05, staleness)")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="values of one notebook parameter, a name its parameters cell assigns (repeatable: "
        "the grid is every combination; default: none, and an empty grid is an error)",
    )
    p.add_argument(
        "--preset", default="cpu", help="preset the notebook runs at (default: %(default)s)"
    )
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=[0],
        metavar="SEED",
        help="seeds each grid point runs with; several give mean ± std (default: 0)",
    )
    p.add_argument(
        "--out",
        default="runs/sweep",
        metavar="DIR",
        help="folder for the grid points' runs and reports and sweep.md; a folder holding an "
        "earlier run of the same sweep is resumed (default: %(default)s)",
    )
    p.add_argument(
        "--notebooks",
        dest="notebooks_dir",
        default=None,
        metavar="DIR",
        help="folder holding the notebooks (default: $FLKIT_NOTEBOOKS or the repository's "
        "notebooks/)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="device parameter passed to the notebook (auto, cpu, cuda; default: the "
        "notebook's own, normally auto)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter fixed for every grid point (repeatable; default: none)",
    )
    add_kernel_arguments(p)
    add_executor_arguments(p)
    add_run_arguments(p, what="(grid point, seed) runs")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args) -> int:
    grid, kwargs = parse_grid(args.grid), run_kwargs(args)

    def confirm(name: str, todo: int) -> None:
        stop = ask("sweep", args, {name: todo}, kwargs, changed=True)
        if stop is not None:
            raise NotStartedError(stop)

    try:
        with stop_on_signals():
            _, infos = sweep(args.notebook, grid, confirm=confirm, **kwargs)
    except NotStartedError as stop:
        return stop.status
    except Stopped as stop:
        print(stopped_message("sweep", stop), file=sys.stderr, flush=True)
        return 128 + stop.signum
    return 0 if all(r["status"] == "ok" for r in infos) else 1


def main(argv=None) -> int:
    """``flkit sweep`` on its own (tests)."""
    return run_alone(register_cli, "sweep", argv)
