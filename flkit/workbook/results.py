"""Reading and summarising ``results.json`` files (what :class:`flkit.workbook.report.Report`
writes): ``load_results``, ``summarize`` (one or several seeds into "paper reports / we measured /
verdict" rows), ``results_frame`` (those rows as a DataFrame Jupyter shows whole),
``claim_counts`` (how many claims have each verdict of :mod:`flkit.workbook.verdict`) and the
one number format for people: ``readable`` (3 significant digits), ``readable_text`` (every long
decimal in a sentence rounded the same way) and ``format_value``."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

from .verdict import INCONCLUSIVE, VERDICTS, combine, verdict_of

RESULTS_FILE = "results.json"
COLUMNS = ("paper reports", "we measured", "verdict")
DIGITS = 3  # significant digits of every number written for people (tables, claim evidence)
# a decimal number inside a sentence; not part of a word or a version ("v1.2.3", "resnet18")
_DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?:[eE][-+]?\d+)?(?![\w.])")

__all__ = [
    "load_results",
    "summarize",
    "results_frame",
    "format_value",
    "readable",
    "readable_text",
    "claim_counts",
    "unit_sep",
    "COLUMNS",
    "RESULTS_FILE",
]


def load_results(path: str | Path) -> dict:
    """Read a ``results.json`` (or the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def summarize(results: list[dict]) -> list[dict]:
    """Rows "paper reports / we measured / verdict" over one or several seeds' results.

    Numbers: the mean, and ``± std`` (sample std) over seeds when there are several; claims: the
    verdict (over several seeds combined by :func:`flkit.workbook.verdict.combine`, with each
    seed's verdict). Each row is a dict with display strings ``item`` (a number's key and its note,
    "as the row above" where the number before it has the same note), ``paper``, ``measured``,
    ``holds`` (the verdict) and raw fields ``kind``, ``key``, ``note``, ``unit``, ``values``
    (numbers) / ``verdicts``, ``reason``, ``regime`` (claims)."""
    rows: list[dict] = []
    n_runs = len(results)
    num_order: dict[str, list] = {}
    num_first: dict[str, dict] = {}
    claim_order: dict[str, list] = {}
    claim_first: dict[str, dict] = {}
    claim_seed: dict[str, object] = {}
    for res in results:
        for n in res.get("numbers", []):
            num_first.setdefault(n["key"], n)
            num_order.setdefault(n["key"], []).append(_as_float(n.get("measured")))
        for c in res.get("claims", []):
            if c["text"] not in claim_first:
                claim_first[c["text"]] = c
                claim_seed[c["text"]] = res.get("seed")
            claim_order.setdefault(c["text"], []).append(verdict_of(c))
    previous_note = ""
    for key, values in num_order.items():
        first = num_first[key]
        unit = first.get("unit", "")
        finite = [v for v in values if v is not None]
        if n_runs <= 1:
            measured = format_value(first.get("measured"), unit)
        elif not finite:
            measured = ""
        else:
            mean = sum(finite) / len(finite)
            if len(finite) > 1 and all(math.isfinite(v) for v in finite):
                std = math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
                measured = f"{format_value(mean)} ± {readable(std, 2)}"
                measured += f"{unit_sep(unit)}{unit}" if unit else ""
            else:
                measured = format_value(mean, unit)
            measured += (
                f" (n={len(finite)})"
                if len(finite) == n_runs
                else f" ({len(finite)} of {n_runs} seeds)"
            )
        paper = first.get("paper")
        paper_s = format_value(paper, unit) if not isinstance(paper, str) else paper
        note = first.get("note") or ""
        # a note shared by a run of numbers (one table's line under it) is written once: repeated
        # on every row, a long line would bury the numbers it explains
        shown = "as the row above" if note and note == previous_note else note
        previous_note = note
        item = key + (f" — {shown}" if shown else "")
        rows.append(
            {
                "kind": "number",
                "item": item,
                "paper": paper_s,
                "measured": measured,
                "holds": "",
                "values": values,
                "unit": unit,
                "key": key,
                "note": first.get("note", ""),
            }
        )
    for text, verdicts in claim_order.items():
        first = claim_first[text]
        holds = combine(verdicts)
        if n_runs > 1:
            holds += (
                " ("
                + ", ".join(f"{n} {v}" for v in VERDICTS if (n := verdicts.count(v)))
                + f" of {len(verdicts)} seeds)"
            )
        evidence = readable_text(first.get("evidence", ""))
        if n_runs > 1 and evidence:
            evidence += f" (seed {claim_seed[text]})"
        rows.append(
            {
                "kind": "claim",
                "item": text,
                "paper": first.get("paper", "") or "",
                "measured": evidence,
                "holds": holds,
                "verdicts": verdicts,
                "reason": readable_text(first.get("reason", "")),
                "regime": first.get("regime") or [],
            }
        )
    return rows


@functools.cache
def _whole_frame():
    """The DataFrame class of a results table (made on first use: pandas loads only then)."""
    import pandas as pd

    class WholeFrame(pd.DataFrame):
        """A DataFrame that Jupyter shows with every row: pandas cuts a frame of more than
        ``display.max_rows`` rows to its first and last five, and a notebook's results table
        (one row per claim and per number, 60 and more) would hide most of its claims."""

        @property
        def _constructor(self):
            return WholeFrame

        def _repr_html_(self):
            return self.to_html()

    return WholeFrame


def results_frame(rows: list[dict]):
    """Rows of :func:`summarize` as a DataFrame with the columns ``COLUMNS``, shown whole in a
    notebook however many rows it has."""
    df = _whole_frame()(
        [[r["paper"], r["measured"], r["holds"]] for r in rows],
        columns=list(COLUMNS),
        index=[r["item"] for r in rows],
    )
    df.index.name = ""
    return df


def claim_counts(rows: list[dict]) -> dict:
    """How many claim rows of :func:`summarize` have each verdict (over several seeds the
    verdicts combined by :func:`flkit.workbook.verdict.combine`)."""
    out = dict.fromkeys(VERDICTS, 0)
    for row in rows:
        if row.get("kind") == "claim":
            out[combine(row.get("verdicts") or [INCONCLUSIVE])] += 1
    return out


def readable(v, digits: int = DIGITS) -> str:
    """A number for people: ``digits`` significant digits (45.89166 -> '45.9', 0.012345 ->
    '0.0123'), whole numbers from 10**digits up without exponent (12345.6 -> '12346'), ints as
    they are."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 10 ** (digits - 1) - 0.5:  # no digit after the point left to keep
        return f"{v:.0f}"
    return f"{float(f'{v:.{digits}g}'):.{digits}g}" if abs(v) >= 1e-4 or v == 0 else f"{v:.2e}"


def readable_text(text: str, digits: int = DIGITS) -> str:
    """``text`` with every decimal number holding more than ``digits`` significant digits
    rounded by :func:`readable`; shorter ones ('0.10', '2.5') are left as written."""

    def shorten(m: re.Match) -> str:
        raw = m.group(0)
        mantissa = raw.lstrip("+-").split("e")[0].split("E")[0].replace(".", "").lstrip("0")
        if len(mantissa) <= digits:
            return raw
        return ("+" if raw.startswith("+") else "") + readable(float(raw), digits)

    return _DECIMAL.sub(shorten, str(text)) if text else text


def format_value(v, unit: str = "") -> str:
    """A number for a table (:func:`readable`: 3 significant digits), the unit appended; '' for
    None."""
    if v is None or v == "":
        return ""
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return v
        v = f
    s = readable(v)
    return f"{s}{unit_sep(unit)}{unit}" if unit else s


def unit_sep(unit: str) -> str:
    """The space between a number and `unit` ("" before "%", "°", "×", "x")."""
    return "" if unit.startswith(("%", "°", "×", "x")) else " "


def _as_float(v):
    """Stored measurement -> float (None stays None)."""
    if v is None or isinstance(v, bool):
        return None if v is None else float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return float(v)
