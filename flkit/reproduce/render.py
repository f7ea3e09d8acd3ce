"""Step 3 of ``flkit reproduce``: collect what every run recorded and write ``report.md``,
``report.html`` (figures embedded) and ``summary.json``."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import re
from pathlib import Path

from .. import presets
from ..datasets.identity import describe as describe_data
from ..report import versions
from ..results import claim_counts, load_results, summarize
from ..store import save_text

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
        figures = []
        if used:
            first = used[0]
            for f in first["_results"].get("figures", []):
                rel = f"{name}/seed{first['seed']}/{f['file']}"
                if (out / rel).is_file():
                    figures.append((f["name"], rel, first["seed"]))
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


CLAIMS_HEAD = "claims: holds / does not hold / inconclusive"


def _claims_cell(counts: dict) -> str:
    """'2 / 1 / 3' (holds / does not hold / inconclusive), '' when the notebook has no claim."""
    if not sum(counts.values()):
        return ""
    return " / ".join(str(counts[k]) for k in ("holds", "does not hold", "inconclusive"))


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", name.lower().replace(" ", "-"))


def _render_md(head: dict, sections: list[dict]) -> str:
    L = ["# flkit reproduction report", ""]
    L.append(
        f"Preset **{head['preset']}** · seeds {', '.join(map(str, head['seeds']))} · "
        f"{head['finished']} · wall time {_fmt_time(head['wall_time_s'])} "
        f"(jobs {head['jobs']})"
    )
    if head["overrides"]:
        L.append("")
        L.append("Overrides: " + ", ".join(f"`{k}={v!r}`" for k, v in head["overrides"].items()))
    L += [
        "",
        f"| notebook | status | seeds ok | run time | {CLAIMS_HEAD} |",
        "|---|---|---|---|---|",
    ]
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        claims = _claims_cell(s["claims"])
        status = s["status"] if s["status"] == "ok" else f"**{s['status']}**"
        L.append(
            f"| [{_md_cell(s['name'])}](#{_anchor(s['name'])}) | {status} | "
            f"{len(s['seeds_ok'])}/{len(s['seeds'])} | {_fmt_time(t)} | {claims} |"
        )
    L += ["", "Package versions: " + ", ".join(f"{k} {v}" for k, v in head["versions"].items()), ""]
    for s in sections:
        L += [f'<a id="{_anchor(s["name"])}"></a>', "", f"## {s['name']}: {s['title']}", ""]
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        L.append(
            f"Status **{s['status']}** · notebook `{s['file']}` · preset {head['preset']} · "
            f"seeds {', '.join(map(str, s['seeds']))} · device {', '.join(s['devices']) or '?'}"
            f" · run time {per_seed}"
        )
        L += ["", _md_cell(_data_line(s["data"]))]
        if s["notebooks"]:
            L += [
                "",
                "Executed notebooks: " + ", ".join(f"[seed {sd}]({p})" for sd, p in s["notebooks"]),
            ]
        L.append("")
        if s["rows"]:
            if s["partial"]:
                L += ["*Partial results, recorded before the notebook failed:*", ""]
            elif len(s["seeds_ok"]) > 1:
                L += [f"Numbers are mean ± std over {len(s['seeds_ok'])} seeds.", ""]
            L += ["| | paper reports | we measured | claim holds? |", "|---|---|---|---|"]
            for r in s["rows"]:
                L.append(
                    f"| {_md_cell(r['item'])} | {_md_cell(r['paper'])} | "
                    f"{_md_cell(r['measured'])} | {_md_cell(r['holds'])} |"
                )
            L.append("")
        elif not s["failures"]:
            L += ["*The notebook recorded no results (no `flkit.report.Report` saved).*", ""]
        for fname, rel, seed in s["figures"]:
            L += [f"![{fname} (seed {seed})]({rel})", ""]
        for f in s["failures"]:
            where = failure_where(f)
            L += [
                f"**FAILED** seed {f['seed']}{where}: `{_md_cell(f.get('ename', '?'))}: "
                f"{_md_cell(f.get('evalue', ''))[:500]}`",
                "",
            ]
            if f.get("cell_source"):
                L += ["Failing cell:", "", "```python", f["cell_source"].rstrip(), "```", ""]
            if f.get("traceback"):
                L += [
                    "<details><summary>traceback</summary>",
                    "",
                    "```",
                    "\n".join(f["traceback"].splitlines()[-25:]),
                    "```",
                    "",
                    "</details>",
                    "",
                ]
    return "\n".join(L) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:.8em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.ok{color:#1a7f37}
.failed{color:#c62828;font-weight:bold}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.meta{color:#555}"""


def _render_html(head: dict, sections: list[dict], out: Path) -> str:
    e = html.escape
    H = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>flkit reproduction report</title>",
        f"<style>{_CSS}</style></head><body><h1>flkit reproduction report</h1>",
        f"<p class='meta'>Preset <b>{e(head['preset'])}</b> · seeds "
        f"{e(', '.join(map(str, head['seeds'])))} · {e(head['finished'])} · wall time "
        f"{e(_fmt_time(head['wall_time_s']))} (jobs {head['jobs']})</p>",
    ]
    if head["overrides"]:
        H.append(
            "<p>Overrides: "
            + e(", ".join(f"{k}={v!r}" for k, v in head["overrides"].items()))
            + "</p>"
        )
    H.append(
        "<table><tr><th>notebook</th><th>status</th><th>seeds ok</th><th>run time</th>"
        f"<th>{CLAIMS_HEAD}</th></tr>"
    )
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        cls = "ok" if s["status"] == "ok" else "failed"
        claims = _claims_cell(s["claims"])
        H.append(
            f"<tr><td><a href='#{_anchor(s['name'])}'>{e(s['name'])}</a></td>"
            f"<td class='{cls}'>{e(s['status'])}</td><td>{len(s['seeds_ok'])}/{len(s['seeds'])}"
            f"</td><td>{e(_fmt_time(t))}</td><td>{claims}</td></tr>"
        )
    H.append(
        "</table><p class='meta'>Package versions: "
        + e(", ".join(f"{k} {v}" for k, v in head["versions"].items()))
        + "</p>"
    )
    for s in sections:
        cls = "ok" if s["status"] == "ok" else "failed"
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        H.append(f"<h2 id='{_anchor(s['name'])}'>{e(s['name'])}: {e(s['title'])}</h2>")
        H.append(
            f"<p class='meta'>Status <span class='{cls}'>{e(s['status'])}</span> · notebook "
            f"<code>{e(s['file'])}</code> · preset {e(head['preset'])} · seeds "
            f"{e(', '.join(map(str, s['seeds'])))} · device "
            f"{e(', '.join(s['devices']) or '?')} · run time {e(per_seed)}</p>"
        )
        H.append(f"<p class='meta'>{e(_data_line(s['data']))}</p>")
        if s["notebooks"]:
            H.append(
                "<p>Executed notebooks: "
                + ", ".join(f"<a href='{e(p)}'>seed {sd}</a>" for sd, p in s["notebooks"])
                + "</p>"
            )
        if s["rows"]:
            if s["partial"]:
                H.append("<p><i>Partial results, recorded before the notebook failed:</i></p>")
            elif len(s["seeds_ok"]) > 1:
                H.append(f"<p>Numbers are mean ± std over {len(s['seeds_ok'])} seeds.</p>")
            H.append(
                "<table><tr><th></th><th>paper reports</th><th>we measured</th>"
                "<th>claim holds?</th></tr>"
            )
            for r in s["rows"]:
                H.append(
                    f"<tr><td>{e(r['item'])}</td><td>{e(str(r['paper']))}</td>"
                    f"<td>{e(str(r['measured']))}</td><td>{e(str(r['holds']))}</td></tr>"
                )
            H.append("</table>")
        elif not s["failures"]:
            H.append(
                "<p><i>The notebook recorded no results (no flkit.report.Report saved).</i></p>"
            )
        for fname, rel, seed in s["figures"]:
            try:
                data = base64.b64encode((out / rel).read_bytes()).decode()
                H.append(
                    f"<figure><img alt='{e(fname)}' src='data:image/png;base64,{data}'>"
                    f"<figcaption>{e(fname)} (seed {seed})</figcaption></figure>"
                )
            except OSError:
                H.append(f"<p><a href='{e(rel)}'>{e(fname)}</a></p>")
        for f in s["failures"]:
            where = failure_where(f)
            H.append(
                f"<p class='failed'>FAILED seed {f['seed']}{e(where)}: "
                f"{e(str(f.get('ename', '?')))}: {e(str(f.get('evalue', ''))[:500])}</p>"
            )
            if f.get("cell_source"):
                H.append(f"<p>Failing cell:</p><pre>{e(f['cell_source'])}</pre>")
            if f.get("traceback"):
                H.append(
                    "<details><summary>traceback</summary><pre>"
                    + e("\n".join(f["traceback"].splitlines()[-25:]))
                    + "</pre></details>"
                )
    H.append("</body></html>")
    return "\n".join(H) + "\n"


def write_reports(plan_: dict, infos: list[dict], wall_time_s: float | None = None) -> Path:
    """Write report.md, report.html and summary.json into the plan's output folder."""
    out: Path = plan_["out"]
    sections = _collect(plan_, infos)
    head = {
        "preset": plan_["preset"],
        "seeds": plan_["seeds"],
        "jobs": plan_["jobs"],
        "overrides": plan_["overrides"],
        "wall_time_s": wall_time_s,
        "versions": versions(),
        "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    save_text(out / "report.md", _render_md(head, sections))
    save_text(out / "report.html", _render_html(head, sections, out))
    summary = {
        **head,
        "notebooks_dir": plan_["notebooks_dir"],
        "runs": [
            {k: v for k, v in r.items() if not k.startswith("_")} | {"results": r.get("_results")}
            for r in infos
        ],
        "notebooks": [
            {k: v for k, v in s.items() if k != "rows"}
            | {"rows": [{k: v for k, v in row.items()} for row in s["rows"]]}
            for s in sections
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
