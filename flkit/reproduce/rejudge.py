"""Re-judge published results under the current rules, without training.

A published entry (``docs/results.json``) keeps, for every claim, its face-value outcome per run
and the indicator values it was judged on (``measured``, recorded by ``Report.claim`` from
``REGIME.readings``). :func:`rejudge` reads each claim's rule from its paper's ``REGIME`` as the
code has it now and derives the verdict again with :func:`flkit.workbook.verdict.decide`, so a
corrected indicator, threshold or source changes the page without a re-run. A verdict that changes
keeps the previous one beside it (``previous_verdict``) for one publication.

What it cannot do is refused by name: an entry of rules version 1 (before measurements were
recorded), a claim whose rule reads an indicator its entry did not measure, a claim key the
paper's regime no longer has.
"""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

from ..paths import project_root
from ..store import save_text
from ..utils import FlkitError
from ..workbook.verdict import RULES_VERSION, combine, decide

__all__ = ["regime_of", "rejudge_entry", "rejudge", "rejudge_file", "verdict_changes"]


def regime_of(notebook: str):
    """The ``REGIME`` of ``notebooks/NN_<slug>.ipynb``'s paper folder."""
    slug = notebook.split("_", 1)[1] if "_" in notebook else notebook
    try:
        mod = importlib.import_module(f"flkit.papers.{slug}.regime")
    except ModuleNotFoundError:
        raise FlkitError(
            f"notebook {notebook!r} has no paper folder flkit/papers/{slug}/ with a regime.py"
        ) from None
    regime = getattr(mod, "REGIME", None)
    if regime is None:
        raise FlkitError(f"flkit/papers/{slug}/regime.py declares no REGIME")
    return regime


def _merged_readings(per_run: list) -> list[dict]:
    """One row per indicator over the runs (ours per run), as the page shows them."""
    rows: dict[str, dict] = {}
    for readings in per_run:
        for r in readings:
            d = r.to_dict()
            row = rows.setdefault(
                d["key"],
                {
                    **{k: d[k] for k in ("key", "indicator", "paper", "rule", "unit", "source")},
                    "diagnostic": d["diagnostic"],
                    "ours": [],
                    "inside": True,
                },
            )
            row["ours"].append(d["ours"])
            if d["inside"] is False:
                row["inside"] = False
            elif d["inside"] is None and row["inside"] is True:
                row["inside"] = None
    return list(rows.values())


def _rejudge_claim(claim: dict, preset: str, regime, where: str) -> dict:
    out = dict(claim)
    runs = list(claim.get("face", {}))
    key = claim.get("key")
    if key is None and claim.get("regime"):
        raise FlkitError(
            f"{where}: claim {claim['text']!r} was judged on regime readings but records no "
            "claim key and no measurements (field 'key', 'measured'); re-run the notebook"
        )
    per_run = []
    verdicts, reasons = {}, {}
    for run in runs:
        readings = []
        if key is not None:
            measured = (claim.get("measured") or {}).get(run)
            if measured is None:
                raise FlkitError(
                    f"{where}: claim {claim['text']!r} has no measurements for run {run} "
                    "(field 'measured'); re-run the notebook"
                )
            try:
                readings = regime.readings(measured, key)
            except FlkitError as err:
                raise FlkitError(f"{where}: claim {claim['text']!r}: {err}") from None
        per_run.append(readings)
        v, why = decide(
            claim["face"][run],
            preset,
            readings,
            bool(claim.get("judge_at_smoke")),
            claim.get("face_reason", ""),
            claim.get("test", ""),
        )
        verdicts[run], reasons[run] = v, why
    verdict = combine(list(verdicts.values()))
    reason = next((reasons[r] for r in runs if verdicts[r] == verdict and reasons[r]), "")
    if not reason and len(set(verdicts.values())) > 1:
        reason = "the seeds disagree"
    out.update(verdict=verdict, reason=reason, per_seed=verdicts)
    if key is not None:
        out["regime"] = _merged_readings(per_run)
    # the previous verdict stays beside a changed one until the entry is published again
    if verdict != claim["verdict"]:
        out["previous_verdict"] = claim["verdict"]
    return out


def rejudge_entry(entry: dict) -> dict:
    """``entry`` with every claim judged again under the current rules (see the module)."""
    where = f"{entry.get('notebook')} at {entry.get('preset')!r}"
    rules = entry.get("rules")
    if rules is None or rules < 2:
        raise FlkitError(
            f"{where} was judged under rules version {rules or 1}, which recorded no "
            f"measurements; this flkit re-judges version {RULES_VERSION}'s fields (claim 'key', "
            "'measured', 'face' per run): re-run the notebook and publish it"
        )
    regime = None
    if any(c.get("key") is not None for c in entry["claims"]):
        regime = regime_of(entry["notebook"])
    out = copy.deepcopy(entry)
    out["claims"] = [_rejudge_claim(c, entry["preset"], regime, where) for c in entry["claims"]]
    out["rules"] = RULES_VERSION
    return out


def rejudge(entries: list[dict]) -> list[dict]:
    return [rejudge_entry(e) for e in entries]


def verdict_changes(old: list[dict], new: list[dict]) -> list[str]:
    """Lines 'notebook preset: claim: old -> new' for every claim whose verdict changed."""
    before = {
        (e["notebook"], e["preset"], c["text"]): c["verdict"] for e in old for c in e["claims"]
    }
    lines = []
    for e in new:
        for c in e["claims"]:
            was = before.get((e["notebook"], e["preset"], c["text"]))
            if was is not None and was != c["verdict"]:
                lines.append(f"{e['notebook']} {e['preset']}: {c['text']}: {was} -> {c['verdict']}")
    return lines


def rejudge_file(root: str | Path | None = None, check: bool = False) -> tuple[Path, list[str]]:
    """Re-judge ``docs/results.json`` under ``root``, cite the release holding each run's commit
    (:func:`flkit.reproduce.results_page.cite_releases`) and rewrite the pages from it. With
    ``check``, write nothing and raise when the page on disk is not what the current rules give.
    Returns the page's path and the verdict changes."""
    from . import results_page

    root = Path(root) if root is not None else (project_root() or Path.cwd())
    store = root / results_page.DOCS_DATA
    if not store.is_file():
        raise FlkitError(f"{store} does not exist; accepted: a repository with published results")
    old = json.loads(store.read_text(encoding="utf-8"))
    new = rejudge(old)
    changes = verdict_changes(old, new)
    page = root / results_page.DOCS_PAGE
    if check:
        want = results_page.docs_page(new, root)
        have = page.read_text(encoding="utf-8") if page.is_file() else ""
        if changes or want != have:
            raise FlkitError(
                f"{page} is not what the current rules give for {store} ("
                f"{len(changes)} verdict(s) change); run `flkit reproduce --rejudge`"
            )
        return page, changes
    results_page.cite_releases(new, root)
    save_text(store, json.dumps(new, indent=2, ensure_ascii=False) + "\n")
    return results_page.rewrite_pages(root), changes
