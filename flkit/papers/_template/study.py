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
