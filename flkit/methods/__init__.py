"""Federated methods, one family per module, each registered by name.

Adding a family is one line here: ``from . import <family>``. The family module subclasses
:class:`Method` (from ``.base``), decorates every runnable class with ``@register`` (from
``.registry``) and imports nothing from this package's ``__init__``.
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
from .base import ClientUpdates, Method, RoundLog, RunContext, weighted_average
from .fedavg import FedAvg, FedProx
from .registry import REGISTRY, get, names, register

__all__ = [
    "ClientUpdates",
    "Method",
    "RoundLog",
    "RunContext",
    "weighted_average",
    "FedAvg",
    "FedProx",
    "register",
    "get",
    "names",
    "REGISTRY",
]
