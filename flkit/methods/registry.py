"""The method registry: name -> Method subclass.

Every family module decorates its classes with :func:`register`. :data:`FAMILIES` names the
family module of every built-in method, so the names are known (``flkit run --list``, error
messages) without importing any family, and :func:`get` imports only the family of the method
asked for: a run pays for one family's imports, not all of them. This module imports no family
at import time, so families and the registry never import each other.
"""

from __future__ import annotations

import importlib

from ..utils import FlkitError, check_choice
from .base import Method

__all__ = ["REGISTRY", "FAMILIES", "register", "get", "names"]

REGISTRY: dict[str, type[Method]] = {}

# built-in method name -> the module of flkit.methods that registers it (a test checks that this
# table and what the family modules register are the same)
FAMILIES: dict[str, str] = {
    "fedavg": "fedavg",
    "fedprox": "fedavg",
    "stc": "stc",
    "fedfv": "stc",
    "stc_pa": "stc",
    "feddip": "pruning",
    "feddp": "pruning",
    "dpf": "pruning",
    "feddip_prox": "pruning",
    "snip": "pruning_static",
    "prunetrain": "pruning_static",
    "prunefl": "pruning_dst",
    "feddst": "pruning_dst",
    "hidenseek": "hidenseek",
    "fedavg_split": "hidenseek",
    "bnnavg": "hidenseek",
    "fedmask": "fedmask",
    "signed": "fedmask",
    "unstale": "staleness",
    "unweighted": "staleness",
    "weighted": "staleness",
    "first_order": "staleness",
    "asyn_tiers": "staleness",
    "w_pred": "staleness",
    "gi_staleness": "staleness_gi",
}


def family_module(name: str) -> str:
    """The module that registers the built-in method ``name``."""
    return f"{__package__}.{FAMILIES[name]}"


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` runnable by its ``name`` (``RunConfig(method=cls.name)``)."""
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise FlkitError(f"register expects a Method subclass, got {cls!r}")
    if cls.name in FAMILIES and cls.__module__ != family_module(cls.name):
        importlib.import_module(family_module(cls.name))  # the built-in holder of the name
    other = REGISTRY.get(cls.name)
    if other is not None and other is not cls:
        raise FlkitError(
            f"method name {cls.name!r} is taken by {other.__module__}.{other.__name__}; "
            f"choose another name for {cls.__module__}.{cls.__name__}"
        )
    REGISTRY[cls.name] = cls
    return cls


def get(name: str) -> type[Method]:
    """The Method class registered as ``name`` (FlkitError listing the names otherwise)."""
    check_choice("method", name, names())
    if name not in REGISTRY:
        importlib.import_module(family_module(name))
    return REGISTRY[name]


def names() -> list[str]:
    return sorted({*FAMILIES, *REGISTRY})
