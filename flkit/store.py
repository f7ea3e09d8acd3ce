"""Run folders: one run's files in the run cache, named by the hash of its key, written
atomically, checked before they are served; the checkpoint an interrupted run resumes from.

A :class:`RunFolder` is everything a runner does with its folder: is a run finished here
(:attr:`~RunFolder.finished`), is it whole or damaged, and where (:meth:`~RunFolder.damage`: the
file and why), serve it (:meth:`~RunFolder.serve`), resume from its checkpoint
(:meth:`~RunFolder.resume`), begin a run (:meth:`~RunFolder.begin`), write a checkpoint
(:meth:`~RunFolder.checkpoint`), and commit the finished run (:meth:`~RunFolder.commit`). While
it runs, a folder holds its identity (config.json, the key the runner records) and checkpoint.pt
with its checksum in checkpoint.json; once finished, its identity, its result files, DONE and
MANIFEST.json.

The manifest is written last, atomically: the number of history rows, the folder's run (its
name) and a SHA-256 checksum of every file of the finished run. A folder is compared with it
before the run is served, so a file changed, truncated or deleted afterwards is found, not
loaded, and a folder copied or renamed to another run's name is not served as that run. A
finished folder without a manifest (DONE alone: written before manifests existed, or its
manifest deleted) is never served: it is trained again. Nothing it holds can be checked, since a
file that reads and has the right row count may still hold other numbers, and checking it against
results recomputed from its config would cost the run itself; retraining costs the same and
writes a sealed folder whose numbers are the run's own (a run is deterministic: resumed or not,
it writes the same history).

A :class:`Checkpoint` records the run it belongs to (its folder's name: the method and the hash
of the run's cache key, which holds the config, the thread count and the data copy) and is
resumed only in that run's folder: one copied or moved from another run, or written before
checkpoints recorded their run, is refused with the path to delete."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

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
DONE = "DONE"
IDENTITY = "config.json"
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_SUM = "checkpoint.json"

T = TypeVar("T")


def file_digest(path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _canonical(obj) -> str:
    """``obj`` as its JSON file reads back (tuples as lists, keys as strings), in one text."""
    return json.dumps(json.loads(json.dumps(obj, default=str)), sort_keys=True)


@dataclass(frozen=True)
class Damage:
    """What is wrong with a run folder: the file at fault and why (a sentence naming it)."""

    file: str
    reason: str

    def __str__(self) -> str:
        return self.reason


class DamagedRunError(FlkitError):
    """A run folder that is not served: the folder, and its :class:`Damage`."""

    def __init__(self, folder: Path, damage: Damage):
        self.folder, self.damage = Path(folder), damage
        super().__init__(
            f"run folder {folder} is damaged ({damage.reason}); it is not loaded: delete it, or "
            "run its config again (a run trains a damaged folder again)"
        )


class DamagedRunWarning(UserWarning):
    """A damaged run folder found by a runner, which trains it again; ``damage`` says where."""

    def __init__(self, message: str, damage: Damage):
        super().__init__(message)
        self.damage = damage


@dataclass
class Checkpoint:
    """Where an interrupted run resumes: the runner's state after ``round``, the history rows so
    far, every global random state (:mod:`flkit.rng_state`; None: not recorded), the torch thread
    count its rounds were computed with (None: a GPU run) and the run it belongs to (its folder's
    name, set when the folder writes it)."""

    state: Any
    rows: list
    round: int
    rng: dict | None = None
    threads: int | None = None
    run: str = ""

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, saved: Mapping) -> Checkpoint:
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


class RunFolder:
    """One run's folder: ``path``, the ``files`` a finished run holds (checked against its
    manifest), and ``identity``, the key its config.json records (None: the folder has none;
    when given, config.json is one of ``files``, written by :meth:`commit` and compared on
    every read). Constructing one touches no file."""

    def __init__(self, path: str | os.PathLike, files, identity: Mapping | None = None):
        self.path = Path(path)
        self.files = tuple(files)
        self.identity = identity
        if identity is not None and IDENTITY not in self.files:
            raise FlkitError(
                f"files={self.files} for a run folder with an identity; accepted: files that "
                f"include {IDENTITY}, where the identity is written"
            )

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def finished(self) -> bool:
        """Whether a run was committed here, whole or not (:meth:`damage` says which)."""
        return (self.path / DONE).exists() or (self.path / MANIFEST).exists()

    # ------------------------------------------------------------------ finished runs
    def damage(self, rows: int | None = None) -> Damage | None:
        """What is wrong with the finished run here (None: nothing): no manifest, or one that
        cannot be read, seals another folder's run, or does not list every one of the files; no
        DONE; a file missing or not matching its checksum; a row count other than ``rows``; a
        config.json that records another run than this folder's identity."""
        path = self.path / MANIFEST
        if not path.exists():
            why = "written before manifests existed, or the manifest was deleted"
            return Damage(
                MANIFEST, f"it has no {MANIFEST} ({why}), so nothing it holds can be checked"
            )
        try:
            manifest = load_json(path)
            listed, count = dict(manifest["files"]), int(manifest["rows"])
            sealed = manifest.get("run")  # manifests written before they named their run: none
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return Damage(MANIFEST, f"{MANIFEST} cannot be read ({type(e).__name__})")
        if sealed is not None and sealed != self.name:
            return Damage(
                MANIFEST,
                f"{MANIFEST} seals run {sealed}, not this folder's run {self.name} (the folder "
                "was copied or renamed from another run's)",
            )
        if not (self.path / DONE).exists():
            return Damage(DONE, f"{DONE} is missing beside {MANIFEST} (deleted)")
        unlisted = [name for name in self.files if name not in listed]
        if unlisted:
            return Damage(unlisted[0], f"{MANIFEST} does not list {', '.join(unlisted)}")
        for name, digest in listed.items():
            if not (self.path / name).is_file():
                return Damage(name, f"{name} is missing")
            if file_digest(self.path / name) != digest:
                why = f"does not match its checksum in {MANIFEST} (changed or truncated)"
                return Damage(name, f"{name} {why}")
        if rows is not None and count != rows:
            return Damage(MANIFEST, f"{MANIFEST} records {count} history rows, the run has {rows}")
        return self._identity_damage()

    def _identity_damage(self) -> Damage | None:
        if self.identity is None:
            return None
        try:
            held = load_json(self.path / IDENTITY)
        except (OSError, ValueError) as e:
            return Damage(IDENTITY, f"{IDENTITY} cannot be read ({type(e).__name__})")
        if _canonical(held) != _canonical(self.identity):
            return Damage(
                IDENTITY,
                f"{IDENTITY} records another run than this folder's {self.name} (the folder "
                "was copied or renamed from another run's, and sealed again)",
            )
        return None

    def verify(self, rows: int | None = None) -> None:
        """DamagedRunError (the file and why) unless the finished run here is whole."""
        found = self.damage(rows)
        if found is not None:
            raise DamagedRunError(self.path, found)

    def whole(self, rows: int | None = None, repair: bool = True) -> bool:
        """Whether a whole run is finished here (:meth:`damage` finds nothing). A damaged folder
        is reported with a :class:`DamagedRunWarning` naming the file and why, and its finished
        files are removed so that it trains again; with ``repair=False`` it is left as it is and
        nothing is said (a cache that must not change)."""
        if not self.finished:
            return False
        found = self.damage(rows)
        if found is not None:
            self._refuse(found, repair)
        return found is None

    def serve(
        self, reader: Callable[[RunFolder], T], rows: int | None = None, repair: bool = True
    ) -> T | None:
        """``reader(self)`` when a whole run is finished here (:meth:`whole`), else None; a run
        that ``reader`` refuses (a :meth:`damaged` file) is a damaged folder too."""
        if not self.whole(rows, repair):
            return None
        try:
            return reader(self)
        except DamagedRunError as e:
            self._refuse(e.damage, repair)
            return None

    def _refuse(self, found: Damage, repair: bool) -> None:
        if repair:
            self._report(found, "it is trained again")
            self.discard()

    @contextmanager
    def reading(self, name: str) -> Iterator[Path]:
        """The path of file ``name``; whatever fails while it is read (or checked) inside the
        block is a :class:`DamagedRunError` naming it."""
        try:
            yield self.path / name
        except DamagedRunError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever a reader raises, the file is not usable
            raise self.damaged(name, f"{name} cannot be used ({type(e).__name__}: {e})") from e

    def _report(self, found: Damage, action: str) -> None:
        said = f"run folder {self.path} is damaged: {found.reason}; {action}"
        warnings.warn(DamagedRunWarning(said, found), stacklevel=5)  # near the call of the runner

    def damaged(self, name: str, reason: str) -> DamagedRunError:
        """The error a reader raises for file ``name`` of this folder (``reason`` names it)."""
        return DamagedRunError(self.path, Damage(name, reason))

    def discard(self) -> None:
        """Remove a damaged finished run's files (not its checkpoint) so that it trains again."""
        for name in (MANIFEST, DONE, *self.files):
            (self.path / name).unlink(missing_ok=True)

    def begin(self) -> None:
        """Before the run's work: its identity (config.json) written, so that a folder that
        cannot be written fails now, not after the run, and an unfinished folder says whose it
        is."""
        if self.identity is not None:
            save_json(self.path / IDENTITY, self.identity)

    def commit(self, contents: Mapping[str, Any], rows: int) -> None:
        """Write the finished run: its identity (config.json), each of ``contents`` ({file name:
        a dict for .json, a DataFrame for .csv, anything torch saves for .pt}), DONE, then the
        manifest, last (the run is whole), and remove its checkpoint."""
        written = {**({IDENTITY: self.identity} if self.identity is not None else {}), **contents}
        if sorted(written) != sorted(self.files):
            raise FlkitError(
                f"a commit of {sorted(written)} to {self.path}; accepted: exactly the folder's "
                f"files {sorted(self.files)}"
            )
        for name, obj in written.items():
            _WRITERS[Path(name).suffix](self.path / name, obj)
        save_json(self.path / DONE, {"done": True})
        self.seal(rows)
        self._drop_checkpoint()

    def seal(self, rows: int) -> None:
        """MANIFEST.json, written atomically: ``rows``, this folder's run and each file's
        checksum, as the files are now."""
        digests = {name: file_digest(self.path / name) for name in self.files}
        save_json(self.path / MANIFEST, {"rows": int(rows), "files": digests, "run": self.name})

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, saved: Checkpoint) -> None:
        """checkpoint.pt, then its checksum in checkpoint.json (a checkpoint whose checksum does
        not match is never resumed from); both record this folder's run."""
        saved = replace(saved, run=self.name)
        save_torch(self.path / CHECKPOINT, saved.to_dict())
        digest = file_digest(self.path / CHECKPOINT)
        save_json(
            self.path / CHECKPOINT_SUM, {"round": saved.round, "run": self.name, "sha256": digest}
        )

    def resume(self, device="cpu", threads: int | None = None) -> Checkpoint | None:
        """The checkpoint to resume from (None: there is none). A damaged one is reported (a
        :class:`DamagedRunWarning` naming the file and why) and removed: the run starts again
        from round 1. One that is not this run's is refused (FlkitError, the file kept): computed
        under another thread count than ``threads`` (None: a GPU run, any count), whose later
        rounds would sum in another order than the rounds before, or recording another run (copied
        or moved from another run's folder, whose config or data differ, or written before
        checkpoints recorded their run)."""
        saved, found = self._read_checkpoint(device)
        if found is not None:
            self._report(found, "training starts again from round 1")
            self._drop_checkpoint()
            return None
        if saved is not None:
            self._check_own(saved, threads)
        return saved

    def _drop_checkpoint(self) -> None:
        for name in (CHECKPOINT, CHECKPOINT_SUM):
            (self.path / name).unlink(missing_ok=True)

    def _read_checkpoint(self, device) -> tuple[Checkpoint | None, Damage | None]:
        path = self.path / CHECKPOINT
        if not path.exists():
            return None, None
        try:
            recorded = load_json(self.path / CHECKPOINT_SUM)
            digest, recorded_round = recorded["sha256"], recorded["round"]
        except FileNotFoundError:
            why = f"{CHECKPOINT_SUM} is missing, so {CHECKPOINT} cannot be checked"
            return None, Damage(CHECKPOINT_SUM, why)
        except (OSError, ValueError, KeyError, TypeError) as e:
            return None, Damage(
                CHECKPOINT_SUM, f"{CHECKPOINT_SUM} cannot be read ({type(e).__name__})"
            )
        if file_digest(path) != digest:
            return None, Damage(
                CHECKPOINT, f"{CHECKPOINT} does not match its checksum in {CHECKPOINT_SUM}"
            )
        try:
            saved = Checkpoint.from_dict(load_torch(path, device))
        except Exception as e:  # noqa: BLE001 - any reader's failure means a damaged checkpoint
            why = f"{CHECKPOINT} cannot be read ({type(e).__name__}: {str(e)[:80]})"
            return None, Damage(CHECKPOINT, why)
        if saved.round != recorded_round:
            why = (
                f"{CHECKPOINT_SUM} records round {recorded_round}, {CHECKPOINT} round {saved.round}"
            )
            return None, Damage(CHECKPOINT_SUM, why)
        if len(saved.rows) != saved.round:
            why = f"{CHECKPOINT} is inconsistent (round {saved.round}, {len(saved.rows)} rows)"
            return None, Damage(CHECKPOINT, why)
        return saved, None

    def _check_own(self, saved: Checkpoint, threads: int | None) -> None:
        path = self.path / CHECKPOINT
        if threads is not None and saved.threads != threads:
            was = saved.threads
            was_text = (
                f"{was} torch threads" if was is not None else "an unrecorded number of threads"
            )
            raise FlkitError(
                f"run folder {self.path} holds a checkpoint (round {saved.round}) computed with "
                f"{was_text}, but this process computes with {threads}; it is not resumed from. "
                f"Accepted: resume with {was if was is not None else 'its'} threads "
                f"(torch.set_num_threads or FLKIT_THREADS), or delete {path} to train from round 1"
            )
        if saved.run == self.name:
            return
        whose = (
            f"run {saved.run}"
            if saved.run
            else "no run (written before checkpoints recorded their run)"
        )
        raise FlkitError(
            f"run folder {self.path} holds a checkpoint (round {saved.round}) that records "
            f"{whose}, not this folder's run {self.name}; it is not resumed from, since its "
            "rounds were not computed with this run's config, threads and data. Accepted: a "
            f"checkpoint this run wrote; delete {path} to train from round 1"
        )


#: how :meth:`RunFolder.commit` writes a file, by its suffix
_WRITERS = {".json": save_json, ".csv": save_frame, ".pt": save_torch}
