"""One notebook's part of the reproduce report, in the order a reader asks: its claims first
(verdict, evidence, regime), then its numbers grouped as the paper's tables, then its figures.

Numbers are grouped by their keys: a key "<table>, <row>, <column>" (three or more comma-separated
parts, e.g. "final accuracy, HideNseek, har") is one cell of the table "<table>" when that table
has at least two rows and two columns with one note; every other number goes into one list. Each
table prints its note once, under it. Both Markdown and HTML are written from the same groups.
"""

from __future__ import annotations

import html

from ..workbook.verdict import STYLE, VERDICTS

__all__ = ["number_groups", "claims_md", "numbers_md", "claims_html", "numbers_html", "badge"]


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _split(key: str):
    parts = [p.strip() for p in key.split(", ")]
    if len(parts) < 3:
        return None
    return ", ".join(parts[:-2]), parts[-2], parts[-1]


def _cell(row: dict) -> str:
    """'70.1 ± 0.3%' or '70.1% (paper 71.2%)'."""
    out = row["measured"] or "—"
    return f"{out} (paper {row['paper']})" if row.get("paper") else out


def number_groups(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(tables, rest): tables = [{"title", "unit", "note", "rows": [...], "columns": [...],
    "cells": {(row, column): text}}] for the numbers that form a table, rest = the other number
    rows of :func:`flkit.workbook.results.summarize`, in recording order."""
    groups: dict[tuple, list] = {}
    for r in rows:
        if r.get("kind") != "number":
            continue
        split = _split(r.get("key", r["item"]))
        gk = (split[0], r.get("unit", ""), r.get("note", "")) if split else ("", id(r))
        groups.setdefault(gk, []).append((split, r))
    tables, rest = [], []
    for gk, members in groups.items():
        splits = [s for s, _ in members]
        rows_ = list(dict.fromkeys(s[1] for s in splits if s))
        cols = list(dict.fromkeys(s[2] for s in splits if s))
        pairs = {(s[1], s[2]) for s in splits if s}
        if gk[0] and len(rows_) >= 2 and len(cols) >= 2 and len(pairs) == len(members):
            tables.append(
                {
                    "title": gk[0],
                    "unit": gk[1],
                    "note": gk[2],
                    "rows": rows_,
                    "columns": cols,
                    "cells": {(s[1], s[2]): _cell(r) for s, r in members},
                }
            )
        else:
            rest.extend(r for _, r in members)
    order = {id(r): i for i, r in enumerate(rows)}
    rest.sort(key=lambda r: order[id(r)])
    return tables, rest


def badge(verdict: str) -> tuple[str, str]:
    """(colour, symbol) of a verdict cell ("holds", "outside regime (1 holds, ... of 2 seeds)")."""
    for v in VERDICTS:
        if verdict.startswith(v):
            return STYLE[v]
    return ("#444444", "")


def _regime_text(reading: dict) -> str:
    mark = {True: "in", False: "OUT", None: "unknown"}[reading.get("inside")]
    unit = f" {reading['unit']}" if reading.get("unit") else ""
    ours = "not measured" if reading.get("ours") is None else f"{reading['ours']:.3g}{unit}"
    if isinstance(reading.get("ours"), str):
        ours = reading["ours"]
    paper = reading.get("paper")
    paper = f"{paper:.3g}{unit}" if isinstance(paper, (int, float)) else str(paper)
    return f"{reading['indicator']}: ours {ours}, paper {paper}, rule {reading['rule']} → {mark}"


def _claim_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("kind") == "claim"]


# ------------------------------------------------------------------------------ Markdown
def claims_md(rows: list[dict]) -> list[str]:
    claims = _claim_rows(rows)
    if not claims:
        return []
    md = ["### Claims", "", "| claim | verdict | evidence | regime |", "|---|---|---|---|"]
    for c in claims:
        _, sym = badge(c["holds"])
        src = f" ({_md(c['paper'])})" if c.get("paper") else ""
        verdict = f"{sym} **{c['holds']}**".strip()
        if c.get("reason"):
            verdict += f": {c['reason']}"
        regime = "<br>".join(_md(_regime_text(x)) for x in c.get("regime") or []) or "—"
        md.append(f"| {_md(c['item'])}{src} | {_md(verdict)} | {_md(c['measured'])} | {regime} |")
    return md + [""]


def numbers_md(rows: list[dict], seeds_note: str = "") -> list[str]:
    tables, rest = number_groups(rows)
    if not tables and not rest:
        return []
    md = ["### Numbers", ""] + ([seeds_note, ""] if seeds_note else [])
    for t in tables:
        unit = f" ({t['unit']})" if t["unit"] else ""
        md += [f"**{_md(t['title'])}**{unit}", ""]
        md.append("| | " + " | ".join(_md(c) for c in t["columns"]) + " |")
        md.append("|---" * (len(t["columns"]) + 1) + "|")
        for r in t["rows"]:
            cells = [_md(t["cells"].get((r, c), "")) for c in t["columns"]]
            md.append(f"| {_md(r)} | " + " | ".join(cells) + " |")
        md += [""] + ([f"*{_md(t['note'])}*", ""] if t["note"] else [])
    if rest:
        if tables:
            md += ["**Other numbers**", ""]
        notes = {r.get("note", "") for r in rest}
        one_note = len(notes) == 1
        head = "| | paper reports | we measured |" + ("" if one_note else " note |")
        md += [head, "|---|---|---|" + ("" if one_note else "---|")]
        for r in rest:
            note = "" if one_note else f" {_md(r.get('note', ''))} |"
            md.append(
                f"| {_md(r.get('key', r['item']))} | {_md(r['paper'])} | "
                f"{_md(r['measured'])} |{note}"
            )
        md.append("")
        if one_note and next(iter(notes)):
            md += [f"*{_md(next(iter(notes)))}*", ""]
    return md


# ------------------------------------------------------------------------------ HTML
def claims_html(rows: list[dict]) -> list[str]:
    e = html.escape
    claims = _claim_rows(rows)
    if not claims:
        return []
    page = [
        "<h3>Claims</h3><table><tr><th>claim</th><th>verdict</th><th>evidence</th>"
        "<th>regime</th></tr>"
    ]
    for c in claims:
        colour, sym = badge(c["holds"])
        src = f" <span class='meta'>({e(c['paper'])})</span>" if c.get("paper") else ""
        reason = f"<div class='reason'>{e(c['reason'])}</div>" if c.get("reason") else ""
        regime = "<br>".join(e(_regime_text(x)) for x in c.get("regime") or []) or "—"
        page.append(
            f"<tr><td>{e(c['item'])}{src}</td><td><span class='verdict' style='background:"
            f"{colour}'>{e(sym)} {e(c['holds'])}</span>{reason}</td><td>{e(c['measured'])}"
            f"</td><td class='regime'>{regime}</td></tr>"
        )
    return page + ["</table>"]


def numbers_html(rows: list[dict], seeds_note: str = "") -> list[str]:
    e = html.escape
    tables, rest = number_groups(rows)
    if not tables and not rest:
        return []
    page = ["<h3>Numbers</h3>"] + ([f"<p>{e(seeds_note)}</p>"] if seeds_note else [])
    for t in tables:
        unit = f" ({e(t['unit'])})" if t["unit"] else ""
        page.append(f"<p><b>{e(t['title'])}</b>{unit}</p><table><tr><th></th>")
        page.append("".join(f"<th>{e(c)}</th>" for c in t["columns"]) + "</tr>")
        for r in t["rows"]:
            cells = "".join(f"<td>{e(t['cells'].get((r, c), ''))}</td>" for c in t["columns"])
            page.append(f"<tr><th>{e(r)}</th>{cells}</tr>")
        page.append("</table>" + (f"<p class='note'>{e(t['note'])}</p>" if t["note"] else ""))
    if rest:
        if tables:
            page.append("<p><b>Other numbers</b></p>")
        notes = {r.get("note", "") for r in rest}
        one_note = len(notes) == 1
        page.append(
            "<table><tr><th></th><th>paper reports</th><th>we measured</th>"
            + ("" if one_note else "<th>note</th>")
            + "</tr>"
        )
        for r in rest:
            note = "" if one_note else f"<td>{e(r.get('note', ''))}</td>"
            page.append(
                f"<tr><td>{e(r.get('key', r['item']))}</td><td>{e(str(r['paper']))}</td>"
                f"<td>{e(str(r['measured']))}</td>{note}</tr>"
            )
        page.append("</table>")
        if one_note and next(iter(notes)):
            page.append(f"<p class='note'>{e(next(iter(notes)))}</p>")
    return page
