"""The verdict of a paper's claim, and the regime rule that can make it "outside regime".

Every claim a notebook records ends with one of four verdicts (``VERDICTS``):

- ``holds``: the run shows the claim, in the paper's regime;
- ``does not hold``: the run contradicts the claim, in the paper's regime (a finding);
- ``outside regime``: a regime indicator the claim depends on is not where the paper's setting
  has it, so the run cannot show the paper's effect either way (the claim's readings say which
  indicator, ours and the paper's);
- ``inconclusive``: the run cannot decide, with the reason (the smoke preset, a seed spread larger
  than the effect, a target no method reached, an indicator not measured).

A regime indicator (:class:`Indicator`) is declared once, in the paper's ``regime.py``: what it
measures, the paper's value, the :class:`Rule` saying where ours must be for the paper's effect
to be possible, and the source of that threshold (:data:`SOURCE_KINDS`: a quoted paper number, a
value computed from the paper's stated setting, or ours with one sentence why). An indicator that
the paper's own setting would fail is a *diagnostic*: shown beside the claim, never gating it.
A claim carries the readings of the indicators it depends on (``Regime.readings`` of
:mod:`flkit.workbook.regime`); :func:`decide` turns the face-value outcome, the preset and those
readings into the verdict, so no notebook chooses "outside regime" by hand. The smoke rule (a
smoke run judges nothing that depends on its length or size) lives here and nowhere else.
"""

from __future__ import annotations

import math
import numbers as _numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..utils import FlkitError

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
OUTSIDE_REGIME = "outside regime"
INCONCLUSIVE = "inconclusive"
VERDICTS = (HOLDS, DOES_NOT_HOLD, OUTSIDE_REGIME, INCONCLUSIVE)

SMOKE_PRESET = "smoke"
SMOKE_REASON = "smoke preset: too short to judge"
UNDECIDED_REASON = "the run does not decide it (see the evidence)"

#: colour (Okabe-Ito blue, vermillion, orange; grey) and a symbol per verdict. Under red-green
#: colour blindness Okabe-Ito's green turns as grey as the grey, and vermillion and orange stay
#: apart by lightness; the verdict is always written out too, so no reader depends on colour alone
STYLE = {
    HOLDS: ("#0072B2", "✓"),
    DOES_NOT_HOLD: ("#D55E00", "✗"),
    OUTSIDE_REGIME: ("#E69F00", "◇"),
    INCONCLUSIVE: ("#6E6E6E", "?"),
}

_OPS = ("at least", "at most", "above", "below", "between", "within")

#: where a threshold comes from: "paper: <section/table, the number quoted>", "computed: <how,
#: from which stated setting of the paper>", "ours: <one sentence why>"
SOURCE_KINDS = ("paper", "computed", "ours")

#: the version of the judging rules (indicators, their sources and what each claim reads). A
#: published entry records it; re-judging an entry of another version is refused with what is
#: missing (:mod:`flkit.reproduce.rejudge`)
RULES_VERSION = 2

__all__ = [
    "HOLDS",
    "DOES_NOT_HOLD",
    "OUTSIDE_REGIME",
    "INCONCLUSIVE",
    "VERDICTS",
    "SMOKE_PRESET",
    "SMOKE_REASON",
    "SOURCE_KINDS",
    "RULES_VERSION",
    "STYLE",
    "Rule",
    "Indicator",
    "Reading",
    "source_kind",
    "plain",
    "at_least",
    "at_most",
    "above",
    "below",
    "between",
    "within",
    "read",
    "decide",
    "combine",
    "check_verdict",
    "verdict_of",
]


def check_verdict(verdict) -> str:
    """``verdict`` if it is one of ``VERDICTS``; FlkitError naming the accepted ones otherwise."""
    if verdict not in VERDICTS:
        raise FlkitError(f"verdict {verdict!r}; accepted: {', '.join(map(repr, VERDICTS))}")
    return verdict


def _number(value, field: str):
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, _numbers.Real):
        raise FlkitError(f"{field}={value!r}; accepted: a number")
    return float(value)


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Rule:
    """Where an indicator must be for the paper's effect to be possible.

    ``op`` is "at least" / "at most" / "above" / "below" (the last two strictly; ``bound``),
    "between" (``bound`` =
    (low, high)) or "within" (``bound`` = a relative tolerance around the paper's value, e.g. 0.2
    for ±20 %).
    ``missing`` says what an unmeasured indicator (``None``) means: "unknown" (the claim is
    inconclusive) or "outside" (for example FedAvg never reaching the target is not the paper's
    regime, where it does)."""

    op: str
    bound: object
    missing: str = "unknown"

    def __post_init__(self):
        if self.op not in _OPS:
            raise FlkitError(f"rule op {self.op!r}; accepted: {', '.join(map(repr, _OPS))}")
        if self.missing not in ("unknown", "outside"):
            raise FlkitError(f"rule missing={self.missing!r}; accepted: 'unknown', 'outside'")
        if self.op == "between":
            if not isinstance(self.bound, (tuple, list)) or len(self.bound) != 2:
                raise FlkitError(f"rule 'between' bound={self.bound!r}; accepted: (low, high)")
            lo, hi = (_number(b, "rule bound") for b in self.bound)
            if lo > hi:
                raise FlkitError(f"rule 'between' bound=({lo}, {hi}); accepted: low <= high")
            object.__setattr__(self, "bound", (lo, hi))
        else:
            b = _number(self.bound, f"rule {self.op!r} bound")
            if self.op == "within" and not b > 0:
                raise FlkitError(f"rule 'within' tolerance={b}; accepted: a number > 0")
            object.__setattr__(self, "bound", b)

    def check(self, ours, paper) -> bool | None:
        """True when ``ours`` is where the rule asks, False when not, None when ``ours`` is
        unmeasured and ``missing`` is "unknown"."""
        if ours is None or (isinstance(ours, float) and math.isnan(ours)):
            return False if self.missing == "outside" else None
        x = _number(ours, "indicator value")
        if self.op == "at least":
            return x >= self.bound
        if self.op == "at most":
            return x <= self.bound
        if self.op == "above":
            return x > self.bound
        if self.op == "below":
            return x < self.bound
        if self.op == "between":
            return self.bound[0] <= x <= self.bound[1]
        p = _number(paper, "the paper's value of a 'within' rule")
        return abs(x - p) <= self.bound * abs(p)

    def text(self, paper=None) -> str:
        """The rule in words: '≥ 0.75', '≤ 2', '0.7–0.9', 'within 20 % of 39 (31.2–46.8)'."""
        if self.op == "at least":
            return f"≥ {_fmt(self.bound)}"
        if self.op == "at most":
            return f"≤ {_fmt(self.bound)}"
        if self.op == "above":
            return f"> {_fmt(self.bound)}"
        if self.op == "below":
            return f"< {_fmt(self.bound)}"
        if self.op == "between":
            return f"{_fmt(self.bound[0])}–{_fmt(self.bound[1])}"
        p = float(paper)
        lo, hi = p - self.bound * abs(p), p + self.bound * abs(p)
        return f"within {_fmt(100 * self.bound)} % of the paper's ({_fmt(lo)}–{_fmt(hi)})"


def at_least(bound, missing: str = "unknown") -> Rule:
    return Rule("at least", bound, missing)


def at_most(bound, missing: str = "unknown") -> Rule:
    return Rule("at most", bound, missing)


def above(bound, missing: str = "unknown") -> Rule:
    return Rule("above", bound, missing)


def below(bound, missing: str = "unknown") -> Rule:
    return Rule("below", bound, missing)


def between(low, high, missing: str = "unknown") -> Rule:
    return Rule("between", (low, high), missing)


def within(tolerance, missing: str = "unknown") -> Rule:
    return Rule("within", tolerance, missing)


@dataclass(frozen=True)
class Indicator:
    """One regime indicator of a paper: ``key`` (identifier), ``text`` (what it measures, for a
    reader), ``paper`` (the paper's value: a number, or words where the paper gives none, e.g.
    "still rising at round 800"), ``rule`` (where ours must be), ``unit``, ``source`` (where the
    rule's threshold comes from: "paper: ...", "computed: ..." or "ours: ...", see
    :data:`SOURCE_KINDS`) and ``diagnostic`` (shown beside the claims it concerns, never gates a
    verdict: for a quantity the paper's own setting would fail, or one the paper does not
    report). ``paper_from_run``: the paper's value is computed in the run itself (a timing-only
    simulation of the paper's setting) and measured beside ours under the key ``<key>@paper``;
    ``paper`` then says in words how it is computed."""

    key: str
    text: str
    paper: object
    rule: Rule
    unit: str = ""
    source: str | None = None
    diagnostic: bool = False
    paper_from_run: bool = False

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key.isidentifier():
            raise FlkitError(f"indicator key={self.key!r}; accepted: an identifier")
        if self.paper is None or self.paper == "":
            raise FlkitError(
                f"indicator {self.key!r} has no paper value; accepted: the paper's value (a "
                "number, or words saying what the paper's setting has)"
            )
        if not isinstance(self.rule, Rule):
            raise FlkitError(
                f"indicator {self.key!r} rule={self.rule!r}; accepted: a Rule (at_least, "
                "at_most, between, within)"
            )
        if self.rule.op == "within" and not (
            isinstance(self.paper, _numbers.Real) or self.paper_from_run
        ):
            raise FlkitError(
                f"indicator {self.key!r}: a 'within' rule needs a numeric paper value, got "
                f"{self.paper!r}"
            )
        source_kind(self.source, f"indicator {self.key!r}")
        if not isinstance(self.diagnostic, bool):
            raise FlkitError(
                f"indicator {self.key!r} diagnostic={self.diagnostic!r}; accepted: True, False"
            )

    @property
    def source_kind(self) -> str:
        """ "paper", "computed" or "ours"."""
        return source_kind(self.source, f"indicator {self.key!r}")

    def read(self, ours, per_seed: Sequence | None = None) -> Reading:
        """This indicator measured on our run: ``ours`` (over seeds: their mean; per method: a
        mapping method -> value, see :class:`Reading`) and, optionally, the per-seed values."""
        return Reading(self, ours, tuple(per_seed) if per_seed is not None else None)


def source_kind(source, where: str = "indicator") -> str:
    """The kind of a threshold's ``source`` ("paper: Table 10, ...", "computed: ...", "ours:
    ..."); FlkitError naming the accepted forms when it has none or another."""
    kinds = ", ".join(f"'{k}: ...'" for k in SOURCE_KINDS)
    if not isinstance(source, str) or ":" not in source:
        raise FlkitError(f"{where} has no source (source={source!r}); accepted: {kinds}")
    kind, _, said = source.partition(":")
    if kind.strip() not in SOURCE_KINDS or not said.strip():
        raise FlkitError(f"{where} source={source!r}; accepted: {kinds}, with the words after it")
    return kind.strip()


@dataclass(frozen=True)
class Reading:
    """An indicator with our value; ``inside`` applies the paper's rule.

    ``ours`` is one value, or a mapping method -> value for an indicator measured per method (a
    baseline that learns): then every method's value must meet the rule, and a method without a
    value is unknown."""

    indicator: Indicator
    ours: object
    per_seed: tuple | None = None

    @property
    def inside(self) -> bool | None:
        if isinstance(self.ours, Mapping):
            checks = [
                self.indicator.rule.check(v, self.indicator.paper) for v in self.ours.values()
            ]
            if not checks or None in checks and False not in checks:
                return None
            return all(checks)
        return self.indicator.rule.check(self.ours, self.indicator.paper)

    @property
    def diagnostic(self) -> bool:
        return self.indicator.diagnostic

    def _ours_text(self, unit: str) -> str:
        if self.ours is None:
            return "not measured"
        if isinstance(self.ours, Mapping):
            rule, paper = self.indicator.rule, self.indicator.paper
            shown = [
                (m, v) for m, v in self.ours.items() if rule.check(v, paper) is not True
            ] or list(self.ours.items())
            return ", ".join(
                f"{m} {'not measured' if v is None else _fmt(plain(v)) + unit}" for m, v in shown
            )
        return _fmt(plain(self.ours)) + unit

    def describe(self) -> str:
        """'FedAvg: share of rounds to 95 %: ours 0.3, paper 0.985 (rule ≥ 0.75)'; per method,
        the methods that miss the rule (all, when none does)."""
        ind = self.indicator
        unit = f" {ind.unit}" if ind.unit else ""
        return (
            f"{ind.text}: ours {self._ours_text(unit)}, paper "
            f"{_fmt(plain(ind.paper))}{unit if not isinstance(ind.paper, str) else ''} "
            f"(rule {ind.rule.text(ind.paper)})"
        )

    def to_dict(self) -> dict:
        ind = self.indicator
        ours = (
            {str(m): plain(v) for m, v in self.ours.items()}
            if isinstance(self.ours, Mapping)
            else plain(self.ours)
        )
        return {
            "key": ind.key,
            "indicator": ind.text,
            "ours": ours,
            "per_seed": None if self.per_seed is None else [plain(v) for v in self.per_seed],
            "paper": plain(ind.paper),
            "rule": ind.rule.text(ind.paper),
            "unit": ind.unit,
            "source": ind.source,
            "diagnostic": ind.diagnostic,
            "inside": self.inside,
        }


def plain(v):
    """``v`` as a plain JSON value (numpy/torch scalars unwrapped, NaN as None)."""
    if hasattr(v, "item") and callable(v.item):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else v
    return v


def read(
    indicators: Mapping[str, Indicator],
    ours: Mapping[str, object],
    keys: Iterable[str] | None = None,
    per_seed: Mapping[str, Sequence] | None = None,
) -> list[Reading]:
    """Readings of ``keys`` (default: every key of ``ours``) from a paper's ``INDICATORS`` and
    our measured values. A key the paper's regime does not declare (no paper value, no rule), or
    one without a measured value, is a FlkitError."""
    keys = list(ours) if keys is None else list(keys)
    out = []
    for k in keys:
        if k not in indicators:
            raise FlkitError(
                f"regime indicator {k!r} has no paper value and rule in this paper's regime.py; "
                f"declared: {', '.join(indicators) or 'none'}"
            )
        if k not in ours:
            raise FlkitError(f"regime indicator {k!r} was not measured; measured: {list(ours)}")
        out.append(indicators[k].read(ours[k], (per_seed or {}).get(k)))
    return out


def verdict_of(holds) -> str:
    """The verdict a recorded claim shows: its ``verdict`` field, else (results written before
    the vocabulary had four words) from ``holds``: True/False/None."""
    if isinstance(holds, dict):
        if holds.get("verdict") is not None:
            return check_verdict(holds["verdict"])
        holds = holds.get("holds")
    return {True: HOLDS, False: DOES_NOT_HOLD, None: INCONCLUSIVE}[holds]


def decide(
    holds,
    preset: str | None = None,
    regime: Sequence[Reading] = (),
    judge_at_smoke: bool = False,
    reason: str = "",
    test: str = "",
) -> tuple[str, str]:
    """The verdict of a claim and its reason (empty for holds).

    ``holds``: the face-value outcome, True / False / None (undecided), or the words "holds",
    "does not hold", "inconclusive". In order: at the smoke preset a claim is inconclusive unless
    ``judge_at_smoke`` (its outcome does not depend on the run's length or size); a reading
    outside its rule makes it "outside regime"; an unmeasured reading makes it inconclusive;
    otherwise the face value decides. The reason of a smoke or outside-regime verdict ends with
    the face-value outcome, so nothing the run showed is lost. ``test`` is the claim's own test in
    words ("GI's gain over Unweighted >= 2 points in every seed"): a *does not hold* names it as
    the threshold the run missed. Diagnostic readings never change the verdict."""
    if hasattr(holds, "item") and callable(holds.item):
        holds = holds.item()
    if isinstance(holds, str):
        if holds == OUTSIDE_REGIME:
            raise FlkitError(
                "verdict 'outside regime' is derived, not given: pass the claim's regime "
                "readings (regime=REGIME.readings(ours, claim)) and its face-value outcome"
            )
        check_verdict(holds)
        holds = {HOLDS: True, DOES_NOT_HOLD: False, INCONCLUSIVE: None}[holds]
    if holds is not None and not isinstance(holds, bool):
        raise FlkitError(
            f"holds={holds!r}; accepted: True, False or None, or one of "
            f"{HOLDS!r}, {DOES_NOT_HOLD!r}, {INCONCLUSIVE!r}"
        )
    bad = [r for r in regime if not isinstance(r, Reading)]
    if bad:
        raise FlkitError(
            f"regime={bad[0]!r}; accepted: readings of the paper's regime indicators "
            "(REGIME.readings(ours, claim) of the paper's regime.py)"
        )
    face = {True: "; at face value it holds", False: "; at face value it does not hold"}.get(
        holds, ""
    )
    if preset == SMOKE_PRESET and not judge_at_smoke:
        return INCONCLUSIVE, SMOKE_REASON + face
    regime = [r for r in regime if not r.diagnostic]
    outside = [r for r in regime if r.inside is False]
    if outside:
        return OUTSIDE_REGIME, "; ".join(r.describe() for r in outside) + face
    unknown = [r for r in regime if r.inside is None]
    if unknown:
        return INCONCLUSIVE, "regime not measured: " + "; ".join(r.describe() for r in unknown)
    if holds is None:
        return INCONCLUSIVE, reason or UNDECIDED_REASON
    if holds:
        return HOLDS, ""
    return DOES_NOT_HOLD, (f"missed: {test}" if test else reason)


def combine(verdicts: Sequence[str]) -> str:
    """One verdict for a claim over several seeds (runs): the same verdict everywhere is that
    verdict; any seed outside the regime makes it outside regime (the comparison was not in the
    paper's setting there); else any seed against makes it does not hold; else (some held, the
    rest inconclusive) inconclusive."""
    vs = [check_verdict(v) for v in verdicts]
    if not vs:
        return INCONCLUSIVE
    if all(v == vs[0] for v in vs):
        return vs[0]
    if OUTSIDE_REGIME in vs:
        return OUTSIDE_REGIME
    if DOES_NOT_HOLD in vs:
        return DOES_NOT_HOLD
    return INCONCLUSIVE
