"""Regime indicators of notebook 04's accuracy claims: where the supermask methods can compete.

The paper's supermask methods keep learning through the run (HideNseek's accuracy "fluctuates",
Fig. 2), end far above chance (Table 1), and every client it scores has a trained personal head.
A comparison between methods whose scores froze after one round, or that sit near chance, or
that scores clients with an untrained head, is another comparison. Three indicators:

- ``flip_share``: the smallest, over the supermask methods, share of sign / mask entries that
  flip in a round after round 2 (from the runs' ``flip_share`` metric, when a method records it);
- ``above_chance``: the smallest, over the supermask methods and tasks, final accuracy minus
  chance (points);
- ``coverage``: the smallest share of scored test clients whose head was trained (from the runs'
  ``coverage`` metric, when recorded).

An indicator the runs do not record is None: the claims that depend on it are then inconclusive
("regime not measured"), never judged as if in the paper's regime.

Interface (the same in every paper's ``regime.py``): ``paper_indicators()`` (here the constant
``INDICATORS``), ``measure(...)``, ``readings(ours, keys)``, ``in_regime(ours)``, ``CLAIMS``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.workbook.verdict import Indicator, above, at_least, read

#: the methods that train a supermask (sign or keep mask) over a frozen random network
SUPERMASK = ("HideNseek", "FedMask", "Signed", "BNNAvg")
#: accuracy (%) of guessing, per task: HAR has 6 activities, MNIST 10 digits, FEMNIST 62 classes
CHANCE = {"har": 100 / 6, "femnist": 100 / 62, "mnist": 10.0}
#: "far above chance": at least this many points
MIN_ABOVE_CHANCE = 20.0
#: the first round whose flips count (round 1 moves every score from its initial value)
FIRST_FLIP_ROUND = 3

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
    "coverage": Indicator(
        "coverage",
        "smallest share of scored clients whose personal head was trained",
        1.0,
        at_least(1.0),
    ),
}

_ACCURACY = ("flip_share", "above_chance", "coverage")
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
    "readings",
    "in_regime",
    "chance",
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
            flips = float(late.groupby(["task", "method", "seed"]).flip_share.mean().min())
    cover = None
    if "coverage" in runs:
        c = runs.dropna(subset=["coverage"])
        cover = (
            float(c.groupby(["task", "method", "seed"]).coverage.last().min()) if len(c) else None
        )
    return {"flip_share": flips, "above_chance": above_c, "coverage": cover}


def paper_indicators() -> dict:
    return INDICATORS


def readings(ours: Mapping, keys=None) -> list:
    """Readings of ``keys`` (default: every measured one) for ``report.claim(regime=...)``."""
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))
