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

The open settings of the notebook (each supermask method's score learning rate, the MNIST rounds
of the `long` preset, the MNIST clients per round) are chosen once by these indicators, never by
which method ends higher: the grids, the recorded search tables and the rules that read them are
in ``searches.py``; ``plateau_rise`` here is the "near its plateau" reading they use.

Each accuracy claim reads the indicators on the tasks it compares (``measure``'s ``tasks``;
``record.claim_tasks``): HAR and mild MNIST for the ranking, MNIST alpha = 0.1 and 1 for the
narrowing lead, mild MNIST for p_r and for the active clients. A task no claim reads (FEMNIST) is
measured and shown, and decides no verdict.

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
    "plateau_rise",
]


def chance(task: str) -> float:
    """Accuracy (%) of guessing on ``task`` ("har", "femnist", "mnist_a<alpha>")."""
    for prefix, c in CHANCE.items():
        if task == prefix or task.startswith(prefix + "_"):
            return c
    raise ValueError(f"no chance level for task {task!r}; known: {', '.join(CHANCE)}")


def measure(runs: pd.DataFrame, acc: pd.DataFrame, tasks=None) -> dict:
    """Our indicators: ``runs`` = the per-round histories (``study.main_runs``), ``acc`` = the
    final accuracy table (``study.accuracy_table``: task, method, mean). ``tasks``: the tasks a
    claim reads (default: every task of ``acc``); a claim's regime is that of the runs it
    compares, so a task no claim reads (FEMNIST) decides no verdict. FlkitError for a task that
    ``acc`` does not hold."""
    if tasks is not None:
        tasks = list(tasks)
        missing = [t for t in tasks if t not in set(acc.task)]
        if missing or not tasks:
            raise FlkitError(
                f"tasks {missing or tasks} for the regime indicators; accepted: a non-empty "
                f"list of the accuracy table's tasks {sorted(set(acc.task))}"
            )
        runs, acc = runs[runs.task.isin(tasks)], acc[acc.task.isin(tasks)]
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


def paper_indicators() -> dict:
    return INDICATORS


def readings(ours: Mapping, keys=None) -> list:
    """Readings of ``keys`` (default: every measured one) for ``report.claim(regime=...)``."""
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))


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
