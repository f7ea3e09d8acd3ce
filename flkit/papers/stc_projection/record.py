"""What notebook 01 puts into its report beyond its claims and Table 2 (``claims.record``,
``tables.record_numbers``): the link ablation (``study.link_ablation``) as a table of numbers,
with a note generated from them. The paper makes no claim about which link carries STC, so nothing
here is a verdict::

    link_runs, link_tab = study.link_ablation(P, seeds, device)
    note = record.record_links(report, link_tab, P["mnist_target"])   # also returns the note
"""

from __future__ import annotations

import pandas as pd

from flkit.utils import FlkitError, check_range

from .study import LINK_VARIANTS

__all__ = ["LINKS_TABLE", "NEAR", "links_note", "record_links"]

#: the report table's title (the first part of each number's key)
LINKS_TABLE = "MNIST link ablation"
#: a variant's rounds to the target are "near FedFV's" within this fraction of FedFV's rounds
NEAR = 0.10
_COLUMNS = ("variant", "seed", "rounds_to_target", "final_acc", "oscillation")
_FEDFV = next(label for label, method, _ in LINK_VARIANTS if method == "fedfv")


def _check(tab: pd.DataFrame, target: float, near: float) -> None:
    missing = [c for c in _COLUMNS if c not in getattr(tab, "columns", ())]
    if missing or tab.empty:
        raise FlkitError(
            f"link table lacks columns {missing or list(_COLUMNS)} (or is empty); accepted: the "
            f"table of study.link_ablation, with {list(_COLUMNS)}"
        )
    check_range("target", target, 0.0, 1.0, low_open=True)
    check_range("near", near, 0.0, low_open=True)
    if _FEDFV not in set(tab["variant"]):
        raise FlkitError(
            f"link table has no {_FEDFV!r} rows; accepted: the table of study.link_ablation, "
            f"variants {[label for label, _, _ in LINK_VARIANTS]}"
        )


def _rounds(tab: pd.DataFrame, variant: str) -> dict:
    g = tab[tab["variant"] == variant]
    return {
        int(s): (None if pd.isna(r) else float(r)) for s, r in zip(g["seed"], g["rounds_to_target"])
    }


def _fmt(r: float) -> str:
    return f"{r:.0f}" if float(r).is_integer() else f"{r:.1f}"


def links_note(tab: pd.DataFrame, target: float, near: float = NEAR) -> str:
    """One line from the link table: how many seeds, FedFV's rounds to ``target``, and which
    variants reach it within ``near`` (a fraction) of FedFV's rounds in every seed where FedFV
    reaches it, and which do not (rounds: the mean over those seeds; "not reached" where a variant
    missed the target in one of them)."""
    _check(tab, target, near)
    seeds = sorted(set(int(s) for s in tab["seed"]))
    count = f"{len(seeds)} seed" + ("" if len(seeds) == 1 else "s")
    fed = {s: r for s, r in _rounds(tab, _FEDFV).items() if r is not None}
    if not fed:
        return (
            f"{count}, target {target:.0%}: {_FEDFV} does not reach the target in any seed, so no "
            "link variant is compared with it by rounds to the target."
        )
    near_, far = [], []
    for variant in dict.fromkeys(tab["variant"]):
        if variant == _FEDFV:
            continue
        own = _rounds(tab, variant)
        got = [own.get(s) for s in fed]
        missed = sum(r is None for r in got)
        reached = [r for r in got if r is not None]
        close = not missed and all(abs(own[s] - f) <= near * f for s, f in fed.items())
        if missed == len(got):
            what = "not reached"
        else:
            what = _fmt(sum(reached) / len(reached))
            if missed:
                what += f", not reached in {missed} of {len(got)} seeds"
        (near_ if close else far).append(f"{variant} ({what})")
    fed_mean = _fmt(sum(fed.values()) / len(fed))
    partial = "" if len(fed) == len(seeds) else f" in {len(fed)} of {len(seeds)} seeds"
    return (
        f"{count}, target {target:.0%}: {_FEDFV} reaches it at round {fed_mean}{partial}. Within "
        f"{near:.0%} of FedFV's rounds in every seed where FedFV reaches it: "
        f"{'; '.join(near_) or 'none'}. Not within: {'; '.join(far) or 'none'}."
    )


def record_links(report, tab: pd.DataFrame, target: float, near: float = NEAR) -> str:
    """The link table into ``report``: per variant, the rounds to ``target`` (mean over the seeds
    that reached it; None: none did), how many seeds reached it, the final average client accuracy
    and the oscillation, as one table of the report with :func:`links_note` under it. Returns the
    note."""
    note = links_note(tab, target, near)
    for variant, g in tab.groupby("variant", sort=False):
        row = str(variant).replace(", ", "; ")  # ", " separates a key's table, row and column
        reached = g["rounds_to_target"].dropna()
        cells = {
            f"rounds to {target:.0%} (mean of the seeds reaching it)": (
                float(reached.mean()) if len(reached) else None
            ),
            f"seeds reaching {target:.0%}": len(reached),
            "final average client accuracy (%)": float(g["final_acc"].mean()),
            "oscillation (points)": float(g["oscillation"].mean()),
        }
        for column, value in cells.items():
            report.number(f"{LINKS_TABLE}, {row}, {column}", value, note=note)
    return note
