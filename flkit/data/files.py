"""Where each dataset's files live on disk, and how to read them into numpy arrays.

Two layouts are understood inside any directory (a data root or a mirror):
  * the offline mirror's layout: ``MNIST/raw/*.gz``, ``FashionMNIST/raw/*.gz`` (torchvision's own
    layout, gzip or already unpacked) and ``<name>.npz`` for the other datasets;
  * torchvision's download layout: ``cifar-10-batches-py/``, ``cifar-100-python/``,
    ``train_32x32.mat`` / ``test_32x32.mat`` (SVHN).
Every reader raises :class:`CorruptDataError` naming the file when a file cannot be decoded.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..utils import FlkitError


class CorruptDataError(FlkitError):
    """A dataset file exists but cannot be decoded (bad gzip, wrong magic or shape, bad npz)."""


def _corrupt(path, why) -> CorruptDataError:
    return CorruptDataError(
        f"dataset file {str(path)!r} is corrupt or incomplete: {why}. "
        f"Check it with `flkit data verify`, then replace it (re-link the mirror or re-download)."
    )


# --------------------------------------------------------------------------- IDX (MNIST, FMNIST)
IDX_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_FOLDER = {"mnist": "MNIST", "fmnist": "FashionMNIST"}


def read_idx(path, expect_magic: int | None = None, expect_count: int | None = None) -> np.ndarray:
    """Parse one IDX file (gzip'd when the name ends in .gz) into a uint8 array."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _corrupt(path, f"cannot decompress ({type(e).__name__}: {e})") from None
    if len(raw) < 8:
        raise _corrupt(path, f"only {len(raw)} bytes after decompression")
    magic = int.from_bytes(raw[:4], "big")
    if magic not in (2049, 2051) or (expect_magic is not None and magic != expect_magic):
        raise _corrupt(path, f"IDX magic number {magic}, expected {expect_magic or '2049 or 2051'}")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if len(raw) != header + int(np.prod(dims)):
        raise _corrupt(
            path,
            f"IDX header says shape {dims} ({int(np.prod(dims))} bytes) but the "
            f"file holds {len(raw) - header} data bytes",
        )
    if expect_count is not None and dims[0] != expect_count:
        raise _corrupt(path, f"{dims[0]} items, expected {expect_count}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def write_idx(path, arr: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzip'd, with no time stamp, when the name ends in .gz):
    magic 2049 for labels (one dimension), 2051 for images (three), as in MNIST's files."""
    path = Path(path)
    if arr.dtype != np.uint8 or arr.ndim not in (1, 3):
        raise ValueError(
            f"an IDX file here holds uint8 labels or images, not {arr.dtype} {arr.shape}"
        )
    magic = 0x800 + arr.ndim
    raw = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    raw += np.ascontiguousarray(arr).tobytes()
    path.write_bytes(gzip.compress(raw, mtime=0) if path.suffix == ".gz" else raw)


def _idx_file(folder: Path, stem: str):
    for cand in (folder / (stem + ".gz"), folder / stem):
        if cand.is_file():
            return cand
    return None


# --------------------------------------------------------------------------- locating
NPZ_KEYS = {
    "cifar10": ("x_train", "y_train", "x_test", "y_test"),
    "cifar100": ("x_train", "y_train", "x_test", "y_test"),
    "svhn": ("x_train", "y_train", "x_test", "y_test"),
    "har": ("x_train", "y_train", "subject_train", "x_test", "y_test", "subject_test"),
    "femnist": ("x", "y", "writer", "is_test"),
    "shakespeare": ("text", "text_offsets", "num_samples", "num_train", "test_start", "vocab"),
}


def candidates(name: str, directory) -> list[tuple[str, list[Path]]]:
    """(kind, files) layouts that would satisfy `name` inside `directory`, in preference order."""
    d = Path(directory)
    out = []
    if name in IDX_FOLDER:
        raw = d / IDX_FOLDER[name] / "raw"
        out.append(("idx", [raw / s for split in ("train", "test") for s in IDX_NAMES[split]]))
    if name in NPZ_KEYS:
        out.append(("npz", [d / f"{name}.npz"]))
    if name == "cifar10":
        out.append(("cifar-pickle", [d / "cifar-10-batches-py"]))
    if name == "cifar100":
        out.append(("cifar-pickle", [d / "cifar-100-python"]))
    if name == "svhn":
        out.append(("svhn-mat", [d / "train_32x32.mat", d / "test_32x32.mat"]))
    return out


def find(name: str, directory):
    """The first layout of `name` fully present in `directory` as (kind, files), else None."""
    if directory is None or not Path(directory).is_dir():
        return None
    for kind, files in candidates(name, directory):
        if kind == "idx":
            got = [_idx_file(f.parent, f.name) for f in files]
            if all(got):
                return kind, got
        elif all(f.exists() for f in files):
            return kind, files
    return None


def describe(name: str, directory) -> str:
    """Human-readable list of the paths that `find` checks, for error messages."""
    parts = []
    for kind, files in candidates(name, directory):
        if kind == "idx":
            parts.append(f"{files[0].parent}/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz]")
        else:
            parts.append(" + ".join(str(f) for f in files))
    return " or ".join(parts)


def signature(files) -> tuple:
    """A cache key that changes when any file changes: per file its resolved path, size,
    modification time, change time and inode. The change time cannot be set back (a copy made
    with its old mtime kept, `cp -p`, still gets a new one) and a file replaced by a rename gets
    a new inode. A folder (torchvision's CIFAR layout) stands for the files in it."""
    sig = []
    listed = []
    for f in files:
        f = Path(f)
        listed += sorted(p for p in f.iterdir() if p.is_file()) if f.is_dir() else [f]
    for f in listed:
        st = os.stat(f)
        sig.append((str(Path(f).resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(sig)


# --------------------------------------------------------------------------- readers
def load_npz(path, keys=()) -> dict:
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise _corrupt(path, f"missing array(s) {missing}; it holds {sorted(z.files)}")
            return {k: z[k] for k in z.files}
    except CorruptDataError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as e:
        raise _corrupt(path, f"numpy.load failed ({type(e).__name__}: {e})") from None


def read(name: str, kind: str, files) -> dict:
    """Raw arrays for `name`: x_train, y_train, x_test, y_test (+ groups / extras)."""
    if kind == "idx":
        xtr = read_idx(files[0], 2051)
        ytr = read_idx(files[1], 2049, xtr.shape[0])
        xte = read_idx(files[2], 2051)
        yte = read_idx(files[3], 2049, xte.shape[0])
        for f, x in ((files[0], xtr), (files[2], xte)):
            if x.shape[1:] != (28, 28):
                raise _corrupt(f, f"image shape {x.shape[1:]}, expected (28, 28)")
        return dict(
            x_train=xtr, y_train=ytr.astype(np.int64), x_test=xte, y_test=yte.astype(np.int64)
        )
    if kind == "npz":
        z = load_npz(files[0], NPZ_KEYS[name])
        _check_npz(name, files[0], z)
        return z
    if kind == "cifar-pickle":
        return _read_cifar_pickle(name, Path(files[0]))
    if kind == "svhn-mat":
        return _read_svhn_mat(files)
    raise AssertionError(kind)


def _check_npz(name, path, z):
    def need(cond, why):
        if not cond:
            raise _corrupt(path, why)

    if name in ("cifar10", "cifar100", "svhn"):
        for s in ("train", "test"):
            x, y = z[f"x_{s}"], z[f"y_{s}"]
            need(
                x.ndim == 4 and x.shape[1:] == (32, 32, 3),
                f"x_{s} has shape {x.shape}, expected (N, 32, 32, 3)",
            )
            need(y.shape == (x.shape[0],), f"y_{s} has shape {y.shape}, expected ({x.shape[0]},)")
    elif name == "har":
        for s in ("train", "test"):
            x = z[f"x_{s}"]
            need(
                x.ndim == 3 and x.shape[1:] == (9, 128),
                f"x_{s} has shape {x.shape}, expected (N, 9, 128)",
            )
            need(
                z[f"y_{s}"].shape == z[f"subject_{s}"].shape == (x.shape[0],),
                f"y_{s}/subject_{s} length mismatch",
            )
    elif name == "femnist":
        n = z["x"].shape[0]
        need(z["x"].shape[1:] == (28, 28), f"x has shape {z['x'].shape}, expected (N, 28, 28)")
        need(
            z["y"].shape == z["writer"].shape == z["is_test"].shape == (n,),
            "y/writer/is_test length mismatch",
        )
    elif name == "shakespeare":
        off = z["text_offsets"]
        need(
            off.ndim == 1 and off[-1] == z["text"].shape[0], "text_offsets do not match text length"
        )
        need(len(str(z["vocab"])) == 80, f"vocab has {len(str(z['vocab']))} symbols, expected 80")


def _unpickle(path):
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh, encoding="latin1")
    except Exception as e:  # any unpickling failure means a broken file
        raise _corrupt(path, f"cannot unpickle ({type(e).__name__}: {e})") from None


def _read_cifar_pickle(name, folder: Path) -> dict:
    if name == "cifar10":
        train_files = [folder / f"data_batch_{i}" for i in range(1, 6)]
        test_files, key = [folder / "test_batch"], "labels"
    else:
        train_files, test_files, key = [folder / "train"], [folder / "test"], "fine_labels"
    out = {}
    for split, fl in (("train", train_files), ("test", test_files)):
        xs, ys = [], []
        for f in fl:
            if not f.is_file():
                raise _corrupt(folder, f"{f.name} is missing from the torchvision CIFAR folder")
            d = _unpickle(f)
            xs.append(
                np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            )
            ys.append(np.asarray(d[key], dtype=np.int64))
            if name == "cifar100":
                out[f"y_{split}_coarse"] = np.asarray(d["coarse_labels"], dtype=np.int64)
        out[f"x_{split}"], out[f"y_{split}"] = np.concatenate(xs), np.concatenate(ys)
    meta = folder / ("batches.meta" if name == "cifar10" else "meta")
    if meta.is_file():
        m = _unpickle(meta)
        out["classes"] = np.array(m.get("label_names") or m.get("fine_label_names"))
    return out


def _read_svhn_mat(files) -> dict:
    try:
        import scipy.io as sio
    except ImportError:  # pragma: no cover - scipy ships with the dev environment
        raise FlkitError(
            "reading SVHN .mat files needs scipy; install it with `pip install scipy`"
        ) from None
    out = {}
    for split, f in zip(("train", "test"), files):
        try:
            m = sio.loadmat(f)
        except Exception as e:
            raise _corrupt(f, f"scipy.io.loadmat failed ({type(e).__name__}: {e})") from None
        out[f"x_{split}"] = np.ascontiguousarray(m["X"].transpose(3, 0, 1, 2))
        y = m["y"].astype(np.int64).reshape(-1)
        y[y == 10] = 0  # SVHN stores digit 0 as label 10
        out[f"y_{split}"] = y
    return out
