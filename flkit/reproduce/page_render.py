"""The results page for a reader: does each paper's main claim reproduce, and why not.

Rendered from the published entries (``docs/results.json``, :mod:`.results_page`), top down:

1. how to read the page: the four verdicts and what a condition (regime indicator) is, in plain
   words;
2. one row per paper: its title, venue and link, the main claim (the paper's ``[meta] headline``),
   its verdict at the largest preset run, one line of why, links to the section and the notebook;
3. per paper: the claims, one row each with a column per preset (``cpu``, ``long``, ...) holding
   the verdict's symbol and word and one short reason; the main claim's figure of each preset,
   its caption naming the preset; the conditions once, one row per indicator with the paper's
   value, the rule, the rule's source (a row sharing the one above says so) and ours per preset;
   then the full evidence, the data and the runs folded away (``<details>``).

Rows stay short: a reason is cut at a clause boundary to :data:`REASON_CHARS`; the whole text
stays in the folded evidence.
"""

from __future__ import annotations

import re

from ..utils import FlkitError
from ..workbook.results import format_value
from ..workbook.verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    INCONCLUSIVE,
    OUTSIDE_REGIME,
    STYLE,
    VERDICTS,
)

__all__ = [
    "render",
    "paper_section",
    "summary_line",
    "anchor",
    "PRESET_ORDER",
    "REASON_CHARS",
    "ROW_CHARS",
]

#: presets from the smallest to the largest run: the largest one run is a paper's verdict
PRESET_ORDER = ("smoke", "cpu", "long", "paper")
#: a reason on a claim row is cut to about this many characters (the whole one is folded below)
REASON_CHARS = 110
#: a claims-table row is kept to this many characters: the reasons are cut to fit
ROW_CHARS = 300

_GLOSSARY = [
    "**How to read this page.** Each paper's claims were run at one or more *presets* (`cpu`: "
    "scaled down for a laptop; `long`: the same with more training, where the claim needs it; "
    "`paper`: the paper's own settings, for a GPU), over a few training *seeds*. Each claim gets "
    "one verdict:",
    "",
    f"- {STYLE[HOLDS][1]} **holds**: our run shows what the paper claims;",
    f"- {STYLE[DOES_NOT_HOLD][1]} **does not hold**: our run, in the paper's conditions, shows "
    "otherwise (a finding; the reason names the test it missed);",
    f"- {STYLE[OUTSIDE_REGIME][1]} **outside regime**: a *condition* the claim needs is not met "
    "in our run, so it cannot show the effect either way;",
    f"- {STYLE[INCONCLUSIVE][1]} **inconclusive**: the run cannot decide (too short, seeds "
    "disagree, a target never reached).",
    "",
    "A **condition** (regime indicator) describes the setting or a baseline the claim takes for "
    'granted, never the claim\'s own result: for example "FedAvg is still learning at the end" or '
    '"stale updates cost accuracy at all". Each has the paper\'s value, the rule ours must meet '
    "and where that rule comes from (a number the paper states, one computed from its setting, or "
    "ours, with why). A *diagnostic* is shown but never decides.",
]


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _rule(text) -> str:
    # "≥ 0.75" kept on one line: in a narrow column the comparison otherwise stands above its bound
    return re.sub(r"([<>=≤≥≈]) (?=\S)", "\\1\u00a0", _cell(text))


def anchor(notebook: str, preset: str | None = None) -> str:
    raw = notebook if preset is None else f"{notebook}-{preset}"
    return re.sub(r"[^a-z0-9_-]", "", raw.lower())


def _presets(entries: list[dict]) -> list[str]:
    names = {e["preset"] for e in entries}
    return [p for p in PRESET_ORDER if p in names] + sorted(names - set(PRESET_ORDER))


def summary_line(e: dict) -> str:
    """'2 of 5 hold, 1 outside regime, 2 inconclusive' ('no claims recorded' when none), after
    the run's status when it is not ok ('FAILED: no claims recorded')."""
    status = "" if e.get("status", "ok") == "ok" else f"{e['status']}: "
    vs = [c["verdict"] for c in e["claims"]]
    if not vs:
        return status + "no claims recorded"
    n = {v: vs.count(v) for v in VERDICTS}
    parts = [f"{n[HOLDS]} of {len(vs)} hold"]
    for v in (DOES_NOT_HOLD, OUTSIDE_REGIME, INCONCLUSIVE):
        if n[v]:
            said = "do not hold" if v == DOES_NOT_HOLD and n[v] > 1 else v
            parts.append(f"{n[v]} {said}")
    return status + ", ".join(parts)


def _short(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` cut at the last clause boundary (';', ', ', ' (') before ``limit``, with '…'."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind("; "), head.rfind(", "), head.rfind(" ("))
    return (head[:cut] if cut > limit // 2 else head.rsplit(" ", 1)[0]).rstrip(" ,;:") + " …"


def _value(v, unit: str = "") -> str:
    if v is None:
        return "not measured"
    if isinstance(v, dict):
        return ", ".join(f"{m} {_value(x, unit)}" for m, x in v.items())
    if isinstance(v, str):
        return v
    return format_value(v, unit)


def _ours(values: list, unit: str) -> str:
    if len(values) == 1:
        return _value(values[0], unit)
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) == len(values) and nums:
        mean = sum(nums) / len(nums)
        return f"{_value(mean, unit)} (runs {', '.join(_value(v) for v in values)})"
    return "; ".join(_value(v, unit) for v in values)


def _why(c: dict) -> str:
    """One line of why: the failing condition (outside regime), the missed test (does not
    hold), the reason (inconclusive), the evidence (holds)."""
    v = c["verdict"]
    if v == OUTSIDE_REGIME:
        out = [
            r for r in c.get("regime") or [] if r.get("inside") is False and not r.get("diagnostic")
        ]
        if out:
            r = out[0]
            unit = r.get("unit", "")
            return f"{r['indicator']}: ours {_ours(r['ours'], unit)}, needs {r['rule']}"
    if v == HOLDS:
        return c.get("evidence", "")
    return c.get("reason") or c.get("evidence", "")


def _verdict(c: dict | None, with_why: bool = True, limit: int = REASON_CHARS) -> str:
    if c is None:
        return "—"
    v = c["verdict"]
    out = f"{STYLE[v][1]} {v}"
    if c.get("previous_verdict"):
        out += f" (was {c['previous_verdict']})"
    why = _why(c) if with_why else ""
    return out + (f": {_short(why, limit)}" if why else "")


def _meta(notebook: str, fallback_title: str) -> dict:
    from ..workbook import presets

    try:
        m = presets.meta(notebook)
    except FlkitError:
        m = {}
    return {
        "title": m.get("title") or fallback_title,
        "venue": m.get("venue", ""),
        "link": m.get("link", ""),
        "headline": m.get("headline", ""),
        "notebook": m.get("notebook") or f"{notebook}.ipynb",
        "paper": m.get("paper", ""),
    }


def _headline(meta: dict, entry: dict) -> dict | None:
    head = meta["headline"]
    if not head:
        return None
    return next((c for c in entry["claims"] if c["text"].startswith(head)), None)


def headline_text(entry: dict) -> str | None:
    """The text of ``entry``'s main claim as recorded (its paper's ``[meta] headline``)."""
    c = _headline(_meta(entry["notebook"], entry.get("title", "")), entry)
    return None if c is None else c["text"]


def _paper_link(meta: dict) -> str:
    title = _cell(meta["title"])
    return f"[{title}]({meta['link']})" if meta["link"] else title


def render(entries: list[dict], root: str = "../", papers=()) -> str:
    """The page (Markdown) for ``entries``: the glossary, one row per paper, then each paper's
    section. ``root``: the repository root relative to the page (links to the notebooks);
    ``papers``: notebooks that get a row even without a published entry (saying so)."""
    md = [
        "# What reproduces",
        "",
        "<!-- Generated by `flkit reproduce` from recorded runs; `flkit reproduce --publish "
        "RUN_DIR` updates it and `flkit reproduce --rejudge` re-judges it under the current rules. "
        "Never edit by hand: a test re-renders it from docs/results.json. -->",
        "",
        *_GLOSSARY,
        "",
    ]
    if not entries:
        return "\n".join(md + ["No run has been published yet.", ""])
    by_nb: dict[str, list[dict]] = {}
    for e in sorted(entries, key=lambda e: e["notebook"]):
        by_nb.setdefault(e["notebook"], []).append(e)
    md += [
        "## At a glance",
        "",
        "| paper | main claim | verdict | why | more |",
        "|---|---|---|---|---|",
    ]
    for nb in sorted(set(by_nb) | set(papers)):
        if nb not in by_nb:
            meta = _meta(nb, nb)
            venue = f" ({_cell(meta['venue'])})" if meta["venue"] else ""
            md.append(
                f"| {_paper_link(meta)}{venue} | — | not yet judged | no run published under the "
                f"current rules | [notebook]({root}notebooks/{meta['notebook']}) |"
            )
            continue
        mine = by_nb[nb]
        meta = _meta(nb, mine[0].get("title", nb))
        best = max(mine, key=lambda e: _rank(e["preset"]))
        head = _headline(meta, best)
        venue = f" ({_cell(meta['venue'])})" if meta["venue"] else ""
        claim = _cell(head["text"]) if head else "—"
        verdict = f"{_verdict(head, with_why=False)} at `{best['preset']}`" if head else "—"
        why = _cell(_short(_why(head))) if head else summary_line(best)
        md.append(
            f"| {_paper_link(meta)}{venue} | {claim} | {verdict} | {why} | "
            f"[claims](#{anchor(nb)}) · [notebook]({root}notebooks/{meta['notebook']}) |"
        )
    md.append("")
    for nb, mine in by_nb.items():
        md += paper_section(nb, mine, level=2, root=root)
    return "\n".join(md)


def _rank(preset: str) -> int:
    return PRESET_ORDER.index(preset) if preset in PRESET_ORDER else len(PRESET_ORDER)


def paper_section(
    notebook: str, entries: list[dict], level: int = 2, root: str = "../"
) -> list[str]:
    """One paper's section: heading, main claim, the claims table with a column per preset, the
    conditions once, and the folded evidence, data and runs of each preset."""
    h = "#" * level
    meta = _meta(notebook, entries[0].get("title", notebook))
    order = _presets(entries)
    by_preset = {e["preset"]: e for e in entries}
    cite = _cell(meta["paper"]) or _cell(meta["venue"])
    if cite and meta["link"]:
        cite = f"[{cite}]({meta['link']})"
    md = [
        f'<a id="{anchor(notebook)}"></a>',
        "",
        f"{h} {notebook[:2]} · {_cell(meta['title'])}",
        "",
        (f"{cite} · " if cite else "")
        + f"notebook [`{meta['notebook']}`]({root}notebooks/{meta['notebook']}) · "
        + " · ".join(f"`{p}`: {summary_line(by_preset[p])}" for p in order),
        "",
    ]
    texts: list[str] = []
    for p in order:
        for c in by_preset[p]["claims"]:
            if c["text"] not in texts:
                texts.append(c["text"])
    find = {p: {c["text"]: c for c in by_preset[p]["claims"]} for p in order}
    md += [
        "| claim | paper | " + " | ".join(f"`{p}`" for p in order) + " |",
        "|---|---|" + "---|" * len(order),
    ]
    for t in texts:
        first = next(find[p][t] for p in order if t in find[p])
        head = f"| {_cell(t)} | {_cell(first.get('paper', '')) or '—'} | "
        # the reasons share what is left of ROW_CHARS; the whole reason is in the evidence below
        limit = REASON_CHARS
        while True:
            cells = [_cell(_verdict(find[p].get(t), limit=limit)) for p in order]
            row = head + " | ".join(cells) + " |"
            if len(row) <= ROW_CHARS or limit <= 20:
                break
            limit -= 10
        md.append(row)
    md.append("")
    for p in order:
        fig = by_preset[p].get("figure")
        if fig:
            # an image's alt text is not shown: the caption says which preset drew it
            md += [
                f"![Our run at `{p}`: the main claim's figure]({root}docs/{fig})",
                "",
                f"*The main claim's figure, from our run at `{p}`.*",
                "",
            ]
    md += _conditions(entries, order, h)
    for p in order:
        md += _details(by_preset[p])
    return md


def _conditions(entries: list[dict], order: list[str], h: str) -> list[str]:
    """The conditions once per paper: one row per indicator over every claim and preset."""
    rows: dict[str, dict] = {}
    for e in entries:
        for c in e["claims"]:
            for r in c.get("regime") or []:
                key = r.get("key") or r["indicator"]
                row = rows.setdefault(key, {"r": r, "ours": {}})
                row["ours"].setdefault(e["preset"], (r, c["text"]))
    if not rows:
        return []
    md = [
        f"{h}# Conditions",
        "",
        "| condition | paper | rule | source | " + " | ".join(f"ours `{p}`" for p in order) + " |",
        "|---|---|---|---|" + "---|" * len(order),
    ]
    previous_source = None
    for row in rows.values():
        r = row["r"]
        # a paper's indicators often share one reasoning: told once, it no longer fills the table
        source = r.get("source") or "not recorded"
        shown = "as the row above" if source == previous_source else _cell(source)
        previous_source = source
        unit = r.get("unit", "")
        name = _cell(r["indicator"]) + (" *(diagnostic)*" if r.get("diagnostic") else "")
        paper = _cell(_value(r.get("paper"), unit if not isinstance(r.get("paper"), str) else ""))
        ours = []
        for p in order:
            got = row["ours"].get(p)
            if got is None:
                ours.append("—")
                continue
            mark = {True: "met", False: "**not met**", None: "unmeasured"}[got[0].get("inside")]
            ours.append(f"{_cell(_ours(got[0]['ours'], unit))} ({mark})")
        md.append(
            f"| {name} | {paper} | {_rule(r.get('rule', ''))} | "
            f"{shown} | " + " | ".join(ours) + " |"
        )
    return md + [""]


def _details(e: dict) -> list[str]:
    """The folded evidence of one preset: run line, data, and per claim evidence, test, seeds."""
    md = [
        f'<a id="{anchor(e["notebook"], e["preset"])}"></a>',
        "",
        "<details>",
        f"<summary>Evidence at <code>{e['preset']}</code>: {summary_line(e)}</summary>",
        "",
        f"Run {e['date']} · commit `{e['commit'][:10]}`"
        + (f" (in release {e['release']})" if e.get("release") else "")
        + (" (with uncommitted changes)" if e.get("dirty") else "")
        + f" · status {e.get('status', 'ok')} · rules v{e.get('rules') or 1}",
        "",
        "Data: " + (_cell("; ".join(e["data"])) if e.get("data") else "not recorded"),
        "",
    ]
    if not e["claims"]:
        return md + ["*No claim recorded.*", "", "</details>", ""]
    md += [
        "| claim | verdict | evidence | test | training seeds |",
        "|---|---|---|---|---|",
    ]
    for c in e["claims"]:
        seeds = c.get("seeds")
        seeds = ", ".join(map(str, seeds)) if seeds else "not recorded"
        full = f"{STYLE[c['verdict']][1]} {c['verdict']}" + (
            f": {c['reason']}" if c.get("reason") else ""
        )
        per_run = c.get("per_seed") or {}
        if len(per_run) > 1:
            full += " (runs: " + ", ".join(f"{r} {v}" for r, v in per_run.items()) + ")"
        md.append(
            f"| {_cell(c['text'])} | {_cell(full)} | {_cell(c.get('evidence', ''))} | "
            f"{_cell(c.get('test') or '—')} | {seeds} |"
        )
    return md + ["", "</details>", ""]
