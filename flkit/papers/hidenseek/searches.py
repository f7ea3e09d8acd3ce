"""How notebook 04's open settings were chosen: the grids, the recorded search tables and the rules
that read them. Pure data and functions; the runs that fill a table are ``study``'s
(``score_lr_grid``, ``rounds_search``, ``clients_search``).

Every rule reads regime indicators only (``regime``: a flip in every round from round 3, at least
MIN_ABOVE_CHANCE points above chance, dense FedAvg near its plateau), never which method ends
higher:

- the score learning rate of each supermask method on HAR (``choose_score_lr`` on a run of
  ``SCORE_LR_GRID``), and on MNIST (``choose_task_score_lr`` on the recorded ``MNIST_LR_SEARCH``,
  read at ``MNIST_LR_ROUNDS``);
- the MNIST rounds of the `long` preset (``choose_long_rounds`` on the recorded ``LONG_SEARCH``,
  one run per method read at every R of ``LONG_ROUNDS_GRID``): the fewest rounds at which dense
  FedAvg is near its plateau (``regime.plateau_rise`` below 1 point) and every supermask method is
  in the rules of ``flip_share`` and ``above_chance`` on MNIST alpha = 1;
- the MNIST clients per round (``choose_mnist_clients`` on the recorded
  ``MNIST_CLIENTS_SEARCH``): the fewest of ``MNIST_CLIENTS_GRID`` at which every supermask method
  is in those two rules at ``MNIST_LR_ROUNDS`` rounds, the m = 4 rows read from the recorded
  searches (``mnist_clients_rows_at_4``);
- each supermask method's MNIST score lr checked again at the `long` preset's rounds and seeds:
  ``long_lr`` (the rule and its recorded runs) and ``long_lr_runs`` (the runs).

The two levers tried after these, for the baselines that stay frozen on MNIST (FedMask's and
Signed's vote weights, BNNAvg's real-valued learning rate), and their rules are in
``baseline_levers``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from flkit.utils import FlkitError

from .regime import MAX_PLATEAU_RISE, MIN_ABOVE_CHANCE, SUPERMASK

__all__ = [
    "passing",
    "SCORE_LR_GRID",
    "LONG_ROUNDS_GRID",
    "MNIST_CLIENTS_GRID",
    "MNIST_LR_ROUNDS",
    "choose_score_lr",
    "LONG_SEARCH",
    "choose_long_rounds",
    "MNIST_LR_SEARCH",
    "choose_task_score_lr",
    "choose_mnist_clients",
    "mnist_clients_rows_at_4",
    "MNIST_CLIENTS_SEARCH",
    "lr_sequence",
]

#: the score learning rates the HAR grid (``study.score_lr_grid``) and the MNIST search try
SCORE_LR_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
#: the rounds the `long` preset may give MNIST, read by :func:`choose_long_rounds`
LONG_ROUNDS_GRID = (30, 60, 90)
#: the MNIST clients per round the clients rule may choose: the preset's 4 (the first), and up to
#: the paper's 10 % of 160 clients, 16 (40 clients as at `cpu`)
MNIST_CLIENTS_GRID = (4, 8, 16)
#: the rounds at which the MNIST score-lr search reads its runs: the fewest of the `long` grid at
#: which dense FedAvg is near its plateau in :data:`LONG_SEARCH`
MNIST_LR_ROUNDS = 60


def passing(table: pd.DataFrame) -> pd.Series:
    """Which rows of a search table pass the supermask regime test every search reads: at least
    MIN_ABOVE_CHANCE points above chance and a flip in every round from round 3 (flip_share > 0;
    a missing value fails)."""
    return (table.above_chance >= MIN_ABOVE_CHANCE) & (table.flip_share.fillna(0) > 0)


def choose_score_lr(grid: pd.DataFrame) -> dict:
    """The score learning rate of each supermask method from a grid of cheap runs (columns
    method, lr, flip_share = its smallest per-round flip share from round 3, above_chance =
    final accuracy minus chance in points): the smallest lr at which flip_share > 0 and
    above_chance >= MIN_ABOVE_CHANCE, so the paper's own lr is kept wherever it works. Which
    method ends higher plays no part. A method with no such lr maps to None."""
    need = {"method", "lr", "flip_share", "above_chance"}
    if not need <= set(grid.columns):
        raise FlkitError(
            f"score-lr grid has columns {sorted(grid.columns)}; accepted: at least {sorted(need)}"
        )
    out = {}
    for method, g in grid.groupby("method"):
        ok = g[passing(g)]
        out[method] = float(ok.lr.min()) if len(ok) else None
    return out


#: the search that set the `long` preset's MNIST rounds (``study.rounds_search`` on MNIST
#: alpha = 1, seed 0, the `cpu` settings otherwise; one 90-round run per method read at each
#: grid value; one torch thread on a shared 2-core machine, so ``train_s``, the local-training
#: seconds up to that round, is a guide, not a run time). accuracy in %, above_chance and rise5
#: in points, flip_share the smallest from round 3 (None: FedAvg has no mask); lr the learning
#: rate each method ran at (the HAR choice)
_LONG_COLUMNS = (
    "method",
    "lr",
    "rounds",
    "accuracy",
    "above_chance",
    "flip_share",
    "rise5",
    "train_s",
)
_LONG_ROWS = (
    ("FedAvg", 0.001, 30, 72.9, 62.9, None, 7.02, 35),
    ("FedAvg", 0.001, 60, 84.5, 74.5, None, 0.59, 71),
    ("FedAvg", 0.001, 90, 89.5, 79.5, None, 0.36, 106),
    ("BNNAvg", 1.0, 30, 24.2, 14.2, 1.3e-04, 2.1, 46),
    ("BNNAvg", 1.0, 60, 20.1, 10.1, 4.9e-05, 0.1, 84),
    ("BNNAvg", 1.0, 90, 25.6, 15.6, 4.9e-05, -0.94, 116),
    ("Signed", 10.0, 30, 22.6, 12.6, 6.2e-06, 0.95, 36),
    ("Signed", 10.0, 60, 24.1, 14.1, 0.0, 0.73, 65),
    ("Signed", 10.0, 90, 25.4, 15.4, 0.0, 0.69, 85),
    ("FedMask", 100.0, 30, 27.6, 17.6, 8.0e-05, 3.99, 27),
    ("FedMask", 100.0, 60, 22.6, 12.6, 4.9e-05, -0.38, 59),
    ("FedMask", 100.0, 90, 18.3, 8.3, 1.9e-05, -1.21, 88),
    ("HideNseek", 10.0, 30, 23.3, 13.3, 1.7e-03, 2.0, 24),
    ("HideNseek", 10.0, 60, 46.8, 36.8, 7.8e-04, 3.88, 50),
    ("HideNseek", 10.0, 90, 21.8, 11.8, 0.0, -3.4, 77),
)
LONG_SEARCH: list[dict] = [dict(zip(_LONG_COLUMNS, row)) for row in _LONG_ROWS]


def choose_long_rounds(table: pd.DataFrame | None = None) -> dict:
    """The `long` preset's MNIST rounds from a search table (columns method, rounds,
    above_chance, flip_share, rise5; ``study.rounds_search``): the fewest rounds at which dense
    FedAvg rises by less than MAX_PLATEAU_RISE points over the last PLATEAU_SPAN rounds and every
    supermask method is at least MIN_ABOVE_CHANCE points above chance with a flip in every round
    from round 3. Regime indicators only; which method ends higher plays no part. Returns
    {"rounds": the chosen value, or the largest searched when none qualifies, "meets_rule",
    "unmet": {rounds: [the indicators out of their rule]}}. Default: the recorded
    :data:`LONG_SEARCH`."""
    if table is None:
        table = pd.DataFrame(LONG_SEARCH)
    need = {"method", "rounds", "above_chance", "flip_share", "rise5"}
    if not need <= set(table.columns):
        raise FlkitError(
            f"rounds search has columns {sorted(table.columns)}; accepted: at least {sorted(need)}"
        )
    unmet = {}
    for r, g in table.groupby("rounds"):
        out = []
        dense = g[g.method == "FedAvg"]
        rise = dense.rise5.iloc[0] if len(dense) else None
        if rise is None or pd.isna(rise) or not rise < MAX_PLATEAU_RISE:
            out.append("FedAvg rise5")
        for m in SUPERMASK:
            row = g[g.method == m]
            if not len(row) or not row.above_chance.iloc[0] >= MIN_ABOVE_CHANCE:
                out.append(f"{m} above_chance")
            f = row.flip_share.iloc[0] if len(row) else None
            if f is None or pd.isna(f) or not f > 0:
                out.append(f"{m} flip_share")
        unmet[int(r)] = out
    ok = [r for r, out in unmet.items() if not out]
    chosen = min(ok) if ok else max(unmet)
    return {"rounds": chosen, "meets_rule": bool(ok), "unmet": unmet}


def choose_task_score_lr(
    table: pd.DataFrame, current: Mapping[str, float], rounds: int = MNIST_LR_ROUNDS
) -> dict:
    """Each supermask method's score learning rate on one task from a search table (columns
    method, lr, rounds, above_chance, flip_share; ``study.rounds_search`` with ``lr``), read at
    ``rounds``: the method's ``current`` lr (label -> lr, the HAR choice) when it passes there
    (at least MIN_ABOVE_CHANCE above chance and a flip in every round from round 3), else the
    smallest passing lr, else ``current`` again. Returns {label: {"lr", "passes"}}: a method
    whose every lr fails keeps its current one, and its verdicts on that task read outside
    regime. Which method ends higher plays no part."""
    need = {"method", "lr", "rounds", "above_chance", "flip_share"}
    if not need <= set(table.columns):
        raise FlkitError(
            f"score-lr search has columns {sorted(table.columns)}; "
            f"accepted: at least {sorted(need)}"
        )
    at = table[table["rounds"] == rounds]
    if not len(at):
        raise FlkitError(
            f"no run of the search is read at rounds={rounds}; accepted: "
            f"{sorted(int(r) for r in table['rounds'].unique())}"
        )
    out = {}
    for label, lr in current.items():
        rows = at[at.method == label]
        ok = rows[passing(rows)]
        if float(lr) in set(ok.lr.astype(float)):
            out[label] = {"lr": float(lr), "passes": True}
        elif len(ok):
            out[label] = {"lr": float(ok.lr.min()), "passes": True}
        else:
            out[label] = {"lr": float(lr), "passes": False}
    return out


#: the search that set the MNIST score learning rates (``choose_task_score_lr`` at
#: ``MNIST_LR_ROUNDS``): ``study.rounds_search`` with ``lr`` on MNIST alpha = 1, seed 0, the `cpu`
#: settings otherwise, one 90-round run per (method, lr) read at 30 / 60 / 90, ascending lr until
#: one passed (none did); HideNseek's current lr passes, its rows are :data:`LONG_SEARCH`'s. One
#: torch thread, two runs side by side. accuracy in %, above_chance in points, flip_share the
#: smallest from round 3
_MNIST_LR_COLUMNS = ("method", "lr", "rounds", "accuracy", "above_chance", "flip_share")
_MNIST_LR_ROWS = (
    ("FedMask", 0.001, 30, 10.9, 0.9, 0.0e00),
    ("FedMask", 0.001, 60, 11.4, 1.4, 0.0e00),
    ("FedMask", 0.001, 90, 11.5, 1.5, 0.0e00),
    ("FedMask", 0.01, 30, 11.3, 1.3, 0.0e00),
    ("FedMask", 0.01, 60, 11.4, 1.4, 0.0e00),
    ("FedMask", 0.01, 90, 12.2, 2.2, 0.0e00),
    ("FedMask", 0.1, 30, 11.0, 1.0, 0.0e00),
    ("FedMask", 0.1, 60, 11.8, 1.8, 0.0e00),
    ("FedMask", 0.1, 90, 12.0, 2.0, 0.0e00),
    ("FedMask", 1, 30, 9.6, -0.4, 0.0e00),
    ("FedMask", 1, 60, 10.6, 0.6, 0.0e00),
    ("FedMask", 1, 90, 11.4, 1.4, 0.0e00),
    ("FedMask", 10, 30, 25.0, 15.0, 0.0e00),
    ("FedMask", 10, 60, 27.4, 17.4, 0.0e00),
    ("FedMask", 10, 90, 28.4, 18.4, 0.0e00),
    ("FedMask", 100, 30, 27.6, 17.6, 8.0e-05),
    ("FedMask", 100, 60, 22.6, 12.6, 4.9e-05),
    ("FedMask", 100, 90, 18.3, 8.3, 1.9e-05),
    ("Signed", 0.001, 30, 6.8, -3.2, 0.0e00),
    ("Signed", 0.001, 60, 6.8, -3.2, 0.0e00),
    ("Signed", 0.001, 90, 6.6, -3.4, 0.0e00),
    ("Signed", 0.01, 30, 8.6, -1.4, 0.0e00),
    ("Signed", 0.01, 60, 7.6, -2.4, 0.0e00),
    ("Signed", 0.01, 90, 8.0, -2.0, 0.0e00),
    ("Signed", 0.1, 30, 13.2, 3.2, 0.0e00),
    ("Signed", 0.1, 60, 14.0, 4.0, 0.0e00),
    ("Signed", 0.1, 90, 14.7, 4.7, 0.0e00),
    ("Signed", 1, 30, 30.9, 20.9, 0.0e00),
    ("Signed", 1, 60, 32.8, 22.8, 0.0e00),
    ("Signed", 1, 90, 35.6, 25.6, 0.0e00),
    ("Signed", 10, 30, 22.6, 12.6, 6.2e-06),
    ("Signed", 10, 60, 24.1, 14.1, 0.0e00),
    ("Signed", 10, 90, 25.4, 15.4, 0.0e00),
    ("Signed", 100, 30, 7.8, -2.2, 6.2e-06),
    ("Signed", 100, 60, 10.2, 0.2, 0.0e00),
    ("Signed", 100, 90, 9.9, -0.1, 0.0e00),
    ("BNNAvg", 0.001, 30, 10.1, 0.1, 0.0e00),
    ("BNNAvg", 0.001, 60, 10.9, 0.9, 0.0e00),
    ("BNNAvg", 0.001, 90, 9.5, -0.5, 0.0e00),
    ("BNNAvg", 0.01, 30, 10.1, 0.1, 0.0e00),
    ("BNNAvg", 0.01, 60, 8.8, -1.2, 0.0e00),
    ("BNNAvg", 0.01, 90, 10.3, 0.3, 0.0e00),
    ("BNNAvg", 0.1, 30, 13.5, 3.5, 0.0e00),
    ("BNNAvg", 0.1, 60, 12.4, 2.4, 0.0e00),
    ("BNNAvg", 0.1, 90, 12.3, 2.3, 0.0e00),
    ("BNNAvg", 1, 30, 24.2, 14.2, 1.3e-04),
    ("BNNAvg", 1, 60, 20.1, 10.1, 4.9e-05),
    ("BNNAvg", 1, 90, 25.6, 15.6, 4.9e-05),
    ("BNNAvg", 10, 30, 10.0, 0.0, 3.2e-03),
    ("BNNAvg", 10, 60, 9.7, -0.3, 1.6e-03),
    ("BNNAvg", 10, 90, 10.5, 0.5, 1.6e-03),
    ("BNNAvg", 100, 30, 9.7, -0.3, 1.6e-03),
    ("BNNAvg", 100, 60, 10.0, 0.0, 1.6e-03),
    ("BNNAvg", 100, 90, 9.0, -1.0, 1.6e-03),
)
MNIST_LR_SEARCH: list[dict] = [dict(zip(_MNIST_LR_COLUMNS, row)) for row in _MNIST_LR_ROWS] + [
    {k: r[k] for k in _MNIST_LR_COLUMNS} for r in LONG_SEARCH if r["method"] == "HideNseek"
]


def choose_mnist_clients(table: pd.DataFrame, rounds: int = MNIST_LR_ROUNDS) -> dict:
    """The MNIST clients per round from a search table (columns method, clients_per_round,
    rounds, above_chance, flip_share; ``study.clients_search`` for m = 8 and 16 with
    :func:`mnist_clients_rows_at_4`), read at ``rounds``: the smallest m of MNIST_CLIENTS_GRID at
    which every supermask method is at least MIN_ABOVE_CHANCE points above chance with a flip in
    every round from round 3 (the pass test of ``choose_task_score_lr``); none: the preset's
    m = 4 stays and ``passes`` is False. Which method ends higher plays no part, and dense FedAvg
    none (rows of other methods are ignored). Returns {"clients_per_round", "passes",
    "per_m": {m: {label: passes}}}."""
    need = {"method", "clients_per_round", "rounds", "above_chance", "flip_share"}
    if not need <= set(table.columns):
        raise FlkitError(
            f"clients search has columns {sorted(table.columns)}; accepted: at least {sorted(need)}"
        )
    at = table[(table["rounds"] == rounds) & table.method.isin(SUPERMASK)]
    if not len(at):
        raise FlkitError(
            f"no supermask run of the clients search is read at rounds={rounds}; accepted: "
            f"{sorted(int(r) for r in table['rounds'].unique())}"
        )
    found = sorted(int(m) for m in at.clients_per_round.unique())
    extra = [m for m in found if m not in MNIST_CLIENTS_GRID]
    missing = [m for m in MNIST_CLIENTS_GRID if m not in found]
    if extra or missing:
        raise FlkitError(
            f"clients search holds clients_per_round {found} (missing {missing}, outside the "
            f"grid {extra}); accepted: exactly the grid {list(MNIST_CLIENTS_GRID)}"
        )
    per_m = {}
    for m in MNIST_CLIENTS_GRID:
        rows = at[at.clients_per_round == m]
        counts = rows.method.value_counts()
        absent = [label for label in SUPERMASK if label not in counts]
        twice = [label for label in SUPERMASK if counts.get(label, 0) > 1]
        if absent or twice:
            raise FlkitError(
                f"clients search at clients_per_round={m}, rounds={rounds}: methods {absent} "
                f"missing, {twice} more than once; accepted: one row per method of "
                f"{list(SUPERMASK)}"
            )
        per_m[m] = {}
        for label, ok in zip(rows.method, passing(rows)):
            per_m[m][label] = bool(ok)
        per_m[m] = {label: per_m[m][label] for label in SUPERMASK}
    ok = [m for m in MNIST_CLIENTS_GRID if all(per_m[m].values())]
    return {
        "clients_per_round": ok[0] if ok else MNIST_CLIENTS_GRID[0],
        "passes": bool(ok),
        "per_m": per_m,
    }


def mnist_clients_rows_at_4(lrs: Mapping[str, float]) -> list[dict]:
    """The m = 4 rows of the clients rule, read from the recorded searches (4 of 40 clients a
    round): each supermask method's :data:`MNIST_LR_SEARCH` row at its MNIST score lr (``lrs``,
    label -> lr, e.g. ``settings.PRE_LEVER_MNIST_LR`` keyed by ``settings.LABELS``, the lrs the
    searches ran with) and ``MNIST_LR_ROUNDS`` rounds (HideNseek's are :data:`LONG_SEARCH`'s),
    with ``clients_per_round`` = 4."""
    out = []
    for label in SUPERMASK:
        if label not in lrs:
            raise FlkitError(
                f"no MNIST score lr for {label!r} in {sorted(lrs)}; accepted: one per method of "
                f"{list(SUPERMASK)}"
            )
        rows = [
            r
            for r in MNIST_LR_SEARCH
            if r["method"] == label
            and float(r["lr"]) == float(lrs[label])
            and r["rounds"] == MNIST_LR_ROUNDS
        ]
        if len(rows) != 1:
            raise FlkitError(
                f"{len(rows)} recorded rows of {label} at lr={lrs[label]} and "
                f"rounds={MNIST_LR_ROUNDS}; accepted: an lr of the recorded search, "
                f"{sorted({r['lr'] for r in MNIST_LR_SEARCH if r['method'] == label})}"
            )
        out.append({**rows[0], "clients_per_round": MNIST_CLIENTS_GRID[0]})
    return out


#: the search of the MNIST clients rule for m = 8 and 16 (the m = 4 rows are
#: :func:`mnist_clients_rows_at_4`'s): ``study.rounds_search(cpu, grid=(60,),
#: clients_per_round=16)`` for the four supermask methods, then ``study.clients_search(cpu,
#: grid=(8,))``, on MNIST alpha = 1, seed 0, 40 clients, the `cpu` settings otherwise, each method
#: at its MNIST score lr, one 60-round run per (method, m) read at round 60. Two processes with one
#: torch thread each ran side by side on a shared 2-core machine, so ``train_s``, the seconds of
#: local training up to round 60, is a guide, not a run time. accuracy in %, above_chance and rise5
#: in points, flip_share the smallest from round 3
_MNIST_CLIENTS_COLUMNS = (
    "method",
    "lr",
    "clients_per_round",
    "rounds",
    "accuracy",
    "above_chance",
    "flip_share",
    "rise5",
    "train_s",
)
_MNIST_CLIENTS_ROWS = (
    ("HideNseek", 10.0, 8, 60, 82.8, 72.8, 3.54e-04, 2.67, 94),
    ("FedMask", 100.0, 8, 60, 29.0, 19.0, 2.5e-05, -1.30, 105),
    ("Signed", 10.0, 8, 60, 27.1, 17.1, 0.0, -0.08, 110),
    ("BNNAvg", 1.0, 8, 60, 16.1, 6.1, 0.0, 0.04, 131),
    ("HideNseek", 10.0, 16, 60, 84.2, 74.2, 4.9e-05, 1.93, 194),
    ("FedMask", 100.0, 16, 60, 20.9, 10.9, 0.0, -0.89, 223),
    ("Signed", 10.0, 16, 60, 18.7, 8.7, 0.0, -0.36, 207),
    ("BNNAvg", 1.0, 16, 60, 13.7, 3.7, 0.0, 0.20, 284),
)
MNIST_CLIENTS_SEARCH: list[dict] = [
    dict(zip(_MNIST_CLIENTS_COLUMNS, row)) for row in _MNIST_CLIENTS_ROWS
]


def lr_sequence(grid, first=None) -> list[float]:
    """The order in which a rule tries the learning rates of ``grid``: ``first`` (if given, an lr
    of the grid), then the grid ascending without it. FlkitError for an lr that is not a finite
    number above 0, an empty grid or a ``first`` outside it."""
    lrs = list(grid)
    bad = [
        lr
        for lr in lrs
        if isinstance(lr, bool)
        or not isinstance(lr, (int, float))
        or not math.isfinite(lr)
        or lr <= 0
    ]
    if bad or not lrs:
        raise FlkitError(
            f"learning rates {bad or lrs} for a rule's search; accepted: a non-empty list of "
            "finite numbers above 0"
        )
    lrs = sorted({float(lr) for lr in lrs})
    if first is None:
        return lrs
    if float(first) not in lrs:
        raise FlkitError(f"first lr {first!r} is not in the grid; accepted: {lrs}")
    return [float(first)] + [lr for lr in lrs if lr != float(first)]
