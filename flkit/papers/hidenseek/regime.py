"""Regime indicators of notebook 04's accuracy claims: where the supermask methods can compete.

The paper's supermask methods keep learning through the run (HideNseek's accuracy "fluctuates",
Fig. 2), end far above chance (Table 1), and every client it scores has a trained personal head.
A comparison between methods whose scores froze after one round, or that sit near chance, or
that scores clients with an untrained head, is another comparison. Four indicators, with rules
fixed before any verdict was read:

- ``flip_share``: the smallest, over the supermask methods (tasks, seeds) and the rounds from
  round 3 on, share of global sign / mask entries that flip in a round (the runs' ``flip_share``
  metric); rule: above 0, i.e. every supermask method still changes its mask in every round;
- ``above_chance``: the smallest, over the supermask methods and tasks, final accuracy minus
  chance; rule: at least 20 points;
- ``fedmask_gap``: the largest, over tasks, HideNseek minus FedMask final accuracy; the paper's
  gaps run from 2.09 (EMNIST) to 40.6 points, so a larger gap means FedMask is not the working
  baseline the paper compares with; rule: at most 40.6 points;
- ``coverage``: the smallest share of test clients that are scored (a method with personal heads
  or masks scores only the clients that trained them; the runs' ``coverage`` metric at the last
  round); the paper's runs (10 % of the clients for 200-300 rounds) leave a client unsampled with
  probability 0.9^200 < 1e-9; rule: at least 0.75, so the accuracy describes most clients.

The score learning rate of each supermask method is chosen once by the same indicators
(``choose_score_lr``), never by which method ends higher. So are the MNIST rounds of the `long`
preset (``choose_long_rounds`` on ``LONG_SEARCH``): the fewest rounds at which dense FedAvg is
near its plateau (``plateau_rise`` below 1 point) and every supermask method is in the rules of
``flip_share`` and ``above_chance`` on MNIST alpha = 1. So are the MNIST clients per round
(``choose_mnist_clients``): the fewest of ``MNIST_CLIENTS_GRID`` at which every supermask method
is in those two rules at ``MNIST_LR_ROUNDS`` rounds.

An indicator the runs do not record is None: the claims that depend on it are then inconclusive
("regime not measured"), never judged as if in the paper's regime.

Interface (the same in every paper's ``regime.py``): ``paper_indicators()`` (here the constant
``INDICATORS``), ``measure(...)``, ``readings(ours, keys)``, ``in_regime(ours)``, ``CLAIMS``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.utils import FlkitError
from flkit.workbook.verdict import Indicator, above, at_least, at_most, read

from .numbers import ACC_GAIN_EMNIST, ACC_GAIN_RANGE_MILD

#: the methods that train a supermask (sign or keep mask) over a frozen random network
SUPERMASK = ("HideNseek", "FedMask", "Signed", "BNNAvg")
#: accuracy (%) of guessing, per task: HAR has 6 activities, MNIST 10 digits, FEMNIST 62 classes
CHANCE = {"har": 100 / 6, "femnist": 100 / 62, "mnist": 10.0}
#: "far above chance": at least this many points
MIN_ABOVE_CHANCE = 20.0
#: the first round whose flips count (round 1 moves every score from its initial value)
FIRST_FLIP_ROUND = 3
#: the largest HideNseek - FedMask gap the paper reports (points)
MAX_FEDMASK_GAP = ACC_GAIN_RANGE_MILD[1]
#: the smallest share of test clients scored
MIN_COVERAGE = 0.75
#: dense FedAvg "near its plateau" (the `long` preset's rule): its rise over the last
#: PLATEAU_SPAN rounds, read from the least-squares slope over the last PLATEAU_WINDOW rounds
#: (one evaluation is too noisy for a 1-point rule), below MAX_PLATEAU_RISE points
PLATEAU_WINDOW = 20
PLATEAU_SPAN = 5
MAX_PLATEAU_RISE = 1.0

INDICATORS = {
    "flip_share": Indicator(
        "flip_share",
        "supermask methods: smallest share of entries flipping per round after round 2",
        "above 0 (HideNseek's accuracy fluctuates, Fig. 2)",
        above(0.0),
    ),
    "above_chance": Indicator(
        "above_chance",
        "supermask methods: smallest final accuracy above chance",
        "far above chance (Table 1)",
        at_least(MIN_ABOVE_CHANCE),
        unit="points",
    ),
    "fedmask_gap": Indicator(
        "fedmask_gap",
        "largest HideNseek - FedMask final accuracy over tasks",
        f"{ACC_GAIN_EMNIST} (EMNIST) to {MAX_FEDMASK_GAP} (Sec. 5.1)",
        at_most(MAX_FEDMASK_GAP),
        unit="points",
    ),
    "coverage": Indicator(
        "coverage",
        "smallest share of test clients scored (each with a trained personal part)",
        "about 1 (every client sampled within 200-300 rounds)",
        at_least(MIN_COVERAGE),
    ),
}

_ACCURACY = ("flip_share", "above_chance", "fedmask_gap", "coverage")
#: which indicators each claim depends on (claim function name -> keys)
CLAIMS = {
    "beats_baselines": _ACCURACY,
    "margin_narrows": _ACCURACY,
    "small_keep_ratio_harmless": _ACCURACY,
    "more_clients_no_help": _ACCURACY,
}

__all__ = [
    "INDICATORS",
    "CLAIMS",
    "paper_indicators",
    "CHANCE",
    "measure",
    "per_method",
    "readings",
    "in_regime",
    "chance",
    "choose_score_lr",
    "plateau_rise",
    "choose_long_rounds",
    "LONG_SEARCH",
    "choose_task_score_lr",
    "MNIST_LR_SEARCH",
    "MNIST_CLIENTS_GRID",
    "choose_mnist_clients",
    "mnist_clients_rows_at_4",
]


def chance(task: str) -> float:
    """Accuracy (%) of guessing on ``task`` ("har", "femnist", "mnist_a<alpha>")."""
    for prefix, c in CHANCE.items():
        if task == prefix or task.startswith(prefix + "_"):
            return c
    raise ValueError(f"no chance level for task {task!r}; known: {', '.join(CHANCE)}")


def measure(runs: pd.DataFrame, acc: pd.DataFrame) -> dict:
    """Our indicators: ``runs`` = the per-round histories (``study.main_runs``), ``acc`` = the
    final accuracy table (``study.accuracy_table``: task, method, mean)."""
    sm = acc[acc.method.isin(SUPERMASK)]
    above_c = None
    if len(sm):
        above_c = float(min(r["mean"] - chance(r["task"]) for _, r in sm.iterrows()))
    flips = None
    mask_runs = runs[runs.method.isin(SUPERMASK)]
    if "flip_share" in runs and len(mask_runs):
        late = mask_runs[mask_runs["round"] >= FIRST_FLIP_ROUND].dropna(subset=["flip_share"])
        if len(late):
            flips = float(late.groupby(["task", "method", "seed"]).flip_share.min().min())
    cover = None
    if "coverage" in runs:
        c = runs.dropna(subset=["coverage"])
        cover = (
            float(c.groupby(["task", "method", "seed"]).coverage.last().min()) if len(c) else None
        )
    gap = None
    if {"HideNseek", "FedMask"} <= set(acc.method):
        piv = acc.pivot(index="task", columns="method", values="mean")
        gap = float((piv["HideNseek"] - piv["FedMask"]).max())
    return {"flip_share": flips, "above_chance": above_c, "fedmask_gap": gap, "coverage": cover}


def per_method(runs: pd.DataFrame, acc: pd.DataFrame) -> pd.DataFrame:
    """The indicators per task and supermask method (for the notebook's regime table): smallest
    flip share in a round from round 3 (over rounds and seeds), accuracy above chance (mean over
    seeds), coverage at the last round (smallest over seeds)."""
    rows = []
    for (task, method), g in runs[runs.method.isin(SUPERMASK)].groupby(["task", "method"]):
        late = g[g["round"] >= FIRST_FLIP_ROUND]
        flips = (
            float(late.groupby("seed").flip_share.min().min())
            if "flip_share" in g and late.flip_share.notna().any()
            else None
        )
        cover = None
        if "coverage" in g and g.coverage.notna().any():
            cover = float(g.dropna(subset=["coverage"]).groupby("seed").coverage.last().min())
        a = acc[(acc.task == task) & (acc.method == method)]["mean"]
        rows.append(
            {
                "task": task,
                "method": method,
                "flip_share": flips,
                "above_chance": float(a.iloc[0]) - chance(task) if len(a) else None,
                "coverage": cover,
            }
        )
    return pd.DataFrame(rows, dtype=object)


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
        ok = g[(g.flip_share > 0) & (g.above_chance >= MIN_ABOVE_CHANCE)]
        out[method] = float(ok.lr.min()) if len(ok) else None
    return out


#: the rounds at which the MNIST score-lr search reads its runs: the fewest of the `long` grid at
#: which dense FedAvg is near its plateau in :data:`LONG_SEARCH`
MNIST_LR_ROUNDS = 60


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
        ok = rows[(rows.above_chance >= MIN_ABOVE_CHANCE) & (rows.flip_share.fillna(0) > 0)]
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


def paper_indicators() -> dict:
    return INDICATORS


def readings(ours: Mapping, keys=None) -> list:
    """Readings of ``keys`` (default: every measured one) for ``report.claim(regime=...)``."""
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))


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
MNIST_LR_SEARCH: list[dict] = [dict(zip(_MNIST_LR_COLUMNS, row)) for row in _MNIST_LR_ROWS] + [
    {k: r[k] for k in _MNIST_LR_COLUMNS} for r in LONG_SEARCH if r["method"] == "HideNseek"
]


def plateau_rise(rounds, accuracy, window: int = PLATEAU_WINDOW, span: int = PLATEAU_SPAN):
    """``span`` times the least-squares slope of ``accuracy`` (points) against ``rounds`` over the
    evaluations of the last ``window`` rounds (rounds > last - window): how much the curve still
    rises over ``span`` rounds. None with fewer than 3 evaluations there."""
    r = pd.Series(list(rounds), dtype=float)
    a = pd.Series(list(accuracy), dtype=float)
    if len(r) != len(a):
        raise FlkitError(f"{len(r)} rounds but {len(a)} accuracies; accepted: one per round")
    keep = r > r.max() - window if len(r) else r.astype(bool)
    r, a = r[keep], a[keep]
    if len(r) < 3:
        return None
    dr = r - r.mean()
    return float(span * (dr * (a - a.mean())).sum() / (dr * dr).sum())


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


#: the MNIST clients per round the clients rule may choose: the preset's 4 (the first), and up to
#: the paper's 10 % of 160 clients, 16 (40 clients as at `cpu`)
MNIST_CLIENTS_GRID = (4, 8, 16)


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
        for _, r in rows.iterrows():
            above_ok = pd.notna(r.above_chance) and r.above_chance >= MIN_ABOVE_CHANCE
            flips_ok = pd.notna(r.flip_share) and r.flip_share > 0
            per_m[m][r.method] = bool(above_ok and flips_ok)
        per_m[m] = {label: per_m[m][label] for label in SUPERMASK}
    ok = [m for m in MNIST_CLIENTS_GRID if all(per_m[m].values())]
    return {
        "clients_per_round": ok[0] if ok else MNIST_CLIENTS_GRID[0],
        "passes": bool(ok),
        "per_m": per_m,
    }


def mnist_clients_rows_at_4(lrs: Mapping[str, float] | None = None) -> list[dict]:
    """The m = 4 rows of the clients rule, read from the recorded searches (4 of 40 clients a
    round): each supermask method's :data:`MNIST_LR_SEARCH` row at its MNIST score lr (``lrs``,
    label -> lr; default ``study.MNIST_LR``) and ``MNIST_LR_ROUNDS`` rounds (HideNseek's are
    :data:`LONG_SEARCH`'s), with ``clients_per_round`` = 4."""
    if lrs is None:
        from .study import LABELS, MNIST_LR  # study builds MNIST_LR from this module

        lrs = {LABELS[m]: lr for m, lr in MNIST_LR.items()}
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
