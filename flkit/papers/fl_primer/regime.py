"""Regime indicators of the primer's accuracy claim: where "non-IID data slows FedAvg" can show.

McMahan et al. compare FedAvg on IID data with a pathological non-IID split (each client holds
two shards of label-sorted MNIST, so at least half of its data is one class) and the IID run
trains to 99 %. The comparison says something only when both hold in our run:

- ``iid_accuracy``: FedAvg on IID data is far above chance at the end (a run that has not
  trained cannot be slowed down);
- ``dominant_share``: the non-IID split is skewed like the paper's (mean share of a client's
  largest class).

The drift claims measure one round of local training from a given model and depend on neither.

Interface (the same in every paper's ``regime.py``): ``REGIME`` (indicators with their sources,
and what each claim reads) and ``measure(...)`` (ours, from a finished run).
"""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError
from flkit.workbook.regime import ClaimRule, Regime
from flkit.workbook.verdict import Indicator, at_least

#: MNIST CNN target accuracy the paper's IID FedAvg reaches (McMahan et al. 2017, Table 2)
PAPER_IID_ACCURACY = 99.0
#: two shards of label-sorted data per client: at least half of a client's data is one class
PAPER_DOMINANT_SHARE = 0.5
#: "far above chance": the IID run must end at least this accurate (%), 10 classes
MIN_IID_ACCURACY = 50.0

REGIME = Regime(
    indicators=[
        Indicator(
            "iid_accuracy",
            "FedAvg on IID data: final test accuracy",
            PAPER_IID_ACCURACY,
            at_least(MIN_IID_ACCURACY),
            unit="%",
            source="ours: five times chance (10 classes); a run that has not trained cannot be "
            "slowed down, and the paper's 99 % is its target, not a condition",
        ),
        Indicator(
            "dominant_share",
            "non-IID split: mean share of a client's largest class",
            PAPER_DOMINANT_SHARE,
            at_least(PAPER_DOMINANT_SHARE),
            source="computed: the paper's pathological split gives each client two shards of "
            "label-sorted MNIST, so at least half of a client's data is one class (Sec. 3)",
        ),
    ],
    claims={
        "noniid_slows_fedavg": ClaimRule(
            ("iid_accuracy", "dominant_share"), methods=("fedavg",), tasks=("mnist",)
        )
    },
)

__all__ = ["REGIME", "measure", "dominant_share", "split_counts"]


def dominant_share(counts) -> float:
    """Mean over clients of the share of the client's largest class; ``counts``: [clients,
    classes] sample counts (``flkit.data.partition.label_counts``). Clients without data are left
    out."""
    import numpy as np

    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or not c.size:
        raise FlkitError(f"counts of shape {c.shape}; accepted: [clients, classes] counts")
    sizes = c.sum(axis=1)
    keep = sizes > 0
    if not keep.any():
        raise FlkitError("counts: every client is empty")
    return float((c[keep].max(axis=1) / sizes[keep]).mean())


def split_counts(cfg, ds):
    """[clients, classes] label counts of the split a run config trains on (``ds``: the loaded
    dataset, reused)."""
    from flkit.data.partition import label_counts

    from .study import setup_for

    setup = setup_for(cfg, ds)
    y = setup.data.y_train
    return label_counts(setup.parts, y, int(y.max()) + 1).numpy()


def measure(final: pd.Series, iid: str, counts) -> dict:
    """Our indicators: ``final`` = final accuracy (a fraction) by run label
    (``study.final_accuracy``), ``iid`` the IID run's label, ``counts`` the non-IID split's label
    counts."""
    if iid not in final.index:
        raise FlkitError(f"run {iid!r} not in the final accuracies; have {list(final.index)}")
    return {"iid_accuracy": 100 * float(final[iid]), "dominant_share": dominant_share(counts)}
