"""One pool worker: ``python -m flkit.reproduce.pool_worker JOB.json`` trains one
:class:`~.pool_jobs.PoolJob` into the run cache and exits (0 when the run is whole).

A process per run: its torch threads (``FLKIT_THREADS``), its GPU (``CUDA_VISIBLE_DEVICES``) and
its global random generators are its own, so nothing a neighbour does reaches its numbers, and a
worker that dies takes only its own run with it (whose checkpoint the next attempt resumes from).
The run is trained exactly as the notebook trains it: through the paper's ``study.train`` where
the study has one (:mod:`flkit.preset_runs`), else :func:`flkit.experiment.run` alone."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

__all__ = ["train", "main"]


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


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m flkit.reproduce.pool_worker JOB.json", file=sys.stderr)
        return 2
    from .stopping import end_with_parent

    # a pool whose driver is killed (SIGKILL runs no handler) leaves no run training unseen: the
    # run resumes from its checkpoint the next time
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    end_with_parent(lambda: None, parent=spec.get("driver"))
    train(
        spec["job"],
        spec["root"],
        spec.get("device", "auto"),
        spec.get("checkpoint_every"),
        float(spec.get("checkpoint_seconds", 60.0)),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
