"""Experiment drivers of notebook NN_<slug>: build configs from the preset, run them through
``flkit.experiment.run`` (cached, resumable, with progress bars) and return DataFrames.

``runs(preset, seeds)`` lists every run the notebook trains (``flkit.preset_runs``): the run pool
of ``flkit reproduce`` trains them before the notebook executes, and the notebook then reads them
from the run cache. Build that list from the same functions the drivers call, so it never drifts.

Nothing here implements the algorithm: that is a method family in ``flkit/methods/`` (or a
building block elsewhere in the library). Nothing here judges a claim: that is ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flkit.experiment import RunConfig, run
from flkit.preset_runs import distinct, from_preset, seeds_of


def config(preset: dict, method: str, seed: int, device: str = "auto") -> RunConfig:
    """The RunConfig of one method at the preset ``P``: its keys that name RunConfig fields
    (``rounds``, ``train_subset`` ...) read by ``from_preset``."""
    return from_preset(preset, method=method, seed=int(seed), device=device)


def configs(preset: dict, methods, seeds, device: str = "auto") -> list[RunConfig]:
    """The configs of :func:`compare`: every method x seed."""
    return [config(preset, m, s, device) for m in methods for s in seeds]


def runs(preset: dict, seeds) -> list[RunConfig]:
    """Every run the notebook trains at ``preset``, once for each notebook seed of ``seeds``."""
    return distinct(c for s in seeds for c in configs(preset, ("fedavg",), seeds_of(preset, s)))


def compare(preset: dict, methods, seeds, device: str = "auto") -> pd.DataFrame:
    """Every method x seed (cached); one history row per round, columns method and seed added."""
    frames = []
    for cfg in configs(preset, methods, seeds, device):
        h = run(cfg).history.copy()
        frames.append(h.assign(method=cfg.method, seed=cfg.seed))
    return pd.concat(frames, ignore_index=True)


def rounds_row(preset: dict, candidate: dict, seed: int = 0, device: str = "auto") -> dict:
    """One row of the decision ``cpu_rounds`` (``decisions.toml``), the measure
    ``flkit.workbook.decision_runs.drive`` calls per candidate: dense FedAvg at the preset with the
    candidate's rounds; its final test accuracy and its rise over its last 10 rounds, in points."""
    h = run(config({**preset, **candidate}, "fedavg", seed, device)).history
    acc = h["test_accuracy"].dropna()
    rise = acc.iloc[-1] - acc[h.loc[acc.index, "round"] <= h["round"].max() - 10].iloc[-1]
    return {"fedavg_accuracy": 100 * float(acc.iloc[-1]), "fedavg_rise": 100 * float(rise)}
