"""Run folders keyed by the config's hash, atomic writes, checkpoints.

A run folder holds config.json, history.csv, checkpoint.pt (while running) and DONE (when
finished). Re-running an unchanged config loads the folder instead of retraining; an
interrupted run resumes from checkpoint.pt."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .paths import cache_dir


def default_root() -> Path:
    """The run cache: $FLKIT_RUNS, else $FLKIT_RUNS_DIR/cache, else runs/cache at the project
    root; never relative to the working directory (see :mod:`flkit.paths`)."""
    return cache_dir()


def config_hash(config: Mapping[str, Any], length: int = 12) -> str:
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def run_dir(root: str | os.PathLike | None, config: Mapping[str, Any], prefix: str = "") -> Path:
    root = Path(root) if root is not None else default_root()
    name = f"{prefix}-{config_hash(config)}" if prefix else config_hash(config)
    return root / name


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) atomically: readers see the old file or the new one, never a part."""

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    _atomic(Path(path), write)


def save_json(path, obj) -> None:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True, default=str)

    _atomic(Path(path), write)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def save_frame(path, frame: pd.DataFrame) -> None:
    _atomic(Path(path), lambda tmp: frame.to_csv(tmp, index=False))


def save_torch(path, obj) -> None:
    _atomic(Path(path), lambda tmp: torch.save(obj, tmp))


def load_torch(path, device="cpu"):
    return torch.load(path, map_location=device, weights_only=False)


def mark_done(folder: Path) -> None:
    save_json(Path(folder) / "DONE", {"done": True})


def is_done(folder: Path) -> bool:
    return (Path(folder) / "DONE").exists()
