"""What notebook 04 puts into its report: every table it shows, each row with its unit, and the
paper's number only beside a measurement of the same thing; where the settings differ (scale,
hardware, which clients) the row says so in words.

The paper's tables could not be recovered; its running text gives ranges across tasks and single
values (``numbers``). Savings are ``1 - HideNseek / FedMask`` in %, as the text states them.
"""

from __future__ import annotations

import pandas as pd

from . import claims, numbers, regime
from .study import relative_to, tasks

__all__ = [
    "record_accuracy",
    "record_cost",
    "record_one_time",
    "record_active",
    "record_keep_ratio",
    "record_eps",
    "claim_tasks",
    "TESTS",
    "record_claims",
]


def _scale(preset, task: str) -> str:
    """Our scale beside the paper's, in words, for one task."""
    if task == "har":
        ours = (preset["har_num_clients"], preset["har_clients_per_round"], preset["har_rounds"])
        paper = numbers.SETTINGS["har"]
    elif task == "femnist":
        ours = (
            preset["femnist_num_clients"],
            preset["femnist_clients_per_round"],
            preset["femnist_rounds"],
        )
        paper = numbers.SETTINGS["emnist"]
    else:
        ours = (
            preset["mnist_num_clients"],
            preset["mnist_clients_per_round"],
            preset["mnist_rounds"],
        )
        paper = numbers.SETTINGS["mnist"]
    return (
        f"ours {ours[0]} clients, {ours[1]} per round, {ours[2]} rounds; paper "
        f"{paper['clients']}, {paper['per_round']}, {paper['rounds']}"
    )


def _scored(row) -> str:
    """Which clients an accuracy is over, from the row's ``coverage`` (``study.accuracy_table``)."""
    cover = row.get("coverage")
    if cover is None or pd.isna(cover):
        return "every client (global model)"
    return f"{100 * cover:.0f} % of clients scored (those that trained their personal part)"


def record_accuracy(report, preset, acc: pd.DataFrame) -> None:
    """Final accuracy of every method and task (the notebook's table) and HideNseek minus FedMask
    beside the paper's text (Sec. 5.1)."""
    for _, r in acc.iterrows():
        report.number(
            f"final accuracy, {r.method}, {r.task}",
            r["mean"],
            unit="%",
            note=f"last evaluation, mean over {int(r['count'])} seed(s); {_scored(r)}",
        )
    for task, g in relative_to(acc, "mean").items():
        data = (
            "; paper on EMNIST, ours on the mirror's FEMNIST (105 writers)"
            if task == "femnist"
            else ""
        )
        report.number(
            f"HideNseek - FedMask accuracy, {task}",
            g,
            paper=numbers.accuracy_gain_text(task),
            unit="points",
            note="paper: text of Sec. 5.1 (Table 1 not recoverable; points assumed); "
            + _scale(preset, task)
            + data,
        )


def record_cost(report, preset, byt: pd.DataFrame, tim: pd.DataFrame) -> None:
    """Traffic and local-training time of every method and task, and HideNseek's savings vs
    FedMask beside the paper's ranges (Secs. 5.2, 5.3)."""
    for _, r in byt.iterrows():
        report.number(
            f"traffic per client per round, {r.method}, {r.task}",
            r.up_MiB + r.down_MiB,
            unit="MiB",
            note=f"upload {r.up_MiB:.4g} + download {r.down_MiB:.4g} MiB",
        )
    for _, r in tim.iterrows():
        report.number(
            f"local training time per round, {r.method}, {r.task}",
            r.per_round_s,
            unit="s",
            note="a shared CPU",
        )
    saving = relative_to(byt.assign(total=byt.up_MiB + byt.down_MiB), "total", kind="saving")
    time_saving = relative_to(tim, "total_s", kind="saving")
    for task in saving.index:
        report.number(
            f"traffic saving vs FedMask, {task}",
            saving[task],
            paper=numbers.range_text(numbers.COMM_SAVING_RANGE),
            unit="%",
            note="paper: the range over its tasks of total traffic; ours: this task, per round "
            "(the same ratio: both methods run the same rounds and clients)",
        )
        report.number(
            f"training-time saving vs FedMask, {task}",
            time_saving[task],
            paper=numbers.range_text(numbers.TIME_SAVING_RANGE),
            unit="%",
            note="paper: the range over its tasks, on an RTX 3090; ours: this task, local "
            "training seconds on a shared CPU",
        )


def record_one_time(report, preset, once: pd.DataFrame) -> None:
    """What HideNseek's pruning keeps at the preset's keep ratio (sent once, not per round)."""
    for _, r in once.iterrows():
        report.number(
            f"weights kept in the pruned layers, {r.model}, p_r = {preset['keep_ratio']}",
            100 * r.weight_fraction,
            unit="%",
            note=f"{100 * r.groups_kept:.1f} % of channels / nodes kept",
        )


def record_active(report, preset, act: pd.DataFrame) -> None:
    """Table 4: accuracy per number of active clients, and HideNseek's change from the fewest to
    the most, beside the paper's drop from 10 to 40 (Sec. 5.4)."""
    for _, r in act.iterrows():
        report.number(
            f"final accuracy, {r.method}, MNIST alpha=1, {int(r.active)} active clients",
            r["mean"],
            unit="%",
            note=_scored(r),
        )
    hs = act[act.method == "HideNseek"].set_index("active")["mean"].sort_index()
    if len(hs) > 1:
        lo, hi = int(hs.index[0]), int(hs.index[-1])
        paper_counts = numbers.SETTINGS["active_clients"]
        same = (lo, hi) == (paper_counts[0], paper_counts[-1])
        report.number(
            f"HideNseek accuracy drop from {lo} to {hi} active clients, MNIST alpha=1",
            float(hs.iloc[0] - hs.iloc[-1]),
            paper=numbers.ACTIVE_DROP_10_TO_40,
            unit="points",
            note="positive = fewer clients is better; "
            + (
                "the paper's counts"
                if same
                else f"paper: from {paper_counts[0]} to {paper_counts[-1]} of "
                f"{numbers.SETTINGS['mnist']['clients']} clients; ours: {lo} to {hi} of "
                f"{preset['mnist_num_clients']}"
            ),
        )


def record_keep_ratio(report, preset, kr: pd.DataFrame) -> None:
    """Fig. 4: HideNseek's accuracy at each keep ratio p_r on each MNIST split."""
    for _, r in kr.iterrows():
        report.number(
            f"final accuracy, HideNseek, {r.task}, p_r = {r.keep_ratio:g}",
            r["mean"],
            unit="%",
            note=_scored(r),
        )


def record_eps(report, preset, eps_acc: pd.DataFrame) -> None:
    """HideNseek on HAR at each clip eps of the arctanh aggregation."""
    for _, r in eps_acc.iterrows():
        report.number(
            f"final accuracy, HideNseek, {r.task}, eps = {r.eps:g}",
            r["mean"],
            unit="%",
            note=_scored(r) + "; votes normalised over the sampled clients",
        )


def claim_tasks(preset, kr: pd.DataFrame | None = None) -> dict:
    """The tasks whose runs each accuracy claim compares, and so whose regime indicators it reads
    (``regime.measure``'s ``tasks``): the ranking claims HAR and the mild MNIST splits (alpha 1,
    and 10 at `paper`), the narrowing lead MNIST alpha = 0.1 and 1, p_r the mild MNIST splits of
    the keep-ratio runs (``kr``; default: the preset's), the active clients MNIST alpha = 1
    (Table 4's split)."""
    mnist = [t for t in tasks(preset) if t.startswith("mnist_")]
    mild = [t for t in mnist if t in ("mnist_a1", "mnist_a10")]
    kept = [t for t in (kr.task.unique() if kr is not None else mnist) if t != "mnist_a0.1"]
    return {
        "beats_baselines": ["har"] + mild,
        "fedavg_above": ["har"] + mild,
        "margin_narrows": ["mnist_a0.1", "mnist_a1"],
        "small_keep_ratio_harmless": kept,
        "more_clients_no_help": ["mnist_a1"],
    }


#: each claim's own test in words, with its threshold (``claims``' defaults)
TESTS = {
    "beats_baselines": "HideNseek's mean final accuracy above each of FedMask's, Signed's and "
    "BNNAvg's on every task of HAR and mild MNIST",
    "fedavg_above": "FedAvg's mean final accuracy above HideNseek's on every task of HAR and "
    "mild MNIST",
    "margin_narrows": "HideNseek's lead over FedMask smaller at alpha = 0.1 than at alpha = 1",
    "traffic_order": "HAR, MiB per client per round: HideNseek < FedMask, Signed < BNNAvg < "
    "FedAvg, FedAvg / BNNAvg within 1 % of 4, and HideNseek below FedMask both up and down",
    "time_order": "HAR, local-training seconds per round: FedAvg < HideNseek < FedMask, Signed",
    "small_keep_ratio_harmless": "HideNseek's mean final accuracy at p_r 0.2 at most 2 points "
    "below p_r 0.8 on every mild MNIST split",
    "more_clients_no_help": "from the fewest to the most active clients, HideNseek gains at most "
    "1 point and FedMask loses at most 1 point",
}


def record_claims(report, preset, runs, acc, byt, tim, kr, act) -> pd.DataFrame:
    """Every claim of the notebook with its verdict; each accuracy claim carries the readings of
    the regime indicators on the methods and tasks it compares (``regime.measure`` on the main
    runs of ``claim_tasks``, Table 4's coverage for its own claim, read on the claim's methods by
    ``regime.REGIME``), so a comparison with a frozen or near-chance baseline is recorded as
    outside the paper's regime. Returns the claims as a DataFrame (claim, verdict)."""
    scope = claim_tasks(preset, kr)
    seeds = sorted(int(s) for s in runs.seed.unique())

    def reg(name):
        if name not in scope:  # traffic and time: no regime indicator, the key and methods only
            return regime.REGIME.readings({}, name)
        table4 = act if name == "more_clients_no_help" else None
        return regime.REGIME.readings(regime.measure(runs, acc, scope[name], table4), name)

    above, below, ev = claims.beats_baselines(acc, scope["beats_baselines"])
    out = {}

    def claim(text, holds, evidence, paper, name):
        out[text] = report.claim(
            text, holds, evidence, paper, regime=reg(name), test=TESTS[name], seeds=seeds
        )

    claim(
        "HideNseek ends above FedMask, Signed and BNNAvg on HAR and mild MNIST",
        above,
        ev,
        "Sec. 5.1, Table 1",
        "beats_baselines",
    )
    claim("FedAvg (whole model) stays above HideNseek", below, ev, "Sec. 5.1", "fedavg_above")
    if {"mnist_a0.1", "mnist_a1"} <= set(acc.task):
        ok, ev = claims.margin_narrows(acc)
        claim(
            "HideNseek's lead narrows at alpha = 0.1", ok, ev, "Sec. 5.1, Fig. 3", "margin_narrows"
        )
    ok, ev = claims.traffic_order(byt)
    claim(
        "Traffic: HideNseek < FedMask = Signed < BNNAvg < FedAvg = 4 x BNNAvg",
        ok,
        ev,
        "Sec. 5.2, Table 2",
        "traffic_order",
    )
    ok, ev = claims.time_order(tim)
    claim(
        "Time per round: FedAvg < HideNseek < FedMask, Signed",
        ok,
        ev,
        "Sec. 5.3, Table 3",
        "time_order",
    )
    ok, ev = claims.small_keep_ratio_harmless(kr, scope["small_keep_ratio_harmless"])
    claim(
        "p_r 0.2 instead of 0.8 barely hurts mild MNIST",
        ok,
        ev,
        "Sec. 5.5, Fig. 4",
        "small_keep_ratio_harmless",
    )
    ok, ev = claims.more_clients_no_help(act)
    claim(
        "More active clients do not help HideNseek",
        ok,
        ev,
        "Sec. 5.4, Table 4",
        "more_clients_no_help",
    )
    return pd.DataFrame({"claim": list(out), "verdict": list(out.values())})
