"""The results page: what reproduces, per notebook and preset, generated from recorded runs.

``flkit reproduce`` writes ``results.md`` (the page for its own runs) and ``results_page.json``
(the entries the page is rendered from) next to ``report.md``. ``flkit reproduce --publish
RUN_DIR`` checks that folder (every run recorded at the commit its page claims; the page is what
:func:`render` writes for its entries, nothing typed into it), merges its entries into
``docs/results.json`` (one entry per notebook and preset, the newest replacing the older) and
rewrites ``docs/RESULTS.md`` and the results column of the README's notebook table from it.

One entry (plain JSON)::

    {"notebook", "title", "preset", "seeds": [int], "date", "commit", "dirty": bool,
     "status", "data": [str],
     "claims": [{"text", "paper", "verdict", "reason", "evidence",
                 "per_seed": {seed: verdict}, "face": {seed: True|False|None},
                 "regime": [{"indicator", "ours": [value per seed], "paper", "rule",
                             "unit", "inside"}]}]}
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..paths import project_root
from ..store import save_text
from ..utils import FlkitError
from ..workbook.report import source_commit
from ..workbook.results import format_value, readable
from ..workbook.verdict import (
    DOES_NOT_HOLD,
    HOLDS,
    INCONCLUSIVE,
    OUTSIDE_REGIME,
    VERDICTS,
    combine,
    verdict_of,
)

PAGE_FILE = "results.md"
PAGE_DATA = "results_page.json"
DOCS_PAGE = Path("docs") / "RESULTS.md"
DOCS_DATA = Path("docs") / "results.json"
README = Path("README.md")
NOT_YET_RUN = "not yet run"
README_HEAD = "results"

__all__ = [
    "source_commit",
    "entry",
    "render",
    "summary_line",
    "write_page",
    "check_run_dir",
    "publish",
    "readme_table",
    "paper_verdicts",
    "readme_verdicts",
    "PAGE_FILE",
    "PAGE_DATA",
    "NOT_YET_RUN",
]

_LEGEND = (
    "Verdicts: **holds**; **does not hold** (in the paper's regime: a finding of the "
    "reproduction); **outside regime** (a regime indicator the claim depends on is not where the "
    "paper's setting has it: ours beside the paper's value and the rule); **inconclusive** (with "
    "the reason)."
)


# ------------------------------------------------------------------------------ entries
def entry(section: dict, runs: list[tuple[int, dict]], head: dict) -> dict:
    """The page entry of one notebook: ``section`` of the report (name, title, status, data),
    ``runs`` = [(seed, results.json)] of the runs it summarises, ``head`` = preset, date, commit,
    dirty."""
    order: list[str] = []
    by_text: dict[str, list[tuple[int, dict]]] = {}
    for seed, res in runs:
        for c in res.get("claims", []):
            if c["text"] not in by_text:
                order.append(c["text"])
            by_text.setdefault(c["text"], []).append((seed, c))
    claims = []
    for text in order:
        seen = by_text[text]
        first = seen[0][1]
        verdicts = {str(s): verdict_of(c) for s, c in seen}
        verdict = combine(list(verdicts.values()))
        reasons = [c.get("reason", "") for _, c in seen if verdict_of(c) == verdict]
        reason = next((r for r in reasons if r), "")
        if verdict == INCONCLUSIVE and not reason:
            reason = "the seeds disagree" if len(set(verdicts.values())) > 1 else ""
        claims.append(
            {
                "text": text,
                "paper": first.get("paper", ""),
                "verdict": verdict,
                "reason": reason,
                "evidence": first.get("evidence", ""),
                "per_seed": verdicts,
                "face": {str(s): c.get("face", c.get("holds")) for s, c in seen},
                "regime": _regime(seen),
                "test": first.get("test", ""),
                "seeds": first.get("seeds"),
                "judge_at_smoke": bool(first.get("judge_at_smoke")),
                "face_reason": first.get("face_reason", ""),
            }
        )
        if first.get("key") is not None:
            claims[-1]["key"] = first["key"]
            claims[-1]["measured"] = {str(s): c.get("measured") for s, c in seen}
    rules = {res.get("rules") for _, res in runs}
    if len(rules) > 1:
        raise FlkitError(
            f"{section['name']}: its runs were judged under different rule versions "
            f"{sorted(map(str, rules))}; rerun them with one flkit"
        )
    return {
        "notebook": section["name"],
        "title": section.get("title", section["name"]),
        "preset": head["preset"],
        "seeds": [s for s, _ in runs],
        "date": head["date"],
        "commit": head["commit"],
        "dirty": bool(head.get("dirty")),
        "status": section.get("status", "ok"),
        "data": list(section.get("data") or []),
        "rules": rules.pop() if rules else None,
        "claims": claims,
    }


def _regime(seen: list[tuple[int, dict]]) -> list[dict]:
    """The claim's readings over seeds: one row per indicator, ours per seed."""
    rows: dict[str, dict] = {}
    for _, c in seen:
        for r in c.get("regime") or []:
            row = rows.setdefault(
                r["indicator"],
                {
                    "key": r.get("key"),
                    "indicator": r["indicator"],
                    "ours": [],
                    "paper": r.get("paper"),
                    "rule": r.get("rule", ""),
                    "unit": r.get("unit", ""),
                    "source": r.get("source"),
                    "diagnostic": bool(r.get("diagnostic")),
                    "inside": True,
                },
            )
            row["ours"].append(r.get("ours"))
            if r.get("inside") is False:
                row["inside"] = False
            elif r.get("inside") is None and row["inside"] is True:
                row["inside"] = None
    return list(rows.values())


# ------------------------------------------------------------------------------ rendering
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


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _anchor(e: dict) -> str:
    return re.sub(r"[^a-z0-9_-]", "", f"{e['notebook']}-{e['preset']}".lower())


def _commit(e: dict) -> str:
    c = e["commit"][:10]
    return f"`{c}`" + (" (with uncommitted changes)" if e.get("dirty") else "")


def _value(v, unit: str = "") -> str:
    if v is None:
        return "not measured"
    if isinstance(v, str):
        return v
    return format_value(v, unit)


def _ours(values: list, unit: str) -> str:
    if len(values) == 1:
        return _value(values[0], unit)
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    per = ", ".join(_value(v) for v in values)
    if len(nums) == len(values):
        mean = sum(nums) / len(nums)
        return f"{_value(mean, unit)} (seeds {per}; spread {readable(max(nums) - min(nums))})"
    return f"seeds {per}"


def _regime_cell(rows: list[dict]) -> str:
    if not rows:
        return "—"
    out = []
    for r in rows:
        mark = {True: "in", False: "**out**", None: "unknown"}[r["inside"]]
        unit = r.get("unit", "")
        out.append(
            f"{r['indicator']}: ours {_ours(r['ours'], unit)}; paper {_value(r['paper'], unit)}; "
            f"rule {r['rule']} → {mark}"
        )
    return "<br>".join(_cell(x) for x in out)


def _verdict_cell(c: dict) -> str:
    v = f"**{c['verdict']}**"
    return v + (f": {c['reason']}" if c.get("reason") else "")


def render(entries: list[dict]) -> str:
    """The page (Markdown) for ``entries``, in notebook then preset order."""
    entries = sorted(entries, key=lambda e: (e["notebook"], e["preset"]))
    md = [
        "# What reproduces",
        "",
        "<!-- Generated by `flkit reproduce` from recorded runs; `flkit reproduce --publish "
        "RUN_DIR` updates it. Never edit by hand: a test re-renders it from docs/results.json. -->",
        "",
        _LEGEND,
        "",
    ]
    if not entries:
        return "\n".join(md + ["No run has been published yet.", ""])
    md += ["| notebook | preset | claims | date | commit |", "|---|---|---|---|---|"]
    for e in entries:
        md.append(
            f"| [{_cell(e['notebook'])}](#{_anchor(e)}) | `{e['preset']}` | {summary_line(e)} | "
            f"{e['date']} | {_commit(e)} |"
        )
    md.append("")
    for e in entries:
        md += [f'<a id="{_anchor(e)}"></a>', "", f"## {e['notebook']} at `{e['preset']}`", ""]
        md += _section(e)
    return "\n".join(md)


def _section(e: dict) -> list[str]:
    """One entry's lines below its heading: the run line, the data, the claims table."""
    md = [
        f"{_cell(e['title'])} · status {e['status']} · seeds "
        f"{', '.join(map(str, e['seeds'])) or 'none'} · {e['date']} · commit {_commit(e)}"
    ]
    md += ["", "Data: " + (_cell("; ".join(e["data"])) if e["data"] else "not recorded"), ""]
    if not e["claims"]:
        return md + ["*No claim recorded.*", ""]
    md += [
        "| claim | verdict | evidence | regime: ours; paper; rule | per seed |",
        "|---|---|---|---|---|",
    ]
    for c in e["claims"]:
        src = f" ({_cell(c['paper'])})" if c.get("paper") else ""
        per = ", ".join(f"{s}: {v}" for s, v in c["per_seed"].items())
        md.append(
            f"| {_cell(c['text'])}{src} | {_cell(_verdict_cell(c))} | "
            f"{_cell(c['evidence'])} | {_regime_cell(c['regime'])} | {_cell(per)} |"
        )
    md.append("")
    return md


# ------------------------------------------------------------------------------ paper READMEs
VERDICTS_BEGIN = (
    "<!-- verdicts: generated by `flkit reproduce --publish` from docs/results.json; never edit "
    "by hand -->"
)
VERDICTS_END = "<!-- /verdicts -->"


def paper_verdicts(notebook: str, entries: list[dict]) -> str:
    """The verdicts block of one paper README: every published preset of ``notebook``, each with
    its summary line and the same claims table as docs/RESULTS.md."""
    mine = sorted((e for e in entries if e["notebook"] == notebook), key=lambda e: e["preset"])
    md = [VERDICTS_BEGIN, ""]
    if not mine:
        md += [f"No run of {notebook} has been published yet (`docs/RESULTS.md`).", ""]
    for e in mine:
        md += [f"#### At `{e['preset']}`: {summary_line(e)}", ""]
        md += _section(e)
    return "\n".join(md + [VERDICTS_END])


def readme_verdicts(text: str, notebook: str, entries: list[dict]) -> str:
    """``text`` (a paper README) with its verdicts block regenerated; a README without the two
    markers is an error, so a paper cannot silently miss its verdicts."""
    if text.count(VERDICTS_BEGIN) != 1 or text.count(VERDICTS_END) != 1:
        raise FlkitError(
            f"the README of {notebook} has no single verdicts block; accepted: one line "
            f"{VERDICTS_BEGIN!r} and one line {VERDICTS_END!r} in its 'What reproduces' section"
        )
    head, rest = text.split(VERDICTS_BEGIN)
    _, tail = rest.split(VERDICTS_END)
    return head + paper_verdicts(notebook, entries) + tail


def paper_readme(root: Path, notebook: str) -> Path:
    """``flkit/papers/<slug>/README.md`` of ``notebooks/NN_<slug>.ipynb``."""
    return root / "flkit" / "papers" / notebook.split("_", 1)[1] / "README.md"


def write_page(out: Path, entries: list[dict]) -> Path:
    """``results.md`` and ``results_page.json`` of one reproduce run into ``out``."""
    save_text(out / PAGE_DATA, json.dumps(entries, indent=2, ensure_ascii=False) + "\n")
    save_text(out / PAGE_FILE, render(entries))
    return out / PAGE_FILE


# ------------------------------------------------------------------------------ publishing
def _run_commits(run_dir: Path, e: dict) -> dict[int, str | None]:
    """The commit each run of an entry recorded in its results.json (None: not recorded)."""
    out = {}
    for s in e["seeds"]:
        p = run_dir / e["notebook"] / f"seed{s}" / "results.json"
        try:
            out[s] = json.loads(p.read_text(encoding="utf-8")).get("commit")
        except (OSError, ValueError):
            out[s] = None
    return out


def check_run_dir(run_dir: str | Path) -> list[dict]:
    """The entries of a reproduce output folder, after checking that its page is what
    :func:`render` writes for them and that every run recorded the commit the page claims."""
    run_dir = Path(run_dir)
    data, page = run_dir / PAGE_DATA, run_dir / PAGE_FILE
    if not data.is_file() or not page.is_file():
        raise FlkitError(
            f"{run_dir} holds no results page ({PAGE_FILE} and {PAGE_DATA}); accepted: the "
            "output folder of `flkit reproduce` (its --out)"
        )
    entries = json.loads(data.read_text(encoding="utf-8"))
    if page.read_text(encoding="utf-8") != render(entries):
        raise FlkitError(
            f"{page} is not what the report code writes for {data}: it was edited by hand or by "
            "another flkit; rerun `flkit reproduce`"
        )
    for e in entries:
        for seed, commit in _run_commits(run_dir, e).items():
            if commit != e["commit"]:
                raise FlkitError(
                    f"{e['notebook']} seed {seed} in {run_dir} was run at commit {commit!r}, but "
                    f"the page claims commit {e['commit']!r}: the folder mixes runs of other "
                    "commits; rerun `flkit reproduce` into a fresh --out"
                )
    return entries


def publish(run_dir: str | Path, root: str | Path | None = None) -> Path:
    """Check ``run_dir`` (:func:`check_run_dir`), merge its entries into ``docs/results.json``
    under ``root`` (default: the repository), rewrite ``docs/RESULTS.md`` and the README's results
    column. Returns the page's path."""
    root = Path(root) if root is not None else (project_root() or Path.cwd())
    new = check_run_dir(run_dir)
    store = root / DOCS_DATA
    old = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else []
    keys = {(e["notebook"], e["preset"]) for e in new}
    merged = [e for e in old if (e["notebook"], e["preset"]) not in keys] + new
    merged.sort(key=lambda e: (e["notebook"], e["preset"]))
    save_text(store, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return rewrite_pages(root)


def rewrite_pages(root: str | Path) -> Path:
    """Rewrite ``docs/RESULTS.md``, the README's results column and every paper README's verdicts
    block from ``docs/results.json`` under ``root`` (what :func:`publish` does after merging; also
    after a change to how the page is written). Returns the page's path."""
    root = Path(root)
    store = root / DOCS_DATA
    merged = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else []
    save_text(root / DOCS_PAGE, render(merged))
    readme = root / README
    if readme.is_file():
        save_text(readme, readme_table(readme.read_text(encoding="utf-8"), merged))
    for notebook in sorted({e["notebook"] for e in merged}):
        paper = paper_readme(root, notebook)
        if paper.is_file():
            text = paper.read_text(encoding="utf-8")
            save_text(paper, readme_verdicts(text, notebook, merged))
    return root / DOCS_PAGE


def _readme_cell(notebook: str, entries: list[dict]) -> str:
    mine = [e for e in entries if e["notebook"] == notebook]
    if not mine:
        return NOT_YET_RUN
    return "; ".join(
        f"[`{e['preset']}`: {summary_line(e)}](docs/RESULTS.md#{_anchor(e)})" for e in mine
    )


_ROW = re.compile(r"^\| `notebooks/(\d\d_[A-Za-z0-9_]+)\.ipynb` \|")


def readme_table(text: str, entries: list[dict]) -> str:
    """``text`` (the README) with the notebook table's results column written from ``entries``:
    the column is added after "what it shows" when missing, and every cell is generated (a
    notebook without a published run reads "not yet run")."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.startswith("| notebook | what it shows |"):
            line = f"| notebook | what it shows | {README_HEAD} ([all](docs/RESULTS.md)) |"
            if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
                lines[i + 1] = "|---|---|---|"
        else:
            m = _ROW.match(line)
            if m:
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                line = f"| {cells[0]} | {cells[1]} | {_readme_cell(m.group(1), entries)} |"
        out.append(line)
    return "\n".join(out)
