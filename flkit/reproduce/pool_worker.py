"""A pool worker: ``python -m flkit.reproduce.pool_worker DRIVER_PID`` trains
:class:`~.pool_jobs.PoolJob`\\ s into the run cache one after another, as a notebook's kernel trains
its runs, for as long as its driver (:class:`.pool.Pool`) gives it some.

The driver writes one line per run on the worker's stdin: the path of a JSON spec holding the job,
the cache root, where the run's output goes (``log``) and where its outcome goes (``status``). The
worker points its stdout and stderr at the log, trains the run, and writes ``{"returncode": 0}`` to
the status file (a failed run: its traceback in the log, ``1`` in the status, and the worker
exits, so that the next run starts in a clean process). End of input ends the worker.

A worker serves one slot: one GPU (``CUDA_VISIBLE_DEVICES``) and one torch thread count
(``FLKIT_THREADS``), fixed for its life, so Python, torch, CUDA and the decoded data are started
once per slot, not once per run (on the CPU that start-up cost about as much as a short run).
A run's numbers do not depend on what the worker trained before: each run seeds its own
generators from its config, exactly as in a notebook's kernel, which trains its runs one after
another in one process too. A worker that dies takes only its current run with it, whose
checkpoint the next attempt resumes from. The run is trained as the notebook trains it: through
the paper's ``study.train`` where the study has one (:mod:`flkit.preset_runs`), else
:func:`flkit.experiment.run` alone."""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

__all__ = ["train", "train_logged", "output_to", "serve", "main"]


def train(
    job: dict, root: str, device: str = "auto", checkpoint_every=None, checkpoint_seconds=60.0
) -> None:
    """Train ``job`` (a :class:`~.pool_jobs.PoolJob` as a dict) into the cache at ``root``."""
    from ..data import provenance
    from ..utils import configure_threads

    configure_threads(int(job["threads"]))
    provenance.set_policy(job["preset"], bool(job["allow_reduced"]))  # as the notebook's Report
    if job["kind"] == "simulation":
        from ..asyncfl import runner

        runner.run(job["config"], int(job["seed"]), progress=False, device=device, root=root)
        return
    from ..experiment import RunConfig, run

    cfg = RunConfig.from_dict(job["config"])
    how = getattr(importlib.import_module(job["study"]), "train", None) or run
    how(
        cfg,
        out_dir=root,
        progress=False,
        checkpoint_every=checkpoint_every,
        checkpoint_seconds=checkpoint_seconds,
    )


@contextmanager
def output_to(path):
    """This process's stdout and stderr (file descriptors 1 and 2, hence C libraries' output
    too) written to ``path`` while inside, then put back (a Ray worker goes on to other tasks)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for target, fd in zip((1, 2), saved):
            os.dup2(fd, target)
            os.close(fd)


def _write_status(path: str, returncode: int) -> None:
    """The run's outcome, written whole (the driver reads the file once it exists)."""
    from ..store import save_json

    save_json(path, {"returncode": returncode})


def _release() -> None:
    """What the last run left behind given back: its objects, and on a GPU the cached blocks, so
    that the next run's memory is what the pool's estimate counted."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def serve(lines) -> int:
    """Train the run of each spec path in ``lines`` in turn; 0 once they are all done, 1 after
    the first failed run (its status written first)."""
    for line in lines:
        path = line.strip()
        if not path:
            continue
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
        with output_to(spec["log"]):
            returncode = train_logged(spec, spec["root"], catch=BaseException)
        _write_status(spec["status"], returncode)
        if returncode:
            return 1
        _release()
    return 0


def train_logged(spec: dict, root, catch=Exception) -> int:
    """:func:`train` of ``spec``'s job into ``root``: 0 when it ends whole, 1 (its traceback
    printed) when it raised ``catch``."""
    try:
        train(
            spec["job"],
            str(root),
            spec.get("device", "auto"),
            spec.get("checkpoint_every"),
            float(spec.get("checkpoint_seconds", 60.0)),
        )
    except catch:
        traceback.print_exc()
        return 1
    return 0


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m flkit.reproduce.pool_worker DRIVER_PID", file=sys.stderr)
        return 2
    from .stopping import end_with_parent

    # a pool whose driver is killed (SIGKILL runs no handler) leaves no run training unseen: the
    # run resumes from its checkpoint the next time
    end_with_parent(lambda: None, parent=int(args[0]))
    return serve(sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
