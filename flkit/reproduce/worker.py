"""What runs on a worker, whatever the executor: :func:`run_one` executes one (notebook, seed)
with papermill into its run folder, never raises, and reports each cell it starts through an
``events`` queue so the driver can show "cell n of m" while a long notebook runs. A watchdog
process ends the kernel, with whatever the kernel started, should the worker itself be killed
(a Ray worker, a pool worker: :class:`.stopping.GroupWatchdog`). In a local pool worker it also
reports its kernel's process group (``("kernel", i, pgid)``), so a driver that is stopped can end
the kernel without waiting for it; and a pool worker whose driver is gone (killed with SIGKILL)
ends its kernel and itself (:func:`init_worker`)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from ..data.provenance import ENV_ALLOW
from ..store import save_text
from ..workbook.results import RESULTS_FILE
from .plan import RUN_FILE, SOURCE_ROOT, cell_source, notebook_cells
from .stopping import GroupWatchdog, end_groups, end_with_parent

__all__ = [
    "run_one",
    "failed_info",
    "clean_run_dir",
    "install_events",
    "init_worker",
    "KERNEL_ARGUMENTS",
]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

#: ipykernel logs a warning about its (local, loopback) TCP transport at every start; kernel
#: log records are about the kernel machinery, never about the notebook, so only errors show
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=ERROR",)

_EVENTS = None  # the queue a local pool worker reports to (set by its initializer)
#: the process groups of the kernels this process runs now (a pool worker runs one at a time)
_KERNELS: set[int] = set()


def install_events(queue) -> None:
    """Every :func:`run_one` in this process reports to ``queue``, its kernels' process groups
    included."""
    global _EVENTS
    _EVENTS = queue


def init_worker(queue) -> None:
    """Process-pool initializer: report to ``queue`` (:func:`install_events`), and once the
    driver is gone (SIGKILL leaves it no time to end anything) end the running kernel's process
    group and this process, so that no notebook goes on writing into the run cache unseen."""
    install_events(queue)
    end_with_parent(lambda: end_groups(list(_KERNELS)))


def _reporting_kernel_manager(on_kernel: Callable[[int], None]):
    """A kernel manager class that calls ``on_kernel(pgid)`` (its ``report``) with the process
    group of each kernel it starts (the kernel leads its own process group; its pid where there
    are no groups)."""
    from jupyter_client.manager import AsyncKernelManager

    class ReportingKernelManager(AsyncKernelManager):
        report = staticmethod(on_kernel)

        async def start_kernel(self, **kw):
            await super().start_kernel(**kw)
            prov = self.provisioner
            pid = getattr(prov, "pgid", None) or getattr(prov, "pid", None)
            if pid:
                self.report(int(pid))

    return ReportingKernelManager


def _pool_kernel(index: int, events) -> Callable[[int], None]:
    """What a local pool worker does with a kernel it starts: remember it (for
    :func:`init_worker`'s end) and report it to the driver as ``("kernel", index, pgid)``."""

    def seen(pgid: int) -> None:
        _KERNELS.add(pgid)
        try:
            events.put(("kernel", index, pgid))
        except Exception:  # a closed queue never fails a run
            pass

    return seen


def clean_run_dir(run_dir: Path, notebook: str) -> None:
    """Remove what a previous run left in this run's folder (so stale results never show)."""
    if not run_dir.is_dir():
        return
    for f in run_dir.iterdir():
        if f.is_file() and (
            f.name in (RESULTS_FILE, RUN_FILE, f"{notebook}.ipynb") or f.suffix == ".png"
        ):
            f.unlink()


def _code_cells(path: str) -> int:
    try:
        cells = notebook_cells(Path(path))
    except (OSError, ValueError):
        return 0
    return sum(1 for c in cells if c.get("cell_type") == "code" and cell_source(c).strip())


def _cell_hook(index: int, total: int, t0: float, events):
    """An nbclient ``on_cell_start`` hook counting the code cells as they start."""
    count = [0]

    def hook(cell, cell_index):
        if cell.get("cell_type") != "code" or not str(cell.get("source", "")).strip():
            return
        count[0] += 1
        try:
            events.put(("cell", index, count[0], max(total, count[0]), time.perf_counter() - t0))
        except Exception:  # progress is best effort: a closed queue never fails a run
            pass

    return hook


def run_one(run: dict, events=None) -> dict:
    """Execute one (notebook, seed) with papermill; never raises (a failure is recorded). A
    :class:`.stopping.GroupWatchdog` watches the kernel's process group meanwhile, so that the
    kernel, with what it started, ends should this process be killed."""
    import logging

    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    pool_worker = events is None and _EVENTS is not None
    events = events if events is not None else _EVENTS
    logging.getLogger("papermill").setLevel(logging.WARNING)
    run_dir = Path(run["run_dir"])
    clean_run_dir(run_dir, run["notebook"])
    run_dir.mkdir(parents=True, exist_ok=True)
    output = run_dir / f"{run['notebook']}.ipynb"
    pkg_root = str(SOURCE_ROOT)
    os.environ["FLKIT_REPORT_DIR"] = str(run_dir)
    if run.get("allow_reduced_data"):
        os.environ[ENV_ALLOW] = "1"  # the kernel inherits it: see flkit.data.provenance
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
    client = {}  # nbclient options beyond papermill's own
    if events is not None:  # papermill injects one parameters cell
        total = _code_cells(run["input"]) + 1
        client["on_cell_start"] = _cell_hook(run.get("index", 0), total, t0, events)
    watchdog = GroupWatchdog()
    report = _pool_kernel(run.get("index", 0), events) if pool_worker else None

    def started(pgid: int) -> None:
        watchdog.watch(pgid)
        if report is not None:
            report(pgid)

    client["kernel_manager_class"] = _reporting_kernel_manager(started)
    try:
        pm.execute_notebook(
            run["input"],
            str(output),
            parameters=run["parameters"],
            kernel_name=run["kernel_name"],
            progress_bar=False,
            cwd=str(Path(run["input"]).parent),
            execution_timeout=run["timeout"],
            extra_arguments=list(KERNEL_ARGUMENTS),
            **client,
        )
    except PapermillExecutionError as e:
        info["status"] = "failed"
        info["error"] = _error_info(e.ename, e.evalue, e.traceback, e.cell_index, output)
    except BaseException as e:  # kernel died, timeout, bad notebook: record, keep going
        info["status"] = "failed"
        info["error"] = _error_info(type(e).__name__, str(e), None, None, output)
        if isinstance(e, KeyboardInterrupt):
            raise
    finally:  # papermill has shut the kernel down: its group number may soon name another
        _KERNELS.clear()
        watchdog.close()
    info["wall_time_s"] = round(time.perf_counter() - t0, 3)
    info["results"] = RESULTS_FILE if (run_dir / RESULTS_FILE).is_file() else None
    try:
        save_text(run_dir / RUN_FILE, json.dumps(info, indent=2, default=str) + "\n")
    except OSError:
        pass
    return info


def failed_info(run: dict, exc: BaseException) -> dict:
    """The record of a run whose worker died (killed, out of memory, node lost)."""
    return {
        "notebook": run["notebook"],
        "seed": run["seed"],
        "preset": run["preset"],
        "parameters": run["parameters"],
        "status": "failed",
        "wall_time_s": None,
        "results": None,
        "output_notebook": None,
        "error": {
            "ename": type(exc).__name__,
            "evalue": _ANSI.sub("", str(exc)).strip()[:2000],
            "traceback": "",
            "cell_index": None,
            "cell_source": None,
            "execution_count": None,
        },
    }


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
