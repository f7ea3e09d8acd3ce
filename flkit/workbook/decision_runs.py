"""Measuring a decision's table (:mod:`flkit.workbook.decisions`): run its candidates until its
rule is met (:func:`drive`), then write the table once with where, when and how it was measured
(:func:`record`, :func:`provenance`). Reading a recorded table and checking the presets against it
needs none of this."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import platform
from collections.abc import Callable, Mapping, Sequence

from ..utils import FlkitError
from .decisions import PROVENANCE, Decision, Outcome, cell_text, decide, rules_unmet, same_value

__all__ = ["drive", "provenance", "record"]


def drive(
    decision: Decision,
    measure: Callable[[dict], Mapping | Sequence[Mapping]],
    table: Sequence[Mapping] = (),
) -> tuple[Outcome, list[dict]]:
    """Run ``decision``'s candidates in order until its rule is met: ``measure(candidate)`` gives
    the candidate's row (or rows), to which the candidate's values are added. Shape "first" stops
    at the first candidate that passes; shape "best" measures every one. The candidates of rows
    in ``table`` (an earlier, interrupted drive) are not measured again. Returns the outcome and
    every row, for :func:`record`."""
    rows = [dict(r) for r in table]
    if decision.per:
        for sub in decision.groups():
            rows = drive(sub, measure, rows)[1]
        return decide(decision, rows), rows
    for cand in decision.candidates:
        keys = decision.match or tuple(cand)
        have = [r for r in rows if all(same_value(cand[k], r.get(k)) for k in keys if k in cand)]
        if not have:
            got = measure(dict(cand))
            have = [{**cand, **dict(r)} for r in ([got] if isinstance(got, Mapping) else got)]
            if not have:
                raise FlkitError(
                    f"decision {decision.name!r}: measure gave no row for {decision.label(cand)}; "
                    "accepted: a row (a mapping) or a list of rows"
                )
            rows.extend(have)
        if decision.shape == "first" and not rules_unmet(decision.passes, have):
            break
    return decide(decision, rows), rows


def provenance(preset: str, seeds, command: str) -> dict:
    """The provenance of a table measured now: the commit ("+changes" when the working tree
    differs from it), the UTC date, the machine, torch's threads, the preset, seeds and command."""
    import torch

    from .report import source_commit

    src = source_commit()
    commit = src["commit"][:10] if src["commit"] != "unknown" else "not a git checkout"
    commit += "+changes" if src["dirty"] else ""
    return {
        "commit": commit,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "threads": torch.get_num_threads(),
        "preset": preset,
        "seeds": list(seeds),
        "command": command,
    }


def record(decision: Decision, rows: Sequence[Mapping], provenance: Mapping) -> str:
    """Write ``rows`` as the decision's recorded table, once (an existing table is never
    replaced), and return its ``[<name>.provenance]`` block for ``decisions.toml``."""
    if decision.path.exists():
        raise FlkitError(
            f"decision {decision.name!r} already has its recorded table {decision.path}; a "
            "recorded table is written once: a new search is a new decision"
        )
    lack = [k for k in PROVENANCE if k not in provenance]
    if lack:
        raise FlkitError(f"provenance lacks {lack}; accepted: {list(PROVENANCE)}")
    cols = list(dict.fromkeys(c for r in rows for c in r))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows([cols, *([cell_text(r.get(c)) for c in cols] for r in rows)])
    decision.path.parent.mkdir(parents=True, exist_ok=True)
    decision.path.write_text(buf.getvalue(), encoding="utf-8")
    block = [
        f"[{decision.name}.provenance]",
        *(f"{k} = {json.dumps(provenance[k])}" for k in PROVENANCE),
    ]
    return "\n".join(block) + "\n"
