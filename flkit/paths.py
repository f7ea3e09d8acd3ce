"""Where the project keeps its runs and data, whatever the working directory.

`make reproduce` runs notebooks inside ``notebooks/``, papermill and ``flkit run`` usually run from
the repository root, JupyterLab from wherever it was started: a path relative to the working
directory would give each its own run cache. So relative locations are anchored at the project
root: the source checkout that holds this package (the folder with ``pyproject.toml`` naming
``flkit``), or the working directory when flkit is installed from a wheel.

- ``runs_dir()``: ``$FLKIT_RUNS_DIR`` else ``<project>/runs`` (notebook results, reports).
- ``cache_dir()``: ``$FLKIT_RUNS`` else ``runs_dir()/cache`` (the run cache).
- ``data_dir()``: ``<project>/data``, the default data root.
- ``machine_dir()``: ``$FLKIT_MACHINE_DIR`` else ``runs_dir()/machine``: what this machine worked
  out once and every run cache reuses (decoded datasets, backend choices).

A relative value in one of those variables is anchored at the project root too.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_RUNS_DIR = "FLKIT_RUNS_DIR"
ENV_CACHE = "FLKIT_RUNS"
ENV_MACHINE = "FLKIT_MACHINE_DIR"
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent

__all__ = ["project_root", "anchored", "runs_dir", "cache_dir", "data_dir", "machine_dir"]


def project_root() -> Path | None:
    """The source checkout holding this package, or None when flkit is installed as a wheel."""
    meta = _PACKAGE_PARENT / "pyproject.toml"
    try:
        text = meta.read_text(encoding="utf-8")
    except OSError:
        return None
    return _PACKAGE_PARENT if 'name = "flkit"' in text else None


def anchored(path: str | os.PathLike) -> Path:
    """``path`` made absolute: a relative one is taken from the project root (else the cwd)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    return (project_root() or Path.cwd()) / p


def runs_dir() -> Path:
    """``$FLKIT_RUNS_DIR``, else ``runs`` at the project root."""
    return anchored(os.environ.get(ENV_RUNS_DIR) or "runs")


def cache_dir() -> Path:
    """``$FLKIT_RUNS``, else ``runs_dir() / "cache"``."""
    env = os.environ.get(ENV_CACHE)
    return anchored(env) if env else runs_dir() / "cache"


def data_dir() -> Path:
    """``data`` at the project root (the default data root)."""
    return anchored("data")


def machine_dir() -> Path:
    """``$FLKIT_MACHINE_DIR``, else ``runs_dir() / "machine"``: decoded datasets and their
    identities (``data/``, :mod:`flkit.data.decoded`) and the measured backend choices
    (``backend-choices.json``, :mod:`flkit.engine.backend`). Beside the run cache, not in it, so a
    fresh run cache (``flkit run --cache DIR``) still starts from them; under ``runs_dir()``, so
    whatever gives a process its own runs folder (the course grader does, per student) gives it
    its own machine folder too."""
    env = os.environ.get(ENV_MACHINE)
    return anchored(env) if env else runs_dir() / "machine"
