"""Batch reproduction: run notebooks with papermill and write one report of what they measured.

``flkit reproduce --preset cpu --seeds 0 1 2 --jobs 2 --out runs/`` (or ``reproduce(...)``):

1. validates everything before any work starts: the preset against each notebook's preset file,
   ``--only`` names against the notebooks that exist, ``--set`` overrides against each notebook's
   parameters cell (and the preset's types), seeds, jobs, timeout, the kernel and that the output
   folder is writable;
2. trains every selected notebook's runs first, packed over the cores or GPUs (the run pool,
   :mod:`.pool`; ``--no-pool`` turns it off), so that the notebooks then read them from the run
   cache;
3. executes each (notebook, seed) with papermill (parameters ``preset``, ``seed``
   [, ``device``, overrides])
   in a separate process (``--jobs N`` at a time), with ``FLKIT_REPORT_DIR=<out>/<name>/seed<k>`` so
   the notebook's ``flkit.workbook.report.Report`` writes ``results.json`` and its figures there,
   beside the executed notebook ``<out>/<name>/seed<k>/<name>.ipynb`` and ``run.json`` (status,
   time, error);
4. continues past a failing notebook (recording the error and the failing cell) and finally writes
   ``<out>/report.md``, ``<out>/report.html`` (figures embedded) and ``<out>/summary.json``.

Notebooks run with their own folder as working directory (as in JupyterLab and nbval), and with
flkit's source folder prepended to ``PYTHONPATH`` so the kernel imports this same flkit.

The package reads in three steps: :mod:`.plan` (find the notebooks, validate every argument,
list the runs), :mod:`.execute` (run them with papermill, a failing one recorded and skipped, on
an executor from :mod:`.executors`: a local process pool, or Ray in :mod:`.ray_executor`; what
runs on a worker is :mod:`.worker`), :mod:`.render` (report.md, report.html, summary.json);
:mod:`.command` is ``flkit reproduce``. :mod:`.sweep` (``flkit sweep``, a grid of overrides x
seeds for one notebook, resumable) reuses all three and adds one combined report
(:mod:`.sweep_render`).
"""

from __future__ import annotations

from .command import main, register_cli, run_cli
from .execute import reproduce, reproduce_runs
from .plan import (
    ENV_NOTEBOOKS,
    RESERVED_PARAMETERS,
    RUN_FILE,
    SOURCE_ROOT,
    default_notebooks_dir,
    discover,
    match_notebook,
    notebook_parameters,
    parameters_cell,
    plan,
)
from .render import write_reports
from .sweep import parse_grid, sweep
from .sweep import register_cli as register_sweep_cli

__all__ = [
    "reproduce",
    "reproduce_runs",
    "plan",
    "register_cli",
    "run_cli",
    "main",
    "discover",
    "notebook_parameters",
    "parameters_cell",
    "match_notebook",
    "default_notebooks_dir",
    "write_reports",
    "sweep",
    "parse_grid",
    "register_sweep_cli",
    "ENV_NOTEBOOKS",
    "RESERVED_PARAMETERS",
    "RUN_FILE",
    "SOURCE_ROOT",
]
