"""Regime indicators of notebook 02's accuracy claims: where FedDIP's effect can show.

The paper compares methods after 1000 rounds, with every network converged and every pruned
method at its target sparsity: what separates FedDIP from FedDP and dense FedAvg is accuracy
near the dense plateau at extreme sparsity. Two indicators say whether our run is there:

- ``dense_gap``: how far dense FedAvg ends below the plateau of the same model on the same data
  (points of top-1 accuracy). Far from the plateau, every method is still climbing and the
  pruned ones trail for a reason the paper does not study.
- ``sparsity_shortfall``: how far FedDIP's final sparsity ends below its target s_p (largest over
  the targets). Accuracy "at s_p" of a network that is not at s_p is another comparison.

Interface (the same in every paper's ``regime.py``): ``paper_indicators()`` (here the constant
``INDICATORS``), ``measure(...)``, ``readings(ours, keys)``, ``in_regime(ours)``, ``CLAIMS``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from flkit.workbook.verdict import Indicator, at_most, read

from .study import final_rows

#: top-1 accuracy (%) each workload's dense model reaches when trained to convergence, the
#: plateau ``dense_gap`` is measured from (LeNet-5 on Fashion-MNIST: about 90 %)
PLATEAU = {"fmnist_lenet5": 90.0}
#: dense FedAvg may end at most this many points below its plateau
MAX_DENSE_GAP = 3.0
#: FedDIP's final sparsity may end at most this far below s_p (a fraction of the weights)
MAX_SHORTFALL = 0.005

INDICATORS = {
    "dense_gap": Indicator(
        "dense_gap",
        "dense FedAvg: points below the model's plateau",
        "≈ 0 (1000 rounds, converged)",
        at_most(MAX_DENSE_GAP),
        unit="points",
    ),
    "sparsity_shortfall": Indicator(
        "sparsity_shortfall",
        "FedDIP: final sparsity below the target s_p (largest over targets)",
        0.0,
        at_most(MAX_SHORTFALL),
    ),
}

#: which indicators each claim depends on (claim function name -> keys)
CLAIMS = {
    "close_to_dense": ("dense_gap", "sparsity_shortfall"),
    "ordering": ("dense_gap", "sparsity_shortfall"),
    "gap_grows": ("dense_gap", "sparsity_shortfall"),
    "noniid_close": ("dense_gap",),
}

__all__ = [
    "INDICATORS",
    "CLAIMS",
    "paper_indicators",
    "PLATEAU",
    "measure",
    "readings",
    "in_regime",
]


def measure(grid: dict, workload: str) -> dict:
    """Our indicators from the main grid's runs (``study.run_grid``): ``dense_gap`` is None for a
    workload without a known plateau (``PLATEAU``)."""
    df = final_rows(grid)
    dense = df[df.method == "fedavg"].final_acc.mean()
    plateau = PLATEAU.get(workload)
    gap = None if plateau is None or pd.isna(dense) else plateau - 100 * float(dense)
    fd = df[df.method == "feddip"]
    short = (fd.sparsity.astype(float) - fd.final_sparsity.astype(float)).max()
    return {
        "dense_gap": gap,
        "sparsity_shortfall": None if pd.isna(short) else max(0.0, float(short)),
    }


def paper_indicators() -> dict:
    return INDICATORS


def readings(ours: Mapping, keys=None) -> list:
    """Readings of ``keys`` (default: every measured one) for ``report.claim(regime=...)``."""
    return read(INDICATORS, ours, keys)


def in_regime(ours: Mapping) -> bool:
    return all(r.inside for r in readings(ours))
