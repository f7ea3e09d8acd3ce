"""Step 3 of ``flkit reproduce``: collect what every run recorded and write ``report.md``,
``report.html`` (figures embedded), ``summary.json`` and the results page (``results.md``, see
:mod:`.results_page`). Each notebook's section reads top-down (:mod:`.sections`): its claims with
their verdicts and regime, then its numbers grouped as tables, then its figures."""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re
from pathlib import Path

from ..data.provenance import describe as describe_data
from ..store import save_text
from ..workbook import presets
from ..workbook.report import source_commit, versions
from ..workbook.results import claim_counts, load_results, summarize
from ..workbook.verdict import VERDICTS
from . import results_page
from . import sections as notebook_parts

__all__ = ["write_reports", "failure_where"]


def failure_where(err: dict) -> str:
    """' in cell In [3]' for a failure (execution count as shown in Jupyter), '' if unknown."""
    if err.get("execution_count"):
        return f" in cell In [{err['execution_count']}]"
    if err.get("cell_index") is not None:
        return f" in cell #{err['cell_index']}"
    return ""


def _fmt_time(s) -> str:
    if s is None:
        return "?"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _collect(plan_: dict, infos: list[dict]) -> list[dict]:
    """Per-notebook sections (plain data) for the reports."""
    out: Path = plan_["out"]
    sections = []
    for name in plan_["notebooks"]:
        runs = [r for r in infos if r["notebook"] == name]
        for r in runs:
            r["_results"] = None
            if r.get("results"):
                try:
                    r["_results"] = load_results(out / name / f"seed{r['seed']}")
                except (OSError, ValueError):
                    pass
        ok = [r for r in runs if r["status"] == "ok"]
        failed = [r for r in runs if r["status"] != "ok"]
        used = [r for r in ok if r["_results"]]
        partial = False
        if not used:  # nothing succeeded: show what the failed runs recorded before failing
            used = [r for r in failed if r["_results"]]
            partial = bool(used)
        rows = summarize([r["_results"] for r in used]) if used else []
        page_runs = [(r["seed"], r["_results"]) for r in used] if not partial else []
        figures = []
        if used:
            first = used[0]
            for f in first["_results"].get("figures", []):
                rel = f"{name}/seed{first['seed']}/{f['file']}"
                if (out / rel).is_file():
                    figures.append(
                        {
                            "name": f["name"],
                            "file": rel,
                            "seed": first["seed"],
                            "claims": f.get("claims") or [],
                        }
                    )
        meta = presets.meta(name)
        times = [r.get("wall_time_s") for r in runs]
        devices = sorted({r["_results"].get("device", "?") for r in used})
        data_used = _data_used(used)
        status = "ok" if not failed else ("FAILED" if not ok else "partly failed")
        sections.append(
            {
                "name": name,
                "title": meta.get("title", name),
                "file": meta["notebook"],
                "status": status,
                "seeds": [r["seed"] for r in runs],
                "seeds_ok": [r["seed"] for r in ok],
                "times": times,
                "notebooks": [
                    (r["seed"], f"{name}/seed{r['seed']}/{r['output_notebook']}")
                    for r in runs
                    if r.get("output_notebook")
                    and (out / name / f"seed{r['seed']}" / r["output_notebook"]).is_file()
                ],
                "rows": rows,
                "partial": partial,
                "figures": figures,
                "devices": devices,
                "data": data_used,
                "claims": claim_counts(rows),
                "parameters": runs[0]["parameters"] if runs else {},
                "failures": [{"seed": r["seed"], **(r.get("error") or {})} for r in failed],
                "_runs": page_runs,
            }
        )
    return sections


def _data_used(runs: list[dict]) -> list[str] | None:
    """One line per dataset copy the runs read (``results.json`` "data"); None when no run
    recorded it (results written before the data was recorded)."""
    if not any("data" in r["_results"] for r in runs):
        return None
    lines: list[str] = []
    for r in runs:
        for ident in r["_results"].get("data", []):
            line = describe_data(ident)
            if line not in lines:
                lines.append(line)
    return lines


def _data_line(data: list[str] | None) -> str:
    if data is None:
        return "Data used: not recorded"
    return "Data used: " + ("; ".join(data) if data else "none read (no dataset loaded)")


CLAIMS_HEAD = "claims: " + " / ".join(VERDICTS)


def _claims_cell(counts: dict) -> str:
    """'2 / 1 / 0 / 3' (holds / does not hold / outside regime / inconclusive), '' when the
    notebook has no claim."""
    if not sum(counts.values()):
        return ""
    return " / ".join(str(counts.get(k, 0)) for k in VERDICTS)


def _seeds_note(s: dict) -> str:
    n = len(s["seeds_ok"])
    return f"Numbers are mean ± std over {n} seeds." if n > 1 and not s["partial"] else ""


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", name.lower().replace(" ", "-"))


def _render_md(head: dict, sections: list[dict]) -> str:
    md = ["# flkit reproduction report", ""]
    md.append(
        f"Preset **{head['preset']}** · seeds {', '.join(map(str, head['seeds']))} · "
        f"{head['finished']} · wall time {_fmt_time(head['wall_time_s'])} "
        f"(jobs {head['jobs']}) · commit `{head['commit'][:10]}`"
        + (" (with uncommitted changes)" if head.get("dirty") else "")
    )
    if head["overrides"]:
        md.append("")
        md.append("Overrides: " + ", ".join(f"`{k}={v!r}`" for k, v in head["overrides"].items()))
    md += [
        "",
        f"| notebook | status | seeds ok | run time | {CLAIMS_HEAD} |",
        "|---|---|---|---|---|",
    ]
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        claims = _claims_cell(s["claims"])
        status = s["status"] if s["status"] == "ok" else f"**{s['status']}**"
        md.append(
            f"| [{_md_cell(s['name'])}](#{_anchor(s['name'])}) | {status} | "
            f"{len(s['seeds_ok'])}/{len(s['seeds'])} | {_fmt_time(t)} | {claims} |"
        )
    md += [
        "",
        "Package versions: " + ", ".join(f"{k} {v}" for k, v in head["versions"].items()),
        "",
    ]
    for s in sections:
        md += [f'<a id="{_anchor(s["name"])}"></a>', "", f"## {s['name']}: {s['title']}", ""]
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        md.append(
            f"Status **{s['status']}** · notebook `{s['file']}` · preset {head['preset']} · "
            f"seeds {', '.join(map(str, s['seeds']))} · device {', '.join(s['devices']) or '?'}"
            f" · run time {per_seed}"
        )
        md += ["", _md_cell(_data_line(s["data"]))]
        if s["notebooks"]:
            md += [
                "",
                "Executed notebooks: " + ", ".join(f"[seed {sd}]({p})" for sd, p in s["notebooks"]),
            ]
        md.append("")
        if s["rows"]:
            if s["partial"]:
                md += ["*Partial results, recorded before the notebook failed:*", ""]
            md += notebook_parts.claims_md(s["rows"])
            md += notebook_parts.numbers_md(s["rows"], _seeds_note(s))
        elif not s["failures"]:
            md += [
                "*The notebook recorded no results (no `flkit.workbook.report.Report` saved).*",
                "",
            ]
        md += notebook_parts.figures_md(s["rows"], s["figures"])
        for f in s["failures"]:
            where = failure_where(f)
            md += [
                f"**FAILED** seed {f['seed']}{where}: `{_md_cell(f.get('ename', '?'))}: "
                f"{_md_cell(f.get('evalue', ''))[:500]}`",
                "",
            ]
            if f.get("cell_source"):
                md += ["Failing cell:", "", "```python", f["cell_source"].rstrip(), "```", ""]
            if f.get("traceback"):
                md += [
                    "<details><summary>traceback</summary>",
                    "",
                    "```",
                    "\n".join(f["traceback"].splitlines()[-25:]),
                    "```",
                    "",
                    "</details>",
                    "",
                ]
    return "\n".join(md) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:.8em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.ok{color:#1a7f37}
.verdict{font-weight:bold;padding:.1em .5em;border-radius:.3em;white-space:nowrap}
.reason,.note{color:#555;font-size:.9em}.regime{font-size:.9em}.legend span{margin-right:1em}
.failed{color:#c62828;font-weight:bold}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.meta{color:#555}
table.claims{width:100%}table.claims td:first-child{min-width:14em}
.regime div{border-left:4px solid #ccc;padding-left:.4em;margin:.15em 0}
.verdict.count{font-weight:normal;margin-right:.3em}.seeds{color:#555;font-size:.85em}
.supports{margin:1.2em 0 .2em}.figures{display:flex;flex-wrap:wrap;gap:1em}
.figures figure{margin:0;flex:1 1 420px}figcaption{color:#555;font-size:.9em}"""


def _render_html(head: dict, sections: list[dict], out: Path) -> str:
    e = html.escape
    page = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>flkit reproduction report</title>",
        f"<style>{_CSS}</style></head><body><h1>flkit reproduction report</h1>",
        f"<p class='meta'>Preset <b>{e(head['preset'])}</b> · seeds "
        f"{e(', '.join(map(str, head['seeds'])))} · {e(head['finished'])} · wall time "
        f"{e(_fmt_time(head['wall_time_s']))} (jobs {head['jobs']}) · commit "
        f"<code>{e(head['commit'][:10])}</code>"
        + (" (with uncommitted changes)" if head.get("dirty") else "")
        + "</p>",
    ]
    if head["overrides"]:
        page.append(
            "<p>Overrides: "
            + e(", ".join(f"{k}={v!r}" for k, v in head["overrides"].items()))
            + "</p>"
        )
    page.append(
        "<table><tr><th>notebook</th><th>status</th><th>seeds ok</th><th>run time</th>"
        "<th>claims</th></tr>"
    )
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        cls = "ok" if s["status"] == "ok" else "failed"
        claims = notebook_parts.counts_html(s["claims"])
        page.append(
            f"<tr><td><a href='#{_anchor(s['name'])}'>{e(s['name'])}</a></td>"
            f"<td class='{cls}'>{e(s['status'])}</td><td>{len(s['seeds_ok'])}/{len(s['seeds'])}"
            f"</td><td>{e(_fmt_time(t))}</td><td>{claims}</td></tr>"
        )
    page.append(
        "</table><p class='legend'>"
        + "Verdicts: "
        + "".join(notebook_parts.badge_html(v) for v in VERDICTS)
        + "</p><p class='meta'>Package versions: "
        + e(", ".join(f"{k} {v}" for k, v in head["versions"].items()))
        + "</p>"
    )
    for s in sections:
        cls = "ok" if s["status"] == "ok" else "failed"
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        page.append(f"<h2 id='{_anchor(s['name'])}'>{e(s['name'])}: {e(s['title'])}</h2>")
        page.append(
            f"<p class='meta'>Status <span class='{cls}'>{e(s['status'])}</span> · notebook "
            f"<code>{e(s['file'])}</code> · preset {e(head['preset'])} · seeds "
            f"{e(', '.join(map(str, s['seeds'])))} · device "
            f"{e(', '.join(s['devices']) or '?')} · run time {e(per_seed)}</p>"
        )
        page.append(f"<p class='meta'>{e(_data_line(s['data']))}</p>")
        if s["notebooks"]:
            page.append(
                "<p>Executed notebooks: "
                + ", ".join(f"<a href='{e(p)}'>seed {sd}</a>" for sd, p in s["notebooks"])
                + "</p>"
            )
        if s["rows"]:
            if s["partial"]:
                page.append("<p><i>Partial results, recorded before the notebook failed:</i></p>")
            page += notebook_parts.claims_html(s["rows"])
            page += notebook_parts.numbers_html(s["rows"], _seeds_note(s))
        elif not s["failures"]:
            page.append(
                "<p><i>The notebook recorded no results "
                "(no flkit.workbook.report.Report saved).</i></p>"
            )
        page += notebook_parts.figures_html(s["rows"], s["figures"], out)
        for f in s["failures"]:
            where = failure_where(f)
            page.append(
                f"<p class='failed'>FAILED seed {f['seed']}{e(where)}: "
                f"{e(str(f.get('ename', '?')))}: {e(str(f.get('evalue', ''))[:500])}</p>"
            )
            if f.get("cell_source"):
                page.append(f"<p>Failing cell:</p><pre>{e(f['cell_source'])}</pre>")
            if f.get("traceback"):
                page.append(
                    "<details><summary>traceback</summary><pre>"
                    + e("\n".join(f["traceback"].splitlines()[-25:]))
                    + "</pre></details>"
                )
    page.append("</body></html>")
    return "\n".join(page) + "\n"


def write_reports(plan_: dict, infos: list[dict], wall_time_s: float | None = None) -> Path:
    """Write report.md, report.html and summary.json into the plan's output folder."""
    out: Path = plan_["out"]
    parts = _collect(plan_, infos)
    head = {
        "preset": plan_["preset"],
        "seeds": plan_["seeds"],
        "jobs": plan_["jobs"],
        "overrides": plan_["overrides"],
        "wall_time_s": wall_time_s,
        "versions": versions(),
        "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **(plan_.get("source") or source_commit()),
    }
    save_text(out / "report.md", _render_md(head, parts))
    save_text(out / "report.html", _render_html(head, parts, out))
    page_head = {**head, "date": head["finished"]}
    results_page.write_page(out, [results_page.entry(s, s["_runs"], page_head) for s in parts])
    summary = {
        **head,
        "notebooks_dir": plan_["notebooks_dir"],
        "runs": [
            {k: v for k, v in r.items() if not k.startswith("_")} | {"results": r.get("_results")}
            for r in infos
        ],
        "notebooks": [
            {k: v for k, v in s.items() if k != "rows" and not k.startswith("_")}
            | {"rows": [{k: v for k, v in row.items()} for row in s["rows"]]}
            for s in parts
        ],
    }
    save_text(
        out / "summary.json",
        json.dumps(_json_safe(summary), indent=2, allow_nan=False, default=str) + "\n",
    )
    return out / "report.md"


def _json_safe(o):
    """Strict-JSON copy: non-finite floats become "NaN"/"Infinity" strings, tuples lists."""
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if math.isnan(o) else ("Infinity" if o > 0 else "-Infinity")
    if isinstance(o, dict):
        return {str(k): _json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_json_safe(v) for v in o]
    if isinstance(o, Path):
        return str(o)
    return o
