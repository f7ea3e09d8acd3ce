"""Verdicts of the primer's three claims, as functions of its result tables.

Each returns a dict ``text, holds, evidence, paper, judge_at_smoke`` that goes straight into
``report.claim(**c)``. ``judge_at_smoke`` is true for the two drift claims: they measure one
round of local training from a given model, which does not need a long run, so they are judged
at every preset; the accuracy claim needs the full run (``flkit.workbook.report`` records it as
inconclusive at ``smoke``).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["noniid_slows_fedavg", "noniid_drifts_apart", "prox_reduces_drift"]


def noniid_slows_fedavg(
    final: pd.Series,
    iid: str,
    noniid: str,
    alpha: float,
    rounds: int,
    min_gap: float = 0.0,
    regime=(),
) -> dict:
    """FedAvg on Dirichlet(alpha) data ends below FedAvg on IID data: final accuracy gap (IID
    minus non-IID, a fraction) > ``min_gap``. ``final``: `study.final_accuracy` (by run label);
    ``regime``: ``regime.REGIME.readings(ours, "noniid_slows_fedavg")`` (a run that did not
    train, or a mild split, is outside the paper's regime)."""
    gap = float(final[iid] - final[noniid])
    return dict(
        text=f"Non-IID data (Dir({alpha:g})) slows FedAvg: lower accuracy than IID after "
        f"{rounds} rounds",
        holds=bool(gap > min_gap),
        evidence=f"IID {100 * final[iid]:.1f}% vs Dir {100 * final[noniid]:.1f}% "
        f"(gap {100 * gap:.1f} points)",
        paper="McMahan et al. 2017, Sec. 3",
        judge_at_smoke=False,
        regime=regime,
        test=f"IID minus non-IID final accuracy > {100 * min_gap:g} points",
    )


def noniid_drifts_apart(drift_summary: pd.DataFrame, iid: str, noniid: str) -> dict:
    """Non-IID clients end farther from the round's average model than IID clients (mean L2).
    ``drift_summary``: `study.drift_summary(..., "data")`, indexed by the data labels."""
    d = drift_summary[("dist_avg", "mean")]
    return dict(
        text="Non-IID clients drift apart: larger distance from the clients' average "
        "than with IID data",
        holds=bool(d[noniid] > d[iid]),
        evidence=f"mean L2 to the average: IID {d[iid]:.3f}, non-IID {d[noniid]:.3f}",
        paper="",
        judge_at_smoke=True,
        test="non-IID clients' mean L2 distance to their average > the IID clients'",
    )


def prox_reduces_drift(drift_by_mu: pd.Series) -> dict:
    """FedProx: the clients' mean distance from the global model strictly decreases as mu grows.
    ``drift_by_mu``: mean distance indexed by mu (ascending)."""
    d = drift_by_mu.sort_index()
    return dict(
        text="FedProx's proximal term reduces client drift: distance from the global "
        "model decreases as mu grows",
        holds=bool((d.diff().dropna() < 0).all()),
        evidence="mean L2 to the global model: "
        + ", ".join(f"mu={m:g}: {v:.4f}" for m, v in d.items()),
        paper="Li et al. 2020, Sec. 3",
        judge_at_smoke=True,
        test="mean L2 distance to the global model strictly decreases at every larger mu",
    )
