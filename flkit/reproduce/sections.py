"""One notebook's part of the reproduce report, in the order a reader asks: its claims first
(verdict, evidence, regime), then its numbers grouped as the paper's tables, then its figures.

Claims: one row each (verdict with its symbol, evidence, the regime readings beside the paper's
values); a source in the paper shared by every claim is written once under the table, and an
"outside regime" verdict names the indicator only in the regime column, keeping the outcome at
face value beside the verdict.

Numbers are grouped by their keys: a key "<table>, <row>, <column>" (three or more comma-separated
parts, e.g. "final accuracy, HideNseek, har") is one cell of the table "<table>" when that table
has at least two rows and two columns with one note; the unit goes into the table's title and the
paper's value beside ours in the cell. Every other number goes into lists, one per note. Each
table or list prints its note once, under it.

Figures recorded with the claims they support (``report.figure(..., claims=[...])``) are shown
under those claims; the others after them. Markdown and HTML are written from the same groups.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from ..workbook.report import supports
from ..workbook.results import unit_sep
from ..workbook.verdict import HOLDS, OUTSIDE_REGIME, STYLE, VERDICTS

__all__ = [
    "badge_html",
    "number_groups",
    "figure_groups",
    "claims_md",
    "numbers_md",
    "figures_md",
    "claims_html",
    "counts_html",
    "numbers_html",
    "figures_html",
    "badge",
    "ink",
]

_ALL_SEEDS = re.compile(r" \(n=\d+\)$")  # "(n=2)": every seed measured it; the seeds note says so
_FACE = "; at face value it "


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _split(key: str):
    parts = [p.strip() for p in key.split(", ")]
    if len(parts) < 3:
        return None
    return ", ".join(parts[:-2]), parts[-2], parts[-1]


def _drop_unit(text: str, unit: str) -> str:
    """``text`` without ``unit`` after its numbers ('70.1 ± 0.3%' -> '70.1 ± 0.3')."""
    if not unit or not text:
        return text
    return re.sub(r"(?<=\d)" + re.escape(unit_sep(unit) + unit) + r"(?=$|[\s)])", "", text)


def _cell(row: dict, unit: str = "", all_seeds_said: bool = False) -> str:
    """'70.1 ± 0.3' or '70.1 (paper 71.2)': the table's title carries ``unit``; '(n=2)' goes
    when the seeds note says every number is over all seeds (``all_seeds_said``)."""
    out = row["measured"] or "—"
    if all_seeds_said:
        out = _ALL_SEEDS.sub("", out)
    out = _drop_unit(out, unit)
    paper = _drop_unit(str(row.get("paper") or ""), unit)
    return f"{out} (paper {paper})" if paper else out


def number_groups(rows: list[dict], all_seeds_said: bool = False) -> tuple[list[dict], list[dict]]:
    """(tables, rest): tables = [{"title", "unit", "note", "rows": [...], "columns": [...],
    "cells": {(row, column): text}}] for the numbers that form a table, rest = the other number
    rows of :func:`flkit.workbook.results.summarize`, in recording order. ``all_seeds_said``: the
    report says once that numbers are over all seeds, so cells leave out '(n=...)'."""
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
                    "cells": {(s[1], s[2]): _cell(r, gk[1], all_seeds_said) for s, r in members},
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

    def value(v) -> str:
        if v is None:
            return "not measured"
        if isinstance(v, dict):  # an indicator read per method
            return ", ".join(f"{m} {value(x)}" for m, x in v.items())
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return f"{v:.3g}{unit}"
        return str(v)

    ours = value(reading.get("ours"))
    paper = reading.get("paper")
    paper = f"{paper:.3g}{unit}" if isinstance(paper, (int, float)) else str(paper)
    kind = " (diagnostic)" if reading.get("diagnostic") else ""
    return (
        f"{reading['indicator']}{kind}: ours {ours}, paper {paper}, rule {reading['rule']} → {mark}"
    )


def _claim_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("kind") == "claim"]


def _shared_source(claims: list[dict]) -> str:
    """The paper's source when two or more claims all cite the same one (written once)."""
    sources = {c.get("paper", "") for c in claims}
    return sources.pop() if len(claims) > 1 and len(sources) == 1 else ""


def _verdict_words(c: dict) -> tuple[str, str]:
    """(verdict, reason to show): an outside-regime reason keeps only the outcome at face value,
    since the regime column shows the indicator, ours and the paper's."""
    reason = c.get("reason") or ""
    if c["holds"].startswith(OUTSIDE_REGIME) and c.get("regime"):
        reason = ("at face value it " + reason.rsplit(_FACE, 1)[1]) if _FACE in reason else ""
    return c["holds"], reason


def _listed(row: dict, all_seeds_said: bool) -> str:
    """A listed number's measured text; '(n=...)' goes when the seeds note says it."""
    return _ALL_SEEDS.sub("", str(row["measured"])) if all_seeds_said else str(row["measured"])


def _by_notes(rest: list[dict]) -> list[tuple[str, list[dict]]]:
    """The listed numbers grouped by note, in order of each note's first number."""
    groups: dict[str, list[dict]] = {}
    for r in rest:
        groups.setdefault(r.get("note", ""), []).append(r)
    return list(groups.items())


def figure_groups(rows: list[dict], figures: list[dict]) -> list[tuple[dict | None, list[dict]]]:
    """[(claim row, its figures), ..., (None, the other figures)]: ``figures`` are dicts
    {"name", "file", "seed", "claims"}; a figure goes under the first claim row it supports
    (:func:`flkit.workbook.report.supports`), else among the others (the last group, present
    when not empty)."""
    claims = _claim_rows(rows)
    by_text = {c["item"]: [] for c in claims}
    other = []
    for f in figures:
        home = next((c["item"] for c in claims if supports(f, c["item"])), None)
        (by_text[home] if home is not None else other).append(f)
    out = [(c, by_text[c["item"]]) for c in claims if by_text[c["item"]]]
    return out + ([(None, other)] if other else [])


# ------------------------------------------------------------------------------ Markdown
def claims_md(rows: list[dict]) -> list[str]:
    claims = _claim_rows(rows)
    if not claims:
        return []
    shared = _shared_source(claims)
    md = ["### Claims", "", "| claim | verdict | evidence | regime |", "|---|---|---|---|"]
    for c in claims:
        _, sym = badge(c["holds"])
        src = f" ({_md(c['paper'])})" if c.get("paper") and not shared else ""
        words, reason = _verdict_words(c)
        verdict = f"{sym} **{words}**".strip() + (f": {reason}" if reason else "")
        regime = "<br>".join(_md(_regime_text(x)) for x in c.get("regime") or []) or "—"
        md.append(f"| {_md(c['item'])}{src} | {_md(verdict)} | {_md(c['measured'])} | {regime} |")
    return (
        md
        + [""]
        + ([f"*Source in the paper, for every claim: {_md(shared)}.*", ""] if shared else [])
    )


def numbers_md(rows: list[dict], seeds_note: str = "") -> list[str]:
    tables, rest = number_groups(rows, all_seeds_said=bool(seeds_note))
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
    if rest and tables:
        md += ["**Other numbers**", ""]
    for note, group in _by_notes(rest):
        md += ["| | paper reports | we measured |", "|---|---|---|"]
        for r in group:
            measured = _listed(r, bool(seeds_note))
            md.append(f"| {_md(r.get('key', r['item']))} | {_md(r['paper'])} | {_md(measured)} |")
        md += [""] + ([f"*{_md(note)}*", ""] if note else [])
    return md


def _claim_head(c: dict) -> str:
    _, sym = badge(c["holds"])
    return f"{sym} {c['holds']}".strip()


def figures_md(rows: list[dict], figures: list[dict]) -> list[str]:
    """The figures (dicts {"name", "file" (path relative to the report), "seed", "claims"}),
    under the claims they support, then the others."""
    groups = figure_groups(rows, figures)
    if not groups:
        return []
    md = ["### Figures", ""]
    for claim, figs in groups:
        if claim is not None:
            md += [f"**{_md(claim['item'])}**: {_md(_claim_head(claim))}", ""]
        elif len(groups) > 1:
            md += ["**Other figures**", ""]
        for f in figs:
            md += [f"![{f['name']} (seed {f['seed']})]({f['file']})", ""]
    return md


# ------------------------------------------------------------------------------ HTML
def claims_html(rows: list[dict]) -> list[str]:
    e = html.escape
    claims = _claim_rows(rows)
    if not claims:
        return []
    shared = _shared_source(claims)
    page = [
        "<h3>Claims</h3><table class='claims'><tr><th>claim</th><th>verdict</th><th>evidence</th>"
        "<th>regime: ours, paper, rule</th></tr>"
    ]
    for c in claims:
        src = (
            f" <span class='meta'>({e(c['paper'])})</span>" if c.get("paper") and not shared else ""
        )
        _, reason = _verdict_words(c)
        reason = f"<div class='reason'>{e(reason)}</div>" if reason else ""
        regime = "".join(_regime_html(x) for x in c.get("regime") or []) or "—"
        page.append(
            f"<tr><td>{e(c['item'])}{src}</td><td>{badge_html(c['holds'])}{reason}</td>"
            f"<td>{e(c['measured'])}</td><td class='regime'>{regime}</td></tr>"
        )
    page.append("</table>")
    return page + (
        [f"<p class='note'>Source in the paper, for every claim: {e(shared)}.</p>"]
        if shared
        else []
    )


def _split_verdict(text: str) -> tuple[str, str]:
    """('holds', '2 holds of 2 seeds') from 'holds (2 holds of 2 seeds)'."""
    word = next((v for v in VERDICTS if text.startswith(v)), text)
    return word, text[len(word) :].strip().removeprefix("(").removesuffix(")")


def ink(colour: str) -> str:
    """Black or white, whichever contrasts more with the background ``colour`` ('#rrggbb'),
    by the WCAG relative luminance."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#000" if (lum + 0.05) / 0.05 > 1.05 / (lum + 0.05) else "#fff"


def _label_style(verdict: str) -> str:
    colour, _ = badge(verdict)
    return f"background:{colour};color:{ink(colour)}"


def badge_html(verdict: str, seeds: bool = True) -> str:
    """The verdict as a coloured label holding its symbol and its words (never colour alone);
    with ``seeds``, the seeds' breakdown ('2 holds of 2 seeds'), if any, follows in plain text."""
    _, sym = badge(verdict)
    word, detail = _split_verdict(verdict)
    seeds = f" <span class='seeds'>{html.escape(detail)}</span>" if seeds and detail else ""
    return (
        f"<span class='verdict' style='{_label_style(verdict)}'>{html.escape(sym)} "
        f"{html.escape(word)}</span>{seeds}"
    )


def counts_html(counts: dict) -> str:
    """A notebook's claims per verdict as labels ('✓ 2 holds', '? 1 inconclusive'); '' for
    none."""
    return "".join(
        f"<span class='verdict count' style='{_label_style(v)}'>"
        f"{html.escape(STYLE[v][1])} {n} {html.escape(v)}</span>"
        for v in VERDICTS
        if (n := counts.get(v, 0))
    )


def _regime_html(reading: dict) -> str:
    """One reading on its own line, its side bar coloured as the verdict it leads to (inside:
    the colour of holds, outside: of outside regime); the words say it too."""
    inside = reading.get("inside")
    colour = {True: STYLE[HOLDS][0], False: STYLE[OUTSIDE_REGIME][0]}.get(inside, "#cccccc")
    return f"<div style='border-left-color:{colour}'>{html.escape(_regime_text(reading))}</div>"


def numbers_html(rows: list[dict], seeds_note: str = "") -> list[str]:
    e = html.escape
    tables, rest = number_groups(rows, all_seeds_said=bool(seeds_note))
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
    if rest and tables:
        page.append("<p><b>Other numbers</b></p>")
    for note, group in _by_notes(rest):
        page.append("<table><tr><th></th><th>paper reports</th><th>we measured</th></tr>")
        for r in group:
            page.append(
                f"<tr><td>{e(r.get('key', r['item']))}</td><td>{e(str(r['paper']))}</td>"
                f"<td>{e(_listed(r, bool(seeds_note)))}</td></tr>"
            )
        page.append("</table>" + (f"<p class='note'>{e(note)}</p>" if note else ""))
    return page


def figures_html(rows: list[dict], figures: list[dict], out: Path) -> list[str]:
    """:func:`figures_md` in HTML, each PNG embedded (read from ``out``/file)."""
    e = html.escape
    groups = figure_groups(rows, figures)
    if not groups:
        return []
    page = ["<h3>Figures</h3>"]
    for claim, figs in groups:
        if claim is not None:
            page.append(
                f"<p class='supports'><b>{e(claim['item'])}</b> "
                f"{badge_html(claim['holds'], seeds=False)}</p>"
            )
        elif len(groups) > 1:
            page.append("<p><b>Other figures</b></p>")
        page.append("<div class='figures'>")
        for f in figs:
            caption = f"{e(f['name'])} (seed {f['seed']})"
            try:
                data = base64.b64encode((out / f["file"]).read_bytes()).decode()
                page.append(
                    f"<figure><img alt='{e(f['name'])}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{caption}</figcaption></figure>"
                )
            except OSError:
                page.append(f"<p><a href='{e(f['file'])}'>{caption}</a></p>")
        page.append("</div>")
    return page
