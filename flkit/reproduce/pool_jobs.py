"""What the run pool trains: one :class:`PoolJob` per training run a notebook makes, read from its
paper folder's ``study.runs(preset, seeds)`` (:mod:`flkit.preset_runs`).

A job carries what names its run-cache folder besides the config: the torch thread count the run
computes with on the CPU. That is the notebook's, never the pool's choice: a preset that pins
``threads`` (FedFV's projection, FedAST's simulations, HideNseek) keeps its own count, and every
other notebook computes with the count its kernel gets from the executor (``FLKIT_THREADS``,
:func:`.plan.with_threads`), so the folder the pool fills is the one the notebook reads. It also
says whether the notebook reads the run's wall-clock times (``timed``, from ``study.timed``),
which the pool then never packs with another run."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from .. import store
from ..preset_runs import identity
from ..utils import FlkitError
from ..workbook import presets

__all__ = [
    "PoolJob",
    "KINDS",
    "DEVICE_TYPES",
    "PAPERS",
    "notebook_jobs",
    "study_module",
    "log_name",
    "resume_round",
]

#: a job's kind: a run of :func:`flkit.experiment.run` (a RunConfig), or a FedAST simulation of
#: :func:`flkit.asyncfl.run` (a FedASTRun and a seed)
KINDS = ("run", "simulation")
#: devices named by their type alone: :meth:`PoolJob.folder` names their folders on any machine
DEVICE_TYPES = ("cpu", "cuda")


@dataclass(frozen=True)
class PoolJob:
    """One training run of a notebook, as a pool worker process receives it (plain data)."""

    notebook: str
    study: str  # the paper folder's study module, whose ``train`` (if any) trains the run
    preset: str
    kind: str
    config: dict
    seed: int | None  # a simulation's seed (a RunConfig holds its own)
    threads: int
    allow_reduced: bool = False
    #: the notebook reads this run's wall-clock times as evidence (``study.timed``): the pool
    #: trains it alone on its device, as the notebook would without the pool
    timed: bool = False

    def label(self) -> str:
        c = self.config
        if self.kind == "run":
            return f"{self.notebook} {c['method']} seed {c['seed']}"
        return f"{self.notebook} {c['method']} ({len(c['tasks'])} tasks) seed {self.seed}"

    def cost(self) -> float:
        """A rough measure of the work, to start the dearest first and to estimate the time left
        (rounds x clients x local passes; a simulation: its tasks x its time or arrival limit)."""
        c = self.config
        if self.kind == "run":
            passes = c.get("local_epochs") or c.get("local_steps") or 1
            return float(c["rounds"] * c["clients_per_round"] * passes)
        limit = c.get("max_time") or c.get("max_events") or 1.0
        return float(len(c["tasks"]) * limit)

    def folder(self, root, device: str = "auto") -> Path | None:
        """The run-cache folder this job fills under ``root`` when it trains on ``device``
        (its key at the job's thread count); None for a run whose backend is "auto", which a
        measurement on the worker decides. ``device`` "cpu" or "cuda" names the folder of a run
        on such a device even where this machine has none (a Ray cluster's GPUs)."""
        typed = device if device in DEVICE_TYPES else None
        if self.kind == "run":
            from ..experiment import RunConfig

            cfg = RunConfig.from_dict({**self.config, "device": "cpu" if typed else device})
            if cfg.backend == "auto":
                return None
            key = cfg.cache_key(typed)
            if "threads" in key:
                key["threads"] = self.threads
            return store.run_dir(root, key, prefix=cfg.method)
        import torch

        from ..asyncfl import FedASTRun, runner
        from ..utils import resolve_device

        cfg = FedASTRun.from_dict(self.config).validate()
        dev = torch.device(typed) if typed else resolve_device(device)
        key = runner.cache_key(cfg, self.seed, dev)
        if "threads" in key:
            key["threads"] = self.threads
        return runner.run_folder(cfg, self.seed, dev, root, key)

    def finished(self, folder: Path | None) -> bool:
        """Whether ``folder`` holds this run whole (a damaged one is left to the worker, which
        reports it and trains the run again)."""
        if folder is None:
            return False
        if self.kind == "run":
            from ..experiment import RUN_FILES

            rows = self.config["rounds"]
        else:
            from ..asyncfl.runner import RUN_FILES

            rows = None
        return store.RunFolder(folder, RUN_FILES).whole(rows, repair=False)


#: the paper folders: a notebook whose preset file lives elsewhere has no ``study.runs``
PAPERS = Path(__file__).resolve().parents[1] / "papers"


def study_module(notebook: str):
    """The ``study`` module of ``notebook``'s paper folder (the folder holding its preset file);
    FlkitError for a notebook whose preset file is in no paper folder."""
    folder = Path(presets.meta(notebook)["preset_file"]).resolve().parent
    if folder.parent != PAPERS or not (folder / "study.py").is_file():
        raise FlkitError(
            f"{notebook}'s preset file is in {folder}, not in a paper folder of {PAPERS} with a "
            "study.py, so its runs cannot be listed"
        )
    return importlib.import_module(f"flkit.papers.{folder.name}.study")


def notebook_jobs(
    notebook: str,
    preset: str,
    seeds,
    overrides: dict,
    threads: int,
    allow_reduced: bool = False,
) -> list[PoolJob]:
    """Every training run of ``notebook`` at ``preset`` for the notebook seeds ``seeds`` with the
    parameter ``overrides`` (as ``flkit reproduce`` passes them; ``device`` aside, each must be a
    preset key), from its ``study.runs``. ``threads``: the torch threads the notebook's kernel
    computes with where its preset pins none (:func:`.plan.run_threads`). A run the study lists
    in ``study.timed(preset, seeds)`` (its notebook reads the run's wall-clock times) is marked
    ``timed``. FlkitError when the
    runs cannot be listed (no ``study.runs``, an override the preset does not hold): the notebook
    then trains its runs itself."""
    study = study_module(notebook)
    if not hasattr(study, "runs"):
        raise FlkitError(f"{study.__name__} has no runs(preset, seeds); accepted: a paper folder")
    keys = presets.load(notebook, preset)
    unknown = sorted(k for k in overrides if k != "device" and k not in keys)
    if unknown:
        raise FlkitError(
            f"parameter(s) {', '.join(unknown)} of {notebook} are not preset keys, so its runs "
            f"cannot be listed before it executes; accepted: {', '.join(sorted(keys))}"
        )
    chosen = {k: v for k, v in overrides.items() if k in keys}
    p = presets.load(notebook, preset, allow_reduced_data=allow_reduced or None, **chosen)
    threads = int(p.get("threads", 0) or 0) or int(threads)
    seeds = [int(s) for s in seeds]
    timed = {identity(r) for r in study.timed(p, seeds)} if hasattr(study, "timed") else set()
    jobs = []
    for item in study.runs(p, seeds):
        if isinstance(item, tuple):
            config, seed, kind = dict(item[0]), int(item[1]), "simulation"
        else:
            config, seed, kind = item.to_dict(), None, "run"
        jobs.append(
            PoolJob(
                notebook,
                study.__name__,
                p.name,
                kind,
                config,
                seed,
                threads,
                bool(allow_reduced),
                identity(item) in timed,
            )
        )
    return jobs


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:80]


def log_name(i: int, job: PoolJob) -> str:
    """The name of run ``i``'s log in the pool's log folder."""
    return f"{i:03d}-{_slug(job.label())}.log"


def resume_round(folder: Path | None) -> int:
    """The round a run's checkpoint in ``folder`` resumes from (0: none)."""
    try:
        return int(store.load_json(folder / store.CHECKPOINT_SUM)["round"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0
