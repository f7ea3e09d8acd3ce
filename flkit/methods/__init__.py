"""Federated methods, one family per module, each registered by name.

Adding a family is one line here: ``from . import <family>``. The family module subclasses
:class:`Method` (from ``.base``), declares each method's hyperparameters as a ``Params`` dataclass
(``.hyperparameters``) and its server state as a ``State`` dataclass, decorates every runnable
class with ``@register`` (from ``.registry``) and imports nothing from this package's
``__init__``.
"""

from __future__ import annotations

# each family registers its methods on import
from . import (  # noqa: F401
    fedavg,
    fedmask,
    hidenseek,
    personal,
    pruning,
    pruning_dst,
    pruning_static,
    staleness,
    staleness_gi,
    stc,
)
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
from .registry import REGISTRY, get, names, register

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
]
