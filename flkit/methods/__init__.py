"""Federated methods, one family per module, each registered by name.

Adding a family is one line per method in ``registry.FAMILIES`` (name -> family module): the
names are listed from there, and a family is imported only when one of its methods is asked for
(``get``), or when its module is named (``flkit.methods.stc``). The family module subclasses
:class:`Method` (from ``.base``), declares each method's hyperparameters as a ``Params`` dataclass
(``.hyperparameters``) and its server state as a ``State`` dataclass, decorates every runnable
class with ``@register`` (from ``.registry``) and imports nothing from this package's
``__init__``.
"""

from __future__ import annotations

import importlib

from .base import (
    ClientUpdates,
    Method,
    RoundLog,
    RunContext,
    ServerState,
    sample_clients,
    weighted_average,
)
from .fedavg import FedAvg, FedProx
from .hyperparameters import (
    Hyperparameters,
    LearningRateDecay,
    anything,
    choice,
    flag,
    integer,
    real,
)
from .registry import FAMILIES, REGISTRY, get, names, register

__all__ = [
    "ClientUpdates",
    "Method",
    "RoundLog",
    "RunContext",
    "ServerState",
    "Hyperparameters",
    "LearningRateDecay",
    "real",
    "integer",
    "choice",
    "flag",
    "anything",
    "sample_clients",
    "weighted_average",
    "FedAvg",
    "FedProx",
    "register",
    "get",
    "names",
    "REGISTRY",
    "FAMILIES",
]

# modules of this package that are imported on first use (families; `personal` is the base of
# two of them)
_LAZY = {*FAMILIES.values(), "personal"}


def __getattr__(name: str):
    """``flkit.methods.<family>`` imports that family on first use, as an eager import would
    have made it an attribute."""
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
