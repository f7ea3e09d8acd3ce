"""Method registry: name -> Method subclass. Later papers add their families here."""
from __future__ import annotations

from ..utils import check_choice
from .base import ClientUpdates, Method, RoundLog, RunContext, weighted_average
from .fedavg import FedAvg, FedProx

REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    REGISTRY[cls.name] = cls
    return cls


for _cls in (FedAvg, FedProx):
    register(_cls)


def get(name: str) -> type[Method]:
    _load_optional()
    check_choice("method", name, sorted(REGISTRY))
    return REGISTRY[name]


def names() -> list[str]:
    _load_optional()
    return sorted(REGISTRY)


def _load_optional():
    """Method families in their own modules register themselves on import."""
    import importlib
    for mod in ("stc", "staleness", "staleness_gi"):
        try:
            importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":
                raise


__all__ = ["ClientUpdates", "Method", "RoundLog", "RunContext", "weighted_average", "FedAvg", "FedProx",
           "register", "get", "names", "REGISTRY"]
