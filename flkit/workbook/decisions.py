"""Decisions as data: how a preset value was chosen, by a rule fixed before the runs that read it.

A paper folder's ``decisions.toml`` holds one table per decision, ``decisions/<name>.csv`` its
recorded table (one row per run or reading, written once by
:func:`flkit.workbook.decision_runs.record`)::

    [cpu_setting]
    text = "the largest gap among the settings whose accuracy still rises ..."   # the rule
    presets = ["cpu"]                    # the preset tables it sets
    sets = ["lr", "tau"]                 # their keys ("key[i]": one element of a list), or
                                         # {preset key = "column"} for a column named otherwise
    candidates = [{lr = 0.05, tau = 40}, {lr = 0.02, tau = 40}]   # in the order the rule tries
                                         # them, or a grid {lr = [0.05, 0.02], tau = [40]}
    shape = "best"                       # "first": the first candidate, in order, that passes;
    best = {column = "gap", aim = "max"} # "best": among those that pass, aim "max" or "min", or
                                         # closest = <number>; ties go to the earlier candidate
    pass = [{column = "gap", op = "at least", bound = 4.0}]
    [cpu_setting.provenance]             # commit, date, machine, threads, preset, seeds, command

Optional: ``rows`` ({column: value or [values]}: the rows of the table read), ``match`` (the
columns a row is matched to a candidate on; default the candidates' own), a pass rule's ``where``
(the rows of a candidate it applies to) and ``of`` ("every", the default: each of those rows must
meet it; "mean": their mean must, e.g. the mean over seeds), ``fallback`` ("first" or "last": the
candidate taken when none passes), ``fallback_pass`` (rules the fallback must meet too),
``without`` (what no choice means: "unset", the keys keep what other rules give them, or
"absent", the presets named do not exist), ``table`` (the CSV's name in ``decisions/``) and
``per`` (a column of the candidates: one choice per value of it, on the rows with that value;
``{i}`` in a key is the value's place, in the candidates' order, e.g. ``"targets[{i}]"`` for one
list element per task).

A candidate passes when the table has rows for it and each pass rule holds on every row it
applies to (or on their mean); an empty cell fails (nothing passes on what was not measured).
The rules are :class:`~flkit.workbook.verdict.Rule`, the vocabulary of the regime indicators ("at
least", "at most", "above", "below", "between"), so a threshold reads alike in a decision and in
a claim's condition; "within" is refused: a decision has no paper value to be within.

:func:`decide` reads the recorded table and gives the chosen values. They live only in
``preset.toml``; :func:`check` compares the two (a test runs it on every decision of every
paper). Decisions apply in the order of ``decisions.toml``: a later decision that chooses a value
for the same key of the same preset replaces the earlier one's, whose choice then lives only in
its table (a later decision may start from it: its first candidate). A step that sets no preset
value itself, only the candidates of a later decision, has ``presets = []`` and ``sets = []``.
Measuring a table (running the candidates until the rule is met, writing it once with its
provenance) is :mod:`flkit.workbook.decision_runs`.

How a paper's README quotes a decision is :mod:`flkit.workbook.decision_quotes`.

This module is longer than the house's 500 lines: a decision's file format, its pass rules and
reading its recorded table are one idea, and each needs the others to be read.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ..utils import FlkitError
from . import presets
from .verdict import Rule

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["SHAPES", "PROVENANCE", "Pass", "Decision", "Outcome", "load", "read_table", "decide"]
__all__ += ["check", "missing_value", "paper_folder"]

SHAPES = ("first", "best")
#: what a decision's provenance names: where, when and how its table was measured
PROVENANCE = ("commit", "date", "machine", "threads", "preset", "seeds", "command")
_OPS = ("at least", "at most", "above", "below", "between")
_FALLBACKS, _WITHOUT, _AIMS = ("first", "last"), ("unset", "absent"), ("max", "min")
_OF = ("every", "mean")
_REQUIRED = ("text", "presets", "sets", "candidates", "shape", "provenance")
_OPTIONAL = (
    "best",
    "pass",
    "rows",
    "match",
    "fallback",
    "fallback_pass",
    "without",
    "table",
    "per",
)
_KEY = re.compile(r"^([A-Za-z_]\w*)(?:\[(\d+)\])?$")
PAPERS_DIR = Path(__file__).resolve().parent.parent / "papers"


def missing_value(v) -> bool:
    """Whether a table cell holds nothing: None, pandas' NA or NaN."""
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _frame(rows: list[dict]) -> pd.DataFrame:
    """``rows`` as a DataFrame in which a column of whole numbers stays whole where some cells are
    missing (pandas would turn it into reals, and a notebook would show 5000 as 5000.0)."""
    df = pd.DataFrame(rows)
    for col in df.columns:
        given = [r[col] for r in rows if not missing_value(r.get(col))]
        whole = all(isinstance(v, int) and not isinstance(v, bool) for v in given)
        if df[col].dtype.kind == "f" and given and whole:
            df[col] = df[col].astype("Int64")
    return df


def same_value(a, b) -> bool:
    """Whether a candidate's value and a table cell are one value (1 and 1.0 are)."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(map(same_value, a, b))
        )
    return not missing_value(a) and not missing_value(b) and a == b


def _selects(row: Mapping, where: Mapping) -> bool:
    """Whether ``row`` has, in every column of ``where``, the value (or one of the values) given."""
    return all(
        any(same_value(row.get(col), w) for w in (want if isinstance(want, list) else [want]))
        for col, want in where.items()
    )


def _shown(v) -> str:
    return "empty" if missing_value(v) else f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Pass:
    """One pass rule: ``column`` must meet ``rule`` on every row of the candidate that ``where``
    selects ({column: value or [values]}; empty: every row), or, with ``of="mean"``, their mean
    must (an empty cell among them fails)."""

    column: str
    rule: Rule
    where: Mapping = field(default_factory=dict)
    of: str = "every"

    def text(self) -> str:
        what = f"mean {self.column}" if self.of == "mean" else self.column
        return f"{what} {self.rule.text()}" + "".join(
            f" where {k} is {v}" for k, v in self.where.items()
        )

    def unmet(self, rows: Sequence[Mapping]) -> str | None:
        """Why the candidate's ``rows`` fail this rule (None: they meet it)."""
        read = [r for r in rows if _selects(r, self.where)]
        values = [r.get(self.column) for r in read]
        if self.of == "mean" and read:
            values = [None if any(map(missing_value, values)) else sum(values) / len(values)]
        bad = [v for v in values if self.rule.check(v, None) is not True]
        if not read or bad:
            return f"{self.text()}: " + (", ".join(map(_shown, bad)) if read else "no row")
        return None


def rules_unmet(passes, rows) -> list[str]:
    """Why ``rows`` fail each of ``passes`` that they fail (empty: they meet every one)."""
    return [u for p in passes if (u := p.unmet(rows)) is not None]


def _passes(spec, where: str) -> tuple[Pass, ...]:
    out = []
    for p in spec if isinstance(spec, list) else [spec]:
        keys = set(p) if isinstance(p, dict) else set()
        if not {"column", "op", "bound"} <= keys <= {"column", "op", "bound", "where", "of"}:
            raise FlkitError(
                f"{where} rule {p!r}; accepted: a table with column, op, bound and optionally "
                "where and of"
            )
        if p["op"] not in _OPS:
            raise FlkitError(
                f"{where} rule on {p['column']!r}: op {p['op']!r}; accepted: {list(_OPS)}"
            )
        of = p.get("of", "every")
        if of not in _OF:
            raise FlkitError(f"{where} rule on {p['column']!r}: of {of!r}; accepted: {list(_OF)}")
        rule = Rule(p["op"], p["bound"], "outside")
        out.append(Pass(p["column"], rule, p.get("where", {}), of))
    return tuple(out)


@dataclass(frozen=True)
class Decision:
    """One decision of a paper folder (the module's docstring gives each field's meaning)."""

    name: str
    folder: Path
    text: str
    presets: tuple
    sets: dict  # {preset key: candidate column}
    candidates: tuple
    shape: str
    provenance: dict
    passes: tuple = ()
    best: dict | None = None
    rows: dict = field(default_factory=dict)
    match: tuple | None = None
    fallback: str | None = None
    fallback_passes: tuple = ()
    without: str = "unset"
    table: str = ""
    per: str | None = None

    @property
    def path(self) -> Path:
        """The recorded table's file."""
        return self.folder / "decisions" / (self.table or f"{self.name}.csv")

    def groups(self) -> list[Decision]:
        """A decision made ``per`` value of a column, as one decision per value (in the order the
        candidates give them): its candidates, its rows, ``{i}`` in its keys the value's place."""
        values = list(dict.fromkeys(c[self.per] for c in self.candidates))
        return [
            replace(
                self,
                per=None,
                candidates=tuple(c for c in self.candidates if same_value(c[self.per], v)),
                rows={**self.rows, self.per: v},
                sets={k.replace("{i}", str(i)): col for k, col in self.sets.items()},
            )
            for i, v in enumerate(values)
        ]

    def values(self, candidate: Mapping) -> dict:
        """{preset key: value} that ``candidate`` gives."""
        return {key: candidate[col] for key, col in self.sets.items()}

    def label(self, candidate: Mapping) -> str:
        """The candidate in words, without the columns its rows are selected on."""
        return ", ".join(
            f"{k} {json.dumps(v) if isinstance(v, (list, str)) else v}"
            for k, v in candidate.items()
            if k not in self.rows
        )

    @classmethod
    def from_toml(cls, name: str, spec: Mapping, folder: Path) -> Decision:
        """The decision ``name`` of ``folder``'s ``decisions.toml`` (its table ``spec``),
        checked: FlkitError naming the decision, the bad value and the accepted ones."""
        where = f"decision {name!r} ({folder.name}/decisions.toml)"

        def need(ok, what):
            if not ok:
                raise FlkitError(f"{where}: {what}")

        known = [*_REQUIRED, *_OPTIONAL]
        unknown, lack = sorted(set(spec) - set(known)), [k for k in _REQUIRED if k not in spec]
        need(not unknown, f"unknown keys {unknown}; accepted: {known}")
        need(not lack, f"lacks {lack}; every decision names {list(_REQUIRED)}")
        need(spec["shape"] in SHAPES, f"shape={spec['shape']!r}; accepted: {list(SHAPES)}")
        sets = spec["sets"]
        sets = {k: k for k in sets} if isinstance(sets, list) else dict(sets)
        for key, col in sets.items():
            need(
                _KEY.match(key.replace("{i}", "0")) and isinstance(col, str),
                f"sets {key!r} = {col!r}; accepted: a preset key (or 'key[i]') and a column",
            )
        cands = spec["candidates"]
        if isinstance(cands, dict):  # a grid: the product in order, its first column outermost
            lists = [v if isinstance(v, list) else [v] for v in cands.values()]
            cands = [dict(zip(cands, combo)) for combo in itertools.product(*lists)]
        need(cands, "no candidates; accepted: at least one")
        for c in cands:
            lack = [col for col in sets.values() if col not in c]
            need(not lack, f"candidate {c} has no {lack}; accepted: a value per key set")
        per = spec.get("per")
        lack = [c for c in cands if per is not None and per not in c]
        need(
            not lack,
            f"per={per!r}, but candidate {lack[:1]} has no {per!r}; accepted: a column of "
            "every candidate",
        )
        best = spec.get("best")
        if spec["shape"] == "best":
            ok = isinstance(best, dict) and len(best) == 2 and "column" in best
            ok = ok and (best.get("aim") in _AIMS or isinstance(best.get("closest"), (int, float)))
            need(
                ok,
                f"best={best!r}; accepted: {{column, aim = 'max' or 'min' or closest = x}}",
            )
        need(
            spec["shape"] == "best" or best is None, "best is for shape 'best'; this one is 'first'"
        )
        fallback, without = spec.get("fallback"), spec.get("without", "unset")
        need(
            fallback in (None, *_FALLBACKS), f"fallback={fallback!r}; accepted: {list(_FALLBACKS)}"
        )
        need(without in _WITHOUT, f"without={without!r}; accepted: {list(_WITHOUT)}")
        prov = dict(spec["provenance"])
        lack = [k for k in PROVENANCE if k not in prov]
        need(not lack, f"provenance lacks {lack}; accepted: {list(PROVENANCE)}")
        return cls(
            name=name,
            folder=folder,
            text=" ".join(str(spec["text"]).split()),
            presets=tuple(spec["presets"]),
            sets=sets,
            candidates=tuple(dict(c) for c in cands),
            shape=spec["shape"],
            provenance=prov,
            passes=_passes(spec.get("pass", []), f"{where}: pass"),
            best=best,
            rows=dict(spec.get("rows", {})),
            match=tuple(spec["match"]) if "match" in spec else None,
            fallback=fallback,
            fallback_passes=_passes(spec.get("fallback_pass", []), f"{where}: fallback_pass"),
            without=without,
            table=spec.get("table", ""),
            per=spec.get("per"),
        )


def paper_folder(paper) -> Path:
    """The folder of ``paper`` (a slug under ``flkit/papers`` or a path); FlkitError naming the
    papers there when it is none."""
    folder = Path(paper) if isinstance(paper, Path) or os.sep in str(paper) else PAPERS_DIR / paper
    if not folder.is_dir():
        names = sorted(p.name for p in PAPERS_DIR.iterdir() if (p / "preset.toml").is_file())
        raise FlkitError(f"paper {str(paper)!r} has no folder; accepted: {names} or a folder path")
    return folder


def load(paper) -> dict[str, Decision]:
    """Every decision of a paper folder (a slug such as "staleness", or a folder path), by name;
    {} for a folder without ``decisions.toml``."""
    folder = paper_folder(paper)
    path = folder / "decisions.toml"
    if not path.is_file():
        return {}
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise FlkitError(f"{path} is not valid TOML: {e}") from None
    return {name: Decision.from_toml(name, spec, folder) for name, spec in raw.items()}


def _cell(text: str):
    """A CSV cell as a value: empty -> None, true/false, a JSON list, an int, a float, or text."""
    t = text.strip()
    if t in ("", "true", "false"):
        return None if t == "" else t == "true"
    if t.startswith("["):
        return json.loads(t)
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def cell_text(v) -> str:
    """``v`` as a recorded table's CSV cell writes it (empty for a missing value)."""
    if missing_value(v):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(list(v)) if isinstance(v, (list, tuple)) else str(v)


def read_table(decision: Decision) -> list[dict]:
    """The recorded rows of ``decision`` (its CSV), each {column: value}."""
    if not decision.path.is_file():
        raise FlkitError(
            f"decision {decision.name!r} has no recorded table {decision.path}; accepted: the "
            "table record() wrote for it"
        )
    with open(decision.path, newline="", encoding="utf-8") as fh:
        return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(fh)]


@dataclass(frozen=True)
class Outcome:
    """What a decision's rule gives on a table: ``chosen`` (the candidate, or None), ``values``
    ({preset key: value}, or None), ``passes`` (the choice meets its pass rules; False for the
    fallback or nothing), ``candidates`` (one row per candidate: its values, ``rows`` read,
    ``passes`` (None: not measured), ``unmet`` (the rules it missed), ``chosen``) and ``rows``
    (the rows read, each with ``passes``, by the rules that apply to it, and ``chosen``)."""

    decision: Decision
    chosen: dict | None
    values: dict | None
    passes: bool
    candidates: pd.DataFrame
    rows: pd.DataFrame
    parts: tuple = ()  # a decision made per value: each value's outcome

    def text(self) -> str:
        """One sentence: what the rule chose, and how (per value, one each)."""
        d = self.decision
        if self.parts:
            return " ".join(f"{p.decision.rows[d.per]}: {p.text()}" for p in self.parts)
        if self.chosen is None:
            absent = f"so there is no {', '.join(f'`{p}`' for p in d.presets)} preset"
            absent = absent if d.without == "absent" else "so it sets nothing"
            return f"No candidate meets the rule, {absent}."
        within = "".join(f"; {p.text()}" for p in d.fallback_passes)
        how = "meets the rule" if self.passes else f"is the fallback ({d.fallback}{within})"
        how += "" if self.passes else ": no candidate meets the rule"
        return f"{d.label(self.chosen)} {how}."


def _owners(decision: Decision, rows: list[dict]) -> list[int]:
    """The candidate each row belongs to; FlkitError for a column the rules read that the table
    lacks, or a row that no candidate (or two) matches."""
    cands, where = decision.candidates, f"decision {decision.name!r}"
    match = decision.match or tuple(dict.fromkeys(c for cand in cands for c in cand))
    rules = decision.passes + decision.fallback_passes
    needed = {*match, *(p.column for p in rules), *(c for p in rules for c in p.where)}
    needed |= {decision.best["column"]} if decision.best else set()
    columns = set().union(*(r.keys() for r in rows)) if rows else set()
    if needed - columns:
        raise FlkitError(
            f"{where}: the table lacks columns {sorted(needed - columns)}; it has {sorted(columns)}"
        )
    owners = []
    for r in rows:
        hits = [
            i
            for i, c in enumerate(cands)
            if all(same_value(c[k], r.get(k)) for k in match if k in c)
        ]
        if len(hits) != 1:
            raise FlkitError(
                f"{where}: the row { ({k: r.get(k) for k in match}) } matches {len(hits)} "
                "candidates; "
                f"accepted: one candidate per row, of {[decision.label(c) for c in cands]}"
            )
        owners.append(hits[0])
    return owners


def _row_passes(decision: Decision, row: Mapping, candidate_rows: list) -> bool:
    """Whether ``row`` meets the rules that apply to it: a rule on every row by its own value, a
    rule on the mean by the mean of its candidate's rows that it enters."""
    rules = [p for p in decision.passes if _selects(row, p.where)]
    every = [p for p in rules if p.of == "every"]
    mean = [p for p in rules if p.of == "mean"]
    return not rules_unmet(every, [row]) and not rules_unmet(mean, candidate_rows)


def decide(decision: Decision, table: Sequence[Mapping] | None = None) -> Outcome:
    """The rule of ``decision`` on ``table`` (rows {column: value}; default its recorded table).

    Shape "first" walks the candidates in order and takes the first that passes; a candidate
    before it without rows is an error (the rule reads it before its answer), one after it may be
    absent (the runs stopped there). Shape "best" needs one row per candidate and takes, among
    those that pass, the best value of its column. With none passing: the fallback candidate when
    it meets ``fallback_pass``, else nothing."""
    rows = read_table(decision) if table is None else [dict(r) for r in table]
    if decision.per:  # one choice per value; the values of every choice together
        parts = tuple(decide(sub, rows) for sub in decision.groups())
        values = [p.values for p in parts]
        return Outcome(
            decision,
            {p.decision.rows[decision.per]: p.chosen for p in parts},
            None if None in values else {k: v for vs in values for k, v in vs.items()},
            all(p.passes for p in parts),
            pd.concat([p.candidates for p in parts], ignore_index=True),
            pd.concat([p.rows for p in parts], ignore_index=True),
            parts,
        )
    rows = [r for r in rows if _selects(r, decision.rows)]
    owners = _owners(decision, rows)
    per = [[r for r, o in zip(rows, owners) if o == i] for i in range(len(decision.candidates))]
    unmet = [rules_unmet(decision.passes, rs) if rs else None for rs in per]
    ok = [u == [] for u in unmet]
    label = [f"candidate {decision.label(c)}" for c in decision.candidates]
    pick = None
    if decision.shape == "first":
        for i, rs in enumerate(per):
            if not rs:
                raise FlkitError(
                    f"decision {decision.name!r}: no row for {label[i]}, which the rule "
                    "reads before its answer; accepted: the table of the runs in order"
                )
            if ok[i]:
                pick = i
                break
    else:
        bad = [f"{len(rs)} rows for {label[i]}" for i, rs in enumerate(per) if len(rs) != 1]
        if bad:
            raise FlkitError(
                f"decision {decision.name!r}: {bad[0]}; accepted: one row per candidate"
            )
        col, aim = decision.best["column"], decision.best
        score = [math.nan if missing_value(rs[0][col]) else float(rs[0][col]) for rs in per]
        if "closest" in aim:
            score = [abs(v - float(aim["closest"])) for v in score]
        elif aim["aim"] == "max":
            score = [-v for v in score]
        passing = [i for i in range(len(per)) if ok[i] and not math.isnan(score[i])]
        pick = min(passing, key=lambda i: (score[i], i)) if passing else None
    passes = pick is not None
    if pick is None and decision.fallback is not None:
        i = 0 if decision.fallback == "first" else len(per) - 1
        pick = i if per[i] and not rules_unmet(decision.fallback_passes, per[i]) else None
    summary = [
        {
            **c,
            "rows": len(per[i]),
            "passes": None if unmet[i] is None else ok[i],
            "unmet": "; ".join(unmet[i] or []),
            "chosen": i == pick,
        }
        for i, c in enumerate(decision.candidates)
    ]
    read = [
        {**r, "passes": _row_passes(decision, r, per[o]), "chosen": o == pick}
        for r, o in zip(rows, owners)
    ]
    chosen = None if pick is None else dict(decision.candidates[pick])
    values = None if chosen is None else decision.values(chosen)
    return Outcome(decision, chosen, values, passes, _frame(summary), _frame(read))


def _replaced(decision: Decision) -> set[tuple[str, str]]:
    """The (preset, key) pairs of ``decision`` that a later decision of its folder chose again."""
    every = list(load(decision.folder).values())
    names = [d.name for d in every]
    later = every[names.index(decision.name) + 1 :] if decision.name in names else []
    return {
        (p, key)
        for d in later
        if (values := decide(d).values) is not None
        for p in d.presets
        for key in values
    }


def check(decision: Decision) -> list[str]:
    """Where the folder's ``preset.toml`` differs from what :func:`decide` gives on the recorded
    table (empty: they agree); a key a later decision chose again is that decision's to check.
    Without a choice, an "unset" decision checks nothing and an "absent" one that its presets do
    not exist."""
    tables = presets.validate_file(decision.folder / "preset.toml")["presets"]
    out, replaced = decide(decision), _replaced(decision)
    if out.values is None:
        there = [p for p in decision.presets if p in tables and decision.without == "absent"]
        return [f"[{p}] exists, but the rule chose nothing" for p in there]
    problems = []
    for name in decision.presets:
        if name not in tables:
            problems.append(f"[{name}] is missing; the rule chose {out.values}")
            continue
        for key, want in out.values.items():
            if (name, key) in replaced:
                continue
            base, index = _KEY.match(key).groups()
            have = tables[name].get(base)
            if index is not None:
                have = (
                    have[int(index)] if isinstance(have, list) and int(index) < len(have) else None
                )
            if not same_value(want, have):
                problems.append(f"[{name}] {key} = {have!r}; the rule chose {want!r}")
    return problems
