"""Several simulated experiments at once: :func:`run_many`.

The runs that are not in the run cache go to ``jobs`` worker processes, each of which stores its
result in the cache like :func:`flkit.asyncfl.run`; every result is then read from the cache. A
run's numbers depend only on its configuration, seed, device type and, on the CPU, the torch
threads it computes with (part of its cache key), never on which worker ran it: with ``threads``
given, ``jobs`` changes the wall time and nothing else. An interrupted call keeps every run that
had finished: the next call starts from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

from ..data import provenance as _identity
from ..progress import bar as new_bar
from ..progress import finish
from ..utils import FlkitError, cores_per_job, resolve_device
from .config import FedASTRun
from .defaults import METHOD_LABELS
from .runner import open_folder, run

__all__ = ["run_many", "worker_threads"]


def worker_threads(jobs: int, threads: int | None) -> int:
    """Torch threads per worker: ``threads`` when given (> 0), else the cores shared out."""
    return int(threads) if threads else cores_per_job(jobs)


@contextmanager
def _torch_threads(threads: int | None):
    """torch's intra-op threads set to ``threads`` (None: left as they are), then put back."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _init_worker(threads: int, policy: dict) -> None:
    import torch

    torch.set_num_threads(threads)
    _identity.set_policy(policy["preset"], policy["allow_reduced"])  # the full-data rule, as here


def _run_one(config: dict, seed: int, device: str, root) -> float:
    res = run(config, seed, progress=False, device=device, root=root)
    return float(res.stats.get("wall_seconds", 0.0))


def _label(cfg: FedASTRun, seed: int) -> str:
    return f"{METHOD_LABELS[cfg.method]} ({len(cfg.tasks)} tasks, seed {seed})"


def run_many(
    items: Sequence[tuple],
    *,
    jobs: int = 1,
    device="auto",
    progress: bool = True,
    root=None,
    threads: int | None = None,
) -> list:
    """The :class:`~flkit.asyncfl.SimResult` of every ``(config, seed)`` in ``items``, in order.

    ``jobs`` (>= 1): worker processes for the runs not yet cached (1: run them here, one after
    the other, with a bar per run); ``threads``: torch threads each run computes with (None or
    0: with ``jobs`` = 1 the current count, else the CPU cores divided by ``jobs``); the cache is
    looked up under the same count, here and in the workers. Every config is validated before
    anything runs."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FlkitError(f"jobs={jobs!r} is not accepted; accepted: an integer >= 1")
    runs = []
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise FlkitError(f"items[{i}] = {item!r:.80}; accepted: a (config, seed) pair")
        cfg, seed = item
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise FlkitError(f"items[{i}] has seed {seed!r}; accepted: an integer")
        runs.append((FedASTRun.from_dict(cfg).validate(), int(seed)))
    dev = resolve_device(device)
    if jobs == 1:
        with _torch_threads(threads or None):
            return [run(c, s, device=dev, progress=progress, root=root) for c, s in runs]

    per_worker = worker_threads(jobs, threads)
    # the workers' thread count is part of each run's cache key: look up and read under it
    with _torch_threads(per_worker):
        todo, seen = [], set()
        for c, s in runs:
            folder = open_folder(c, s, dev, root)
            if folder.path not in seen and not folder.whole():
                seen.add(folder.path)
                todo.append((c, s))
        if todo:
            _pool(todo, jobs, dev, progress, root, per_worker)
        return [run(c, s, device=dev, progress=False, root=root) for c, s in runs]


def _pool(todo, jobs, dev, progress, root, threads) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    jobs = min(jobs, len(todo))
    b = (
        new_bar(total=len(todo), desc=f"{len(todo)} runs in {jobs} processes", unit="run")
        if progress
        else None
    )
    ok = False
    try:
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=mp.get_context("spawn"),  # a forked torch can deadlock in its thread pools
            initializer=_init_worker,
            initargs=(threads, _identity.policy()),
        ) as pool:
            pending = {
                pool.submit(_run_one, c.to_dict(), s, str(dev), root): (c, s) for c, s in todo
            }
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    c, s = pending.pop(fut)
                    try:
                        wall = fut.result()
                    except Exception as e:
                        for f in pending:
                            f.cancel()
                        raise FlkitError(
                            f"{_label(c, s)} failed in a worker process: {e}; the runs that "
                            "finished are cached and are not run again"
                        ) from e
                    if b is not None:
                        b.update(1)
                        b.set_postfix_str(f"last: {_label(c, s)}, {wall:.0f} s", refresh=True)
        ok = True
    finally:
        finish(b, ok)
