"""The two levers that may put the frozen supermask baselines of notebook 04 in the paper's regime
on MNIST, and the rules, fixed before any of their runs, that read them. Pure data and functions;
the runs that fill a table are ``baseline_lever_runs``'s.

Why the baselines freeze: their server writes every unanimous vote back at the end of the
write-back's range (FedMask's score 2, Signed's 1), while a round of local training at `cpu`
moves a score by about 1 % of that, and nothing carries over between rounds. BNNAvg's latents are
written back near 0, but the one learning rate that flips them also drives its real-valued
parameters (BatchNorm, the classifier bias), which the server never rewrites.

- Lever 1, vote weights (FedMask, Signed; ``choose_vote_weights``): ``normalize="all"``, the
  votes weighted by n_k / n with n over all clients' samples as in HideNseek's eq. 1, so a
  unanimous vote lands near the split. (a) HAR at `cpu` (25 rounds, read at 25): the smallest lr
  of VOTE_WEIGHT_GRID that passes, ascending; (b) MNIST alpha = 1 at `cpu` settings, 60-round
  runs read at 60: (a)'s lr first, then the grid ascending without it, up to the first pass;
  (c) adopted for the method iff (a) and (b) both pass.
- Lever 2, BNNAvg's real-valued learning rate (``choose_bnnavg_real_lr``, MNIST only):
  ``real_lr`` = BNNAVG_REAL_LR and the latent lr the smallest of BNNAVG_LATENT_GRID that passes
  at round 60.

The pass test is ``searches.passing`` (at least MIN_ABOVE_CHANCE points above chance and a flip in
every round from round 3); which method ends higher plays no part. A rule walks its sequence in
the order the runs were made: a run the sequence needs before its answer is missing from the
table is an error, never read as a failure.
"""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError

from .searches import MNIST_LR_ROUNDS, SCORE_LR_GRID, lr_sequence, passing

__all__ = [
    "VOTE_WEIGHT_GRID",
    "VOTE_WEIGHT_HAR_ROUNDS",
    "VOTE_WEIGHT_METHODS",
    "BNNAVG_LATENT_GRID",
    "BNNAVG_REAL_LR",
    "choose_vote_weights",
    "choose_bnnavg_real_lr",
    "VOTE_WEIGHT_SEARCH",
    "BNNAVG_REAL_LR_SEARCH",
]

#: the score learning rates lever 1 tries, on HAR and on MNIST: the score-lr search's grid
VOTE_WEIGHT_GRID = SCORE_LR_GRID
#: the rounds of lever 1's HAR runs, read at the last: the `cpu` preset's HAR rounds
VOTE_WEIGHT_HAR_ROUNDS = 25
#: the methods lever 1 decides, each separately: method key -> label of the search tables
VOTE_WEIGHT_METHODS = {"fedmask": "FedMask", "signed": "Signed"}
#: the latent learning rates lever 2 tries on MNIST (below 1 the recorded runs flip nothing)
BNNAVG_LATENT_GRID = (10.0, 100.0)
#: BNNAvg's real-valued parameters' learning rate under lever 2: the rate at which BatchNorm and
#: the classifier bias stayed bounded over 90 MNIST rounds
BNNAVG_REAL_LR = 1.0
_HAR, _MNIST = "har", "mnist_a1"
_NEED = {"task", "method", "lr", "rounds", "above_chance", "flip_share"}


def _label(method: str) -> str:
    if method in VOTE_WEIGHT_METHODS:
        return VOTE_WEIGHT_METHODS[method]
    if method in VOTE_WEIGHT_METHODS.values():
        return method
    accepted = [*VOTE_WEIGHT_METHODS, *VOTE_WEIGHT_METHODS.values()]
    raise FlkitError(f"unknown method {method!r} for the vote-weights rule; accepted: {accepted}")


def _rows(table: pd.DataFrame, what: str, need: set, **keep) -> pd.DataFrame:
    """The rows of ``table`` whose columns equal ``keep``, after checking the columns."""
    if not need <= set(table.columns):
        raise FlkitError(
            f"{what} table has columns {sorted(table.columns)}; accepted: at least {sorted(need)}"
        )
    sel = pd.Series(True, index=table.index)
    for col, value in keep.items():
        sel &= table[col] == value
    return table[sel]


def _walk(rows: pd.DataFrame, order: list[float], where: str) -> float | None:
    """The first lr of ``order`` whose run passes (None: none), reading one run per lr.
    FlkitError for an lr of ``rows`` outside ``order``, an lr run twice or an lr the walk
    reaches that was not run."""
    lrs = [float(x) for x in rows.lr]
    outside = sorted({x for x in lrs if x not in order})
    twice = sorted({x for x in lrs if lrs.count(x) > 1})
    if outside or twice:
        raise FlkitError(
            f"{where}: lr {outside} outside the grid, {twice} run more than once; accepted: one "
            f"run per lr of {sorted(order)}"
        )
    ok = dict(zip(lrs, passing(rows)))
    for lr in order:
        if lr not in ok:
            raise FlkitError(
                f"{where}: no run at lr={lr}, which the rule reads before its answer; accepted: "
                f"the runs in the order {order} up to the first that passes"
            )
        if ok[lr]:
            return lr
    return None


def choose_vote_weights(table: pd.DataFrame, method: str, grid=VOTE_WEIGHT_GRID) -> dict:
    """Lever 1 for one method (key "fedmask" / "signed" or its label) from a table of its
    ``normalize="all"`` runs (``baseline_lever_runs.vote_weight_search``; columns task, method,
    lr, rounds, above_chance, flip_share, normalize): (a) the smallest lr of ``grid`` passing on
    HAR at VOTE_WEIGHT_HAR_ROUNDS; (b) on MNIST alpha = 1 at MNIST_LR_ROUNDS, (a)'s lr if it
    passes, else the smallest other lr that passes; (c) adopt iff both pass. Returns {"adopt",
    "lr_har", "lr_mnist" (None where that step found none), "reason"}. Rows of other methods,
    tasks and rounds are ignored."""
    label = _label(method)
    need = _NEED | {"normalize"}
    rows = _rows(table, "vote-weights search", need, method=label)
    sampled = sorted(set(rows.normalize) - {"all"})
    if sampled:
        raise FlkitError(
            f"vote-weights search holds {label} runs with normalize {sampled}; accepted: only "
            'normalize="all" runs'
        )
    har = rows[(rows.task == _HAR) & (rows["rounds"] == VOTE_WEIGHT_HAR_ROUNDS)]
    where = f"{label} on {_HAR} at round {VOTE_WEIGHT_HAR_ROUNDS}"
    lr_har = _walk(har, lr_sequence(grid), where)
    mnist = rows[(rows.task == _MNIST) & (rows["rounds"] == MNIST_LR_ROUNDS)]
    if lr_har is None:
        return {
            "adopt": False,
            "lr_har": None,
            "lr_mnist": None,
            "reason": f"no lr of {list(grid)} passes on HAR: {label} keeps normalize='sampled'",
        }
    where = f"{label} on {_MNIST} at round {MNIST_LR_ROUNDS}"
    lr_mnist = _walk(mnist, lr_sequence(grid, lr_har), where)
    if lr_mnist is None:
        reason = (
            f"HAR passes at lr {lr_har:g}, but no lr passes on MNIST at round "
            f"{MNIST_LR_ROUNDS}: {label} keeps normalize='sampled' and its lrs"
        )
        return {"adopt": False, "lr_har": lr_har, "lr_mnist": None, "reason": reason}
    reason = (
        f"passes on HAR at lr {lr_har:g} and on MNIST at lr {lr_mnist:g} (round "
        f"{MNIST_LR_ROUNDS}): {label} adopts normalize='all' with these lrs"
    )
    return {"adopt": True, "lr_har": lr_har, "lr_mnist": lr_mnist, "reason": reason}


def choose_bnnavg_real_lr(table: pd.DataFrame, grid=BNNAVG_LATENT_GRID) -> dict:
    """Lever 2 from a table of BNNAvg's MNIST runs with ``real_lr`` = BNNAVG_REAL_LR
    (``baseline_lever_runs.bnnavg_real_lr_search``; columns task, method, lr, rounds,
    above_chance, flip_share, real_lr): the smallest latent lr of ``grid`` that passes on MNIST
    alpha = 1 at MNIST_LR_ROUNDS. Returns {"adopt", "lr_mnist" (None: none passes), "real_lr",
    "reason"}; not adopted, BNNAvg keeps its lr without ``real_lr``."""
    need = _NEED | {"real_lr"}
    rows = _rows(table, "BNNAvg real-lr search", need, method="BNNAvg")
    other = sorted({float(x) for x in rows.real_lr if float(x) != BNNAVG_REAL_LR})
    if other:
        raise FlkitError(
            f"BNNAvg real-lr search holds runs with real_lr {other}; accepted: only "
            f"real_lr={BNNAVG_REAL_LR}"
        )
    mnist = rows[(rows.task == _MNIST) & (rows["rounds"] == MNIST_LR_ROUNDS)]
    where = f"BNNAvg on {_MNIST} at round {MNIST_LR_ROUNDS}"
    lr = _walk(mnist, lr_sequence(grid), where)
    if lr is None:
        reason = (
            f"no latent lr of {list(grid)} passes with real_lr {BNNAVG_REAL_LR:g}: BNNAvg keeps "
            "its lr without real_lr"
        )
        return {"adopt": False, "lr_mnist": None, "real_lr": None, "reason": reason}
    reason = (
        f"passes on MNIST at latent lr {lr:g} with real_lr {BNNAVG_REAL_LR:g} (round "
        f"{MNIST_LR_ROUNDS}): BNNAvg adopts them"
    )
    return {"adopt": True, "lr_mnist": lr, "real_lr": BNNAVG_REAL_LR, "reason": reason}


#: the columns of the recorded levers' rows (accuracy and points above chance in per cent, at the
#: run's last round; flip_share: the smallest share of entries flipping in a round from round 3)
_LEVER_COLUMNS = ("task", "method", "lr", "rounds", "accuracy", "above_chance", "flip_share")
_VOTE_WEIGHT_ROWS = (
    ("har", "FedMask", 0.001, 25, 11.06, -5.6, 0.0),
    ("har", "FedMask", 0.01, 25, 11.06, -5.6, 0.0),
    ("har", "FedMask", 0.1, 25, 14.66, -2.01, 0.0),
    ("har", "FedMask", 1.0, 25, 33.98, 17.32, 0.0),
    ("har", "FedMask", 10.0, 25, 73.39, 56.72, 0.000133),
    ("mnist_a1", "FedMask", 10.0, 60, 54.79, 44.79, 0.000241),
    ("har", "Signed", 0.001, 25, 35.72, 19.05, 0.0),
    ("har", "Signed", 0.01, 25, 34.87, 18.21, 0.0),
    ("har", "Signed", 0.1, 25, 39.09, 22.43, 0.0),
    ("har", "Signed", 1.0, 25, 66.06, 49.39, 0.000182),
    ("mnist_a1", "Signed", 1.0, 60, 43.03, 33.03, 0.000241),
)
_BNNAVG_ROWS = (
    ("mnist_a1", "BNNAvg", 10.0, 60, 10.0, 0.0, 0.00158),
    ("mnist_a1", "BNNAvg", 100.0, 60, 9.75, -0.25, 0.00237),
)
#: lever 1's runs (``baseline_lever_runs.vote_weight_search`` for FedMask and Signed at `cpu`,
#: seed 0, one torch thread, ``normalize="all"``), in the order they ran: the rows of the table
#: ``choose_vote_weights`` reads
VOTE_WEIGHT_SEARCH: list[dict] = [
    {**dict(zip(_LEVER_COLUMNS, row)), "normalize": "all"} for row in _VOTE_WEIGHT_ROWS
]
#: lever 2's runs (``baseline_lever_runs.bnnavg_real_lr_search`` at `cpu`, seed 0, one torch
#: thread, ``real_lr`` = BNNAVG_REAL_LR), the rows of the table ``choose_bnnavg_real_lr`` reads
BNNAVG_REAL_LR_SEARCH: list[dict] = [
    {**dict(zip(_LEVER_COLUMNS, row)), "real_lr": BNNAVG_REAL_LR} for row in _BNNAVG_ROWS
]
