"""Experiment drivers of notebook NN_<slug>: build configs from the preset, run them through
``flkit.experiment.run`` (cached, resumable, with progress bars) and return DataFrames.

Nothing here implements the algorithm: that is a method family in ``flkit/methods/`` (or a
building block elsewhere in the library). Nothing here judges a claim: that is ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flkit.experiment import RunConfig, run


def config(preset: dict, method: str, seed: int, device: str = "auto") -> RunConfig:
    """The RunConfig of one method at the preset ``P``."""
    return RunConfig(
        backend=preset["backend"],
        method=method,
        dataset=preset["dataset"],
        rounds=int(preset["rounds"]),
        dataset_kwargs={"train_subset": int(preset["train_subset"])}
        if preset["train_subset"]
        else {},
        seed=int(seed),
        device=device,
    )


def compare(preset: dict, methods, seeds, device: str = "auto") -> pd.DataFrame:
    """Every method x seed (cached); one history row per round, columns method and seed added."""
    frames = []
    for m in methods:
        for s in seeds:
            h = run(config(preset, m, s, device)).history.copy()
            frames.append(h.assign(method=m, seed=s))
    return pd.concat(frames, ignore_index=True)


def rounds_row(preset: dict, candidate: dict, seed: int = 0, device: str = "auto") -> dict:
    """One row of the decision ``cpu_rounds`` (``decisions.toml``), the measure
    ``flkit.workbook.decisions.drive`` calls per candidate: dense FedAvg at the preset with the
    candidate's rounds; its final test accuracy and its rise over its last 10 rounds, in points."""
    h = run(config({**preset, **candidate}, "fedavg", seed, device)).history
    acc = h["test_accuracy"].dropna()
    rise = acc.iloc[-1] - acc[h.loc[acc.index, "round"] <= h["round"].max() - 10].iloc[-1]
    return {"fedavg_accuracy": 100 * float(acc.iloc[-1]), "fedavg_rise": 100 * float(rise)}
