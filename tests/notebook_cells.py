"""The instructor notebooks as the course tests read them: each numbered notebook by name, its
cells, a cell's source as one string and a cell's nbgrader metadata."""

from __future__ import annotations

import json
from pathlib import Path

from flkit.reproduce import discover

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = discover(ROOT / "notebooks")


def cells_of(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source_of(cell: dict) -> str:
    """A cell's source, stored as one string or as a list of lines."""
    s = cell["source"]
    return s if isinstance(s, str) else "".join(s)


def nbgrader_of(cell: dict) -> dict:
    """A cell's nbgrader metadata; {} for a cell nbgrader does not grade."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}
