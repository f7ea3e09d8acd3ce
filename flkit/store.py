"""Run folders keyed by the config's hash, atomic writes, checkpoints, manifests.

A run folder holds config.json, history.csv, checkpoint.pt with its checksum in checkpoint.json
(while running), and DONE and MANIFEST.json (when finished). Re-running an unchanged config loads
the folder instead of retraining; an interrupted run resumes from checkpoint.pt.

The manifest is written last, atomically: the number of history rows and a SHA-256 checksum of
every file of the finished run. :func:`check_finished` compares a folder with it before the run
is served, so a file changed, truncated or deleted afterwards is found, not loaded. A finished
folder without a manifest (DONE alone: written before manifests existed, or its manifest
deleted) is never served: it is trained again. Nothing it holds can be checked, since a file
that reads and has the right row count may still hold other numbers, and checking it against
results recomputed from its config would cost the run itself; retraining costs the same and
writes a sealed folder whose numbers are the run's own (a run is deterministic: resumed or not,
it writes the same history).

A checkpoint records the run it belongs to (its folder's name: the method and the hash of the
run's cache key, which holds the config, the thread count and the data copy) and is resumed only
in that run's folder (:func:`check_checkpoint_threads`): one copied or moved from another run,
or written before checkpoints recorded their run, is refused with the path to delete."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # pandas is imported where a frame is read: a run needs it only at its end
    import pandas as pd

from .paths import cache_dir
from .utils import FlkitError


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


class WriteError(FlkitError, OSError):
    """A file could not be written (read-only folder, full disk, a file where a folder should
    be): the message names the path and what to do. An OSError too, so that callers that
    tolerate a failed write (a best-effort record) still do."""


#: what went wrong, by the errno of a failed write (EDQUOT is missing on some systems)
_ADVICE = {
    errno.EACCES: "the folder is not writable for this user",
    errno.EPERM: "the folder is not writable for this user",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the disk is full",
    getattr(errno, "EDQUOT", errno.ENOSPC): "the disk is full",
    errno.ENOTDIR: "a file stands where a folder of the path should be",
    errno.EEXIST: "a file stands where a folder of the path should be",
}


def _write_error(path: Path, e: OSError) -> WriteError:
    why = _ADVICE.get(e.errno, e.strerror or str(e))
    return WriteError(
        f"cannot write {path} ({why}: {e.strerror or e}); make room or make it writable, or "
        "point flkit elsewhere: $FLKIT_RUNS for the run cache, $FLKIT_RUNS_DIR for results, "
        "--out for a command's output. A run stopped here resumes from its last checkpoint"
    )


def _atomic(path: Path, write) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
        os.close(fd)
    except OSError as e:
        raise _write_error(path, e) from None
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise _write_error(path, e) from None
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
    """torch.save through an open file: given a path, torch names the archive's root folder after
    the file, here a random temporary name, so two saves of the same tensors differed in bytes."""

    def write(tmp):
        with open(tmp, "wb") as f:
            torch.save(obj, f)

    _atomic(Path(path), write)


def load_torch(path, device="cpu"):
    return torch.load(path, map_location=device, weights_only=False)


MANIFEST = "MANIFEST.json"
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_SUM = "checkpoint.json"


def file_digest(path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(folder: Path, files, rows: int) -> None:
    """Seal a finished run: MANIFEST.json, written last and atomically, with the history's row
    count and the checksum of each of ``files`` (names in ``folder``)."""
    folder = Path(folder)
    digests = {name: file_digest(folder / name) for name in files}
    save_json(folder / MANIFEST, {"rows": int(rows), "files": digests})


def check_finished(folder: Path, rows: int | None = None, files=()) -> str:
    """What is wrong with the finished run in ``folder`` ("" when nothing is): no manifest, a
    manifest that does not list every one of ``files``, a file missing or not matching the
    manifest's checksum, a row count other than the manifest's (or ``rows``). A folder without a
    manifest is never whole: see the module's docstring for why it is trained again."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.exists():
        return (
            f"it has no {MANIFEST} (written before manifests existed, or the manifest was "
            "deleted), so nothing it holds can be checked"
        )
    try:
        manifest = load_json(path)
        listed, count = dict(manifest["files"]), int(manifest["rows"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{MANIFEST} cannot be read ({type(e).__name__})"
    unlisted = [name for name in files if name not in listed]
    if unlisted:
        return f"{MANIFEST} does not list {', '.join(unlisted)}"
    for name, digest in listed.items():
        if not (folder / name).is_file():
            return f"{name} is missing"
        if file_digest(folder / name) != digest:
            return f"{name} does not match its checksum in {MANIFEST} (changed or truncated)"
    if rows is not None and count != rows:
        return f"{MANIFEST} records {count} history rows, the config asks for {rows}"
    return ""


def discard_finished(folder: Path, files) -> None:
    """Remove a damaged finished run's files (not its checkpoint) so that it trains again."""
    for name in (MANIFEST, "DONE", *files):
        (Path(folder) / name).unlink(missing_ok=True)


def save_checkpoint(folder: Path, obj, round_: int) -> None:
    """checkpoint.pt, then its checksum in checkpoint.json (a checkpoint whose checksum does not
    match is never resumed from). Both record the run, ``folder``'s name, under ``"run"``."""
    folder = Path(folder)
    save_torch(folder / CHECKPOINT, {**obj, "run": folder.name})
    save_json(
        folder / CHECKPOINT_SUM,
        {"round": round_, "run": folder.name, "sha256": file_digest(folder / CHECKPOINT)},
    )


def load_checkpoint(folder: Path, device="cpu"):
    """(the checkpoint, "") when checkpoint.pt matches its checksum and loads, else (None, what is
    wrong); (None, "") when there is none."""
    folder = Path(folder)
    ckpt = folder / CHECKPOINT
    if not ckpt.exists():
        return None, ""
    try:
        recorded = load_json(folder / CHECKPOINT_SUM)
        if file_digest(ckpt) != recorded["sha256"]:
            return None, f"{CHECKPOINT} does not match its checksum in {CHECKPOINT_SUM}"
        saved = load_torch(ckpt, device)
        if saved["round"] != recorded["round"] or len(saved["rows"]) != saved["round"]:
            return None, f"{CHECKPOINT} is inconsistent (round and rows differ)"
    except Exception as e:  # noqa: BLE001 - any reader's failure means a damaged checkpoint
        return None, f"{CHECKPOINT} cannot be read ({type(e).__name__}: {str(e)[:80]})"
    return saved, ""


def check_checkpoint_threads(folder: Path, saved: dict, threads: int | None) -> None:
    """Refuse to resume a checkpoint that is not this run's: a CPU checkpoint under another
    thread count (``threads``; None: a GPU run), whose later rounds would be computed with other
    sums than the rounds before, a history no single run writes; then any checkpoint that does
    not record this folder's run (copied or moved from another run's folder, whose config or
    data differ, or written before checkpoints recorded their run). The checkpoint is kept: the
    error says which file to delete to train from round 1."""
    _check_thread_count(folder, saved, threads)
    folder = Path(folder)
    run = saved.get("run")
    if run == folder.name:
        return
    whose = f"run {run}" if run else "no run (written before checkpoints recorded their run)"
    raise FlkitError(
        f"run folder {folder} holds a checkpoint (round {saved['round']}) that records {whose}, "
        f"not this folder's run {folder.name}; it is not resumed from, since its rounds were "
        f"not computed with this run's config, threads and data. Accepted: a checkpoint this "
        f"run wrote; delete {folder / CHECKPOINT} to train from round 1"
    )


def _check_thread_count(folder: Path, saved: dict, threads: int | None) -> None:
    if threads is None or saved.get("threads") == threads:
        return
    was = saved.get("threads")
    was_text = f"{was} torch threads" if was is not None else "an unrecorded number of threads"
    raise FlkitError(
        f"run folder {folder} holds a checkpoint (round {saved['round']}) computed with "
        f"{was_text}, but this process computes with {threads}; it is not resumed from. "
        f"Accepted: resume with {was if was is not None else 'its'} threads "
        "(torch.set_num_threads or FLKIT_THREADS), or delete "
        f"{folder / CHECKPOINT} to train from round 1"
    )


def remove_checkpoint(folder: Path) -> None:
    for name in (CHECKPOINT, CHECKPOINT_SUM):
        (Path(folder) / name).unlink(missing_ok=True)


def mark_done(folder: Path) -> None:
    save_json(Path(folder) / "DONE", {"done": True})


def is_done(folder: Path) -> bool:
    return (Path(folder) / "DONE").exists()
