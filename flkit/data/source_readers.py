"""Per-source readers behind `flkit data prepare`: each turns a dataset's published archives (or
LEAF's output folder) into the files :func:`flkit.data.load` reads, in the layout and with the
arrays that the offline mirror's copy has (``data/README.md`` and the mirror's README describe
them).

Every reader writes into an empty folder ``out`` (a temporary folder of
:func:`flkit.data.prepare.prepare`, renamed into the data root only when everything checked out)
and raises :class:`SourceFormatError`, naming the archive or shard and what is wrong, when its input
is not in the source's format.

    READERS[source.reader](name, inputs, out, log)

``inputs``: the archives, downloaded and checked, in the order :mod:`flkit.data.public_sources`
lists them; for the LEAF readers, one folder holding LEAF's ``train/`` and ``test/`` shards.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import tarfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

from . import files
from .files import CorruptDataError

#: LEAF's character vocabulary (``ALL_LETTERS`` of LEAF's language utilities): 80 symbols whose
#: position is the token index, the same string as the mirror's ``shakespeare.npz`` ``vocab``
LEAF_VOCAB = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
LEAF_SEQ_LEN = 80  # characters of context per Shakespeare sample
FEMNIST_CLASSES = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
HAR_CHANNELS = tuple(
    f"{kind}_{axis}" for kind in ("body_acc", "body_gyro", "total_acc") for axis in "xyz"
)
HAR_FOLDER = "UCI HAR Dataset"


class SourceFormatError(CorruptDataError):
    """A downloaded archive or a LEAF shard is not in its source's published format."""


def _bad(what, why) -> SourceFormatError:
    return SourceFormatError(f"{what}: {why}")


def _savez(out: Path, name: str, arrays: dict) -> Path:
    path = out / f"{name}.npz"
    np.savez_compressed(path, **arrays)
    return path


def safe_extract(tar: tarfile.TarFile, dest: Path, members=None) -> None:
    """Extract ``members`` (default: all) of ``tar`` into ``dest``, refusing any that would land
    outside it or is not a plain file or folder (tarfile's "data" filter where Python has it)."""
    chosen = [tar.getmember(m) for m in members] if members is not None else tar.getmembers()
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, members=chosen, filter="data")
        return
    root = Path(dest).resolve()
    for m in chosen:
        if not (m.isfile() or m.isdir()) or not (root / m.name).resolve().is_relative_to(root):
            raise tarfile.TarError(f"member {m.name!r} is not a plain file inside the archive")
    tar.extractall(dest, members=chosen)


# --------------------------------------------------------------------------- copied as published
def read_idx_files(name, inputs, out, log) -> None:
    """MNIST / Fashion-MNIST: the four gzip'd IDX files, byte for byte, in torchvision's layout."""
    raw = out / files.IDX_FOLDER[name] / "raw"
    raw.mkdir(parents=True)
    for p in inputs:
        os.replace(p, raw / p.name)


def read_copied(name, inputs, out, log) -> None:
    """Files that ``load`` reads as they are published (SVHN's .mat files)."""
    out.mkdir(parents=True, exist_ok=True)
    for p in inputs:
        os.replace(p, out / p.name)


# --------------------------------------------------------------------------- CIFAR
_CIFAR_MEMBERS = {
    "cifar10": (
        "cifar-10-batches-py",
        [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"],
    ),
    "cifar100": ("cifar-100-python", ["train", "test", "meta"]),
}


def read_cifar(name, inputs, out, log) -> None:
    """CIFAR-10/100: the python-pickle tarball, decoded by the reader ``load`` uses for
    torchvision's layout, stored as ``<name>.npz`` (x uint8 HWC, y int64, class names; CIFAR-100
    also its superclass labels and names). The pickles are unpickled only after the tarball
    matched its published md5 (``prepare`` checks it first)."""
    tar_path = inputs[0]
    folder, members = _CIFAR_MEMBERS[name]
    where = out.parent / "extract"
    try:
        with tarfile.open(tar_path, "r:gz") as tar:
            names = set(tar.getnames())
            missing = [m for m in members if f"{folder}/{m}" not in names]
            if missing:
                raise _bad(tar_path, f"no {folder}/{missing[0]} in the tarball (not {name}'s)")
            safe_extract(tar, where, [f"{folder}/{m}" for m in members])
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise _bad(tar_path, f"cannot unpack ({type(e).__name__}: {e})") from None
    try:
        arrays = files.read(name, "cifar-pickle", [where / folder])
        if name == "cifar100":
            with open(where / folder / "meta", "rb") as fh:
                meta = pickle.load(fh, encoding="latin1")
            arrays["coarse_classes"] = np.array(meta["coarse_label_names"])
    except (CorruptDataError, KeyError, pickle.UnpicklingError, EOFError) as e:
        raise _bad(tar_path, f"a member does not decode as CIFAR ({e})") from None
    _savez(out, name, arrays)


# --------------------------------------------------------------------------- UCI HAR
def _har_zip(path: Path) -> zipfile.ZipFile:
    """The zip holding ``UCI HAR Dataset/``: the archive itself (the original download) or the
    ``UCI HAR Dataset.zip`` inside it (the UCI site wraps the original in a second zip)."""
    try:
        z = zipfile.ZipFile(path)
        inner = f"{HAR_FOLDER}.zip"
        if inner in z.namelist():
            data = z.read(inner)  # the CRC-32 of the inner zip is checked here
            z.close()
            z = zipfile.ZipFile(io.BytesIO(data))
        return z
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise _bad(path, f"not a readable zip ({type(e).__name__}: {e})") from None


def _har_table(z, path, member, dtype, columns=None) -> np.ndarray:
    full = f"{HAR_FOLDER}/{member}"
    try:
        raw = z.read(full)
    except KeyError:
        raise _bad(path, f"no member {full!r} (not the UCI HAR archive)") from None
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise _bad(path, f"member {full!r} is damaged ({type(e).__name__}: {e})") from None
    try:
        a = np.loadtxt(io.BytesIO(raw), dtype=dtype, ndmin=2 if columns else 1)
    except ValueError as e:
        raise _bad(path, f"member {full!r} does not parse as numbers ({e})") from None
    if columns and a.shape[1] != columns:
        raise _bad(path, f"member {full!r} has {a.shape[1]} columns, expected {columns}")
    return a


def read_uci_har(name, inputs, out, log) -> None:
    """UCI HAR: the raw inertial signals of ``UCI HAR Dataset/{train,test}/Inertial Signals``
    (9 channels x 128 steps, float32 as parsed from the text), the activity (``y`` - 1) and the
    subject of every window, in the official order; stored as ``har.npz``."""
    path = inputs[0]
    z = _har_zip(path)
    with z:
        arrays = {}
        for split in ("train", "test"):
            log(f"  reading {HAR_FOLDER}/{split}/ ({len(HAR_CHANNELS)} signal files)")
            chans = [
                _har_table(
                    z, path, f"{split}/Inertial Signals/{c}_{split}.txt", np.float32, columns=128
                )
                for c in HAR_CHANNELS
            ]
            y = _har_table(z, path, f"{split}/y_{split}.txt", np.int64)
            subject = _har_table(z, path, f"{split}/subject_{split}.txt", np.int64)
            rows = {len(c) for c in chans} | {len(y), len(subject)}
            if len(rows) != 1:
                raise _bad(path, f"the {split} files disagree on the number of windows: {rows}")
            if y.size and (y.min() < 1 or y.max() > 6):
                raise _bad(path, f"y_{split}.txt holds activity ids outside 1..6")
            if subject.size and (subject.min() < 1 or subject.max() > 30):
                raise _bad(path, f"subject_{split}.txt holds subject ids outside 1..30")
            arrays[f"x_{split}"] = np.stack(chans, axis=1)
            arrays[f"y_{split}"] = y - 1
            arrays[f"subject_{split}"] = subject
        labels = _har_labels(z, path)
    arrays["channels"] = np.array(HAR_CHANNELS)
    arrays["activity_names"] = np.array(labels)
    _savez(out, name, arrays)


def _har_labels(z, path) -> list[str]:
    full = f"{HAR_FOLDER}/activity_labels.txt"
    try:
        lines = z.read(full).decode("ascii").split("\n")
    except (KeyError, UnicodeDecodeError) as e:
        raise _bad(path, f"cannot read {full!r} ({type(e).__name__})") from None
    pairs = [ln.split() for ln in lines if ln.strip()]
    if [p[0] for p in pairs] != [str(i) for i in range(1, 7)] or any(len(p) != 2 for p in pairs):
        raise _bad(path, f"{full!r} does not list activities 1..6 as 'id NAME' lines")
    return [p[1] for p in pairs]


# --------------------------------------------------------------------------- LEAF JSON shards
def leaf_shards(folder: Path) -> dict[str, list[Path]]:
    """``{"train": [...], "test": [...]}``: the JSON shards of a LEAF output folder, by name."""
    return {s: sorted((folder / s).glob("*.json")) for s in ("train", "test")}


def _leaf_users(split: str, shards: list[Path], convert, log) -> tuple[dict, dict]:
    """({user: convert(x, y, where)}, {user: hierarchy}) over the shards of one split, checked.

    Each user's lists are converted as soon as its shard is read, so that only the compact form
    of the whole dataset is ever in memory (the full FEMNIST holds 600 million pixels)."""
    users: dict = {}
    groups: dict = {}
    for i, path in enumerate(shards, 1):
        log(f"  reading {split}/{path.name} ({i}/{len(shards)})")
        try:
            with open(path, encoding="utf-8") as fh:
                shard = json.load(fh)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise _bad(path, f"not a readable JSON file ({type(e).__name__}: {e})") from None
        if not isinstance(shard, dict) or not {"users", "num_samples", "user_data"} <= set(shard):
            found = sorted(shard) if isinstance(shard, dict) else type(shard).__name__
            raise _bad(
                path, f"a LEAF shard has keys users, num_samples, user_data; this one: {found}"
            )
        names, counts, data = shard["users"], shard["num_samples"], shard["user_data"]
        if len(names) != len(counts):
            raise _bad(path, f"{len(names)} users but {len(counts)} num_samples")
        hier = shard.get("hierarchies") or [""] * len(names)
        for u, n, h in zip(names, counts, hier):
            d = data.get(u) if isinstance(data, dict) else None
            if not isinstance(d, dict) or not isinstance(d.get("x"), list):
                raise _bad(path, f"user {u!r} has no x/y lists in user_data")
            if not (len(d["x"]) == len(d.get("y", ())) == n):
                raise _bad(
                    path,
                    f"user {u!r}: num_samples {n} but {len(d['x'])} x and {len(d.get('y', ()))} y",
                )
            if u in users:
                raise _bad(path, f"user {u!r} appears in two {split} shards")
            users[u] = convert(d["x"], d["y"], f"{path} (user {u!r})")
            groups[u] = str(h)
        del shard, data
    return users, groups


def _leaf_split(folder: Path, convert, log) -> tuple[dict, dict, dict]:
    shards = leaf_shards(folder)
    for split in ("train", "test"):
        if not shards[split]:
            raise _bad(folder, f"no {split}/*.json shard (expected LEAF's train/ and test/)")
    train, groups = _leaf_users("train", shards["train"], convert, log)
    test, _ = _leaf_users("test", shards["test"], convert, log)
    only = sorted(set(train) ^ set(test))
    if only:
        raise _bad(
            folder,
            f"{len(only)} user(s) are in only one of train/ and test/ (e.g. {only[0]!r}): this is "
            "LEAF's split by user (-t user); flkit needs each user's samples split (-t sample)",
        )
    return train, test, groups


def _femnist_part(x, y, where) -> tuple[np.ndarray, np.ndarray]:
    """LEAF's pixels (gray / 255, white paper = 1.0) as uint8 ink on 0 (the mirror's convention,
    like MNIST), and the labels 0..61."""
    if not x:
        return np.zeros((0, 28, 28), np.uint8), np.zeros(0, np.int64)
    try:
        v = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        labels = np.asarray(y)
    except (TypeError, ValueError):
        raise _bad(where, "x is not a list of 784-number lists") from None
    if v.shape[1:] != (784,):
        raise _bad(where, f"x has {v.shape[1]} numbers per image, expected 784 (28 x 28)")
    scaled = v * 255.0
    levels = np.rint(scaled)
    if v.size and (v.min() < 0 or v.max() > 1 or np.abs(scaled - levels).max() > 1e-3):
        raise _bad(where, "pixels are not gray levels / 255 in [0, 1] (LEAF's scale)")
    if labels.size and (labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() > 61):
        raise _bad(where, "labels are not integers 0..61")
    pixels = (255 - levels.astype(np.uint8)).reshape(-1, 28, 28)
    return pixels, labels.astype(np.int64).reshape(-1)


def read_leaf_femnist(name, inputs, out, log) -> None:
    """FEMNIST from LEAF's per-writer split (``-t sample``): writers sorted by id, each writer's
    training samples then its test samples, in shard order; ``is_test`` marks LEAF's test part.
    Stored as ``femnist.npz`` with x (uint8, N x 28 x 28, ink bright on 0), y (0..61), writer
    (index into writer_ids), is_test, writer_ids and classes."""
    train, test, _ = _leaf_split(inputs[0], _femnist_part, log)
    ids = sorted(train)
    xs, ys, ws, ts = [np.zeros((0, 28, 28), np.uint8)], [np.zeros(0, np.int64)], [], []
    for w, uid in enumerate(ids):
        for (x, y), flag in ((train[uid], False), (test[uid], True)):
            xs.append(x)
            ys.append(y)
            ws.append(np.full(len(y), w, dtype=np.int64))
            ts.append(np.full(len(y), flag, dtype=bool))
    arrays = dict(
        x=np.concatenate(xs),
        y=np.concatenate(ys),
        writer=np.concatenate(ws + [np.zeros(0, np.int64)]),
        is_test=np.concatenate(ts + [np.zeros(0, bool)]),
        writer_ids=np.array(ids),
        classes=np.array(list(FEMNIST_CLASSES)),
    )
    _savez(out, name, arrays)


def _windows_text(x, y, where) -> tuple[str, int]:
    """The text that one part (train or test) of a role's LEAF windows was cut from, and the
    number of windows: LEAF cuts a role's text t into x = t[i:i+80], y = t[i+80] for consecutive
    i, so the part is x[0] + y[0] + y[1] + ...; every window is checked against it."""
    if not x:
        return "", 0
    if not all(isinstance(s, str) for s in x) or not all(isinstance(c, str) for c in y):
        raise _bad(where, "x and y are not lists of strings (LEAF's Shakespeare windows)")
    text = x[0] + "".join(y)
    for j, (xj, yj) in enumerate(zip(x, y)):
        if xj != text[j : j + LEAF_SEQ_LEN] or yj != text[j + LEAF_SEQ_LEN]:
            raise _bad(
                f"{where}, window {j}",
                "windows are not consecutive 80-character slices of one text (LEAF's by-sample "
                "Shakespeare split keeps them in order)",
            )
    return text, len(x)


def _role_text(uid, head, n_tr, tail, n_te) -> str:
    """A role's whole text from its training part and its test part: LEAF starts the test windows
    79 windows after the last training window (so that no test target is inside a training
    window), which makes the two parts overlap in exactly one character."""
    if n_tr == 0 or n_te == 0:
        raise _bad(f"role {uid!r}", f"{n_tr} training and {n_te} test windows; LEAF keeps both")
    if head[-1] != tail[0]:
        raise _bad(
            f"role {uid!r}", "the test windows do not start 79 after the training windows (LEAF)"
        )
    text = head + tail[1:]
    bad = sorted(set(text) - set(LEAF_VOCAB))
    if bad:
        raise _bad(f"role {uid!r}", f"characters outside LEAF's 80-symbol vocabulary: {bad}")
    return text


def read_leaf_shakespeare(name, inputs, out, log) -> None:
    """Shakespeare from LEAF's by-sample split: one text per role (roles sorted by id), rebuilt
    from its windows, with LEAF's train/test boundaries. Stored as ``shakespeare.npz``: text
    (uint8 ASCII, all roles), text_offsets, num_samples (= len(text) - 80), num_train, test_start
    (= num_train + 79), seq_len, vocab, roles and plays (LEAF's hierarchies)."""
    train, test, groups = _leaf_split(inputs[0], _windows_text, log)
    roles = sorted(train)
    texts = [_role_text(u, *train[u], *test[u]) for u in roles]
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    num_train = np.array([train[u][1] for u in roles], dtype=np.int64)
    arrays = dict(
        text=np.frombuffer("".join(texts).encode("ascii"), dtype=np.uint8),
        text_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        num_samples=lengths - LEAF_SEQ_LEN,
        num_train=num_train,
        test_start=num_train + LEAF_SEQ_LEN - 1,
        seq_len=np.int64(LEAF_SEQ_LEN),
        vocab=np.array(LEAF_VOCAB),
        roles=np.array(roles),
        plays=np.array([groups[u] for u in roles]),
    )
    _savez(out, name, arrays)


READERS = {
    "idx": read_idx_files,
    "copy": read_copied,
    "cifar": read_cifar,
    "uci-har": read_uci_har,
    "leaf-femnist": read_leaf_femnist,
    "leaf-shakespeare": read_leaf_shakespeare,
}

__all__ = [
    "READERS",
    "SourceFormatError",
    "LEAF_VOCAB",
    "LEAF_SEQ_LEN",
    "FEMNIST_CLASSES",
    "HAR_CHANNELS",
    "leaf_shards",
    "safe_extract",
]
