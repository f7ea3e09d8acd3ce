"""Regime indicators of the MNIST claims of notebook 01.

The paper's MNIST setting is slow for FedAvg: it needs 197 of its ~200 rounds to reach 95 %
average client accuracy, and STC-PA 100 (Table 2). A claim about "fewer rounds to the target" is
only testable where the baseline still has most of the run to climb; where FedAvg reaches the
target in a few rounds, every method crosses it in its first noisy climb and the ordering says
little. That is the one regime indicator (``REGIME``), a property of the setting (target and run
length, calibrated on FedAvg alone), so every MNIST training claim reads it::

    tab = tables.summary(results, P["mnist_target"])
    ours = regime.measure(tab)             # {"fedavg_share": ...}
    claims.record(report, tab, "mnist", ours=ours, rules=REGIME)  # REGIME.readings(ours, key)
    REGIME.inside(ours)                    # every indicator inside its rule?

- ``fedavg_share``: FedAvg reaches the target in every seed and needs at least ``MIN_FRACTION``
  of the run's rounds to do so (paper: 197 / 200 = 0.985); the smallest share over seeds, a seed
  where FedAvg never reaches the target being outside the regime. The threshold is ours (one
  sentence why in its ``source``) and was fixed before any verdict was read.

STC's place against FedAvg (the paper's STC reaches 95 % in 157 rounds, FedAvg in 197) is a
result of Table 2, not a setting: no stated setting of the paper makes STC faster (it gives
p = 0.1 and nothing else per method, and on CIFAR-10 its STC is slower than FedAvg). It is a
claim of its own (``claims.stc_before_fedavg``), judged at face value, and gates nothing; the
STC / FedAvg ratio is shown beside the regime (:mod:`.target_evidence`, with each method's rounds
to the target, FedAvg's variance and the target ablation) and is what the calibration search of
``decisions.toml`` aimed at (a decision that found no setting reaching it).

Interface (the same in every paper's ``regime.py``): ``REGIME`` and ``measure(tab)``.
"""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError
from flkit.workbook.regime import ClaimRule, Regime
from flkit.workbook.verdict import Indicator, at_least

from .numbers import NUMBERS as PAPER
from .tables import per_seed

PAPER_ROUNDS = PAPER["rounds_to_target"]["mnist"]  # FedAvg 197, STC 157, STC-PA 100 (to 95 %)
PAPER_RUN_ROUNDS = 200  # Figs. 3/4 run to about round 200
MIN_FRACTION = 0.75  # FedAvg must spend at least this share of the run climbing to the target
PAPER_SHARE = round(PAPER_ROUNDS["fedavg"] / PAPER_RUN_ROUNDS, 3)

_MNIST = ("mnist",)
REGIME = Regime(
    indicators=[
        Indicator(
            "fedavg_share",
            "FedAvg: share of the run's rounds spent reaching the target (smallest over seeds)",
            PAPER_SHARE,
            at_least(MIN_FRACTION, missing="outside"),
            source="ours: rounds to the target compare methods only on a slow climb, as the "
            "paper's (FedAvg 197 of about 200 rounds, Table 2 and Figs. 3-4), not at a first "
            "noisy crossing, so FedAvg must climb for at least three quarters of the run; fixed "
            "on FedAvg alone before any verdict was read",
        ),
    ],
    # the target and run length are calibrated on FedAvg, so every MNIST training claim reads
    # FedAvg's share, the STC-PA-against-STC one included: it describes the setting
    claims={
        "stc_before_fedavg": ClaimRule(("fedavg_share",), methods=("fedavg", "stc"), tasks=_MNIST),
        "rounds": ClaimRule(("fedavg_share",), methods=("fedavg", "stc", "stc_pa"), tasks=_MNIST),
        "variance": ClaimRule(("fedavg_share",), methods=("fedavg", "stc", "stc_pa"), tasks=_MNIST),
        "stc_oscillates_more_than_fedavg": ClaimRule(
            ("fedavg_share",), methods=("stc", "fedavg"), tasks=_MNIST
        ),
        "stc_pa_oscillates_less_than_stc": ClaimRule(
            ("fedavg_share",), methods=("stc_pa", "stc"), tasks=_MNIST
        ),
    },
)


def measure(tab: pd.DataFrame) -> dict:
    """Every indicator of :data:`REGIME` in one ``tables.summary`` table: ``fedavg_share``, the
    smallest over seeds of FedAvg's rounds to the table's target over the run's rounds (None: a
    seed never reached it, or the table has no FedAvg row)."""
    if "rounds" not in getattr(tab, "columns", ()) or "rounds_to_target" not in tab.columns:
        raise FlkitError(
            "regime.measure needs a tables.summary table (columns 'rounds', "
            "'rounds_to_target', 'method', 'seed')"
        )
    runs = int(tab["rounds"].max())
    seeds = per_seed(tab, "fedavg", "rounds_to_target")
    share = None
    if seeds and all(r is not None for r in seeds):
        share = min(r / runs for r in seeds)
    return {"fedavg_share": share}
