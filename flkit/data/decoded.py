"""Decoded dataset copies kept on disk, so that a new process neither decodes nor hashes again.

Decoding a copy (gunzipping MNIST's IDX files, unpickling CIFAR batches, reading SVHN's .mat
files) and hashing its content for its identity (:mod:`flkit.data.provenance`) cost most of a
data load, and both depend only on the files read. So the first load of a copy writes an entry
under :func:`flkit.paths.machine_dir` ``/data``: the decoded arrays (``.npy``) and the copy's
content facts (sizes and checksums). A copy in the ``.npz`` layout is stored arrays already; its
entry holds the facts alone.

An entry is named by the signature of the files read (resolved path, size, modification and
change times, inode of each; :func:`flkit.data.files.signature`): a file rewritten, replaced or
touched gets a new signature, so a stale entry is never read, and writing the new entry removes
the stale one. Writers never share a half-written entry: each writes into a private temporary
folder and renames it into place, and when another writer's entry got there first, the loser
discards its own. Anything that fails here (a read-only or full disk) only costs the saving: the
copy is decoded as if there were no cache.

An entry is trusted no more than a run folder is. Its ``entry.json`` records, per array file, its
size and the SHA-256 of the array it holds, and a seal (a SHA-256 of the rest of the entry). A
read checks the seal and every file's size, and hashes each array it reads unless this process
already hashed that very file (same size, modification and change times, inode): once per
process or per file change. The array returned is the one hashed (read into memory, not mapped,
so a later write to the file cannot change it). A damaged entry (an array edited in place, a
file truncated or missing, an ``entry.json`` changed) is reported with a warning naming it,
removed, and rebuilt from the source files by the caller; its arrays are never served, so they
never reach a run under the clean copy's content key. :func:`check` is the full check of
``flkit data verify``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ..paths import machine_dir

#: bumped when the entry layout or the content facts change (older entries are then ignored);
#: part of an entry's name, so an entry of another format is never in the way of a new one
FORMAT = 2
#: layouts whose files are the arrays already: their entries hold the facts, not the arrays
STORED_AS_ARRAYS = ("npz",)
#: copies whose arrays total fewer bytes decode about as fast as an entry is read: facts only
MIN_ARRAY_BYTES = 1 << 20
#: a temporary folder this old belongs to a writer that died (a live one takes seconds)
STALE_TMP_SECONDS = 24 * 3600

__all__ = [
    "folder",
    "entry_path",
    "get",
    "put",
    "check",
    "remove",
    "array_sha256",
    "FORMAT",
    "MIN_ARRAY_BYTES",
]

#: the array files this process hashed and found as recorded: {path: (stat, sha256)}
_HASHED: dict[str, tuple] = {}


def folder() -> Path:
    """Where the entries live: ``machine_dir() / "data"``."""
    return machine_dir() / "data"


def entry_path(name: str, signature: tuple) -> Path:
    """The entry of dataset ``name`` read from files with this signature."""
    key = json.dumps([name, signature, FORMAT])
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return folder() / f"{name}-{digest}"


def _paths(signature) -> list[str]:
    return [str(s[0]) for s in signature]


def array_sha256(a: np.ndarray) -> str:
    """SHA-256 of one array: its dtype and shape, then its bytes."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}\n".encode())
    plain = a.dtype.kind in "OUSV" or a.ndim == 0 or a.size == 0
    h.update(a.tobytes() if plain else memoryview(a).cast("B"))
    return h.hexdigest()


def _seal(entry: dict) -> str:
    """SHA-256 of everything an entry records but its seal."""
    body = {k: v for k, v in entry.items() if k != "seal"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _stat(path: Path) -> tuple:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class _DamagedError(Exception):
    """What is wrong with an entry (its message)."""


def _read_entry(where: Path, signature) -> dict | None:
    """The entry's record; None when there is none or it is of another format; _DamagedError when
    it does not match its seal or names no such files."""
    try:
        text = (where / "entry.json").read_text()
    except OSError:
        return None
    try:
        entry = json.loads(text)
    except ValueError:
        raise _DamagedError("entry.json is not valid JSON") from None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return None
    if entry.get("seal") != _seal(entry):
        raise _DamagedError("entry.json does not match its seal (changed after it was written)")
    if entry.get("signature") != json.loads(json.dumps(signature)):
        raise _DamagedError("entry.json names other source files than its folder's name")
    return entry


def _read_array(where: Path, name: str, record: dict, rehash: bool) -> np.ndarray:
    """The array in ``name``.npy, checked against its record (size, then the SHA-256 of what
    was read, unless this process hashed this unchanged file before and ``rehash`` is False)."""
    path = where / f"{name}.npy"
    try:
        before = _stat(path)
    except OSError:
        raise _DamagedError(f"{name}.npy is missing") from None
    if before[0] != record["bytes"]:
        raise _DamagedError(f"{name}.npy holds {before[0]} bytes, {record['bytes']} were written")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise _DamagedError(f"{name}.npy cannot be read ({e})") from None
    key = str(path)
    if not rehash and _HASHED.get(key) == (before, record["sha256"]):
        return array
    got = array_sha256(array)
    if got != record["sha256"]:
        _HASHED.pop(key, None)
        raise _DamagedError(f"{name}.npy does not match its SHA-256 (changed after it was written)")
    try:
        if _stat(path) == before:  # unchanged while it was read: what was hashed is the file
            _HASHED[key] = (before, record["sha256"])
    except OSError:
        pass
    return array


def _load(where: Path, signature, rehash: bool):
    """(arrays or None, facts) of a whole entry; None if there is none; _DamagedError."""
    entry = _read_entry(where, signature)
    if entry is None:
        return None
    records = entry.get("arrays") or {}
    arrays = {k: _read_array(where, k, r, rehash) for k, r in sorted(records.items())}
    return (arrays or None), entry["facts"]


def get(name: str, signature: tuple):
    """(arrays or None, facts) of the entry for these files, or None when there is none. A
    damaged entry is reported (a warning naming it and what is wrong), removed, and None
    returned: the caller decodes the source files again and writes a new entry."""
    where = entry_path(name, signature)
    try:
        return _load(where, signature, rehash=False)
    except _DamagedError as e:
        source = ", ".join(_paths(signature))
        warnings.warn(
            f"machine cache entry {where} is damaged: {e}; it is removed and rebuilt from {source}",
            stacklevel=3,
        )
        remove(where)
        return None


def check(name: str, signature: tuple, facts: dict | None = None) -> tuple[Path, str] | None:
    """The full check of the entry for these files: (its folder, "" when whole or what is
    wrong), None when there is none. Every array is hashed again; ``facts`` (the content facts
    of the source files, decoded again) are compared with the recorded ones and, for an entry
    holding arrays, with the content of those arrays."""
    from .provenance import content_facts

    where = entry_path(name, signature)
    try:
        got = _load(where, signature, rehash=True)
    except _DamagedError as e:
        return where, str(e)
    if got is None:
        return None
    arrays, recorded = got
    if facts is not None:
        if recorded != facts:
            return where, "its content facts differ from those of the source files"
        if arrays is not None and content_facts(name, dict(arrays)) != facts:
            return where, "its arrays differ from the decoded source files"
    return where, ""


def remove(where: Path) -> None:
    """Remove an entry (a damaged one: it is rebuilt by the next load)."""
    for path in Path(where).glob("*.npy"):
        _HASHED.pop(str(path), None)
    shutil.rmtree(where, ignore_errors=True)


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
        records = {}
        if store_arrays:
            for k, v in sorted(keep.items()):
                a = np.asarray(v)
                np.save(tmp / f"{k}.npy", a, allow_pickle=False)
                size = (tmp / f"{k}.npy").stat().st_size
                records[k] = {"bytes": size, "sha256": array_sha256(a)}
        entry = {
            "format": FORMAT,
            "dataset": name,
            "kind": kind,
            "signature": json.loads(json.dumps(signature)),
            "facts": facts,
            "arrays": records,
        }
        entry["seal"] = _seal(entry)
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
