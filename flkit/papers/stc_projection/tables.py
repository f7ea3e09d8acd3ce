"""Measures and tables of notebook 01 (STC with projection aggregation), from run histories.

Plain pandas over the results ``study.run_comparison`` returns; nothing here trains.

Measures (decided before looking at any result, stated in the notebook):

* accuracy = the average per-client test accuracy ``client_acc_mean`` (our protocol, see
  README.md: per-client accuracy = Σ_c π_i(c)·acc_c; π_i = client i's training label
  distribution);
* rounds to target = first round whose ``client_acc_mean`` ≥ target (None: never reached);
* variance = population variance of the per-client accuracies (percent², as the paper's
  "variance"; FedFV's plots actually show the standard deviation), averaged over the second half
  of the rounds;
* oscillation = mean |acc_t − acc_{t−1}| (percentage points) over the second half of the rounds,
  when the curves are past their initial climb;
* per-round traffic per participating client = mean of bytes_up / m and bytes_down / m over
  rounds ≥ 2 (round 1's download is the dense initial model).
"""

from __future__ import annotations

import math

import pandas as pd

from flkit import compress, metrics, models
from flkit.utils import check_choice

from .numbers import NUMBERS as PAPER

METHOD_LABELS = {"fedavg": "FedAvg", "stc": "STC", "fedfv": "FedFV", "stc_pa": "STC-PA"}
PARTS = ("mnist", "cifar10")


# --------------------------------------------------------------------------- measures
def rounds_to_target(history: pd.DataFrame, target: float, column: str = "client_acc_mean"):
    """First round whose ``column`` ≥ target (average client accuracy by default), or None."""
    return metrics.rounds_to(history, target, column)


def _second_half(history: pd.DataFrame, column: str) -> pd.Series:
    s = history[["round", column]].dropna()
    last = int(s["round"].max())
    return s[s["round"] > last // 2][column]


def oscillation(history: pd.DataFrame, column: str = "client_acc_mean") -> float:
    """Mean |acc_t − acc_{t−1}| in percentage points over the second half of the rounds."""
    return metrics.mean_abs_change(_second_half(history, column)) * 100


def mean_variance(history: pd.DataFrame, column: str = "client_acc_var") -> float:
    """Across-client accuracy variance (percent²) averaged over the second half of the rounds."""
    return float(_second_half(history, column).mean() * 1e4)


def per_round_traffic(history: pd.DataFrame, clients_per_round: int) -> tuple[float, float]:
    """Mean bytes up and down per participating client per round over rounds ≥ 2."""
    h = history[history["round"] >= 2] if len(history) > 1 else history
    return float(h["bytes_up"].mean() / clients_per_round), float(
        h["bytes_down"].mean() / clients_per_round
    )


def summary(results: dict, target: float) -> pd.DataFrame:
    """One row per (method, seed): rounds to target, final accuracy, variance, oscillation,
    traffic."""
    rows = []
    for (m, seed), r in results.items():
        h = r.history
        up, down = per_round_traffic(h, r.config.clients_per_round)
        rows.append(
            {
                "method": m,
                "seed": seed,
                "label": METHOD_LABELS.get(m, m),
                "rounds": int(h["round"].max()),
                "target": target,
                "rounds_to_target": rounds_to_target(h, target),
                "rounds_to_paper_target": rounds_to_target(h, PAPER["target"][part_of(r.config)]),
                "final_acc": float(h["client_acc_mean"].dropna().iloc[-1] * 100),
                "best_acc": float(h["client_acc_mean"].max() * 100),
                "variance": mean_variance(h),
                "final_variance": float(h["client_acc_var"].dropna().iloc[-1] * 1e4),
                "oscillation": oscillation(h),
                "up_bytes": up,
                "down_bytes": down,
                "wall_s": h.attrs.get("wall_seconds"),
            }
        )
    tab = pd.DataFrame(rows)
    dense = tab[tab.method == "fedavg"].set_index("seed")
    for col, src in (("factor_up", "up_bytes"), ("factor_down", "down_bytes")):
        tab[col] = [
            dense[src].get(s, math.nan) / v if v else math.nan for s, v in zip(tab.seed, tab[src])
        ]
    return tab


def per_seed(tab: pd.DataFrame, method: str, column: str) -> list:
    """``column`` of ``method``'s rows of a :func:`summary` table, by seed; None where it has
    no value (a target not reached)."""
    g = tab[tab.method == method].sort_values("seed")
    return [None if pd.isna(v) else float(v) for v in g[column]]


def part_of(cfg) -> str:
    """The dataset part of a RunConfig: "cifar10" or "mnist"."""
    return "cifar10" if cfg.dataset == "cifar10" else "mnist"


def by_method(tab: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per method (rounds to target: mean over the seeds that reached it, and
    how many did)."""
    rows = []
    for m, g in tab.groupby("method", sort=False):
        reached = g["rounds_to_target"].dropna()
        rows.append(
            {
                "method": METHOD_LABELS.get(m, m),
                "seeds": len(g),
                "reached target": f"{len(reached)}/{len(g)}",
                "rounds to target (mean)": float(reached.mean()) if len(reached) else None,
                "final acc %": g["final_acc"].mean(),
                "variance %² (2nd half)": g["variance"].mean(),
                "oscillation pp (2nd half)": g["oscillation"].mean(),
                "up / client / round": compress.format_bytes(g["up_bytes"].mean()),
                "down / client / round": compress.format_bytes(g["down_bytes"].mean()),
                "factor vs FedAvg (up)": g["factor_up"].mean(),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ traffic (exact, from shapes)
def worked_examples(
    p: float = 0.1, counter: str = compress.DEFAULT_COUNTER, extra_models=()
) -> pd.DataFrame:
    """Per-round traffic per client and direction of VGG11* and the assumed MNIST CNN (the worked
    examples of README.md) plus ``extra_models`` (e.g. the model a reduced preset trains), FedAvg vs
    STC,
    with the worked examples' numbers beside."""
    rows = []
    for name in (
        "vgg11_star",
        "cnn3_mnist",
        *[m for m in extra_models if m not in ("vgg11_star", "cnn3_mnist")],
    ):
        net = models.build(name)
        t = compress.traffic_table(net, p=p, counter=counter).set_index("method")
        ref = PAPER["worked_example"].get(name, {})
        rows.append(
            {
                "model": name,
                "params": int(t.loc["FedAvg", "params"]),
                "FedAvg / direction": t.loc["FedAvg", "up"],
                "FedAvg Mbit": round(t.loc["FedAvg", "up_bits"] / 1e6, 2),
                "STC / direction": t.loc["STC", "up"],
                "STC Mbit": round(t.loc["STC", "up_bits"] / 1e6, 3),
                "factor": round(float(t.loc["STC", "factor"]), 1),
                "counter": counter,
                "worked example: FedAvg": compress.format_bytes(ref["fedavg_bytes"]) if ref else "",
                "worked example: STC": compress.format_bytes(ref["stc_bytes"]) if ref else "",
                "paper factor": {
                    "vgg11_star": PAPER["compression_factor"]["cifar10"],
                    "cnn3_mnist": PAPER["compression_factor"]["mnist"],
                }.get(name),
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- Table 2
def table2(tab: pd.DataFrame, part: str) -> pd.DataFrame:
    """Table 2 for one dataset: paper's rounds to target and compression factor beside ours."""
    check_choice("part", part, PARTS)
    rows = []
    for m in [x for x in ("fedavg", "stc", "fedfv", "stc_pa") if x in set(tab.method)]:
        g = tab[tab.method == m]
        reached = g["rounds_to_target"]
        per_seed = ", ".join("—" if pd.isna(v) else str(int(v)) for v in reached)
        rows.append(
            {
                "method": METHOD_LABELS[m],
                "paper: rounds to target": PAPER["rounds_to_target_text"][part].get(
                    m, "not reported"
                ),
                "ours: rounds to target (per seed)": per_seed,
                f"ours: rounds to {PAPER['target'][part]:.0%} (paper target)": ", ".join(
                    "—" if pd.isna(v) else str(int(v)) for v in g["rounds_to_paper_target"]
                ),
                "paper: factor vs FedAvg": (
                    1.0 if m in ("fedavg", "fedfv") else PAPER["compression_factor"][part]
                )
                if m != "fedfv"
                else "not reported",
                "ours: factor up": round(float(g["factor_up"].mean()), 1),
                "ours: factor down": round(float(g["factor_down"].mean()), 1),
                "ours: up / client": compress.format_bytes(g["up_bytes"].mean()),
                "ours: down / client": compress.format_bytes(g["down_bytes"].mean()),
            }
        )
    return pd.DataFrame(rows)


def record_traffic(report, wx: pd.DataFrame) -> None:
    """Worked-example traffic of the paper's two models into the report (exact, from shapes)."""
    for _, r in wx.iterrows():
        ref = PAPER["worked_example"].get(r["model"])
        if not ref:
            continue
        report.number(
            f"{r['model']}: FedAvg bytes per round per direction",
            float(r["FedAvg Mbit"]) * 1e6 / 8,
            paper=ref["fedavg_bytes"],
            unit="B",
        )
        report.number(
            f"{r['model']}: STC bytes per round per direction (p = 0.1, {r['counter']})",
            float(r["STC Mbit"]) * 1e6 / 8,
            paper=ref["stc_bytes"],
            unit="B",
        )
        report.number(
            f"{r['model']}: compression factor vs FedAvg",
            float(r["factor"]),
            paper=r["paper factor"],
            unit="x",
        )


def record_numbers(report, tab: pd.DataFrame, part: str) -> None:
    """Table 2 rows of one dataset into the report: rounds to target, variance, final accuracy,
    traffic factor (the verdicts are ``claims.record``)."""
    name = "MNIST" if part == "mnist" else "CIFAR-10"
    target = float(tab["target"].iloc[0])
    for m in tab.method.unique():
        g = tab[tab.method == m]
        label = METHOD_LABELS[m]
        paper_target = PAPER["target"][part]
        paper_rounds = PAPER["rounds_to_target"][part].get(m)
        horizon = int(g["rounds"].max())
        # the paper's number only beside ours at the paper's own target (like with like)
        targets = [(target, "rounds_to_target", None if target != paper_target else paper_rounds)]
        if target != paper_target:
            targets.append((paper_target, "rounds_to_paper_target", paper_rounds))
        for tgt, column, paper in targets:
            reached = g[column].dropna()
            what = "paper target" if tgt == paper_target else "our target at this preset"
            report.number(
                f"{name}: rounds to {tgt:.0%}, {what} ({label}, mean of seeds that reached it)",
                float(reached.mean()) if len(reached) else None,
                paper=paper,
                unit="rounds",
                note=f"{len(reached)}/{len(g)} seeds reached {tgt:.0%} within {horizon} rounds"
                + ("" if len(reached) else "; not reached"),
            )
        report.number(
            f"{name}: across-client variance, 2nd half ({label})",
            float(g["variance"].mean()),
            unit="%²",
        )
        report.number(
            f"{name}: final average client accuracy ({label})",
            float(g["final_acc"].mean()),
            unit="%",
        )
        if m in ("stc", "stc_pa"):
            report.number(
                f"{name}: per-round traffic factor vs FedAvg, up ({label})",
                float(g["factor_up"].mean()),
                paper=PAPER["compression_factor"][part],
                unit="x",
            )
