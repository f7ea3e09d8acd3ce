"""What notebook 00 puts into its report: every number it computes and shows, with its unit.

The primer quotes no paper table (``numbers.NUMBERS`` is empty), so no row has a paper cell; the
rows say what was measured and over what (rounds, evaluations, clients) so that they read alone.
"""

from __future__ import annotations

import pandas as pd

from .study import drift_summary, final_accuracy

TARGET = 0.9  # the accuracy the "rounds to" rows count to (a fraction)

__all__ = ["record_numbers", "record_same_curve", "TARGET"]


def record_numbers(report, preset, curves, results: dict, drift_data, drift_mu) -> None:
    """Final accuracy and rounds to ``TARGET`` of every run, the clients' drift from the global
    model and from their average under each partition, and the drift under each FedProx mu."""
    for label, acc in final_accuracy(curves, preset["last"]).items():
        report.number(
            f"final test accuracy, {label}",
            100 * acc,
            unit="%",
            note=f"mean of the last {preset['last']} evaluations of {preset['rounds']} rounds",
        )
    for label, res in results.items():
        reached = res.rounds_to(TARGET)
        report.number(
            f"rounds to {TARGET:.0%} test accuracy, {label}",
            reached,
            unit="rounds",
            note=f"not reached in {preset['rounds']} rounds" if reached is None else "",
        )
    by_data = drift_summary(drift_data, "data")
    for name, row in by_data.iterrows():
        for col, what in (
            ("dist_avg", "the clients' average"),
            ("dist_global", "the global model"),
        ):
            report.number(
                f"client drift from {what}, {name}",
                row[(col, "mean")],
                unit="L2",
                note=f"mean over {_count(drift_data, 'data', name)} clients, one round of "
                "local training from the same global model",
            )
    for mu, d in drift_summary(drift_mu, "mu")[("dist_global", "mean")].items():
        report.number(
            f"client drift from the global model, FedProx mu={mu:g}",
            d,
            unit="L2",
            note=f"mean over {_count(drift_mu, 'mu', mu)} clients (mu=0: FedAvg's local objective)",
        )


def record_same_curve(report, same: pd.DataFrame) -> None:
    """The check that the from-scratch FedAvg reproduces flkit's curve."""
    report.number(
        "largest accuracy difference, FedAvg from scratch vs flkit",
        100 * float(same["|difference|"].max()),
        unit="points",
        note=f"over {len(same)} rounds, evaluated every round",
    )


def _count(frame: pd.DataFrame, by: str, value) -> int:
    return int((frame[by] == value).sum())
