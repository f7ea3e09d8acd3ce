"""Decoded dataset copies kept on disk, so that a new process neither decodes nor hashes again.

Decoding a copy (gunzipping MNIST's IDX files, unpickling CIFAR batches, reading SVHN's .mat
files) and hashing its content for its identity (:mod:`flkit.data.provenance`) cost most of a
data load, and both depend only on the files read. So the first load of a copy writes an entry
under :func:`flkit.paths.machine_dir` ``/data``: the decoded arrays (``.npy``, memory-mapped when
read back) and the copy's content facts (sizes and checksums). A copy in the ``.npz`` layout is
stored arrays already; its entry holds the facts alone.

An entry is named by the signature of the files read (resolved path, size, modification and
change times, inode of each; :func:`flkit.data.files.signature`): a file rewritten, replaced or
touched gets a new signature, so a stale entry is never read, and writing the new entry removes
the stale one. Writers never share a half-written entry: each writes into a private temporary
folder and renames it into place, and when another writer's entry got there first, the loser
discards its own. Anything that fails here (a read-only or full disk) only costs the saving: the
copy is decoded as if there were no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ..paths import machine_dir

#: bumped when the entry layout or the content facts change (older entries are then ignored)
FORMAT = 1
#: layouts whose files are the arrays already: their entries hold the facts, not the arrays
STORED_AS_ARRAYS = ("npz",)
#: copies whose arrays total fewer bytes decode about as fast as an entry is read: facts only
MIN_ARRAY_BYTES = 1 << 20
#: a temporary folder this old belongs to a writer that died (a live one takes seconds)
STALE_TMP_SECONDS = 24 * 3600

__all__ = ["folder", "entry_path", "get", "put", "FORMAT", "MIN_ARRAY_BYTES"]


def folder() -> Path:
    """Where the entries live: ``machine_dir() / "data"``."""
    return machine_dir() / "data"


def entry_path(name: str, signature: tuple) -> Path:
    """The entry of dataset ``name`` read from files with this signature."""
    digest = hashlib.sha256(json.dumps([name, signature]).encode()).hexdigest()[:20]
    return folder() / f"{name}-{digest}"


def _paths(signature) -> list[str]:
    return [str(s[0]) for s in signature]


def get(name: str, signature: tuple):
    """(arrays or None, facts) of the entry for these files, or None when there is none."""
    where = entry_path(name, signature)
    try:
        entry = json.loads((where / "entry.json").read_text())
    except (OSError, ValueError):
        return None
    if entry.get("format") != FORMAT or entry.get("signature") != json.loads(json.dumps(signature)):
        return None
    if not entry.get("arrays"):
        return None, entry["facts"]
    try:
        arrays = {k: _open(where / f"{k}.npy") for k in entry["arrays"]}
    except (OSError, ValueError):
        return None, entry["facts"]
    return arrays, entry["facts"]


def _open(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:  # an empty array cannot be memory-mapped
        return np.load(path, allow_pickle=False)


def put(name: str, kind: str, signature: tuple, arrays: dict, facts: dict) -> Path | None:
    """Write the entry for these files (arrays kept unless the layout stores them already or the
    copy is small); returns its folder, or None when it could not be written."""
    base = folder()
    final = entry_path(name, signature)
    if (final / "entry.json").is_file():
        return final
    keep = {k: v for k, v in arrays.items() if not k.startswith("_")}
    store_arrays = (
        kind not in STORED_AS_ARRAYS
        and sum(np.asarray(v).nbytes for v in keep.values()) >= MIN_ARRAY_BYTES
    )
    tmp = None
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base))
        if store_arrays:
            for k, v in keep.items():
                np.save(tmp / f"{k}.npy", np.asarray(v), allow_pickle=False)
        entry = {
            "format": FORMAT,
            "dataset": name,
            "kind": kind,
            "signature": signature,
            "facts": facts,
            "arrays": sorted(keep) if store_arrays else [],
        }
        (tmp / "entry.json").write_text(json.dumps(entry, indent=1))
        os.rename(tmp, final)  # atomic; fails when another writer's entry is already there
        tmp = None
    except OSError:
        return None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _remove_stale(name, signature, final)
    return final


def _remove_stale(name: str, signature: tuple, keep: Path) -> None:
    """Remove the entries of earlier versions of the same files (same paths, other signature),
    and temporary folders that a writer killed mid-way left behind a day ago or more."""
    for tmp in folder().glob(f".{name}-*"):
        try:
            if time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            continue
    mine = _paths(signature)
    for other in folder().glob(f"{name}-*"):
        if other == keep:
            continue
        try:
            entry = json.loads((other / "entry.json").read_text())
        except (OSError, ValueError):
            continue
        if _paths(entry.get("signature", [])) == mine:
            shutil.rmtree(other, ignore_errors=True)
