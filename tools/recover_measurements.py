"""Recover the measurements of results published under rules version 1, for re-judging.

Entries of ``docs/results.json`` written before claims recorded their key and measurements hold
each claim's regime readings as text rows (indicator, ours per run, rule). Where those rows carry
what the current rules read, this tool writes them back as version-2 fields: each claim's
``key`` and, per run, ``measured`` = every indicator value read anywhere in the entry (so a rule
may read an indicator another claim carried). A map per notebook, ``tools/v1_maps/<notebook>.json``,
names the claim keys (claim text prefix -> key), the indicator keys (indicator text -> key), the
training seeds of each preset, each claim's own test in words (claim text prefix -> test, as
the claims code now records it) and, per preset, values of new indicators read off another
recorded line of the same entry ("measured", with "measured_from" saying which line); a claim
judged on readings that the map leaves out is an error, and an entry whose rules read an
indicator the rows never held fails the re-judge by name (then the notebook is re-run).

    python tools/recover_measurements.py 03_fedast [--preset cpu] [--dry-run]

Each recovered claim says so (``"recovered": "rules v1 readings"``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flkit.reproduce import rejudge  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402

MAPS = ROOT / "tools" / "v1_maps"


def _readings(entry: dict, rows: list, indicators: dict, runs: list) -> dict:
    """{run: {key: ours, key@paper: the paper value the row was judged against}} of ``rows``."""
    out = {run: {} for run in runs}
    for row in rows:
        key = indicators.get(row["indicator"])
        if key is None:
            raise FlkitError(
                f"{entry['notebook']}: indicator {row['indicator']!r} has no key in the map"
            )
        for run, value in zip(runs, row["ours"]):
            out[run][key] = value
            if isinstance(row.get("paper"), (int, float)):
                out[run][f"{key}@paper"] = row["paper"]
    return out


def _undecided_reason(c: dict) -> str:
    """The reason a v1 claim gave for an undecided face value (its recorded reason without the
    face-value tail); '' when its face value was decided."""
    if c.get("face", {}) and any(v is not None for v in c["face"].values()):
        return ""
    return str(c.get("reason", "")).split("; at face value")[0]


def recover(
    entry: dict, claims: dict, indicators: dict, seeds=None, tests=None, extra=None
) -> dict:
    """``entry`` (rules 1) with claim keys and measurements from its readings (rules 2): each
    claim's own readings, over every other reading of the entry. ``seeds``: the training seeds
    of the entry's preset (the map's "seeds"), recorded on every claim."""
    runs = [str(s) for s in entry["seeds"]]
    every = _readings(
        entry, [r for c in entry["claims"] for r in c.get("regime") or []], indicators, runs
    )
    for run in runs:  # values the map reads off another recorded line (it says which, and why)
        every[run].update(extra or {})
    out = dict(entry, rules=2, claims=[])
    for c in entry["claims"]:
        c = dict(c)
        key = next((k for text, k in claims.items() if c["text"].startswith(text)), None)
        if key is not None:
            own = _readings(entry, c.get("regime") or [], indicators, runs)
            c["key"] = key
            c["measured"] = {run: {**every[run], **own[run]} for run in runs}
            c["recovered"] = "rules v1 readings"
        elif c.get("regime"):
            raise FlkitError(
                f"{entry['notebook']}: claim {c['text']!r} was judged on readings but has no key "
                "in the map"
            )
        test = next((t for text, t in (tests or {}).items() if c["text"].startswith(text)), "")
        c["test"] = c.get("test") or test
        if isinstance(seeds, dict):  # by claim text prefix
            c["seeds"] = c.get("seeds") or next(
                (v for text, v in seeds.items() if c["text"].startswith(text)), None
            )
        else:
            c["seeds"] = c.get("seeds") or seeds
        c.setdefault("judge_at_smoke", False)
        c.setdefault("face_reason", _undecided_reason(c))
        out["claims"].append(c)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", help="e.g. 03_fedast")
    p.add_argument("--preset", help="only this preset's entry (default: every entry)")
    p.add_argument("--dry-run", action="store_true", help="print the verdict changes only")
    a = p.parse_args(argv)
    mp = json.loads((MAPS / f"{a.notebook}.json").read_text(encoding="utf-8"))
    store = ROOT / "docs" / "results.json"
    entries = json.loads(store.read_text(encoding="utf-8"))
    out = []
    for e in entries:
        if e["notebook"] == a.notebook and (a.preset is None or e["preset"] == a.preset):
            if e.get("rules", 1) < 2:
                seeds = (mp.get("seeds") or {}).get(e["preset"])
                extra = (mp.get("measured") or {}).get(e["preset"])
                e = recover(e, mp["claims"], mp["indicators"], seeds, mp.get("tests"), extra)
            e = rejudge.rejudge_entry(e)
        out.append(e)
    for line in rejudge.verdict_changes(entries, out):
        print(line)
    if not a.dry_run:
        store.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
