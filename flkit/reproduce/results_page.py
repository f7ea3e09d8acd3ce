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
from ..workbook.report import source_commit, supports
from ..workbook.verdict import INCONCLUSIVE, combine, verdict_of
from . import page_render
from .page_render import summary_line

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
    "mark_changed_verdicts",
    "readme_table",
    "paper_verdicts",
    "readme_verdicts",
    "PAGE_FILE",
    "PAGE_DATA",
    "NOT_YET_RUN",
]


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
def render(entries: list[dict]) -> str:
    """The page (Markdown) for ``entries``, as ``docs/RESULTS.md`` shows it
    (:mod:`.page_render`)."""
    return page_render.render(entries, root="../")


def docs_page(entries: list[dict], root: str | Path) -> str:
    """``docs/RESULTS.md`` for ``entries``: :func:`render`, with a row for every notebook of the
    repository at ``root``, published or not."""
    from ..workbook import presets

    root = Path(root)
    every = [n for n in presets.notebooks() if (root / "notebooks" / f"{n}.ipynb").is_file()]
    return page_render.render(entries, root="../", papers=every)


def _anchor(e: dict) -> str:
    return page_render.anchor(e["notebook"], e["preset"])


# ------------------------------------------------------------------------------ paper READMEs
VERDICTS_BEGIN = (
    "<!-- verdicts: generated by `flkit reproduce --publish` from docs/results.json; never edit "
    "by hand -->"
)
VERDICTS_END = "<!-- /verdicts -->"


def paper_verdicts(notebook: str, entries: list[dict]) -> str:
    """The verdicts block of one paper README: the paper's section of docs/RESULTS.md (claims
    with a column per preset, conditions, folded evidence)."""
    mine = [e for e in entries if e["notebook"] == notebook]
    md = [VERDICTS_BEGIN, ""]
    if not mine:
        md += [f"No run of {notebook} has been published yet (`docs/RESULTS.md`).", ""]
    else:
        md += page_render.paper_section(notebook, mine, level=3, root="../../../")
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


def mark_changed_verdicts(entry: dict, published: list[dict]) -> dict:
    """Set ``previous_verdict`` on each claim of ``entry`` whose verdict differs from the same
    claim (by its text) in the published entry of the same notebook and preset, so a reader sees
    what a re-run changed; the mark lasts one publication, as after a re-judgement."""
    before = next(
        (
            e
            for e in published
            if (e["notebook"], e["preset"]) == (entry["notebook"], entry["preset"])
        ),
        None,
    )
    if before is None:
        return entry
    verdicts = {c["text"]: c["verdict"] for c in before.get("claims", [])}
    for c in entry.get("claims", []):
        was = verdicts.get(c["text"])
        if was is not None and was != c["verdict"]:
            c["previous_verdict"] = was
    return entry


def publish(run_dir: str | Path, root: str | Path | None = None) -> Path:
    """Check ``run_dir`` (:func:`check_run_dir`), merge its entries into ``docs/results.json``
    under ``root`` (default: the repository), rewrite ``docs/RESULTS.md`` and the README's results
    column. Returns the page's path."""
    root = Path(root) if root is not None else (project_root() or Path.cwd())
    new = check_run_dir(run_dir)
    for e in new:
        figure = headline_figure(Path(run_dir), e, root)
        if figure:
            e["figure"] = figure
    store = root / DOCS_DATA
    old = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else []
    for e in new:
        mark_changed_verdicts(e, old)
    keys = {(e["notebook"], e["preset"]) for e in new}
    merged = [e for e in old if (e["notebook"], e["preset"]) not in keys] + new
    merged.sort(key=lambda e: (e["notebook"], e["preset"]))
    cite_releases(merged, root)
    save_text(store, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return rewrite_pages(root)


#: a release tag: semantic version with a leading "v" (CHANGELOG.md names each one)
RELEASE_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


def release_of(commit: str, root: str | Path) -> str | None:
    """The first release (tag ``vX.Y.Z``, oldest version first) whose history holds ``commit`` in
    the git repository at ``root``; None when no release holds it yet or git cannot say."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "tag", "--contains", commit, "--list", "v*", "--sort=version:refname"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return next((t for t in out.stdout.split() if RELEASE_TAG.match(t)), None)


def cite_releases(entries: list[dict], root: str | Path) -> list[dict]:
    """Set ``release`` on every entry whose run's commit a release holds (so the page cites
    "in release v0.2.0" beside the commit); an entry keeps a release once cited, since a later
    checkout without tags must not un-cite it. Returns ``entries``."""
    for e in entries:
        if not e.get("release") and e.get("commit"):
            rel = release_of(e["commit"], root)
            if rel:
                e["release"] = rel
    return entries


#: the published headline figures (docs/figures/), at most this wide: a page, not a print
FIGURE_WIDTH = 900


def headline_figure(run_dir: Path, e: dict, root: Path) -> str | None:
    """Copy the figure a run recorded for its notebook's main claim (``report.figure(...,
    claims=[...])``; the paper's ``[meta] headline``) from ``run_dir`` into
    ``docs/figures/<notebook>-<preset>.png``, at most :data:`FIGURE_WIDTH` pixels wide; returns its
    path relative to ``docs/``, or None when no figure supports the main claim."""
    head = page_render.headline_text(e)
    if head is None or not e["seeds"]:
        return None
    seed = e["seeds"][0]
    res = run_dir / e["notebook"] / f"seed{seed}" / "results.json"
    try:
        figures = json.loads(res.read_text(encoding="utf-8")).get("figures", [])
    except (OSError, ValueError):
        return None
    match = next((f for f in figures if supports(f, head)), None)
    if match is None:
        return None
    src = res.parent / match["file"]
    name = f"figures/{e['notebook']}-{e['preset']}.png"
    dest = root / "docs" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    from PIL import Image

    with Image.open(src) as img:
        if img.width > FIGURE_WIDTH:
            img = img.resize((FIGURE_WIDTH, round(img.height * FIGURE_WIDTH / img.width)))
        img.save(dest, optimize=True)
    return name


def rewrite_pages(root: str | Path) -> Path:
    """Rewrite ``docs/RESULTS.md``, the README's results column and every paper README's verdicts
    block from ``docs/results.json`` under ``root`` (what :func:`publish` does after merging; also
    after a change to how the page is written). Returns the page's path."""
    root = Path(root)
    store = root / DOCS_DATA
    merged = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else []
    save_text(root / DOCS_PAGE, docs_page(merged, root))
    readme = root / README
    if readme.is_file():
        save_text(readme, readme_table(readme.read_text(encoding="utf-8"), merged))
    from ..workbook import presets

    shown = {n for n in presets.notebooks() if (root / "notebooks" / f"{n}.ipynb").is_file()}
    for notebook in sorted({e["notebook"] for e in merged} | shown):
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
