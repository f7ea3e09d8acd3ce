"""The runs of notebook 04's long-lr rule (``long_lr``): each supermask method on MNIST
alpha = 1 at the `long` preset's rounds and seeds, run adaptively in the rule's order and stopped
where the rule has its answer, one run at a time through ``study.rounds_search`` (cached on disk
like every run, so a rerun loads what is done), returning the table the rule reads.

    long = presets.load("04_hidenseek", "long")
    t = long_lr_search(long, device="cpu", progress=True)
    long_lr.choose_long_lr(t, {"HideNseek": 10.0, "FedMask": 10.0, "Signed": 1.0, "BNNAvg": 1.0})
"""

from __future__ import annotations

from numbers import Integral

import pandas as pd

from flkit.utils import FlkitError, check_choice, configure_threads

from . import study
from .long_lr import LONG_LR_SEEDS, long_lr_verdict
from .searches import SCORE_LR_GRID, lr_sequence
from .settings import PRE_LONG_LR, Settings

__all__ = ["long_lr_search"]


def long_lr_search(
    preset,
    methods=study.SUPERMASK_METHODS,
    seeds=LONG_LR_SEEDS,
    grid=SCORE_LR_GRID,
    device="auto",
    progress=False,
    out_dir=None,
    settings: Settings | None = None,
) -> pd.DataFrame:
    """The runs of the rule that checks each supermask method's MNIST score lr at the `long`
    preset's rounds and seeds (``long_lr.choose_long_lr``): MNIST alpha = 1 at the preset's
    settings (``long``: 90 rounds, 4 of 40 clients a round), each method at its MNIST lr of
    ``settings`` (default ``PRE_LONG_LR``, the settings the recorded search ran with; where the
    rule keeps a method's lr these are the very runs the `long` notebook makes and finds in the
    cache) first, then the lrs of ``grid`` ascending, every seed of ``seeds``, up to
    the first lr that passes (``long_lr.long_lr_verdict``); the other seeds of an lr are not run
    once one seed has a round without a flip. One row per run, read at its last round
    (``study.rounds_search``'s, with ``seed``). Every config is built (and so checked) before any
    run."""
    if settings is None:
        settings = PRE_LONG_LR
    seeds = list(seeds)
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, Integral) or s < 0]
    if bad or not seeds or len(set(seeds)) != len(seeds):
        raise FlkitError(
            f"seeds {bad or seeds} for the long-lr search; accepted: distinct integers >= 0, "
            "at least one"
        )
    rounds = int(preset["mnist_rounds"])
    for m in methods:
        check_choice("method of the long-lr search", m, study.SUPERMASK_METHODS)
    plan = {m: lr_sequence(grid, settings.lr_of(m, "mnist_a1")) for m in methods}
    for m, order in plan.items():
        for lr in order:
            for s in seeds:
                study.config(preset, "mnist_a1", m, s, device, settings=settings, lr=lr)
    if preset["threads"]:
        configure_threads(int(preset["threads"]))
    frames = []
    for m, order in plan.items():
        for lr in order:
            rows = []
            for s in seeds:
                row = study.rounds_search(
                    preset,
                    grid=(rounds,),
                    methods=(m,),
                    task="mnist_a1",
                    seed=s,
                    device=device,
                    progress=progress,
                    out_dir=out_dir,
                    lr=lr,
                    settings=settings,
                ).assign(seed=s)
                rows.append(row)
                if long_lr_verdict(row, seeds) is False:  # a round without a flip
                    break
            frames += rows
            if long_lr_verdict(pd.concat(rows, ignore_index=True), seeds):
                break
    return pd.concat(frames, ignore_index=True)
