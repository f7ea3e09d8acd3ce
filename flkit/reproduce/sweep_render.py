"""The combined report of ``flkit sweep``: ``sweep.md``, ``sweep.html`` and ``sweep.json``.

One column per grid point. Its cells are the rows each point's own report computed (read back
from ``<point>/summary.json``, so numbers are the same mean ± std over seeds): every number, and
every claim with the seeds in which it holds; then, per grid point, the claims that hold in all
its seeds."""

from __future__ import annotations

import datetime as _dt
import html
import json
from pathlib import Path

from ..store import save_text
from ..workbook.verdict import HOLDS, verdict_of

__all__ = ["write_sweep_report", "sweep_table"]


def _point_summary(out: Path, label: str) -> dict:
    try:
        summary = json.loads((out / label / "summary.json").read_text(encoding="utf-8"))
        return summary["notebooks"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return {"rows": [], "status": "FAILED", "seeds": [], "seeds_ok": []}


def sweep_table(out: Path, points: list[dict]) -> dict:
    """``{"labels", "status", "items": [(kind, item, paper, [cell per point])], "holding"}``."""
    sections = [_point_summary(out, pt["label"]) for pt in points]
    items: dict[str, dict] = {}
    for j, sec in enumerate(sections):
        for row in sec.get("rows", []):
            entry = items.setdefault(
                row["item"],
                {"kind": row["kind"], "paper": row["paper"], "cells": [""] * len(points)},
            )
            entry["cells"][j] = row["measured"] if row["kind"] == "number" else row["holds"]
    holding = []
    for sec in sections:
        holding.append(
            [
                row["item"]
                for row in sec.get("rows", [])
                if row["kind"] == "claim"
                and row.get("verdicts")
                and all(
                    verdict_of({"verdict": v} if isinstance(v, str) else v) == HOLDS
                    for v in row["verdicts"]
                )
            ]
        )
    return {
        "labels": [pt["label"] for pt in points],
        "status": [
            f"{sec.get('status', '?')} ({len(sec.get('seeds_ok', []))}/"
            f"{len(sec.get('seeds', []))} seeds)"
            for sec in sections
        ],
        "items": [(e["kind"], item, e["paper"], e["cells"]) for item, e in items.items()],
        "holding": holding,
    }


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _head_line(head: dict) -> str:
    grid = "; ".join(f"{k} ∈ {{{', '.join(map(str, v))}}}" for k, v in head["grid"].items())
    return (
        f"Preset {head['preset']} · grid {grid} · seeds {', '.join(map(str, head['seeds']))} · "
        f"{head['executor']} · {head['resumed']} run(s) kept from an earlier sweep · "
        f"{head['finished']}"
    )


def _render_md(head: dict, t: dict) -> str:
    md = [f"# flkit sweep: {head['notebook']}", "", _head_line(head), ""]
    if head["overrides"]:
        md += ["Fixed: " + ", ".join(f"`{k}={v!r}`" for k, v in head["overrides"].items()), ""]
    md += [
        "Numbers are mean ± std over the seeds that finished; claims give the seeds in which "
        "they hold. Each grid point's full report (figures, failures) is linked in its column.",
        "",
        "| | paper | " + " | ".join(f"[{_md(lb)}]({lb}/report.md)" for lb in t["labels"]) + " |",
        "|---|---|" + "---|" * len(t["labels"]),
        "| status | | " + " | ".join(map(_md, t["status"])) + " |",
    ]
    for _, item, paper, cells in t["items"]:
        md.append(f"| {_md(item)} | {_md(paper)} | " + " | ".join(map(_md, cells)) + " |")
    md += ["", "## Claims that hold in every seed", ""]
    for label, claims in zip(t["labels"], t["holding"]):
        md.append(f"- **{_md(label)}**: " + ("; ".join(claims) if claims else "none"))
    return "\n".join(md) + "\n"


def _render_html(head: dict, t: dict) -> str:
    e = html.escape
    page = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>flkit sweep: {e(head['notebook'])}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto}"
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.3em .6em;"
        "text-align:left}th{background:#f3f3f3}</style></head><body>",
        f"<h1>flkit sweep: {e(head['notebook'])}</h1><p>{e(_head_line(head))}</p>",
        "<table><tr><th></th><th>paper</th>"
        + "".join(f"<th><a href='{e(lb)}/report.html'>{e(lb)}</a></th>" for lb in t["labels"])
        + "</tr><tr><td>status</td><td></td>"
        + "".join(f"<td>{e(s)}</td>" for s in t["status"])
        + "</tr>",
    ]
    for _, item, paper, cells in t["items"]:
        page.append(
            f"<tr><td>{e(item)}</td><td>{e(str(paper))}</td>"
            + "".join(f"<td>{e(str(c))}</td>" for c in cells)
            + "</tr>"
        )
    page.append("</table><h2>Claims that hold in every seed</h2><ul>")
    for label, claims in zip(t["labels"], t["holding"]):
        page.append(f"<li><b>{e(label)}</b>: {e('; '.join(claims) if claims else 'none')}</li>")
    page.append("</ul></body></html>")
    return "\n".join(page) + "\n"


def write_sweep_report(out: Path, head: dict, points: list[dict]) -> Path:
    """Write sweep.md, sweep.html and sweep.json into ``out``; returns sweep.md's path."""
    head = {
        **head,
        "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    t = sweep_table(out, points)
    save_text(out / "sweep.md", _render_md(head, t))
    save_text(out / "sweep.html", _render_html(head, t))
    data = {
        **head,
        "points": [
            {
                "point": pt["point"],
                "label": pt["label"],
                "status": st,
                "holding": hold,
                "runs": [
                    {k: r.get(k) for k in ("seed", "status", "wall_time_s", "error")}
                    for r in pt.get("infos", [])
                ],
            }
            for pt, st, hold in zip(points, t["status"], t["holding"])
        ],
        "items": [
            {"kind": k, "item": i, "paper": p, "cells": dict(zip(t["labels"], c))}
            for k, i, p, c in t["items"]
        ],
    }
    save_text(out / "sweep.json", json.dumps(data, indent=2, default=str) + "\n")
    return out / "sweep.md"
