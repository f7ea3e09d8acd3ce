"""Verdicts of the STC-PA paper's claims from the per-seed ``tables.summary`` table.

A claim holds only when it holds for every seed; the evidence lists the per-seed numbers. Each
verdict is a function of the table with its thresholds as named parameters::

    tab = tables.summary(results, target)
    claims.record(report, tab, "mnist", model="cnn3_mnist", regime=regime.readings(tab))
    # with the CIFAR-10 "qualitative run" rule:
    claims.record(report, tab, "cifar10", qualitative="a short run")

``exact`` marks the traffic claim: byte counts follow from the model's shapes, so that verdict is
judged at every preset (``flkit.workbook.report`` makes the others inconclusive at ``smoke``).
``key`` names each claim for ``regime.CLAIMS`` (the regime indicators it depends on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from flkit.utils import FlkitError, check_choice

from .numbers import NUMBERS as PAPER
from .study import PAPER_METHODS
from .tables import METHOD_LABELS, PARTS

__all__ = [
    "traffic",
    "rounds",
    "variance",
    "oscillation",
    "verdicts",
    "record",
    "closing",
    "link_summary",
]


def _name(part: str) -> str:
    return "MNIST" if part == "mnist" else "CIFAR-10"


def _val(tab: pd.DataFrame, method: str, seed, col: str):
    row = tab[(tab.method == method) & (tab.seed == seed)]
    return None if row.empty else row[col].iloc[0]


def _missing(v) -> bool:
    return v is None or pd.isna(v)


def traffic(
    tab: pd.DataFrame, part: str, model: str | None = None, tolerance: float = 0.10
) -> dict | None:
    """STC and STC-PA per-round traffic is the paper's factor below FedAvg, within ``tolerance``
    (relative), for every measured factor (up and down, every seed). None without STC rows."""
    paper_f = PAPER["compression_factor"][part]
    comp = tab[tab.method.isin(["stc", "stc_pa"])]
    fs = [f for f in comp["factor_up"].tolist() + comp["factor_down"].tolist() if f == f]
    if not fs:
        return None
    ok = all(abs(f - paper_f) / paper_f <= tolerance for f in fs)
    return dict(
        text=f"{_name(part)}: STC / STC-PA per-round traffic ≈ {paper_f:g}× below FedAvg "
        f"(within {tolerance:.0%})",
        holds=ok,
        evidence=f"measured factors {min(fs):.1f}–{max(fs):.1f}× (up and down, "
        f"{model or 'model'}, simulator counter)",
        paper="Table 2",
        exact=True,
        key="traffic",
    )


def rounds(tab: pd.DataFrame, part: str) -> dict:
    """STC-PA reaches the target in fewer rounds than STC and no later than FedAvg (a method that
    never reaches it counts as infinitely late); None when no method reached it in any seed."""
    target = float(tab["target"].iloc[0])
    verdicts_, ev = [], []
    for s in sorted(set(tab.seed)):
        r = {m: _val(tab, m, s, "rounds_to_target") for m in PAPER_METHODS}
        ev.append(
            f"seed {s}: "
            + ", ".join(
                f"{METHOD_LABELS[m]} {'—' if _missing(r[m]) else int(r[m])}" for m in PAPER_METHODS
            )
        )
        if all(_missing(r[m]) for m in PAPER_METHODS):
            verdicts_.append(None)
        else:
            rounds_of = {m: math.inf if _missing(r[m]) else r[m] for m in PAPER_METHODS}
            verdicts_.append(
                rounds_of["stc_pa"] < rounds_of["stc"]
                and rounds_of["stc_pa"] <= rounds_of["fedavg"]
            )
    holds = None if all(v is None for v in verdicts_) else all(bool(v) for v in verdicts_)
    reason = "" if holds is not None else f"; no method reached {target:.0%} at this scale"
    return dict(
        text=f"{_name(part)}: STC-PA reaches {target:.0%} in fewer rounds than STC and no "
        f"later than FedAvg",
        holds=holds,
        evidence="; ".join(ev) + " (— = not reached)" + reason,
        paper="Table 2",
        exact=False,
        key="rounds",
    )


def variance(tab: pd.DataFrame, part: str) -> dict:
    """STC-PA has the lowest across-client accuracy variance (2nd half of the rounds)."""
    ev, ok = [], []
    for s in sorted(set(tab.seed)):
        v = {m: _val(tab, m, s, "variance") for m in PAPER_METHODS}
        ok.append(min(v, key=lambda m: v[m]) == "stc_pa")
        ev.append(
            f"seed {s}: " + ", ".join(f"{METHOD_LABELS[m]} {v[m]:.0f}" for m in PAPER_METHODS)
        )
    return dict(
        text=f"{_name(part)}: STC-PA has the lowest across-client accuracy variance",
        holds=all(ok),
        evidence="variance %², 2nd half of rounds — "
        + "; ".join(ev)
        + f" ({sum(ok)}/{len(ok)} seeds)",
        paper="Fig. 4" if part == "mnist" else "Fig. 6",
        exact=False,
        key="variance",
    )


def oscillation(tab: pd.DataFrame, part: str, a: str, b: str, more: bool) -> dict:
    """Method ``a`` oscillates more (``more=True``) or less than ``b``: mean |Δ accuracy| over
    the 2nd half of the rounds, every seed."""
    ev, ok = [], []
    for s in sorted(set(tab.seed)):
        oa, ob = _val(tab, a, s, "oscillation"), _val(tab, b, s, "oscillation")
        ok.append(oa > ob if more else oa < ob)
        ev.append(f"seed {s}: {METHOD_LABELS[a]} {oa:.2f} vs {METHOD_LABELS[b]} {ob:.2f}")
    text = f"{METHOD_LABELS[a]} oscillates {'more' if more else 'less'} than {METHOD_LABELS[b]}"
    return dict(
        text=f"{_name(part)}: {text} (non-IID, 2 shards)",
        holds=all(ok),
        evidence="mean |Δacc| in points, 2nd half — "
        + "; ".join(ev)
        + f" ({sum(ok)}/{len(ok)} seeds)",
        paper="Fig. 3" if part == "mnist" else "Fig. 5",
        exact=False,
        key=f"{a}_oscillates_{'more' if more else 'less'}_than_{b}",
    )


def verdicts(
    tab: pd.DataFrame, part: str, model: str | None = None, tolerance: float = 0.10
) -> list[dict]:
    """Every claim for one dataset: dicts with text, holds (True/False/None), evidence, paper,
    exact (True: independent of training), key (the claim's name in ``regime.CLAIMS``)."""
    check_choice("part", part, PARTS)
    out = [traffic(tab, part, model, tolerance)]
    out += [
        rounds(tab, part),
        variance(tab, part),
        oscillation(tab, part, "stc", "fedavg", more=True),
        oscillation(tab, part, "stc_pa", "stc", more=False),
    ]
    return [c for c in out if c is not None]


def record(
    report,
    tab: pd.DataFrame,
    part: str,
    model: str | None = None,
    qualitative: str = "",
    tolerance: float = 0.10,
    regime=(),
) -> pd.DataFrame:
    """Every verdict of one dataset into ``report``; returns them as a DataFrame (claim, verdict,
    evidence, paper, regime).

    ``regime``: the readings of the regime indicators the claims about training depend on, either
    per claim, {claim key: readings} (``regime.claim_readings(tab)``, MNIST: each claim with the
    indicators ``regime.CLAIMS`` names for it), or one list for every such claim.
    ``report.claim`` records a claim as "outside regime" when one of its readings breaks the
    paper's rule. The traffic claim follows from the model's shapes and carries none.

    ``qualitative``: a reason why this dataset's run is too short to judge training claims at
    this preset (the CIFAR-10 part of ``cpu``); then every verdict except the exact traffic one
    is recorded as inconclusive with that reason and the face-value outcome."""
    found = verdicts(tab, part, model, tolerance)
    if isinstance(regime, Mapping):
        lacking = [c["key"] for c in found if not c["exact"] and c["key"] not in regime]
        if lacking:
            raise FlkitError(
                f"regime has no readings for claim(s) {lacking}; accepted: a mapping with a key "
                f"per training claim ({[c['key'] for c in found if not c['exact']]}, as "
                "regime.claim_readings(tab) gives) or one list of readings for every claim"
            )
    rows = []
    for c in found:
        holds, reason = c["holds"], ""
        if qualitative and not c["exact"]:
            face = {
                True: "it holds",
                False: "it does not hold",
                None: "it cannot be judged either",
            }[holds]
            holds, reason = None, f"too short at this preset ({qualitative}); at face value {face}"
        elif holds is None:
            reason = "no method reached the target at this scale"
        if c["exact"]:
            reg = []
        else:
            reg = list(regime[c["key"]] if isinstance(regime, Mapping) else regime)
        verdict = report.claim(
            c["text"],
            holds,
            evidence=c["evidence"],
            paper=c["paper"],
            judge_at_smoke=c["exact"],
            regime=reg,
            reason=reason,
        )
        rows.append(
            {
                "claim": c["text"],
                "verdict": verdict,
                "evidence": c["evidence"],
                "paper": c["paper"],
                "regime": "; ".join(r.describe() for r in reg),
            }
        )
    return pd.DataFrame(rows)


def closing(recorded, seeds) -> str:
    """Markdown for the notebook's closing text, derived from the recorded verdicts (the
    DataFrames :func:`record` returns), so every sentence is true of the run whatever the
    verdicts are: the claims grouped by verdict, with the seeds they were judged on."""
    from flkit.workbook.verdict import VERDICTS

    frames = [f for f in recorded if f is not None and not f.empty]
    if not frames:
        return "No claim was recorded in this run."
    allc = pd.concat(frames, ignore_index=True)
    seeds = list(seeds)
    lines = [f"Judged on seed(s) {seeds} (a claim holds only when it holds in every seed):", ""]
    for v in VERDICTS:
        got = allc[allc.verdict == v]
        if got.empty:
            continue
        lines.append(f"* **{v}** ({len(got)}): " + "; ".join(got.claim))
    return "\n".join(lines)


def link_summary(tab: pd.DataFrame, target: float) -> str:
    """One sentence per variant of ``study.link_ablation``'s table, from its numbers: rounds to the
    target (mean over the seeds that reached it, and how many did) and the oscillation."""
    out = []
    for label, g in tab.groupby("variant", sort=False):
        reached = g["rounds_to_target"].dropna()
        when = (
            f"reaches {target:.0%} at round {reached.mean():.0f} (mean of {len(reached)}/{len(g)} "
            "seeds)"
            if len(reached)
            else f"does not reach {target:.0%} in any seed"
        )
        osc = g["oscillation"].mean()
        osc = "not measured (too few rounds)" if pd.isna(osc) else f"{osc:.2f} points"
        out.append(f"* {label}: {when}; oscillation {osc}")
    return "\n".join(out)
