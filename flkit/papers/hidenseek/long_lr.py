"""The long-lr rule of notebook 04: each supermask method's MNIST score lr checked again at the
`long` preset's rounds and seeds, its recorded runs and its answer's inputs. Pure data and
functions; the runs that fill the table are ``long_lr_runs``'s.

The MNIST score lrs of ``searches`` were read at MNIST_LR_ROUNDS (60) with one seed; `long` runs
MNIST for 90 rounds with two, and an lr that passes at 60 may not at 90 (HideNseek's 10 did not).
The rule (README, "MNIST score lrs at `long`'s rounds", fixed before any of its runs): a method's
current MNIST lr first, then ``searches.SCORE_LR_GRID`` ascending without it (``lr_sequence``),
each lr on MNIST alpha = 1 at `long`'s settings for every seed of LONG_LR_SEEDS, up to the first
that passes :func:`long_lr_verdict`; none: the current lr stays and the method's MNIST verdicts
read outside regime. Regime indicators only; which method ends higher plays no part.

    choose_long_lr(pd.DataFrame(LONG_LR_SEARCH), {"HideNseek": 10.0})
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.utils import FlkitError

from .regime import MIN_ABOVE_CHANCE
from .searches import LONG_ROUNDS_GRID, SCORE_LR_GRID, lr_sequence

__all__ = [
    "LONG_LR_ROUNDS",
    "LONG_LR_SEEDS",
    "long_lr_verdict",
    "choose_long_lr",
    "LONG_LR_SEARCH",
]

#: the rounds and seeds at which each supermask method's MNIST score lr is checked again: those of
#: the `long` preset (the largest of LONG_ROUNDS_GRID, its two seeds), where the lrs chosen at
#: MNIST_LR_ROUNDS with one seed must also hold (:func:`choose_long_lr`)
LONG_LR_ROUNDS = LONG_ROUNDS_GRID[-1]
LONG_LR_SEEDS = (0, 1)


def long_lr_verdict(rows: pd.DataFrame, seeds=LONG_LR_SEEDS) -> bool | None:
    """Whether one (method, lr)'s runs (one row per seed, columns seed, above_chance, flip_share)
    pass the check at `long`'s rounds: every seed flips in every round from round 3
    (flip_share > 0) and the mean over ``seeds`` is at least MIN_ABOVE_CHANCE points above chance
    (the regime indicator reads the mean over seeds). False as soon as one run has a round
    without a flip, whatever seeds are missing; None when no run fails that way but a seed of
    ``seeds`` was not run (the rule cannot read it yet)."""
    if not (rows.flip_share.fillna(0) > 0).all():
        return False
    if set(int(s) for s in rows.seed) != set(int(s) for s in seeds):
        return None
    return bool(rows.above_chance.mean() >= MIN_ABOVE_CHANCE)


def choose_long_lr(
    table: pd.DataFrame, current: Mapping[str, float], grid=SCORE_LR_GRID, seeds=LONG_LR_SEEDS
) -> dict:
    """Each supermask method's MNIST score lr, checked at the `long` preset's rounds and seeds
    (``long_lr_runs.long_lr_search``; columns method, lr, seed, above_chance, flip_share, one
    row per run read at LONG_LR_ROUNDS), in the order of ``searches.lr_sequence``: the
    ``current`` lr (label -> lr, the notebook's MNIST lr, an lr of ``grid``) when it
    passes :func:`long_lr_verdict`, else the first passing lr of the grid ascending without it,
    else ``current`` again with ``passes`` False (the method's MNIST verdicts then read outside
    regime). Which method ends higher plays no part. Returns {label: {"lr", "passes",
    "tried": [lr, ...]}}. FlkitError when the table lacks a run the rule reads before its answer,
    or holds an lr outside the order."""
    need = {"method", "lr", "seed", "above_chance", "flip_share"}
    if not need <= set(table.columns):
        raise FlkitError(
            f"long-lr search has columns {sorted(table.columns)}; accepted: at least {sorted(need)}"
        )
    out = {}
    for label, lr in current.items():
        order = lr_sequence(grid, lr)
        mine = table[table.method == label]
        outside = sorted({float(x) for x in mine.lr} - set(order))
        if outside:
            raise FlkitError(
                f"long-lr search of {label}: lr {outside} outside the grid; accepted: {order}"
            )
        out[label] = {"lr": float(lr), "passes": False, "tried": []}
        for x in order:
            verdict = long_lr_verdict(mine[mine.lr.astype(float) == x], seeds)
            if verdict is None:
                raise FlkitError(
                    f"long-lr search of {label} at lr={x}: seeds "
                    f"{sorted(int(s) for s in mine[mine.lr.astype(float) == x].seed)} run; "
                    f"accepted: every seed of {list(seeds)} up to the first lr that passes, in "
                    f"the order {order}"
                )
            out[label]["tried"].append(x)
            if verdict:
                out[label].update(lr=x, passes=True)
                break
    return out


#: the long-lr rule's runs (``long_lr_runs.long_lr_search(long)``, run at commit d9a4fea, from
#: ``settings.PRE_LONG_LR``; MNIST alpha = 1, 90 rounds, 4 of 40 clients a round, the `long`
#: settings otherwise; one torch thread, alone on a 2-core machine), read at round 90: accuracy
#: in %, above_chance in points, flip_share the smallest from round 3, train_s the seconds of
#: local training
_LONG_LR_COLUMNS = ("method", "lr", "seed", "accuracy", "above_chance", "flip_share", "train_s")
_LONG_LR_ROWS = (
    ("HideNseek", 10.0, 0, 21.85, 11.85, 0.0, 44),
    ("HideNseek", 0.001, 0, 36.55, 26.55, 0.0, 40),
    ("HideNseek", 0.01, 0, 37.23, 27.23, 0.0, 40),
    ("HideNseek", 0.1, 0, 43.95, 33.95, 0.0, 36),
    ("HideNseek", 1.0, 0, 65.97, 55.97, 2e-05, 40),
    ("HideNseek", 1.0, 1, 69.24, 59.24, 9.8e-06, 37),
    ("FedMask", 10.0, 0, 44.54, 34.54, 0.00024, 46),
    ("FedMask", 10.0, 1, 53.28, 43.28, 0.00014, 47),
    ("Signed", 1.0, 0, 48.74, 38.74, 0.00024, 45),
    ("Signed", 1.0, 1, 50.17, 40.17, 0.00023, 47),
    ("BNNAvg", 1.0, 0, 32.27, 22.27, 6.2e-06, 54),
    ("BNNAvg", 1.0, 1, 26.30, 16.30, 2.5e-05, 55),
    ("BNNAvg", 0.001, 0, 9.58, -0.42, 0.0, 56),
    ("BNNAvg", 0.01, 0, 10.17, 0.17, 0.0, 56),
    ("BNNAvg", 0.1, 0, 11.43, 1.43, 0.0, 53),
    ("BNNAvg", 10.0, 0, 9.66, -0.34, 0.0024, 46),
    ("BNNAvg", 10.0, 1, 10.17, 0.17, 0.0016, 52),
    ("BNNAvg", 100.0, 0, 9.66, -0.34, 0.0016, 50),
    ("BNNAvg", 100.0, 1, 10.42, 0.42, 0.0016, 49),
)
LONG_LR_SEARCH: list[dict] = [dict(zip(_LONG_LR_COLUMNS, row)) for row in _LONG_LR_ROWS]
