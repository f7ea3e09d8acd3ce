"""One paper's regime: its indicators, what each claim reads, and the tables a reader sees.

Every paper's ``regime.py`` declares one :class:`Regime` (its constant ``REGIME``) and a
``measure(...)`` that turns its runs into our indicator values; nothing else of the judging
interface is written per paper::

    REGIME = Regime(
        indicators=[Indicator("staleness_gap", ..., source="paper: Table 10, ...")],
        diagnostics=[Indicator("disparity_ratio", ..., source="ours: ...", diagnostic=True)],
        claims={"gi_beats_unweighted": ClaimRule(("staleness_gap",), methods=("gi", "unweighted"))},
    )
    report.claim(text, holds, evidence, regime=REGIME.readings(ours, "gi_beats_unweighted"))

A claim reads only the indicators its :class:`ClaimRule` names, and an indicator measured per
method (a mapping method -> value) only on the methods that claim compares: a baseline another
claim uses cannot make this one "outside regime". Diagnostics are read for every claim that names
them and shown beside it, never gating (:func:`flkit.workbook.verdict.decide`).

The readings a claim records carry the claim's key and every measured value of ``ours``
(:class:`Readings`), so a published entry keeps its measurements apart from the judgment and a
changed rule re-judges it without training (:mod:`flkit.reproduce.rejudge`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..utils import FlkitError
from .verdict import Indicator, Reading, plain

__all__ = ["ClaimRule", "Regime", "Readings", "plain_measurements"]


@dataclass(frozen=True)
class ClaimRule:
    """What one claim reads: ``indicators`` (keys of the regime's indicators or diagnostics),
    ``methods`` (the methods the claim compares; a per-method indicator is read on these only;
    empty: every measured method) and ``tasks`` (the tasks or datasets its evidence uses, for a
    reader)."""

    indicators: tuple = ()
    methods: tuple = ()
    tasks: tuple = ()

    def __post_init__(self):
        for name in ("indicators", "methods", "tasks"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise FlkitError(f"claim rule {name}={value!r}; accepted: a tuple of names")
            object.__setattr__(self, name, tuple(value))


class Readings(list):
    """The readings of one claim (a list of :class:`Reading`), with the claim's key and the
    measured values they were read from (every key of ``ours``), for the record."""

    def __init__(self, readings: Iterable[Reading], claim: str, measured: Mapping):
        super().__init__(readings)
        self.claim = claim
        self.measured = dict(measured)


def plain_measurements(ours: Mapping) -> dict:
    """``ours`` as plain JSON values (numbers, None for NaN, nested per-method mappings)."""

    def convert(v):
        if isinstance(v, Mapping):
            return {str(k): convert(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        v = plain(v)
        if isinstance(v, float) and math.isnan(v):
            return None
        return v

    return {str(k): convert(v) for k, v in ours.items()}


class Regime:
    """A paper's regime indicators, its diagnostics and the rule of each claim."""

    def __init__(
        self,
        indicators: Iterable[Indicator],
        claims: Mapping[str, ClaimRule | Sequence[str]],
        diagnostics: Iterable[Indicator] = (),
    ):
        self.indicators: dict[str, Indicator] = {}
        self.diagnostics: dict[str, Indicator] = {}
        for ind, diag in [(i, False) for i in indicators] + [(i, True) for i in diagnostics]:
            if not isinstance(ind, Indicator):
                raise FlkitError(f"regime indicator {ind!r}; accepted: an Indicator")
            if ind.diagnostic is not diag:
                where = "diagnostics" if diag else "indicators"
                raise FlkitError(
                    f"indicator {ind.key!r} is listed under {where} but has diagnostic="
                    f"{ind.diagnostic}; accepted: diagnostic=True exactly for the diagnostics"
                )
            if ind.key in self.indicators or ind.key in self.diagnostics:
                raise FlkitError(f"indicator {ind.key!r} is declared twice")
            (self.diagnostics if diag else self.indicators)[ind.key] = ind
        self.claims: dict[str, ClaimRule] = {}
        for key, rule in claims.items():
            if not isinstance(rule, ClaimRule):
                rule = ClaimRule(tuple(rule))
            unknown = [k for k in rule.indicators if k not in self.all]
            if unknown:
                raise FlkitError(
                    f"claim {key!r} reads indicator(s) {unknown} that this regime does not "
                    f"declare; declared: {', '.join(self.all) or 'none'}"
                )
            self.claims[key] = rule

    @property
    def all(self) -> dict[str, Indicator]:
        """Indicators, then diagnostics."""
        return {**self.indicators, **self.diagnostics}

    def rule(self, claim: str) -> ClaimRule:
        if claim not in self.claims:
            raise FlkitError(
                f"claim {claim!r} has no rule in this regime; accepted: "
                f"{', '.join(map(repr, self.claims)) or 'none'}"
            )
        return self.claims[claim]

    def readings(
        self, ours: Mapping, claim: str, per_seed: Mapping[str, Sequence] | None = None
    ) -> Readings:
        """The readings of ``claim``'s indicators in ``ours`` (key -> value, or key -> {method:
        value}), per-method ones restricted to the methods the claim compares. A key the claim
        reads that ``ours`` lacks, or a compared method a per-method indicator has no value for,
        is a FlkitError naming it (a rule must not silently read nothing)."""
        rule = self.rule(claim)
        if not isinstance(ours, Mapping):
            raise FlkitError(f"ours={ours!r}; accepted: a mapping indicator key -> value")
        out = []
        for k in rule.indicators:
            if k not in ours:
                raise FlkitError(
                    f"claim {claim!r} reads indicator {k!r}, which was not measured; measured: "
                    f"{', '.join(map(str, ours)) or 'none'}"
                )
            value = ours[k]
            if isinstance(value, Mapping) and rule.methods:
                missing = [m for m in rule.methods if m not in value]
                if missing:
                    raise FlkitError(
                        f"claim {claim!r} compares method(s) {missing}, but indicator {k!r} was "
                        f"measured for {list(value)} only"
                    )
                value = {m: value[m] for m in rule.methods}
            ind = self.all[k]
            if ind.paper_from_run:
                paper = ours.get(f"{k}@paper")
                if paper is None:
                    raise FlkitError(
                        f"claim {claim!r} reads indicator {k!r}, whose paper value is computed in "
                        f"the run ({ind.paper}), but {k}@paper was not measured"
                    )
                ind = replace(ind, paper=float(paper))
            out.append(ind.read(value, (per_seed or {}).get(k)))
        return Readings(out, claim, ours)

    def inside(self, ours: Mapping, claim: str | None = None) -> bool | None:
        """Whether every regime indicator (not the diagnostics) of ``claim`` (default: of every
        claim) meets its rule; None when one is unmeasured and none fails."""
        claims = [claim] if claim is not None else list(self.claims)
        checks = [
            r.inside for c in claims for r in self.readings(ours, c) if not r.indicator.diagnostic
        ]
        if False in checks:
            return False
        return None if None in checks else True

    def table(self, ours: Mapping | None = None):
        """The conditions once, for a reader: one row per indicator (then the diagnostics) with
        what it measures, the paper's value, the rule, the rule's source, the claims that read
        it, and ours and whether it is inside the rule when ``ours`` is given."""
        import pandas as pd

        rows = []
        for key, ind in self.all.items():
            row = {
                "indicator": ind.text,
                "role": "diagnostic" if ind.diagnostic else "condition",
                "paper": ind.paper,
                "rule": ind.rule.text(ind.paper),
                "source": ind.source,
                "claims": ", ".join(c for c, r in self.claims.items() if key in r.indicators),
            }
            if ours is not None:
                r = ind.read(ours.get(key))
                row["ours"] = r.to_dict()["ours"]
                row["inside"] = r.inside
            rows.append(row)
        return pd.DataFrame(rows)
