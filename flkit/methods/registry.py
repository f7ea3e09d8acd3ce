"""The method registry: name -> Method subclass.

Every family module decorates its classes with :func:`register`; ``flkit/methods/__init__.py``
imports each family module explicitly, so by the time anyone can call :func:`get` every method is
registered. This module imports no family, so families and the registry never import each other.
"""

from __future__ import annotations

from ..utils import FlkitError, check_choice
from .base import Method

__all__ = ["REGISTRY", "register", "get", "names"]

REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` runnable by its ``name`` (``RunConfig(method=cls.name)``)."""
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise FlkitError(f"register expects a Method subclass, got {cls!r}")
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
    check_choice("method", name, sorted(REGISTRY))
    return REGISTRY[name]


def names() -> list[str]:
    return sorted(REGISTRY)
