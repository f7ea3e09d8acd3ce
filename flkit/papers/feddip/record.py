"""What notebook 02 puts into its report beyond the main grid (``study.record_grid``): the
non-IID comparison and the ablations it shows. The paper's result tables could not be recovered,
so these rows have no paper cell."""

from __future__ import annotations

import pandas as pd

from .study import LABELS, final_rows

__all__ = ["record_noniid", "record_ablations"]


def record_noniid(report, preset, noniid: dict) -> None:
    """Mean client accuracy of each method on 2 classes per client (the notebook's table)."""
    df = final_rows(noniid, column="client_acc_mean")
    for (m, s), g in df.groupby(["method", "sparsity"], sort=False):
        where = "dense" if s == 0 else f"s = {s:g}"
        report.number(
            f"{preset['workloads'][0]}, 2 classes/client: mean client accuracy, {LABELS[m]}, "
            f"{where}",
            float(g.final_acc.mean() * 100),
            unit="%",
            note=f"after {preset['noniid_rounds']} rounds, mean of {len(g)} seed(s); each client's "
            "accuracy weights the per-class test accuracy by its label shares",
        )


def record_ablations(report, preset, abl: pd.DataFrame) -> None:
    """FedDIP's final accuracy for each ablation (R, mask order) beside its default."""
    s = max(preset["sparsities"])
    for label, g in abl.groupby("label", sort=False):
        report.number(
            f"{preset['workloads'][0]}: final top-1 accuracy, FedDIP s = {s:g}, {label}",
            float(g.final_acc.mean() * 100),
            unit="%",
            note=f"ablation, mean of {len(g)} seed(s)",
        )
