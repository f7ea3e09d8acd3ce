"""What every exercise checker shares.

A checker prints a verdict and returns something truthy only when the answer is right. Three
outcomes: right; wrong, with a hint saying what differs; not attempted yet (the stub still raises
NotImplementedError), printed beside the reference result so a reader sees what a right answer
gives without the checker ever saying "right" for an untouched stub.

``require(check, *args)`` is the graded (hidden) test of a notebook: it runs the checker quietly
and raises AssertionError carrying the checker's own words when the verdict is not "right", so
nbgrader's feedback shows the hint.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..utils import FlkitError

NOT_ATTEMPTED = "not attempted yet: replace `raise NotImplementedError` with your code"


@dataclass
class Verdict:
    """passed: True (right), False (wrong), None (not attempted yet)."""

    passed: bool | None
    lines: list[str] = field(default_factory=list)
    reference: str = ""  # shown apart when not attempted: what the reference answer gives

    def __bool__(self) -> bool:
        return self.passed is True

    @property
    def attempted(self) -> bool:
        return self.passed is not None

    def text(self) -> str:
        if self.passed is None:
            out = [NOT_ATTEMPTED + "."]
            if self.reference:
                out.append(f"(for comparison, the reference answer gives: {self.reference})")
            return "\n".join(out)
        return "\n".join(self.lines)

    __str__ = text

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p, cycle):  # IPython shows the text, not a dataclass repr
        p.text(self.text())


def not_attempted(reference: str = "") -> Verdict:
    return Verdict(None, reference=reference)


def _close(got: float, want: float, rel_tol: float) -> bool:
    return math.isclose(got, want, rel_tol=rel_tol, abs_tol=1e-12)


def check_number(
    fn: Callable[[], float],
    want: float,
    what: str,
    rel_tol: float = 1e-3,
    mistakes: Mapping[str, float] | None = None,
    verbose: bool = True,
) -> Verdict:
    """Call ``fn()`` (the student's answer as a function without arguments) and compare it with
    ``want``. An untouched stub gets "not attempted yet" without the value (it is the answer).
    ``mistakes``: {hint: the value a typical mistake gives}; a match prints that hint."""
    if not callable(fn):
        raise FlkitError(f"the answer must be a function without arguments; got {type(fn)}")
    try:
        got = fn()
    except NotImplementedError:
        v = not_attempted()  # the number is the answer: it is not shown
    except Exception as e:  # noqa: BLE001 - a student's error is reported, not raised
        v = Verdict(False, [f"wrong: your function raised {type(e).__name__}: {e}"])
    else:
        try:
            got = float(got)
        except (TypeError, ValueError):
            v = Verdict(False, [f"wrong: return a number, not a {type(got).__name__}"])
        else:
            if _close(got, want, rel_tol):
                v = Verdict(True, [f"right: {what} = {got:.6g}"])
            else:
                hint = next(
                    (h for h, val in (mistakes or {}).items() if _close(got, val, rel_tol)),
                    "check the formula in the text above",
                )
                v = Verdict(False, [f"wrong: {what} = {got:.6g} is not right. Hint: {hint}"])
    if verbose:
        print(v.text())
    return v


def _passed(result) -> bool:
    """A checker's return value as right / not right (bool, None, CheckResult, Verdict)."""
    if isinstance(result, str):
        return result.strip().splitlines()[-1].startswith("right")
    return bool(result) and result is not None


def require(check: Callable, *args, **kwargs) -> None:
    """The graded test: run ``check(*args, **kwargs)`` with its printing captured and raise
    AssertionError with the checker's words unless its verdict is right."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = check(*args, **kwargs)
    if not _passed(result):
        said = buf.getvalue().strip() or str(result)
        raise AssertionError(f"not right yet:\n{said}")


def check_choice(
    fn: Callable[[], str],
    want: str,
    choices: Mapping[str, str],
    verbose: bool = True,
) -> Verdict:
    """``fn()`` returns one word of ``choices`` ({word: why it is wrong, or why right for want})."""
    try:
        got = fn()
    except NotImplementedError:
        v = not_attempted()
    except Exception as e:  # noqa: BLE001 - a student's error is reported, not raised
        v = Verdict(False, [f"wrong: your function raised {type(e).__name__}: {e}"])
    else:
        word = str(got).strip().strip("'\"").lower()
        if word not in choices:
            v = Verdict(False, [f"wrong: answer one of {sorted(choices)}, not {got!r}"])
        elif word == want:
            v = Verdict(True, [f"right: {word!r}: {choices[word]}"])
        else:
            v = Verdict(False, [f"wrong: {word!r}. Hint: {choices[word]}"])
    if verbose:
        print(v.text())
    return v


def check_cases(
    fn: Callable,
    cases: list[tuple[str, tuple, object]],
    explain: Callable[[object, object, tuple], str | None],
    reference: str = "",
    then: tuple[str, Callable[[], Verdict]] | None = None,
    verbose: bool = True,
) -> Verdict:
    """Call ``fn(*args)`` on every ``(label, args, want)`` case until one is wrong.

    ``explain(got, want, args)``: None when ``got`` is right, else the hint. ``reference``: shown
    beside "not attempted yet". ``then = (name, check)``: a second verdict (the interpretation of
    an experiment) asked once every case is right; the exercise is right when both are."""
    lines: list[str] = []
    for label, args, want in cases:
        try:
            got = fn(*args)
        except NotImplementedError:
            v = not_attempted(reference)
            break
        except Exception as e:  # noqa: BLE001 - a student's error is reported, not raised
            v = Verdict(False, lines + [f"wrong: {label} raised {type(e).__name__}: {e}"])
            break
        hint = explain(got, want, args)
        if hint:
            v = Verdict(False, lines + [f"wrong for {label}: {got!r}. Hint: {hint}"])
            break
        lines.append(f"{label}: right")
    else:
        v = Verdict(True, lines)
        if then is not None:
            name, check = then
            c = check()
            v = Verdict(c.passed if c.attempted else False, lines + [f"{name}: {c.text()}"])
    if verbose:
        print(v.text())
    return v
