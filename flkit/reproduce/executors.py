"""Where the runs execute. An executor takes the list of runs and yields events as they happen:
``("cell", i, n, m, elapsed_s)`` when run ``i`` starts its ``n``-th of ``m`` code cells, and
``("done", i, info)`` when it ends (``info`` as :func:`.worker.run_one` returns it, its files in
the run's folder on the driver). ``local`` (the default) is a process pool on this machine;
``ray`` (:mod:`.ray_executor`) runs each run as one Ray task, on a local instance or a cluster.

:class:`Progress` is what the driver prints: one line per finished run, an overall bar on a
terminal, and within a running notebook "cell n/m" and its elapsed time (on a terminal in the
bar, otherwise a line at most every ``CELL_LINE_EVERY_S`` seconds per run). A heartbeat repeats
that line while one cell runs for minutes, so a long cell never leaves the driver silent."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time

from ..utils import FlkitError, check_choice, cores_per_job
from .worker import failed_info, install_events, run_one

__all__ = [
    "LocalExecutor",
    "make_executor",
    "task_resources",
    "Progress",
    "EXECUTORS",
    "PRESET_RESOURCES",
    "CELL_LINE_EVERY_S",
    "HEARTBEAT_S",
]

EXECUTORS = ("local", "ray")
#: resources one Ray task asks for, per preset: the ``paper`` settings are meant for a GPU,
#: the others run on a CPU core (``--cpus-per-task`` / ``--gpus-per-task`` override them)
PRESET_RESOURCES = {"paper": {"cpus": 1, "gpus": 1}}
DEFAULT_RESOURCES = {"cpus": 1, "gpus": 0}
CELL_LINE_EVERY_S = 30.0
#: how often the driver brings the running cells' elapsed times up to date
HEARTBEAT_S = 5.0
#: seconds a stopped run's workers and kernels get to exit on SIGTERM before SIGKILL
STOP_GRACE_S = 5.0
RAY_INSTALL = "pip install 'flkit[ray]'  (or: pip install 'ray>=2.9')"


def _fmt_elapsed(s: float) -> str:
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """Driver-side progress of ``total`` runs (labels ``"<notebook> seed <k>"``)."""

    def __init__(self, labels: list[str], enabled: bool = True, stream=None):
        self.labels = labels
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.cells: dict[int, str] = {}
        self.last_line: dict[int, float] = {}
        self.bar = None
        if enabled and getattr(self.stream, "isatty", lambda: False)():
            from tqdm import tqdm

            self.bar = tqdm(total=len(labels), desc="runs", file=self.stream, unit="run")
        # run i's current cell: (n, m, elapsed at its start, time.monotonic() when reported)
        self.running: dict[int, tuple[int, int, float, float]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.beat = None
        if enabled:
            self.beat = threading.Thread(target=self._beat, name="flkit-progress", daemon=True)
            self.beat.start()

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            self.heartbeat()

    def _write(self, msg: str) -> None:
        if self.bar is not None:
            self.bar.write(msg, file=self.stream)
        else:
            print(msg, file=self.stream, flush=True)

    def cell(self, i: int, n: int, m: int, elapsed: float) -> None:
        if not self.enabled:
            return
        with self.lock:
            self.running[i] = (n, m, elapsed, time.monotonic())
            self._show(i)

    def heartbeat(self) -> None:
        """Show every running notebook's current cell with its elapsed time brought up to now
        (a line per run at most every ``CELL_LINE_EVERY_S`` s; the bar's text on a terminal)."""
        with self.lock:
            for i in list(self.running):
                self._show(i)

    def _show(self, i: int) -> None:
        n, m, elapsed, since = self.running[i]
        now = time.monotonic()
        text = f"{self.labels[i]}: cell {n}/{m}, {_fmt_elapsed(elapsed + now - since)}"
        self.cells[i] = text
        if self.bar is not None:
            self.bar.set_postfix_str("; ".join(self.cells.values()), refresh=True)
            return
        if now - self.last_line.get(i, -1e9) >= CELL_LINE_EVERY_S:
            self.last_line[i] = now
            self._write(f"  {text}")

    def finished(self, i: int, info: dict, where: str = "") -> None:
        with self.lock:
            self._finished(i, info, where)

    def _finished(self, i: int, info: dict, where: str) -> None:
        self.done += 1
        self.cells.pop(i, None)
        self.running.pop(i, None)
        if not self.enabled:
            return
        head = f"[{self.done}/{len(self.labels)}] {self.labels[i]}"
        if info["status"] == "ok":
            self._write(f"{head}: ok in {info['wall_time_s']:.1f} s")
        else:
            e = info["error"]
            self._write(f"{head}: FAILED ({e['ename']}: {e['evalue'][:200]}{where})")
        if self.bar is not None:
            self.bar.set_postfix_str("; ".join(self.cells.values()), refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        self.stop.set()
        if self.beat is not None:
            self.beat.join()
        if self.bar is not None:
            self.bar.close()


class LocalExecutor:
    """``jobs`` runs at a time, each in its own process on this machine."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = jobs

    def describe(self) -> str:
        return f"local, {self.jobs} job(s)"

    def prepare(self, runs: list[dict]) -> None:
        """Nothing to check for a process pool (a Ray cluster checks its resources here)."""

    def close(self) -> None:
        pass

    def events(self, runs: list[dict]):
        import multiprocessing as mp
        import queue as _queue
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        if not runs:
            return
        jobs = min(self.jobs, len(runs))
        # parallel notebooks share the cores instead of each taking all of them
        # (see utils.configure_threads)
        threads = cores_per_job(jobs) if jobs > 1 else None
        # a run pool's notebooks compute with the pool's count, to find its runs (.pool)
        runs = [
            {**r, "threads": r.get("threads") or threads, "index": i} for i, r in enumerate(runs)
        ]
        ctx = mp.get_context("spawn")
        events = ctx.Queue()
        kernels: dict[int, int] = {}  # running run's index -> its kernel's process group
        ended: set[int] = set()  # a late report of an ended run's kernel names no live group
        pool = ProcessPoolExecutor(
            max_workers=jobs, mp_context=ctx, initializer=install_events, initargs=(events,)
        )
        try:
            pending = {pool.submit(run_one, run): i for i, run in enumerate(runs)}
            while pending:
                finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                while True:
                    try:
                        event = events.get_nowait()
                    except (_queue.Empty, OSError, ValueError):
                        break
                    if event[0] != "kernel":
                        yield event
                    elif event[1] not in ended:
                        kernels[event[1]] = event[2]
                for fut in finished:
                    i = pending.pop(fut)
                    ended.add(i)
                    kernels.pop(i, None)
                    try:
                        info = fut.result()
                    except Exception as e:  # the worker itself died (BrokenProcessPool)
                        info = failed_info(runs[i], e)
                    yield ("done", i, info)
        except BaseException:
            # stopped (a signal, the consumer gone): end the kernels and the workers now;
            # shutting the pool down alone would wait for every running notebook to finish
            _stop_pool(pool, events, kernels, ended)
            raise
        pool.shutdown(wait=True)
        events.close()


def _stop_pool(
    pool, events, kernels: dict[int, int], ended: set[int], grace_s: float = STOP_GRACE_S
) -> None:
    """End a pool's running notebooks: SIGTERM to each kernel's process group (the kernel and
    what it started) and to each worker, SIGKILL to what is left after ``grace_s`` seconds."""
    import queue as _queue
    import signal

    while True:  # a kernel started since the last look is reported in the queue
        try:
            event = events.get_nowait()
        except (_queue.Empty, OSError, ValueError):
            break
        if event[0] == "kernel" and event[1] not in ended:
            kernels[event[1]] = event[2]
    workers = list((getattr(pool, "_processes", None) or {}).values())
    hard = getattr(signal, "SIGKILL", signal.SIGTERM)
    for sig in (signal.SIGTERM, hard):
        for pgid in kernels.values():
            try:
                if hasattr(os, "killpg"):
                    os.killpg(pgid, sig)
                else:
                    os.kill(pgid, sig)
            except OSError:  # already gone
                pass
        for w in workers:
            if not w.is_alive():
                continue
            if sig == signal.SIGTERM:
                w.terminate()
            else:
                w.kill()
        deadline = time.monotonic() + grace_s
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
        if sig == signal.SIGTERM and not any(w.is_alive() for w in workers):
            if not any(_group_alive(g) for g in kernels.values()):
                break
    pool.shutdown(wait=False, cancel_futures=True)
    events.close()


def _group_alive(pgid: int) -> bool:
    try:
        if hasattr(os, "killpg"):
            os.killpg(pgid, 0)
        else:
            os.kill(pgid, 0)
    except OSError:
        return False
    return True


def task_resources(preset: str, cpus=None, gpus=None) -> dict:
    """CPUs and GPUs one task asks for: the preset's default, each overridable."""
    res = dict(PRESET_RESOURCES.get(preset, DEFAULT_RESOURCES))
    for key, value, low in (("cpus", cpus, 1), ("gpus", gpus, 0)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
            raise FlkitError(
                f"{key} per task = {value!r} is outside the accepted range [{low}, inf) "
                f"(--{key}-per-task)"
            )
        res[key] = value
    return res


def make_executor(
    name: str = "local",
    jobs: int = 1,
    address: str | None = None,
    preset: str = "cpu",
    cpus_per_task=None,
    gpus_per_task=None,
):
    """The executor called ``name`` (one of ``EXECUTORS``); checked before any run starts."""
    check_choice("executor", name, EXECUTORS)
    if name == "local":
        extra = [
            f"--{flag}"
            for flag, v in (
                ("address", address),
                ("cpus-per-task", cpus_per_task),
                ("gpus-per-task", gpus_per_task),
            )
            if v is not None
        ]
        if extra:
            raise FlkitError(
                f"{', '.join(extra)} only applies to --executor ray; accepted with "
                "--executor local: --jobs"
            )
        return LocalExecutor(jobs)
    if importlib.util.find_spec("ray") is None:
        raise FlkitError(
            f"--executor ray needs Ray, which is not installed; install it with: {RAY_INSTALL}"
        )
    from .ray_executor import RayExecutor

    resources = task_resources(preset, cpus_per_task, gpus_per_task)
    cores = os.cpu_count() or 1
    if address is None and cpus_per_task is not None and cpus_per_task > cores:
        # a Ray started here has this machine's cores only: such a task would never be scheduled
        raise FlkitError(
            f"--cpus-per-task {cpus_per_task:g} is more than this machine's {cores} CPUs; "
            f"accepted without --address: 1..{cores}"
        )
    return RayExecutor(address=address, jobs=jobs, **resources)
