"""The runs of the baseline levers' rules (``baseline_levers``): each lever's sequence, run
adaptively in the rule's order and stopped where the rule has its answer, one run at a time
through ``study.rounds_search`` (cached on disk like every run, so a rerun loads what is done),
returning the table the rule reads.

    cpu = presets.load("04_hidenseek", "cpu")
    t = vote_weight_search(cpu, "fedmask", device="cpu", progress=True)
    baseline_levers.choose_vote_weights(t, "fedmask")
    b = bnnavg_real_lr_search(cpu, device="cpu", progress=True)
    baseline_levers.choose_bnnavg_real_lr(b)

Every config of a sequence is built (and so checked) before its first run: bad input trains
nothing. The runs start from ``settings.PRE_LEVER``, the settings the levers were tried against,
with the lever's option over them.
"""

from __future__ import annotations

import pandas as pd

from flkit.utils import check_choice, configure_threads

from . import study
from .baseline_levers import (
    BNNAVG_LATENT_GRID,
    BNNAVG_REAL_LR,
    VOTE_WEIGHT_GRID,
    VOTE_WEIGHT_HAR_ROUNDS,
    VOTE_WEIGHT_METHODS,
)
from .searches import MNIST_LR_ROUNDS, lr_sequence, passing

__all__ = ["vote_weight_search", "bnnavg_real_lr_search"]

_MNIST = "mnist_a1"


def _settings(preset, task: str, rounds: int) -> dict:
    """The preset with ``task``'s rounds set to ``rounds``, the rounds the rule reads."""
    return {**preset, f"{task.split('_')[0]}_rounds": rounds}


def _check(preset, plan, seed, device) -> None:
    """Build every config of ``plan`` ((task, rounds, method, lr, params)), so that a bad option,
    lr or preset is refused before the first run."""
    for task, rounds, method, lr, params in plan:
        study.config(
            _settings(preset, task, rounds),
            task,
            method,
            seed,
            device,
            settings=study.PRE_LEVER,
            lr=lr,
            **params,
        )


def _one(preset, task, rounds, method, lr, params, seed, device, progress, out_dir):
    """One run of the sequence, read at its last round: a row of ``study.rounds_search``."""
    return study.rounds_search(
        preset,
        grid=(rounds,),
        methods=(method,),
        task=task,
        seed=seed,
        device=device,
        progress=progress,
        out_dir=out_dir,
        lr=lr,
        method_params=params,
        settings=study.PRE_LEVER,
    )


def _threads(preset) -> None:
    if preset["threads"]:
        configure_threads(int(preset["threads"]))


def vote_weight_search(
    preset,
    method: str,
    seed: int = 0,
    device="auto",
    progress=False,
    out_dir=None,
    grid=VOTE_WEIGHT_GRID,
) -> pd.DataFrame:
    """Lever 1's runs for ``method`` ("fedmask" or "signed"), all with ``normalize="all"``: HAR
    for VOTE_WEIGHT_HAR_ROUNDS rounds at each lr of ``grid`` ascending, up to the first that
    passes; then, if one did, MNIST alpha = 1 for MNIST_LR_ROUNDS rounds at that lr first and the
    grid ascending without it, up to the first that passes. The preset's other settings (`cpu`
    for the recorded rule). One row per run (``study.rounds_search``'s, with ``normalize``), the
    table ``baseline_levers.choose_vote_weights`` reads."""
    check_choice("method of the vote-weights search", method, tuple(VOTE_WEIGHT_METHODS))
    order = lr_sequence(grid)
    params = {"normalize": "all"}
    plan = [
        (task, rounds, method, lr, params)
        for task, rounds in (("har", VOTE_WEIGHT_HAR_ROUNDS), (_MNIST, MNIST_LR_ROUNDS))
        for lr in order
    ]
    _check(preset, plan, seed, device)
    _threads(preset)
    run_args = (seed, device, progress, out_dir)
    frames, lr_har = [], None
    for lr in order:
        row = _one(preset, "har", VOTE_WEIGHT_HAR_ROUNDS, method, lr, params, *run_args)
        frames.append(row)
        if passing(row).all():
            lr_har = lr
            break
    if lr_har is not None:
        for lr in lr_sequence(order, lr_har):
            row = _one(preset, _MNIST, MNIST_LR_ROUNDS, method, lr, params, *run_args)
            frames.append(row)
            if passing(row).all():
                break
    return pd.concat(frames, ignore_index=True)


def bnnavg_real_lr_search(
    preset,
    seed: int = 0,
    device="auto",
    progress=False,
    out_dir=None,
    grid=BNNAVG_LATENT_GRID,
    real_lr: float = BNNAVG_REAL_LR,
) -> pd.DataFrame:
    """Lever 2's runs: BNNAvg on MNIST alpha = 1 for MNIST_LR_ROUNDS rounds with ``real_lr`` for
    its real-valued parameters, at each latent lr of ``grid`` ascending, up to the first that
    passes; the preset's other settings (`cpu` for the recorded rule). One row per run
    (``study.rounds_search``'s, with ``real_lr``), the table
    ``baseline_levers.choose_bnnavg_real_lr`` reads."""
    order = lr_sequence(grid)
    params = {"real_lr": real_lr}
    plan = [(_MNIST, MNIST_LR_ROUNDS, "bnnavg", lr, params) for lr in order]
    _check(preset, plan, seed, device)
    _threads(preset)
    run_args = (seed, device, progress, out_dir)
    frames = []
    for lr in order:
        row = _one(preset, _MNIST, MNIST_LR_ROUNDS, "bnnavg", lr, params, *run_args)
        frames.append(row)
        if passing(row).all():
            break
    return pd.concat(frames, ignore_index=True)
