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
measures, the paper's value and the :class:`Rule` saying where ours must be for the paper's effect
to be possible. A claim carries the readings of the indicators it depends on
(``Indicator.read(ours)``); :func:`decide` turns the face-value outcome, the preset and those
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

_OPS = ("at least", "at most", "above", "between", "within")

__all__ = [
    "HOLDS",
    "DOES_NOT_HOLD",
    "OUTSIDE_REGIME",
    "INCONCLUSIVE",
    "VERDICTS",
    "SMOKE_PRESET",
    "SMOKE_REASON",
    "STYLE",
    "Rule",
    "Indicator",
    "Reading",
    "at_least",
    "at_most",
    "above",
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

    ``op`` is "at least" / "at most" / "above" (strictly; ``bound``), "between" (``bound`` =
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


def between(low, high, missing: str = "unknown") -> Rule:
    return Rule("between", (low, high), missing)


def within(tolerance, missing: str = "unknown") -> Rule:
    return Rule("within", tolerance, missing)


@dataclass(frozen=True)
class Indicator:
    """One regime indicator of a paper: ``key`` (identifier), ``text`` (what it measures, for a
    reader), ``paper`` (the paper's value: a number, or words where the paper gives none, e.g.
    "still rising at round 800"), ``rule`` (where ours must be) and ``unit``."""

    key: str
    text: str
    paper: object
    rule: Rule
    unit: str = ""

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
        if self.rule.op == "within" and not isinstance(self.paper, _numbers.Real):
            raise FlkitError(
                f"indicator {self.key!r}: a 'within' rule needs a numeric paper value, got "
                f"{self.paper!r}"
            )

    def read(self, ours, per_seed: Sequence | None = None) -> Reading:
        """This indicator measured on our run: ``ours`` (over seeds: their mean) and, optionally,
        the per-seed values."""
        return Reading(self, ours, tuple(per_seed) if per_seed is not None else None)


@dataclass(frozen=True)
class Reading:
    """An indicator with our value; ``inside`` applies the paper's rule."""

    indicator: Indicator
    ours: object
    per_seed: tuple | None = None

    @property
    def inside(self) -> bool | None:
        return self.indicator.rule.check(self.ours, self.indicator.paper)

    def describe(self) -> str:
        """'FedAvg: share of rounds to 95 %: ours 0.3, paper 0.985 (rule ≥ 0.75)'."""
        ind = self.indicator
        ours = "not measured" if self.ours is None else _fmt(_plain(self.ours))
        unit = f" {ind.unit}" if ind.unit else ""
        return (
            f"{ind.text}: ours {ours}{unit if self.ours is not None else ''}, paper "
            f"{_fmt(_plain(ind.paper))}{unit if not isinstance(ind.paper, str) else ''} "
            f"(rule {ind.rule.text(ind.paper)})"
        )

    def to_dict(self) -> dict:
        ind = self.indicator
        return {
            "key": ind.key,
            "indicator": ind.text,
            "ours": _plain(self.ours),
            "per_seed": None if self.per_seed is None else [_plain(v) for v in self.per_seed],
            "paper": _plain(ind.paper),
            "rule": ind.rule.text(ind.paper),
            "unit": ind.unit,
            "inside": self.inside,
        }


def _plain(v):
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
) -> tuple[str, str]:
    """The verdict of a claim and its reason (empty for holds / does not hold).

    ``holds``: the face-value outcome, True / False / None (undecided), or the words "holds",
    "does not hold", "inconclusive". In order: at the smoke preset a claim is inconclusive unless
    ``judge_at_smoke`` (its outcome does not depend on the run's length or size); a reading
    outside its rule makes it "outside regime"; an unmeasured reading makes it inconclusive;
    otherwise the face value decides. The reason of a smoke or outside-regime verdict ends with
    the face-value outcome, so nothing the run showed is lost."""
    if hasattr(holds, "item") and callable(holds.item):
        holds = holds.item()
    if isinstance(holds, str):
        if holds == OUTSIDE_REGIME:
            raise FlkitError(
                "verdict 'outside regime' is derived, not given: pass the claim's regime "
                "readings (regime=paper_regime.readings(...)) and its face-value outcome"
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
            "(Indicator.read(ours), or regime.readings(...) of the paper's regime.py)"
        )
    face = {True: "; at face value it holds", False: "; at face value it does not hold"}.get(
        holds, ""
    )
    if preset == SMOKE_PRESET and not judge_at_smoke:
        return INCONCLUSIVE, SMOKE_REASON + face
    outside = [r for r in regime if r.inside is False]
    if outside:
        return OUTSIDE_REGIME, "; ".join(r.describe() for r in outside) + face
    unknown = [r for r in regime if r.inside is None]
    if unknown:
        return INCONCLUSIVE, "regime not measured: " + "; ".join(r.describe() for r in unknown)
    if holds is None:
        return INCONCLUSIVE, reason or UNDECIDED_REASON
    return (HOLDS if holds else DOES_NOT_HOLD), ""


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
