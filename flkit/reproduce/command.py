"""``flkit reproduce``: the sub-command's arguments and handler (``python -m flkit.reproduce`` runs
it on its own)."""

from __future__ import annotations

import argparse
import ast
import sys

from ..utils import FlkitError, add_quiet_argument, run_command
from ..workbook import presets
from ..workbook.run_times import RUN_TIMES, sentence
from .cost_guard import confirm, estimate
from .execute import reproduce_runs
from .executors import EXECUTORS, make_executor
from .parameter_table import parameter_table
from .plan import default_notebooks_dir, discover, plan
from .pool import add_pool_arguments, pool_kwargs
from .stopping import Stopped, stop_on_signals, stopped_message

__all__ = [
    "register_cli",
    "run_cli",
    "main",
    "add_executor_arguments",
    "add_run_arguments",
    "parse_set",
    "guard",
    "ask",
    "JOBS",
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
  flkit reproduce --preset long                    01 to 04 (00 and 05 have no long: skipped)
  flkit reproduce --preset paper --seeds 0 1 2 --jobs 3 --out runs/paper
  flkit reproduce --list                           notebooks and their presets
  flkit reproduce --list-parameters 02_feddip      what --set can change in one notebook
  flkit reproduce --publish runs/                  copy runs/results.md into docs/RESULTS.md
  flkit reproduce --preset smoke --executor ray --jobs 2          on a local Ray instance
  flkit reproduce --preset paper --executor ray --address HEAD:6379   on a Ray cluster

cost: before a paper run, or any run estimated over an hour, the estimate is printed (measured
run times; GPU hours on an H200 for paper) and the command asks before it starts; --yes starts
without the question. Without a terminal on stdin and without --yes it does not start.

exit status: 0 when every run succeeded, 1 when a notebook failed or the question was answered
no, 2 for bad arguments or a costly run refused without a terminal to ask on,
128 + the signal's number when stopped by SIGTERM (kill) or SIGINT (Ctrl-C): every notebook's
kernel is ended, and a new run resumes their training from its checkpoints."""

#: notebooks run at a time unless --jobs says otherwise, in every command that runs notebooks:
#: one, because each notebook's torch already uses every core (parallel ones split them), memory
#: grows with each one at a time, the measured run times are of one at a time, and no number
#: depends on it; more is a choice for a machine with cores and memory to spare
JOBS = 1


def add_run_arguments(p: argparse.ArgumentParser, what: str = "notebooks") -> None:
    """--jobs, --quiet (alias --no-progress) and --yes (reproduce and sweep)."""
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=JOBS,
        metavar="N",
        help=f"how many {what} run at a time, each in its own process (default: %(default)s: "
        "a notebook's torch uses every core already; the numbers never depend on it)",
    )
    add_quiet_argument(
        p, "no progress lines; a costly run's estimate and question still show (default: off)"
    )
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="start a paper run, or one estimated over an hour, without asking (default: off, "
        "the estimate is printed and the command asks; without a terminal it does not start)",
    )


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
        "paper's regime on a free 2-core CPU machine, up to 2 h each); without --only, a "
        "notebook that lacks the preset is skipped with a line saying so (long: 00 and 05), "
        "while one named in --only must have it",
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
        "--list-parameters",
        default=None,
        metavar="NOTEBOOK",
        help="run nothing: list NOTEBOOK's parameters (name, type, default, comment, and the "
        "value at --preset of those that override a preset key), what --set can change "
        "(default: off)",
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
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="run nothing: judge every claim of docs/results.json again under the current "
        "rules from its recorded measurements, cite the release (git tag vX.Y.Z) that holds "
        "each run's commit, rewrite docs/RESULTS.md, the README's results "
        "column and the paper READMEs' verdicts, and print each verdict that changed "
        "(default: off)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --rejudge: write nothing, exit 1 when the page is not what the current "
        "rules give (default: off)",
    )
    add_run_arguments(p)
    p.set_defaults(func=run_cli)
    return p


def run_cli(args) -> int:
    """Handler of ``flkit reproduce``; raises FlkitError for bad arguments."""
    if getattr(args, "check", False) and not getattr(args, "rejudge", False):
        raise FlkitError("--check goes with --rejudge; accepted: --rejudge --check")
    if getattr(args, "rejudge", False):
        from .rejudge import rejudge_file

        try:
            page, changes = rejudge_file(check=args.check)
        except FlkitError as err:
            if not args.check:
                raise
            print(err, file=sys.stderr)
            return 1
        for line in changes:
            print(f"changed: {line}")
        print(f"{'checked' if args.check else 'rejudged'} {page} ({len(changes)} verdicts changed)")
        return 0
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
    if args.list_parameters:
        print(parameter_table(args.list_parameters, args.notebooks_dir, args.preset))
        return 0
    kwargs = run_kwargs(args)
    only = _with_preset(args.only, args.preset, args.notebooks_dir)
    refused = guard("reproduce", args, only=only, **kwargs)
    if refused is not None:
        return refused
    try:
        with stop_on_signals():
            _, infos = reproduce_runs(only=only, **kwargs, **pool_kwargs(args))
    except Stopped as stop:
        print(stopped_message("reproduce", stop), file=sys.stderr, flush=True)
        return 128 + stop.signum
    return 0 if all(r["status"] == "ok" for r in infos) else 1


def _with_preset(only, preset: str, notebooks_dir) -> list[str] | None:
    """``--only`` as given; without it, the notebooks that have ``preset`` when only some do
    (the others are named on stderr). When none has it, every notebook goes on to the
    validation, whose error lists the presets there are."""
    if only:
        return only
    found = discover(notebooks_dir)
    have = [n for n in sorted(found) if preset in presets.available(n)]
    lack = [n for n in sorted(found) if n not in have]
    if not have or not lack:
        return None
    print(
        f"flkit reproduce: skipping {', '.join(lack)}: no preset {preset!r} there "
        f"(running {', '.join(have)})",
        file=sys.stderr,
        flush=True,
    )
    return have


def guard(command: str, args, only=None, **kwargs) -> int | None:
    """Validate every argument as the run will (FlkitError), then say the estimate and ask before
    a costly run (:func:`ask`); None to go on, else the exit status."""
    p = plan(only=only, **{k: kwargs[k] for k in _PLAN_ARGUMENTS})
    make_executor(
        kwargs["executor"],
        kwargs["jobs"],
        kwargs["address"],
        kwargs["preset"],
        kwargs["cpus_per_task"],
        kwargs["gpus_per_task"],
    )
    runs = {n: len(p["seeds"]) for n in p["notebooks"]}
    return ask(command, args, runs, kwargs, changed=bool(kwargs["overrides"]))


def ask(command: str, args, runs: dict[str, int], settings: dict, changed: bool) -> int | None:
    """Say the estimate of ``runs`` ({notebook: number of runs}) and ask about a costly one
    (:func:`.cost_guard.confirm`); ``settings`` as :func:`run_kwargs` gives them, ``changed``
    when parameters are overridden. None to go on, else the exit status."""
    return confirm(
        estimate(settings["preset"], runs),
        command,
        yes=args.yes,
        jobs=settings["jobs"],
        overrides=changed,
        quiet=not settings["progress"],
    )


# the arguments of run_kwargs that plan validates (the others say where and how runs execute)
_PLAN_ARGUMENTS = (
    "preset",
    "seeds",
    "jobs",
    "out",
    "notebooks_dir",
    "timeout",
    "overrides",
    "device",
    "kernel_name",
    "allow_reduced_data",
)


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
