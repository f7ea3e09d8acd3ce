"""What notebook 03's trained heterogeneous runs show beside their regime: Sync-ST's rounds to
reach every target and the staleness of FedAST's updates, as a line in a claim's evidence and as
the section 6b ablation table.

These are evidence, not regime indicators: a trained run stops each task at its target, so its
rounds shorten and its update rate thins out as tasks finish, and both depend on the targets,
not on the timing alone. They have no rule, the paper reports no staleness of its trained runs,
and the claims are judged by the timing-only indicators of ``regime.REGIME`` (read through
:mod:`.claim_readings`). So ``REGIME.table`` cannot render them, and they live here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from flkit.utils import FlkitError
from flkit.workbook.verdict import VERDICTS

from .tables import staleness

__all__ = ["QUANTITIES", "WITH_PAPER", "of_runs", "table", "note", "ablation_rows"]

#: the quantities, in table order, with what each means
QUANTITIES = {
    "sync_rounds": "Sync-ST rounds to reach every target",
    "staleness_mean": "FedAST staleness, mean",
    "staleness_p90": "FedAST staleness, 90th percentile",
}

#: the quantities with a paper counterpart measured the same way: Sync-ST rounds to every target
#: (the paper's inferred completion time over its round length); the paper reports no staleness
#: of its trained runs, so the in-run staleness stands without a paper value (the paper setting's
#: timing-only staleness is in :func:`.timing_only.timing_table`)
WITH_PAPER = ("sync_rounds",)


def _sync_rounds(res) -> int | None:
    """Rounds until every task reached its target (None: some task did not)."""
    if any(t is None for t in res.completion_time.values()):
        return None
    return int(res.stats.get("rounds", 0))


def of_runs(fedast: dict, sync: dict) -> dict:
    """The quantities over seeds: fedast / sync: {seed: SimResult} of FedAST and Sync-ST runs of
    one experiment. Sync-ST rounds: mean over the seeds where Sync-ST finished (None if none);
    staleness: over every arrived FedAST update of every seed."""
    rounds = [r for r in (_sync_rounds(res) for res in sync.values()) if r is not None]
    st = pd.concat([staleness(res).staleness for res in fedast.values()], ignore_index=True)
    return {
        "sync_rounds": float(np.mean(rounds)) if rounds else None,
        "staleness_mean": float(st.mean()) if len(st) else None,
        "staleness_p90": float(np.percentile(st, 90)) if len(st) else None,
    }


def table(paper: dict, columns: dict[str, dict]) -> pd.DataFrame:
    """One row per quantity: the paper's value (only for :data:`WITH_PAPER`) and one column per
    entry of ``columns`` ({label: :func:`of_runs` dict}), e.g. {"ours (cpu)": ...,
    "ours (ablation)": ...}."""
    rows = []
    for key, text in QUANTITIES.items():
        row = {"indicator": text, "paper": paper.get(key) if key in WITH_PAPER else None}
        for label, ind in columns.items():
            row[label] = ind.get(key)
        rows.append(row)
    return pd.DataFrame(rows)


def note(ours: dict, paper: dict | None = None, sync: bool = True) -> str:
    """The quantities as one line for a claim's evidence, the paper's value beside those that
    have one (:data:`WITH_PAPER`; ``sync`` False: the staleness part only, for claims without a
    Sync-ST run). ``paper``: the quantities of the paper's setting of the *same* experiment
    (:func:`.timing_only.paper_setting` is the four-task mix's); None, or no ``sync_rounds`` in
    it, for an experiment whose paper value cannot be inferred: ours then stands alone."""

    def f(x):
        return "n/a" if x is None else f"{x:.3g}"

    stale = (
        f"FedAST staleness in the run mean {f(ours.get('staleness_mean'))} / p90 "
        f"{f(ours.get('staleness_p90'))}"
    )
    if not sync:
        return f"regime: {stale}"
    paper_rounds = (paper or {}).get("sync_rounds")
    beside = "" if paper_rounds is None else f" (paper ≈ {f(paper_rounds)}, inferred)"
    return f"regime: Sync-ST rounds {f(ours.get('sync_rounds'))}{beside}; {stale}"


def ablation_rows(
    paper: dict,
    before: dict,
    after: dict,
    face_before: Sequence[bool],
    face_after: Sequence[bool],
    verdict_before: str,
    verdict_after: str,
) -> pd.DataFrame:
    """The notebook's ablation table: quantity, paper, ours before, ours after, face value
    before / after (the claim's outcome on the runs alone: "holds" when every run shows it) and
    verdict before / after (the claim's recorded verdict, one of
    :data:`flkit.workbook.verdict.VERDICTS`, after the seed and regime rules), the same on every
    row. The verdict columns are the claims' own, so table and claims cannot disagree."""
    for name, v in (("verdict_before", verdict_before), ("verdict_after", verdict_after)):
        if v not in VERDICTS:
            raise FlkitError(f"{name}={v!r}; accepted: {', '.join(map(repr, VERDICTS))}")
    t = table(paper, {"ours before": before, "ours after": after})
    t["face value before"] = ["holds" if all(face_before) else "does not hold"] * len(t)
    t["face value after"] = ["holds" if all(face_after) else "does not hold"] * len(t)
    t["verdict before"] = [verdict_before] * len(t)
    t["verdict after"] = [verdict_after] * len(t)
    return t
