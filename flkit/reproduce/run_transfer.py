"""Run-cache folders carried between machines that share no file system: a run the pool trained
on a Ray cluster's node comes back into this machine's run cache, and the runs a notebook reads go
out to the cache of the node its task runs on.

A folder travels as ``{path relative to the cache root: bytes}`` (what Ray ships), as the
notebooks' own files do (:mod:`.ray_executor`). It is written under a hidden temporary name beside
its place and then renamed into it, so that no reader ever sees half a folder; the same run gives
the same files, so a folder already held whole is kept as it is."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

__all__ = ["files_under", "folder_files", "manifest", "holds", "install"]


def _files(folder: Path, hidden: bool = False):
    """The files below ``folder``; without ``hidden``, none under a hidden name (a cache
    writer's temporary files)."""
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and (hidden or not any(part.startswith(".") for part in rel.parts)):
            yield p


def files_under(folder, hidden: bool = False) -> dict[str, bytes]:
    """Every file below ``folder`` (``hidden``: those under hidden names too), keyed by its path
    relative to ``folder``: what a Ray task sends back of a folder of its own."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in _files(folder, hidden)}


def folder_files(root, folders) -> dict[str, bytes]:
    """Every finished file of each of ``folders`` (folders directly under ``root``; one that
    does not exist gives nothing), keyed by its path relative to ``root``."""
    out = {}
    for folder in map(Path, folders):
        if folder.is_dir():
            rel = folder.relative_to(root).as_posix()
            out.update({f"{rel}/{name}": data for name, data in files_under(folder).items()})
    return out


def manifest(files: dict[str, bytes]) -> dict[str, int]:
    """Each file's size: what :func:`holds` compares."""
    return {rel: len(data) for rel, data in files.items()}


def holds(root, sizes: dict[str, int]) -> bool:
    """Whether ``root`` holds every file of ``sizes`` at that size, and the folders no other."""
    root = Path(root)
    folders = {rel.split("/", 1)[0] for rel in sizes}
    found = {}
    for name in folders:
        folder = root / name
        if not folder.is_dir():
            return False
        found.update({p.relative_to(root).as_posix(): p.stat().st_size for p in _files(folder)})
    return found == sizes


def install(root, files: dict[str, bytes]) -> list[str]:
    """Write ``files`` (as :func:`folder_files` gives them) under ``root``: each folder whole in
    its place, replacing what was there (a shorter run's checkpoint, say). Returns the folders'
    names. A path that would leave ``root`` is refused before anything is written."""
    root = Path(root)
    by_folder: dict[str, dict[str, bytes]] = {}
    for rel, data in files.items():
        parts = Path(rel).parts
        if len(parts) < 2 or any(p in ("", ".", "..") for p in parts) or Path(rel).is_absolute():
            raise ValueError(f"run-cache path {rel!r} is not FOLDER/FILE inside the cache")
        by_folder.setdefault(parts[0], {})[rel] = data
    root.mkdir(parents=True, exist_ok=True)
    for name, group in by_folder.items():
        token = uuid.uuid4().hex[:8]
        incoming = root / f".incoming-{name}-{token}"
        for rel, data in group.items():
            dest = incoming / Path(rel).relative_to(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        place, old = root / name, root / f".old-{name}-{token}"
        if place.exists():
            os.replace(place, old)
        os.replace(incoming, place)
        shutil.rmtree(old, ignore_errors=True)
    return sorted(by_folder)
