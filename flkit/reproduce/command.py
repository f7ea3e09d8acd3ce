"""``flkit reproduce``: the sub-command's arguments and handler (``python -m flkit.reproduce`` runs
it on its own)."""

from __future__ import annotations

import argparse
import ast
import sys

from ..utils import FlkitError, run_command
from ..workbook import presets
from ..workbook.run_times import RUN_TIMES, sentence
from .execute import reproduce_runs
from .executors import EXECUTORS
from .plan import default_notebooks_dir, discover
from .pool import add_pool_arguments, pool_kwargs
from .stopping import Stopped, stop_on_signals, stopped_message

__all__ = [
    "register_cli",
    "run_cli",
    "main",
    "add_executor_arguments",
    "parse_set",
    "run_kwargs",
    "run_alone",
]


def parse_set(items) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise FlkitError(f"--set {item!r} is not KEY=VALUE; accepted e.g. --set rounds=5")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise FlkitError(f"--set {item!r}: {key!r} is not a parameter name")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


_DESCRIPTION = """\
Execute the notebooks with papermill at one preset, for one or more seeds, and write
<out>/report.md and <out>/report.html: per notebook, its claims (verdict, evidence, regime),
its numbers grouped as tables (mean ± std over seeds) and its figures, with run time, preset,
seeds, commit and package versions. A failing notebook is reported as FAILED with the
error and the failing cell; the other notebooks still run.

Each run writes <out>/<notebook>/seed<k>/: the executed notebook, results.json (what the
notebook recorded through flkit.workbook.report), its figures and run.json (status, time, error).
Next to report.md it writes results.md: every claim with its verdict (holds / does not hold /
outside regime / inconclusive), evidence, regime indicators beside the paper's values, seeds,
date and commit; --publish copies it into the repository (docs/RESULTS.md).
All arguments are checked before any notebook starts."""

_EPILOG = """\
examples:
  flkit reproduce                                  every notebook at cpu, seed 0, into runs/
  flkit reproduce --preset smoke --only 02_feddip  one notebook in seconds
  flkit reproduce --preset paper --seeds 0 1 2 --jobs 3 --out runs/paper
  flkit reproduce --list                           notebooks and their presets
  flkit reproduce --publish runs/                  copy runs/results.md into docs/RESULTS.md
  flkit reproduce --preset smoke --executor ray --jobs 2          on a local Ray instance
  flkit reproduce --preset paper --executor ray --address HEAD:6379   on a Ray cluster

exit status: 0 when every run succeeded, 1 when a notebook failed, 2 for bad arguments,
128 + the signal's number when stopped by SIGTERM (kill) or SIGINT (Ctrl-C): every notebook's
kernel is ended, and a new run resumes their training from its checkpoints."""


def add_kernel_arguments(p: argparse.ArgumentParser) -> None:
    """--timeout and --kernel, how each notebook's kernel runs (reproduce and sweep)."""
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="limit per cell (default: none)",
    )
    p.add_argument(
        "--kernel",
        dest="kernel_name",
        default="python3",
        metavar="NAME",
        help="Jupyter kernel to run the notebooks with (default: python3)",
    )
    p.add_argument(
        "--allow-reduced-data",
        action="store_true",
        help="let a preset that needs whole datasets (paper) run on a reduced copy, such as the "
        "mirror's 12,000-image CIFAR-10; the results record the copy as reduced (sets "
        "FLKIT_ALLOW_REDUCED_DATA=1 in each notebook's kernel; default: off, such a run stops "
        "with an error naming the dataset)",
    )


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor, --address, --cpus-per-task, --gpus-per-task (reproduce and sweep)."""
    p.add_argument(
        "--executor",
        default="local",
        choices=EXECUTORS,
        help="where runs execute: local (a process pool, --jobs at a time; default) or ray "
        "(one Ray task per run; needs pip install 'flkit[ray]')",
    )
    p.add_argument(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="with --executor ray: the cluster to join (as printed by `ray start --head`); "
        "default: start a Ray instance on this machine (--jobs tasks at a time) and stop it "
        "at the end",
    )
    p.add_argument(
        "--cpus-per-task",
        type=float,
        default=None,
        metavar="N",
        help="with --executor ray: CPUs each run asks for (default: 1)",
    )
    p.add_argument(
        "--gpus-per-task",
        type=float,
        default=None,
        metavar="N",
        help="with --executor ray: GPUs each run asks for (default: 1 at preset paper, "
        "0 otherwise)",
    )


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command; its handler is ``args.func(args) -> exit status``."""
    p = subparsers.add_parser(
        "reproduce",
        help="run the notebooks (papermill) and write a 'paper vs. measured' report",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--preset",
        default="cpu",
        help="preset every notebook runs at: smoke (seconds, CPU), cpu (real data, "
        "scaled down; default), paper (the paper's settings, GPU) or long (the "
        "notebooks that have one: the paper's regime on a free 2-core CPU machine, up "
        "to 2 h each)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="run only these notebooks (name as in notebooks/, e.g. 02_feddip; the "
        "number or the word alone works when unique); default: all",
    )
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        metavar="SEED",
        help="seeds to run each notebook with (default: 0); several seeds give mean ± std",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="notebooks run in parallel processes (default: 1)",
    )
    p.add_argument(
        "--out",
        default="runs/",
        metavar="DIR",
        help="output folder for executed notebooks, results and reports (default: runs/)",
    )
    p.add_argument(
        "--notebooks",
        dest="notebooks_dir",
        default=None,
        metavar="DIR",
        help="folder holding the notebooks (default: $FLKIT_NOTEBOOKS or the "
        "repository's notebooks/)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="device parameter passed to every notebook (auto, cpu, cuda; default: "
        "the notebook's own, normally auto)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra notebook parameter, e.g. --set rounds=5 (repeatable); KEY must be "
        "assigned in each notebook's parameters cell; VALUE is a Python literal "
        "or a plain string (default: none, the notebooks' own values)",
    )
    add_kernel_arguments(p)
    add_executor_arguments(p)
    add_pool_arguments(p)
    p.add_argument(
        "--list",
        action="store_true",
        help="list the notebooks and their presets, then exit (default: off)",
    )
    p.add_argument(
        "--publish",
        default=None,
        metavar="RUN_DIR",
        help="run nothing: check the results page of an earlier run's output folder (every run "
        "recorded at the commit its page claims, the page as generated) and copy it into the "
        "repository: docs/RESULTS.md, docs/results.json and the README's results column "
        "(default: off)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines (default: off)")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args) -> int:
    """Handler of ``flkit reproduce``; raises FlkitError for bad arguments."""
    if getattr(args, "publish", None):
        from .results_page import publish

        print(f"published {publish(args.publish)}")
        return 0
    if args.list:
        found = discover(args.notebooks_dir)
        if not found:
            print(
                "no notebooks with a preset file in "
                f"{args.notebooks_dir or default_notebooks_dir()}"
                f" (preset files searched in: {', '.join(map(str, presets.search_path()))})"
            )
        for name, path in sorted(found.items()):
            print(f"{name:28s} {', '.join(presets.available(name)):28s} {path}")
            if name in RUN_TIMES:
                print(f"{'':28s} {sentence(name)}")
        return 0
    try:
        with stop_on_signals():
            _, infos = reproduce_runs(only=args.only, **run_kwargs(args), **pool_kwargs(args))
    except Stopped as stop:
        print(stopped_message("reproduce", stop), file=sys.stderr, flush=True)
        return 128 + stop.signum
    return 0 if all(r["status"] == "ok" for r in infos) else 1


def run_kwargs(args) -> dict:
    """The keyword arguments ``flkit reproduce`` and ``flkit sweep`` share, from parsed args."""
    return dict(
        preset=args.preset,
        seeds=args.seeds if args.seeds is not None else (0,),
        jobs=args.jobs,
        out=args.out,
        notebooks_dir=args.notebooks_dir,
        timeout=args.timeout,
        overrides=parse_set(args.overrides),
        device=args.device,
        kernel_name=args.kernel_name,
        allow_reduced_data=args.allow_reduced_data,
        progress=not args.quiet,
        executor=args.executor,
        address=args.address,
        cpus_per_task=args.cpus_per_task,
        gpus_per_task=args.gpus_per_task,
    )


def run_alone(register, name: str, argv=None) -> int:
    """Run the sub-command ``name`` (added by ``register``) on its own, as ``flkit name``."""
    parser = argparse.ArgumentParser(prog="flkit")
    register(parser.add_subparsers(dest="command"))
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != name:
        argv = [name] + argv
    return run_command(parser, argv)


def main(argv=None) -> int:
    """``python -m flkit.reproduce [options]``: the same as ``flkit reproduce [options]``."""
    return run_alone(register_cli, "reproduce", argv)
