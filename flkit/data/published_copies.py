"""Which copy of each dataset the published verdicts used, and whether a run reads the same.

``docs/results.json`` (written by ``flkit reproduce --publish``) holds, per notebook and preset, one
line per dataset copy its verdicts were computed on (:func:`flkit.data.provenance.describe`: sizes,
"REDUCED copy" or "full dataset", the first 12 hex digits of the copy's content SHA-256). A run on
another copy (the full CIFAR-10 after ``flkit data prepare cifar10`` where the published ``cpu``
verdicts used the mirror's 12,000-image subset) can give other numbers and verdicts, and says so:

* :func:`check_at_start`, called when a notebook's :class:`flkit.workbook.report.Report` is made
  (the notebook's first output), finds the copies ``load`` would read now for the datasets of the
  published entry and prints both lines for each that differs;
* :func:`compare` is what the report writes into ``results.json`` as ``"data_vs_published"``: per
  dataset the published line, the line of the copy the run read, and whether they are the same.

Copies are compared by content checksum, so a copy read from another path is still the same copy.
A notebook and preset without a published entry (``smoke``, ``paper``) compares nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..paths import project_root
from ..utils import FlkitError
from . import decoded, files, provenance
from .sources import locate

#: where the published entries live, under the project root
RESULTS_JSON = Path("docs") / "results.json"
RESULTS_KEY = "data_vs_published"

# "cifar10: 12,000 train / ..., sha256 82c8874e6794, from ..." (older lines: "labels sha256 ...")
_LINE = re.compile(r"^(?P<dataset>\w+): .*?, (?P<labels>labels )?sha256 (?P<digest>[0-9a-f]{12})\b")

__all__ = [
    "RESULTS_JSON",
    "RESULTS_KEY",
    "results_path",
    "published_entry",
    "copies_now",
    "notice",
    "check_at_start",
    "compare",
]


def results_path() -> Path | None:
    """``docs/results.json`` of the checkout flkit runs from (None for an installed wheel)."""
    root = project_root()
    return None if root is None else root / RESULTS_JSON


def _parse(line: str) -> dict | None:
    m = _LINE.match(line)
    if not m:
        return None
    field = "labels_sha256" if m["labels"] else "content_sha256"
    return {"dataset": m["dataset"], "field": field, "digest": m["digest"], "line": line}


def published_entry(notebook: str, preset: str, path=None) -> dict | None:
    """The published entry of ``notebook`` at ``preset``: ``{"notebook", "preset", "commit",
    "date", "copies": {dataset: parsed line}}``, or None when there is none (or no file)."""
    path = Path(path) if path is not None else results_path()
    if path is None or not path.is_file():
        return None
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for e in entries if isinstance(entries, list) else []:
        if e.get("notebook") == notebook and e.get("preset") == preset:
            copies = {}
            for line in e.get("data") or []:
                parsed = _parse(str(line))
                if parsed is not None:
                    copies[parsed["dataset"]] = parsed
            return {
                "notebook": notebook,
                "preset": preset,
                "commit": e.get("commit"),
                "date": e.get("date"),
                "copies": copies,
            }
    return None


def _same(ident: dict, published: dict) -> bool:
    return str(ident.get(published["field"], "")).startswith(published["digest"])


def copies_now(entry: dict, root=None, mirror=None) -> dict:
    """{dataset: identity or None} of the copies ``load`` would read now for the datasets of
    ``entry``: found as ``load`` finds them, never downloaded, not recorded as used. Their
    checksums come from the disk cache of decoded copies (:mod:`flkit.data.decoded`) when it
    has them, else are computed and stored there, so the notebook's own load does not hash
    again. None where no copy is found or it does not decode (``load`` reports that itself);
    generated datasets are left out (their content follows the preset's options)."""
    out = {}
    for name in entry["copies"]:
        if name == "synthetic":
            continue
        try:
            hit = locate(name, root, mirror)
            if hit is None:
                out[name] = None
                continue
            _, kind, paths = hit
            signature = files.signature(paths)
            saved = decoded.get(name, signature)
            facts = saved[1] if saved is not None else None
            if facts is None:
                arrays = files.read(name, kind, paths)
                facts = provenance.content_facts(name, arrays)
                decoded.put(name, kind, signature, arrays, facts)
            source = paths[0].parent if kind == "idx" else paths[0]
            out[name] = provenance.identity(facts, str(source))
        except (FlkitError, OSError):
            out[name] = None
    return out


def notice(entry: dict, now: dict) -> str | None:
    """The lines a notebook shows first when a copy it reads differs from the published one;
    None when every copy found is the one the published verdicts used."""
    differ = [
        (name, ident)
        for name, ident in now.items()
        if ident is not None and not _same(ident, entry["copies"][name])
    ]
    if not differ:
        return None
    commit = (entry.get("commit") or "")[:8]
    lines = [
        f"Data: this run reads {'another copy' if len(differ) == 1 else 'other copies'} than "
        f"the published `{entry['preset']}` verdicts of {entry['notebook']} used (docs/RESULTS.md"
        + (f", commit {commit}" if commit else "")
        + "), so its numbers and verdicts can differ from them:"
    ]
    for name, ident in differ:
        lines.append(f"  now:       {provenance.describe(ident)}")
        lines.append(f"  published: {entry['copies'][name]['line']}")
    lines.append(f'results.json records both under "{RESULTS_KEY}".')
    return "\n".join(lines)


def check_at_start(notebook: str, preset: str, log=print, path=None) -> dict | None:
    """The published entry of ``notebook`` at ``preset`` (None when there is none), after
    printing :func:`notice` when the copies ``load`` would read now differ from it. Never
    raises: a notebook must not fail over this check."""
    try:
        entry = published_entry(notebook, preset, path)
        if entry is not None:
            message = notice(entry, copies_now(entry))
            if message:
                log(message)
        return entry
    except Exception:  # the check only informs; load reports real data problems itself
        return None


def compare(entry: dict | None, used: list[dict]) -> dict | None:
    """``results.json``'s ``"data_vs_published"`` for a run that read the copies ``used``
    (identities, :func:`flkit.data.provenance.used_since`): None without a published entry, else
    ``{"preset", "commit", "date", "same", "datasets": [{"dataset", "published", "used",
    "same"}]}``. ``same`` of a dataset: true or false when the run read it and the published
    verdicts used it, null otherwise; overall: false when any differs, null when a published
    dataset was not read (yet) or the run read one the published verdicts did not, else true."""
    if entry is None:
        return None
    rows = []
    read = {}
    for ident in used:
        read.setdefault(ident["dataset"], []).append(ident)
    for name in list(entry["copies"]) + [n for n in read if n not in entry["copies"]]:
        pub = entry["copies"].get(name)
        for ident in read.get(name) or [None]:
            rows.append(
                {
                    "dataset": name,
                    "published": pub["line"] if pub else None,
                    "used": provenance.describe(ident) if ident else None,
                    "same": _same(ident, pub) if ident and pub else None,
                }
            )
    verdicts = [r["same"] for r in rows]
    same = False if False in verdicts else (None if None in verdicts else True)
    return {
        "preset": entry["preset"],
        "commit": entry["commit"],
        "date": entry["date"],
        "same": same,
        "datasets": rows,
    }
