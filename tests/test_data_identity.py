"""Data identity: every copy of a dataset is named by its content (train/test sizes, checksums
of the labels and of all its arrays); the name is part of every run-cache key, so a run on a
reduced copy, or on a copy with damaged pixels, is never served for the full clean dataset; a
`paper` preset refuses a reduced copy unless the user allows it, and what was used is recorded in
the run folder, in results.json and in the reproduce report. `flkit data verify` checks the files
that load reads.

The fixtures are two CIFAR-10 copies in the mirror's npz layout: a "full" one (its official size
set to 100 train / 20 test for the test) and a "reduced" one holding the first 60 / 12 of them,
as the mirror holds 12,000 / 3,000 of the official 50,000 / 10,000."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from flkit import data
from flkit.asyncfl import FedASTRun
from flkit.asyncfl.runner import cache_key as fedast_key
from flkit.data import admin as data_admin
from flkit.data import provenance as identity
from flkit.experiment import RunConfig, run, run_folder
from flkit.reproduce.render import write_reports
from flkit.utils import resolve_device
from flkit.workbook import presets
from flkit.workbook.report import Report

FULL, REDUCED = (100, 20), (60, 12)


def _write_cifar(folder: Path, n_train: int, n_test: int) -> Path:
    rng = np.random.default_rng(0)  # the same draws for both copies: reduced = a prefix of full
    x_tr = rng.integers(0, 256, (FULL[0], 32, 32, 3), dtype=np.uint8)
    x_te = rng.integers(0, 256, (FULL[1], 32, 32, 3), dtype=np.uint8)
    y_tr, y_te = np.arange(FULL[0]) % 10, np.arange(FULL[1]) % 10
    folder.mkdir(parents=True)
    np.savez(
        folder / "cifar10.npz",
        x_train=x_tr[:n_train],
        y_train=y_tr[:n_train].astype(np.int64),
        x_test=x_te[:n_test],
        y_test=y_te[:n_test].astype(np.int64),
    )
    return folder


@pytest.fixture
def copies(tmp_path, monkeypatch):
    """{'full': root, 'reduced': root}; the official CIFAR-10 size is the full fixture's."""
    monkeypatch.setitem(identity.FULL_SIZES, "cifar10", FULL)
    monkeypatch.setenv("FLKIT_MIRROR", str(tmp_path / "no-mirror"))
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "cache"))
    monkeypatch.delenv(identity.ENV_ALLOW, raising=False)
    monkeypatch.delenv("FLKIT_PRESET", raising=False)
    data.clear_cache()
    yield {
        "full": _write_cifar(tmp_path / "full", *FULL),
        "reduced": _write_cifar(tmp_path / "reduced", *REDUCED),
        "tmp": tmp_path,
    }
    data.clear_cache()


def _use(monkeypatch, root: Path) -> None:
    monkeypatch.setenv("FLKIT_DATA", str(root))


def _config(**kw) -> RunConfig:
    base = dict(
        method="fedavg",
        dataset="cifar10",
        model="cnn_cifar10",
        num_clients=4,
        clients_per_round=2,
        batch_size=10,
        rounds=1,
        lr=0.01,
        backend="loop",
        device="cpu",
    )
    return RunConfig(**{**base, **kw})


def test_identity_names_content_not_place(copies, tmp_path):
    full = data.identity("cifar10", root=copies["full"])
    reduced = data.identity("cifar10", root=copies["reduced"])
    # the checksum, computed independently: SHA-256 of the int64 train labels then test labels
    want = hashlib.sha256(
        (np.arange(60) % 10).astype(np.int64).tobytes()
        + (np.arange(12) % 10).astype(np.int64).tobytes()
    ).hexdigest()
    assert reduced["labels_sha256"] == want
    assert (reduced["train"], reduced["test"], reduced["reduced"]) == (60, 12, True)
    assert (full["train"], full["test"], full["reduced"]) == (100, 20, False)
    assert identity.cache_key(full) != identity.cache_key(reduced)
    # the same bytes in another folder: the same content key (the path is recorded, not keyed)
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "cifar10.npz").write_bytes((copies["full"] / "cifar10.npz").read_bytes())
    again = data.identity("cifar10", root=moved)
    assert identity.cache_key(again) == identity.cache_key(full)
    assert again["source"] != full["source"]


def test_run_on_reduced_copy_is_not_served_for_the_full_one(copies, monkeypatch):
    cfg = _config()
    _use(monkeypatch, copies["reduced"])
    small = run(cfg, progress=False)
    assert json.loads((small.run_dir / "meta.json").read_text())["data"]["train"] == 60
    _use(monkeypatch, copies["full"])
    assert run_folder(cfg) != small.run_dir  # a different key for the same config
    full = run(cfg, progress=False)
    assert full.run_dir != small.run_dir
    meta = json.loads((full.run_dir / "meta.json").read_text())["data"]
    assert (meta["train"], meta["test"], meta["reduced"]) == (100, 20, False)
    assert full.history.attrs["data"]["labels_sha256"] == meta["labels_sha256"]
    _use(monkeypatch, copies["reduced"])  # back on the reduced copy: its own run is loaded
    assert run(cfg, progress=False).run_dir == small.run_dir


def _repixel(src: Path, dst: Path) -> Path:
    """A copy of the cifar10.npz in ``src`` with one pixel changed: same sizes, same labels."""
    with np.load(src / "cifar10.npz") as z:
        arrays = {k: z[k].copy() for k in z.files}
    arrays["x_train"][0, 0, 0, 0] ^= 0xFF
    dst.mkdir()
    np.savez(dst / "cifar10.npz", **arrays)
    return dst


def test_copies_that_differ_only_in_pixels_have_different_identities(copies):
    damaged = _repixel(copies["full"], copies["tmp"] / "damaged")
    clean = data.identity("cifar10", root=copies["full"])
    other = data.identity("cifar10", root=damaged)
    assert (other["train"], other["test"]) == (clean["train"], clean["test"])
    assert other["labels_sha256"] == clean["labels_sha256"]
    assert identity.cache_key(other) != identity.cache_key(clean)
    # the content checksum, computed independently: every array in name order, each as
    # 'name|dtype|shape' and a newline, then its bytes
    h = hashlib.sha256()
    with np.load(copies["full"] / "cifar10.npz") as z:
        for k in sorted(z.files):
            a = z[k]
            h.update(f"{k}|{a.dtype.str}|{a.shape}\n".encode() + a.tobytes())
    assert clean["content_sha256"] == h.hexdigest()


def test_run_on_damaged_pixels_is_not_served_for_the_clean_copy(copies, monkeypatch):
    damaged = _repixel(copies["full"], copies["tmp"] / "damaged")
    cfg = _config()
    _use(monkeypatch, damaged)
    bad = run(cfg, progress=False)
    _use(monkeypatch, copies["full"])
    assert run_folder(cfg) != bad.run_dir
    good = run(cfg, progress=False)
    assert good.run_dir != bad.run_dir
    assert (
        good.history.attrs["data"]["content_sha256"] != bad.history.attrs["data"]["content_sha256"]
    )


def _mnist_mirror(mirror: Path) -> Path:
    """MNIST's four .gz files and a MANIFEST.json with their sha256."""
    raw = mirror / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for stem, m in (("train", 30), ("t10k", 10)):
        for kind, magic, arr in (
            ("images-idx3", 2051, rng.integers(0, 256, (m, 28, 28))),
            ("labels-idx1", 2049, np.arange(m) % 10),
        ):
            head = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in arr.shape)
            body = gzip.compress(head + arr.astype(np.uint8).tobytes(), mtime=0)
            (raw / f"{stem}-{kind}-ubyte.gz").write_bytes(body)
    files = [
        {"name": f"MNIST/raw/{p.name}", "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(raw.iterdir())
    ]
    (mirror / "MANIFEST.json").write_text(json.dumps({"files": files}))
    return raw


def test_verify_checks_the_files_load_reads(tmp_path, capsys):
    """The data root holds MNIST's training images unpacked (load reads that file, not the
    mirror's .gz) and links for the rest: verify compares the unpacked file with the unpacked
    content of the .gz on record, so damaged pixels are found, not skipped."""
    raw = _mnist_mirror(tmp_path / "mirror")
    root_raw = tmp_path / "root" / "MNIST" / "raw"
    root_raw.mkdir(parents=True)
    for name in ("train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (root_raw / name).symlink_to(raw / name)
    (root_raw / "t10k-labels-idx1-ubyte.gz").symlink_to(raw / "t10k-labels-idx1-ubyte.gz")
    target = root_raw / "train-images-idx3-ubyte"
    clean = gzip.decompress((raw / "train-images-idx3-ubyte.gz").read_bytes())
    target.write_bytes(clean)
    root, mirror = tmp_path / "root", tmp_path / "mirror"
    assert data.locate("mnist", root, mirror)[2][0] == target  # the file load reads
    args = ["data", "verify", "mnist", "--root", str(root), "--mirror", str(mirror)]
    assert data_admin.main(args) == 0
    out = capsys.readouterr().out
    assert f"OK       mnist        {target} (read by load)" in out
    damaged = bytearray(clean)
    damaged[-1] ^= 0xFF  # one pixel: the file still decodes, with the same size
    target.write_bytes(bytes(damaged))
    assert data_admin.main(args) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH mnist        {target}" in out and "1 bad" in out


def test_fedast_cache_key_names_each_task_copy(copies, monkeypatch):
    cfg = FedASTRun(
        "fedast",
        ({"name": "c", "dataset": "cifar10", "target": 0.5, "requests": 4, "buffer": 2},),
        num_clients=20,
        max_time=5.0,
    ).validate()
    keys = {}
    for name in ("full", "reduced"):
        _use(monkeypatch, copies[name])
        keys[name] = fedast_key(cfg, 0, resolve_device("cpu"))
    assert keys["full"]["config"] == keys["reduced"]["config"]
    assert [d["train"] for d in keys["full"]["data"]] == [100]
    assert [d["train"] for d in keys["reduced"]["data"]] == [60]
    assert keys["full"] != keys["reduced"]


def _open(preset, tmp: Path) -> Report:
    """The notebook's Report: it makes its preset the active one for the full-data rule."""
    return Report("01_stc_projection", preset, 0, out_dir=tmp / "report", autosave=False)


def test_paper_preset_refuses_a_reduced_copy(copies, monkeypatch):
    _use(monkeypatch, copies["reduced"])
    presets.load("01_stc_projection", "paper")  # reading a preset's values changes nothing
    assert data.load("cifar10", device="cpu").meta["identity"]["reduced"] is True
    _open(presets.load("01_stc_projection", "paper"), copies["tmp"])
    with pytest.raises(identity.ReducedDataError) as err:
        data.load("cifar10", device="cpu")
    msg = str(err.value)
    for part in (
        "'paper'",
        "cifar10",
        "60 train / 12 test",  # found
        "100 train / 20 test",  # expected
        "allow_reduced_data=True",
        "FLKIT_ALLOW_REDUCED_DATA=1",
        "--allow-reduced-data",
    ):
        assert part in msg, part
    with pytest.raises(identity.ReducedDataError):  # a run stops before training or caching
        run(_config(), progress=False)
    assert not (copies["tmp"] / "cache").exists()
    _use(monkeypatch, copies["full"])  # the full copy is accepted at `paper`
    assert len(data.load("cifar10", device="cpu").y_train) == 100
    _use(monkeypatch, copies["reduced"])  # other presets take the reduced copy
    _open(presets.load("01_stc_projection", "cpu"), copies["tmp"])
    presets.load("01_stc_projection", "paper")  # e.g. to show the paper's values beside ours
    assert data.load("cifar10", device="cpu").meta["identity"]["reduced"] is True


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_allowed_reduced_run_records_the_reduced_copy(copies, monkeypatch, how):
    _use(monkeypatch, copies["reduced"])
    if how == "argument":
        preset = presets.load("01_stc_projection", "paper", allow_reduced_data=True)
    else:
        monkeypatch.setenv(identity.ENV_ALLOW, "1")
        preset = presets.load("01_stc_projection", "paper")
    report = Report("01_stc_projection", preset, 0, out_dir=copies["tmp"] / "report")
    res = run(_config(), progress=False)
    meta = json.loads((res.run_dir / "meta.json").read_text())["data"]
    assert meta["reduced"] is True and (meta["train"], meta["test"]) == REDUCED
    saved = json.loads(report.save().read_text())
    assert [(d["dataset"], d["train"], d["reduced"]) for d in saved["data"]] == [
        ("cifar10", 60, True)
    ]
    assert saved["data_rule"] == {"preset": "paper", "allow_reduced": True}


def test_bad_override_values_are_refused(monkeypatch):
    with pytest.raises(identity.FlkitError, match="allow_reduced_data='yes'"):
        presets.load("01_stc_projection", "paper", allow_reduced_data="yes")
    monkeypatch.setenv(identity.ENV_ALLOW, "maybe")
    with pytest.raises(identity.FlkitError, match="FLKIT_ALLOW_REDUCED_DATA='maybe'"):
        identity.reduced_allowed()


def test_report_lists_the_data_each_notebook_used(copies, monkeypatch):
    out = copies["tmp"] / "out"
    _use(monkeypatch, copies["reduced"])
    with_data = Report("nb_a", "cpu", 0, out_dir=out / "nb_a" / "seed0")
    data.load("cifar10", device="cpu", train_subset=30)
    with_data.number("x", 1.0)
    old = Report("nb_b", "cpu", 0, out_dir=out / "nb_b" / "seed0")
    old.number("x", 1.0)
    d = json.loads(old.path.read_text())
    d.pop("data")  # a results.json written before the data was recorded
    old.path.write_text(json.dumps(d))
    infos = [
        {
            "notebook": n,
            "seed": 0,
            "status": "ok",
            "results": True,
            "wall_time_s": 1.0,
            "parameters": {"preset": "cpu", "seed": 0},
        }
        for n in ("nb_a", "nb_b")
    ]
    plan = {
        "out": out,
        "notebooks": ["nb_a", "nb_b"],
        "preset": "cpu",
        "seeds": [0],
        "jobs": 1,
        "overrides": {},
        "notebooks_dir": str(out),
    }
    monkeypatch.setattr(presets, "meta", lambda name: {"title": name, "notebook": f"{name}.ipynb"})
    md = write_reports(plan, infos).read_text()
    a, b = md.split("## nb_a")[1].split("## nb_b")
    assert "Data used: cifar10: 60 train / 12 test, REDUCED copy (full 100 / 20)" in a
    assert "Data used: not recorded" in b
    assert "REDUCED copy" in (out / "report.html").read_text()


@pytest.mark.skipif(not data.locate("cifar10"), reason="needs the dataset mirror")
def test_the_mirror_cifar10_is_a_reduced_copy_refused_at_paper():
    ident = data.identity("cifar10")
    assert (ident["train"], ident["test"], ident["reduced"]) == (12_000, 3_000, True)
    Report("03_fedast", presets.load("03_fedast", "paper"), 0, autosave=False)
    with pytest.raises(identity.ReducedDataError, match="12,000 train / 3,000 test"):
        data.identity("cifar10")


def test_reproduce_passes_the_override_to_every_run(tmp_path, monkeypatch):
    import argparse

    from flkit import reproduce as rp
    from flkit.reproduce.command import register_cli, run_kwargs
    from flkit.utils import FlkitError

    fixtures = Path(__file__).resolve().parent / "fixtures"
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(fixtures / "presets"))
    kw = dict(preset="smoke", notebooks_dir=fixtures / "notebooks", out=tmp_path / "out")
    assert all(r["allow_reduced_data"] is False for r in rp.plan(**kw)["runs"])
    runs = rp.plan(**kw, allow_reduced_data=True)["runs"]
    assert runs and all(r["allow_reduced_data"] is True for r in runs)
    with pytest.raises(FlkitError, match="allow_reduced_data='yes'"):
        rp.plan(**kw, allow_reduced_data="yes")
    parser = argparse.ArgumentParser()
    register_cli(parser.add_subparsers())
    args = parser.parse_args(["reproduce", "--preset", "paper", "--allow-reduced-data"])
    assert run_kwargs(args)["allow_reduced_data"] is True
    args = parser.parse_args(["reproduce", "--preset", "paper"])
    assert run_kwargs(args)["allow_reduced_data"] is False
