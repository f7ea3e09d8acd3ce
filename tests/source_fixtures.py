"""Tiny datasets in each public source's own format, for `flkit data prepare`'s tests: a
gzip'd IDX pair (MNIST-like), a CIFAR python tarball, a UCI HAR zip (as UCI serves it and as the
original), LEAF JSON shards for FEMNIST and Shakespeare (LEAF's split written from LEAF's rule),
SVHN .mat files; and sources pointed at them (file:// URLs, checked against their own md5)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from flkit import data
from flkit.data import files
from flkit.data.public_sources import SOURCES, Archive, Source
from flkit.data.source_readers import LEAF_VOCAB


def md5(path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def load(name, root, **kw):
    """Only the prepared data root: no mirror, no download."""
    data.clear_cache()
    return data.load(name, root=root, mirror="", device="cpu", download=False, **kw)


def pointed(name, paths, md5s=None) -> Source:
    """The published source of `name` with its files served from `paths` (file:// URLs) and
    checked against their own md5 (or `md5s`)."""
    archives = tuple(
        Archive(Path(p).name, (Path(p).as_uri(),), (md5s or {}).get(Path(p).name, md5(p)))
        for p in paths
    )
    return dataclasses.replace(SOURCES[name], archives=archives)


def leftovers(root: Path) -> list[str]:
    """What a failed prepare left in the data root (nothing at all, temp folders included)."""
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def quiet(*_a, **_k):
    pass


def idx_fixture(folder: Path) -> dict:
    """MNIST's four gzip'd IDX files: 3 training images (pixel (3, 4) of the first = 255, (0, 0)
    of the second = 51, (27, 27) of the third = 1), labels 5, 0, 4; 2 test images (pixel
    (10, 20) of the second = 128), labels 7, 2. {file name: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    x_tr = np.zeros((3, 28, 28), np.uint8)
    x_tr[0, 3, 4] = 255
    x_tr[1, 0, 0] = 51
    x_tr[2, 27, 27] = 1
    x_te = np.zeros((2, 28, 28), np.uint8)
    x_te[1, 10, 20] = 128
    arrays = {
        "train-images-idx3-ubyte.gz": x_tr,
        "train-labels-idx1-ubyte.gz": np.array([5, 0, 4], np.uint8),
        "t10k-images-idx3-ubyte.gz": x_te,
        "t10k-labels-idx1-ubyte.gz": np.array([7, 2], np.uint8),
    }
    for fname, a in arrays.items():
        files.write_idx(folder / fname, a)
    return {f: folder / f for f in arrays}


def cifar_fixture(path: Path) -> Path:
    """cifar-10-python.tar.gz with one image per batch; image k has pixel value k + 1 in channel
    0 at (0, 0) and 200 in channel 2 at (31, 1); label k."""
    buf = {}
    for k, member in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        row = np.zeros((1, 3072), np.uint8)
        row[0, 0] = k + 1  # channel 0, (0, 0)
        row[0, 2 * 1024 + 31 * 32 + 1] = 200  # channel 2, (31, 1)
        buf[member] = pickle.dumps({"data": row, "labels": [k]})
    buf["batches.meta"] = pickle.dumps({"label_names": [f"c{i}" for i in range(10)]})
    with tarfile.open(path, "w:gz") as tar:
        for member, raw in buf.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{member}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path


HAR_CHANNELS = [f"{k}_{a}" for k in ("body_acc", "body_gyro", "total_acc") for a in "xyz"]


ACTIVITIES = ["WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING"]


def har_value(split, row, channel, step) -> str:
    """The text of one signal value, written as UCI writes them."""
    v = (1 if split == "train" else -1) * (channel + row / 10 + step / 1000)
    return f"{v: .7e}"


def har_members() -> dict:
    rows = {"train": 3, "test": 2}
    top = "UCI HAR Dataset"
    m = {f"{top}/activity_labels.txt": "".join(f"{i} {a}\n" for i, a in enumerate(ACTIVITIES, 1))}
    labels = {"train": ([5, 1, 6], [1, 1, 30]), "test": ([2, 4], [2, 9])}
    for split, n in rows.items():
        for c, ch in enumerate(HAR_CHANNELS):
            m[f"{top}/{split}/Inertial Signals/{ch}_{split}.txt"] = "".join(
                " ".join(har_value(split, r, c, s) for s in range(128)) + "\n" for r in range(n)
            )
        y, subj = labels[split]
        m[f"{top}/{split}/y_{split}.txt"] = "".join(f"{v}\n" for v in y[:n])
        m[f"{top}/{split}/subject_{split}.txt"] = "".join(f"{v:>2}\n" for v in subj[:n])
    return m


def write_zip(path: Path, members: dict) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


def uci_download(path: Path, members=None) -> Path:
    """UCI's download: a zip holding `UCI HAR Dataset.zip` (and a .names file)."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (members or har_members()).items():
            z.writestr(name, text)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("UCI HAR Dataset.zip", inner.getvalue())
        z.writestr("UCI HAR Dataset.names", "Human Activity Recognition Using Smartphones\n")
    return path


def leaf_image(dark: dict) -> list[float]:
    """A LEAF FEMNIST image: 784 gray levels / 255 (white paper = 1.0), `dark` = {pixel: level}."""
    img = [1.0] * 784
    for i, level in dark.items():
        img[i] = level / 255
    return img


def write_shard(path: Path, users: dict, hierarchies=None) -> Path:
    shard = {
        "users": list(users),
        "num_samples": [len(u["y"]) for u in users.values()],
        "user_data": users,
    }
    if hierarchies is not None:
        shard["hierarchies"] = hierarchies
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(shard))
    return path


def femnist_leaf(folder: Path) -> Path:
    """LEAF's output for two writers, listed out of order: f0002_11 (2 train, 1 test) and
    f0001_03 (1 train, 1 test)."""
    train = {
        "f0002_11": {"x": [leaf_image({0: 0}), leaf_image({30: 51})], "y": [10, 61]},
        "f0001_03": {"x": [leaf_image({783: 204})], "y": [3]},
    }
    test = {
        "f0002_11": {"x": [leaf_image({29: 0, 30: 0})], "y": [36]},
        "f0001_03": {"x": [leaf_image({})], "y": [0]},
    }
    write_shard(folder / "train" / "all_data_0_niid_1_keep_0_train_9.json", train)
    write_shard(folder / "test" / "all_data_0_niid_1_keep_0_test_9.json", test)
    return folder


def role_text(seed: int, n: int) -> str:
    rng = np.random.default_rng(seed)
    return "".join(rng.choice(list(LEAF_VOCAB[1:]), n))  # no newline: LEAF turns them to spaces


def leaf_windows(text: str, frac=0.9):
    """LEAF's by-sample split of one role, written from LEAF's rule (not flkit's code): windows
    x = t[i:i+80], y = t[i+80]; train i < max(1, int(frac * n)); test from num_train + 79."""
    n = len(text) - 80
    windows = [(text[i : i + 80], text[i + 80]) for i in range(n)]
    n_tr = max(1, int(frac * n))
    tr, te = windows[:n_tr], windows[n_tr + 79 :]
    part = lambda w: {"x": [a for a, _ in w], "y": [b for _, b in w]}  # noqa: E731
    return part(tr), part(te)


def shakespeare_leaf(folder: Path, texts: dict) -> Path:
    train, test = {}, {}
    for role, text in texts.items():
        train[role], test[role] = leaf_windows(text)
    plays = [r.rsplit("_", 1)[0] for r in texts]
    write_shard(folder / "train" / "all_data_niid_0_keep_0_train_9.json", train, plays)
    write_shard(folder / "test" / "all_data_niid_0_keep_0_test_9.json", test, plays)
    return folder


def never(url, dest):
    raise AssertionError(f"fetched {url} although the input was refused")


def svhn_fixture(folder: Path) -> list[Path]:
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for split, labels in (("train", [10, 3]), ("test", [7])):
        x = np.zeros((32, 32, 3, len(labels)), np.uint8)
        x[0, 0, 0, :] = np.arange(1, len(labels) + 1)
        p = folder / f"{split}_32x32.mat"
        savemat(p, {"X": x, "y": np.array(labels, np.uint8).reshape(-1, 1)})
        out.append(p)
    return out
