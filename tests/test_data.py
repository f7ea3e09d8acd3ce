"""flkit.data: loaders against the offline mirror ($FLKIT_MIRROR), errors, caching, subsets, CLI.

Tests needing the mirror are skipped when $FLKIT_MIRROR is unset (CI sets it)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from flkit import data
from flkit.data import admin as data_admin
from flkit.utils import FlkitError

MIRROR = os.environ.get("FLKIT_MIRROR")
needs_mirror = pytest.mark.skipif(
    not MIRROR or not Path(MIRROR).is_dir(), reason="FLKIT_MIRROR not set"
)


@pytest.fixture
def empty_root(tmp_path):
    return tmp_path / "empty_root"


def load(name, **kw):
    """Read from the mirror only (the data root is an empty temp path, no download)."""
    return data.load(
        name, root="/nonexistent-flkit-root", mirror=MIRROR, device="cpu", download=False, **kw
    )


def _idx_raw(path):
    raw = gzip.decompress(Path(path).read_bytes())
    ndim = raw[3]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)


# ------------------------------------------------------------------ images
@needs_mirror
def test_mnist_shapes_and_normalisation():
    ds = load("mnist")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert ds.meta["normalization"]["mean"] == [0.1307] and ds.meta["normalization"]["std"] == [
        0.3081
    ]
    # independent check from the raw bytes
    pix = _idx_raw(Path(MIRROR) / "MNIST/raw/train-images-idx3-ubyte.gz").astype(np.float64) / 255
    expect = (pix - 0.1307) / 0.3081
    assert abs(ds.x_train.double().mean().item() - expect.mean()) < 1e-4
    assert abs(ds.x_train.mean().item()) < 0.01 and abs(ds.x_train.std().item() - 1) < 0.01
    labels = _idx_raw(Path(MIRROR) / "MNIST/raw/train-labels-idx1-ubyte.gz")
    assert np.array_equal(ds.y_train.numpy(), labels)
    assert np.array_equal(
        np.bincount(ds.y_train.numpy(), minlength=10), np.bincount(labels, minlength=10)
    )
    # pixel 0 of image 0 and a stroke pixel decode exactly
    assert torch.allclose(
        ds.x_train[0].flatten(), torch.tensor(expect[:784], dtype=torch.float32), atol=1e-5
    )


@needs_mirror
def test_cache_reads_the_files_once_and_results_are_independent(monkeypatch, tmp_path):
    # The cache is judged by what it reads from disk, not by a wall-clock limit.
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path))  # no decoded copy on disk yet
    reads = []
    from flkit.data import files

    real_read = files.read
    monkeypatch.setattr(files, "read", lambda *a, **k: reads.append(a[0]) or real_read(*a, **k))
    data.clear_cache()
    a = load("mnist")
    b = load("mnist")
    assert reads == ["mnist"]
    a.y_train[0] = 123  # results never share memory with the cache
    assert load("mnist").y_train[0] != 123 and b.y_train[0] != 123


@needs_mirror
def test_fmnist_and_normalize_options():
    ds = load("fmnist")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.y_test.shape == (10000,)
    assert abs(ds.x_train.mean().item()) < 0.02 and abs(ds.x_train.std().item() - 1) < 0.02
    raw = load("fmnist", normalize="none", test_subset=1000)
    assert (
        raw.x_test.min() >= 0
        and raw.x_test.max() <= 1
        and raw.meta["normalization"]["scheme"] == "none"
    )
    fedast = load("fmnist", normalize="mnist", train_subset=100)
    assert fedast.meta["normalization"]["mean"] == [0.1307]
    with pytest.raises(FlkitError, match="normalize"):
        load("fmnist", normalize="bogus")


@needs_mirror
def test_cifar10_npz_shapes_and_balance():
    ds = load("cifar10")
    assert ds.x_train.shape == (12000, 3, 32, 32) and ds.x_test.shape == (3000, 3, 32, 32)
    assert torch.equal(torch.bincount(ds.y_train), torch.full((10,), 1200))
    assert torch.equal(torch.bincount(ds.y_test), torch.full((10,), 300))
    with np.load(Path(MIRROR) / "cifar10.npz") as z:
        x0 = z["x_train"][5].astype(np.float32) / 255  # HWC
    mean = np.array([0.4914, 0.4822, 0.4465], np.float32)
    std = np.array([0.2470, 0.2435, 0.2616], np.float32)
    assert np.allclose(ds.x_train[5].numpy(), ((x0 - mean) / std).transpose(2, 0, 1), atol=1e-5)
    assert ds.meta["classes"][0] == "airplane"


@needs_mirror
def test_subsets_are_stratified_and_seeded():
    a = load("cifar10", train_subset=1000, test_subset=200, seed=3)
    b = load("cifar10", train_subset=1000, test_subset=200, seed=3)
    c = load("cifar10", train_subset=1000, seed=4)
    assert a.x_train.shape[0] == 1000 and a.x_test.shape[0] == 200
    assert torch.equal(torch.bincount(a.y_train), torch.full((10,), 100))
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.x_train, c.x_train)
    assert "subset" in a.meta
    with pytest.raises(FlkitError, match="train_subset"):
        load("cifar10", train_subset=0)
    with pytest.warns(UserWarning, match="only 3000"):
        full = load("cifar10", test_subset=5000)
    assert len(full.y_test) == 3000 and "only 3000" in full.meta["subset"]["test"]


@needs_mirror
def test_cifar100_fine_and_coarse():
    ds = load("cifar100", test_subset=400)
    assert ds.num_classes == 100 and ds.x_train.shape == (10000, 3, 32, 32)
    assert torch.equal(torch.bincount(ds.y_train), torch.full((100,), 100))
    assert load("cifar100", coarse=True, train_subset=200).num_classes == 20


# ------------------------------------------------------------------ natural datasets
@needs_mirror
def test_har_subjects_as_groups():
    ds = load("har")
    assert (
        ds.x_train.shape == (7352, 9, 128)
        and ds.x_test.shape == (2947, 9, 128)
        and ds.num_classes == 6
    )
    groups = torch.cat([ds.train_groups, ds.test_groups]).unique()
    assert torch.equal(groups, torch.arange(1, 31))
    assert ds.train_groups.unique().numel() == 21 and ds.test_groups.unique().numel() == 9
    assert abs(ds.x_train.mean().item()) < 1e-3 and abs(ds.x_train.std().item() - 1) < 0.01
    ps = load("har", split="per_subject", flatten=True)
    assert ps.input_shape == (1152,) and len(ps.y_train) + len(ps.y_test) == 7352 + 2947
    assert torch.equal(ps.train_groups.unique(), torch.arange(1, 31))
    assert torch.equal(ps.test_groups.unique(), torch.arange(1, 31))


@needs_mirror
def test_femnist_writers():
    ds = load("femnist")
    with np.load(Path(MIRROR) / "femnist.npz") as z:
        is_test, writer, y = z["is_test"], z["writer"], z["y"]
    assert ds.num_classes == 62 and ds.input_shape == (1, 28, 28)
    assert len(ds.y_train) == (~is_test).sum() and len(ds.y_test) == is_test.sum()
    assert np.array_equal(ds.train_groups.numpy(), writer[~is_test])
    assert np.array_equal(ds.y_test.numpy(), y[is_test])
    assert ds.train_groups.unique().numel() == 105
    leaf = load("femnist", normalize="leaf", test_subset=100)
    assert leaf.x_test.max() <= 1 and leaf.x_test.min() >= 0


@needs_mirror
def test_shakespeare_matches_readme_formula():
    ds = load("shakespeare")
    with np.load(Path(MIRROR) / "shakespeare.npz") as z:
        text, off, ns, ntr, ts, vocab = (
            z[k]
            for k in ("text", "text_offsets", "num_samples", "num_train", "test_start", "vocab")
        )
    vocab = str(vocab)
    assert ds.x_train.dtype == torch.int64 and ds.input_shape == (80,) and ds.num_classes == 80
    n_test = np.maximum(
        ns - ts, 0
    )  # roles whose test_start lies past their last window have no test samples
    assert len(ds.y_train) == ntr.sum() and len(ds.y_test) == n_test.sum()
    for r, i in ((0, 0), (0, 17), (3, int(ntr[3]) - 1), (149, 5)):
        t = text[off[r] : off[r + 1]].tobytes().decode()
        j = int(ntr[:r].sum()) + i  # train samples are stored role by role, in window order
        assert "".join(vocab[k] for k in ds.x_train[j].tolist()) == t[i : i + 80]
        assert ds.y_train[j].item() == vocab.find(t[i + 80]) and ds.train_groups[j].item() == r
    r = 2
    t = text[off[r] : off[r + 1]].tobytes().decode()
    j = int(n_test[:r].sum())  # first test sample of role 2 is window test_start[2]
    i = int(ts[r])
    assert "".join(vocab[k] for k in ds.x_test[j].tolist()) == t[i : i + 80]
    assert ds.y_test[j].item() == vocab.find(t[i + 80]) and ds.test_groups[j].item() == r


# ------------------------------------------------------------------ synthetic (no files)
def test_synthetic_shape_and_determinism():
    a = data.load("synthetic", device="cpu", alpha=1, beta=1, num_clients=20, seed=5)
    b = data.load("synthetic", device="cpu", alpha=1, beta=1, num_clients=20, seed=5)
    c = data.load("synthetic", device="cpu", alpha=1, beta=1, num_clients=20, seed=6)
    assert a.input_shape == (60,) and a.num_classes == 10 and a.x_train.dtype == torch.float32
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.y_train[:50], c.y_train[:50]) or a.x_train.shape != c.x_train.shape
    assert torch.equal(a.train_groups.unique(), torch.arange(20))
    sizes = np.bincount(a.train_groups.numpy()) + np.bincount(a.test_groups.numpy(), minlength=20)
    assert sizes.min() >= 50 and sizes.tolist() == a.meta["samples_per_client"]
    # per device: the first int(0.9 n) samples are train
    assert np.array_equal(np.bincount(a.train_groups.numpy()), (0.9 * sizes).astype(int))
    assert a.y_train.max() < 10 and a.y_train.min() >= 0
    d = data.load("synthetic", device="cpu", dim=8, classes=3, num_clients=4, iid=True)
    assert d.x_train.shape[1] == 8 and d.num_classes == 3
    with pytest.raises(FlkitError, match="alpha"):
        data.load("synthetic", device="cpu", alpha=-1)


# ------------------------------------------------------------------ errors
def test_unknown_name_and_option():
    with pytest.raises(FlkitError) as e:
        data.load("imagenet")
    for n in data.DATASETS:
        assert n in str(e.value)
    with pytest.raises(FlkitError, match="train_subset"):
        data.load("synthetic", device="cpu", bogus=1)


def test_missing_data_error_names_places_and_fix(empty_root, monkeypatch):
    monkeypatch.delenv("FLKIT_MIRROR", raising=False)
    monkeypatch.delenv("FLKIT_DATA", raising=False)
    with pytest.raises(data.DataNotFoundError) as e:
        data.load("mnist", root=empty_root, mirror=None, download=False)
    msg = str(e.value)
    assert "mnist" in msg and str(empty_root) in msg and "mirror" in msg
    assert "flkit data link --mirror" in msg and "flkit data download mnist" in msg
    assert "FLKIT_MIRROR" in msg and "download=False" in msg
    with pytest.raises(data.DataNotFoundError) as e:
        data.load("har", root=empty_root, mirror=str(empty_root / "nomirror"), download=None)
    assert (
        "har" in str(e.value) and "nomirror" in str(e.value) and "flkit data link" in str(e.value)
    )


def _write_idx_gz(path, magic, arr):
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    path.write_bytes(gzip.compress(header + arr.astype(np.uint8).tobytes()))


def _fake_mnist(root, n=20, n_test=10):
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for stem, m in (("train", n), ("t10k", n_test)):
        _write_idx_gz(raw / f"{stem}-images-idx3-ubyte.gz", 2051, rng.integers(0, 256, (m, 28, 28)))
        _write_idx_gz(raw / f"{stem}-labels-idx1-ubyte.gz", 2049, rng.integers(0, 10, m))
    return raw


def test_small_root_in_mirror_layout_loads(tmp_path):
    _fake_mnist(tmp_path)
    ds = data.load("mnist", root=tmp_path, mirror=None, download=False, device="cpu")
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.meta["source_place"] == "root"


@pytest.mark.parametrize(
    "damage, expect",
    [
        ("garbage", "decompress"),
        ("magic", "magic"),
        ("shape", "shape"),
        ("truncated", "decompress"),
    ],
)
def test_corrupt_gz_names_the_file(tmp_path, damage, expect):
    raw = _fake_mnist(tmp_path)
    bad = raw / "train-images-idx3-ubyte.gz"
    if damage == "garbage":
        bad.write_bytes(b"this is not gzip at all")
    elif damage == "magic":
        _write_idx_gz(bad, 2049, np.zeros((20, 28, 28)))
    elif damage == "shape":
        header = (2051).to_bytes(4, "big") + b"".join(
            int(d).to_bytes(4, "big") for d in (20, 28, 28)
        )
        bad.write_bytes(gzip.compress(header + bytes(100)))
    else:
        bad.write_bytes(bad.read_bytes()[:-40])
    with pytest.raises(data.CorruptDataError) as e:
        data.load("mnist", root=tmp_path, mirror=None, download=False, device="cpu")
    assert str(bad) in str(e.value) and expect in str(e.value)


def test_corrupt_npz_names_the_file(tmp_path):
    bad = tmp_path / "cifar10.npz"
    bad.write_bytes(b"PK\x03\x04 definitely not a zip archive")
    with pytest.raises(data.CorruptDataError) as e:
        data.load("cifar10", root=tmp_path, mirror=None, download=False, device="cpu")
    assert str(bad) in str(e.value)
    np.savez(
        bad, x_train=np.zeros((4, 32, 32, 3), np.uint8), y_train=np.zeros(4, np.int64)
    )  # missing keys
    with pytest.raises(data.CorruptDataError, match="missing") as e:
        data.load("cifar10", root=tmp_path, mirror=None, download=False, device="cpu")
    assert str(bad) in str(e.value)
    np.savez(
        bad,
        x_train=np.zeros((4, 28, 28), np.uint8),
        y_train=np.zeros(4, np.int64),
        x_test=np.zeros((4, 32, 32, 3), np.uint8),
        y_test=np.zeros(4, np.int64),
    )  # wrong shape
    with pytest.raises(data.CorruptDataError, match="shape"):
        data.load("cifar10", root=tmp_path, mirror=None, download=False, device="cpu")


# ------------------------------------------------------------------ CLI (flkit data ...)
def test_cli_link_list_verify(tmp_path, capsys):
    mirror = tmp_path / "mirror"
    raw = _fake_mnist(mirror)
    entries = [
        {"name": f"MNIST/raw/{p.name}", "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(raw.iterdir())
    ]
    (mirror / "MANIFEST.json").write_text(json.dumps({"files": entries}))
    root = tmp_path / "root"
    assert data_admin.main(["data", "link", "--mirror", str(mirror), "--root", str(root)]) == 0
    linked = root / "MNIST/raw/train-images-idx3-ubyte.gz"
    assert linked.is_symlink() and linked.resolve() == (raw / linked.name).resolve()
    assert data_admin.main(["data", "list", "--root", str(root), "--mirror", ""]) == 0
    out = capsys.readouterr().out
    assert "mnist" in out and str(root) in out and "missing" in out
    assert (
        data_admin.main(["data", "verify", "mnist", "--root", str(root), "--mirror", str(mirror)])
        == 0
    )
    assert "OK" in capsys.readouterr().out
    # damage the mirror file: verify reports the mismatch and fails
    target = raw / "t10k-labels-idx1-ubyte.gz"
    target.write_bytes(target.read_bytes() + b"x")
    assert (
        data_admin.main(
            ["data", "verify", "mnist", "--mirror", str(mirror), "--root", str(tmp_path / "x")]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "MISMATCH" in out and str(target) in out


def test_cli_download_offline_and_non_downloadable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLKIT_OFFLINE", "1")
    assert data_admin.main(["data", "download", "mnist", "--root", str(tmp_path)]) == 2
    assert "offline" in capsys.readouterr().err
    assert (
        data_admin.main(["data", "download", "femnist", "--root", str(tmp_path)]) == 2
    )  # a bad value
    assert "mirror" in capsys.readouterr().err


def test_cli_help_is_complete():
    import argparse

    parser = argparse.ArgumentParser(prog="flkit")
    data_parser = data_admin.register_cli(parser.add_subparsers())
    text = data_parser.format_help()
    for cmd in ("list", "verify", "download", "link"):
        assert cmd in text


def test_torchvision_cifar_layout_is_read(tmp_path):
    """A data root filled by torchvision's CIFAR10 download (pickled batches) loads too."""
    import pickle

    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8), "labels": [0, 1, 2, 3]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(
        pickle.dumps({"label_names": [f"c{i}" for i in range(10)]})
    )
    ds = data.load(
        "cifar10", root=tmp_path, mirror="", download=False, device="cpu", normalize="none"
    )
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    first = pickle.loads((folder / "data_batch_1").read_bytes())["data"][0]
    assert torch.allclose(
        ds.x_train[0].flatten() * 255, torch.tensor(first, dtype=torch.float32), atol=1e-3
    )
    assert ds.meta["source_layout"] == "cifar-pickle" and ds.meta["classes"][3] == "c3"
