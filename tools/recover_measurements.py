"""Recover the measurements of results published under rules version 1, for re-judging.

Entries of ``docs/results.json`` written before claims recorded their key and measurements hold
each claim's regime readings as text rows (indicator, ours per run, rule). Where those rows carry
what the current rules read, this tool writes them back as version-2 fields: each claim's
``key`` and, per run, ``measured`` = every indicator value read anywhere in the entry (so a rule
may read an indicator another claim carried). A map per notebook, ``tools/v1_maps/<notebook>.json``,
names the claim keys (claim text -> key) and the indicator keys (indicator text -> key); a claim
the map leaves out keeps no key and is judged on its face value alone, and an entry whose rules
read an indicator the rows never held fails the re-judge by name (then the notebook is re-run).

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


def recover(entry: dict, claims: dict, indicators: dict) -> dict:
    """``entry`` (rules 1) with claim keys and measurements from its readings (rules 2)."""
    runs = [str(s) for s in entry["seeds"]]
    measured = {run: {} for run in runs}
    for c in entry["claims"]:
        for row in c.get("regime") or []:
            key = indicators.get(row["indicator"])
            if key is None:
                raise FlkitError(
                    f"{entry['notebook']}: indicator {row['indicator']!r} has no key in the map"
                )
            for run, value in zip(runs, row["ours"]):
                measured[run][key] = value
    out = dict(entry, rules=2, claims=[])
    for c in entry["claims"]:
        c = dict(c)
        key = next((k for text, k in claims.items() if c["text"].startswith(text)), None)
        if key is not None:
            c["key"] = key
            c["measured"] = {run: dict(measured[run]) for run in runs}
            c["recovered"] = "rules v1 readings"
        elif c.get("regime"):
            c["regime"] = []  # judged on its face value from here on: the map says why
        c.setdefault("test", "")
        c.setdefault("seeds", None)
        c.setdefault("judge_at_smoke", False)
        c.setdefault("face_reason", "")
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
                e = recover(e, mp["claims"], mp["indicators"])
            e = rejudge.rejudge_entry(e)
        out.append(e)
    for line in rejudge.verdict_changes(entries, out):
        print(line)
    if not a.dry_run:
        store.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
