"""Method hyperparameters: each method declares its own in a frozen dataclass, every field with its
default and what it accepts, and one shared check refuses anything else before any work.

    @register
    class FedProx(FedAvg):
        @dataclass(frozen=True)
        class Params(FedAvg.Params):
            mu: float = real(0.01, low=0)         # proximal coefficient, finite and >= 0

        def local_hooks(self, starts):
            return {"extra_loss": proximal_loss(self.hp.mu)}

A dataclass rather than keyword arguments of ``__init__``: a family shares and extends its
parameters by inheritance (FedDP is FedDIP's parameters with ``lambda_max`` 0), the accepted names
and ranges are known without building a method (``RunConfig`` checks ``method_params``, and so
``flkit run --param``, before any data is loaded), and the values travel as one frozen object
(``method.hp``), never as loose attributes.

The run configuration keeps the plain dict the user gave (``RunConfig.method_params``), so the
cache key of a run is the same whatever defaults a method fills in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..utils import FlkitError

__all__ = [
    "Hyperparameters",
    "LearningRateDecay",
    "real",
    "integer",
    "choice",
    "flag",
    "anything",
]


def _interval(low, high, low_open: bool, high_open: bool) -> str:
    lo = "(-inf" if low is None else ("(" if low_open else "[") + str(low)
    hi = "inf)" if high is None else str(high) + (")" if high_open else "]")
    return f"{lo}, {hi}"


def _field(default, **rule) -> Any:
    return dataclasses.field(default=default, metadata={"rule": rule})


def real(default, low=None, high=None, *, low_open=False, high_open=False, optional=False):
    """A finite real number in the interval (bounds None = unbounded; optional: None allowed)."""
    return _field(
        default,
        kind="real",
        low=low,
        high=high,
        low_open=low_open,
        high_open=high_open,
        optional=optional,
    )


def integer(default, low=None, high=None, *, optional=False):
    """A whole number in [low, high] (an int, or a float with no fractional part, kept as int)."""
    return _field(default, kind="integer", low=low, high=high, optional=optional)


def choice(default, choices):
    """One of ``choices``."""
    return _field(default, kind="choice", choices=tuple(choices))


def flag(default: bool):
    """True or False."""
    return _field(default, kind="flag")


def anything(default=None):
    """Checked where it is used (e.g. a list of layer names the model must hold)."""
    return _field(default, kind="any")


def check_value(name: str, value, rule: dict):
    """The shared check: FlkitError naming the value and what is accepted, else the value as the
    method uses it (reals as float, whole numbers as int)."""
    kind = rule.get("kind", "any")
    if kind == "any" or (value is None and rule.get("optional")):
        return value
    if kind == "choice":
        if value not in rule["choices"]:
            raise FlkitError(
                f"unknown {name} {value!r}; accepted: {', '.join(map(str, rule['choices']))}"
            )
        return value
    if kind == "flag":
        if not isinstance(value, bool):
            raise FlkitError(f"{name}={value!r} must be true or false")
        return value
    low, high = rule.get("low"), rule.get("high")
    low_open, high_open = rule.get("low_open", False), rule.get("high_open", False)
    interval = _interval(low, high, low_open, high_open)
    none = " or None" if rule.get("optional") else ""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if kind == "integer":
        if not number or not math.isfinite(value) or int(value) != value:
            raise FlkitError(f"{name}={value!r} must be a whole number in {interval}{none}")
        value = int(value)
    else:
        if not number or not math.isfinite(value):
            raise FlkitError(
                f"{name}={value!r} must be a finite number in the accepted range {interval}{none}"
            )
        value = float(value)
    ok = True
    if low is not None:
        ok &= value > low if low_open else value >= low
    if high is not None:
        ok &= value < high if high_open else value <= high
    if not ok:
        raise FlkitError(f"{name}={value!r} is outside the accepted range {interval}")
    return value


@dataclass(frozen=True)
class Hyperparameters:
    """No hyperparameters. A method's ``Params`` subclasses this (or its parent method's Params)
    and declares each field with :func:`real`, :func:`integer`, :func:`choice`, :func:`flag` or
    :func:`anything`."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = check_value(f.name, getattr(self, f.name), f.metadata.get("rule", {}))
            object.__setattr__(self, f.name, value)

    @classmethod
    def names(cls) -> list[str]:
        return sorted(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls, method: str, given: Mapping[str, Any]):
        """The checked hyperparameters from the user's ``given`` (defaults fill the rest);
        FlkitError for a name the method does not take, listing the ones it does."""
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise FlkitError(
                f"unknown parameter(s) {unknown} for method {method!r}; "
                f"accepted: {cls.names() or 'none'}"
            )
        return cls(**given)


@dataclass(frozen=True)
class LearningRateDecay(Hyperparameters):
    """Local learning rate lr * lr_decay^(round - 1), constant inside a round (1: constant)."""

    lr_decay: float = real(1.0, 0.0, 1.0, low_open=True)
