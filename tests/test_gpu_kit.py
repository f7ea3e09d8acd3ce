"""The kit that takes the GPU check to a lent machine (benchmarks/gpu_kit.py) and the script that
runs it there (benchmarks/gpu_lease.sh): the reduced data copy against hand-picked rows and
flkit's own loader, the requirements, the size budget, the script's refusal without a kit."""

import importlib.util
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from flkit import data
from flkit.data import files

ROOT = Path(__file__).resolve().parents[1]


def _kit():
    spec = importlib.util.spec_from_file_location("gpu_kit", ROOT / "benchmarks" / "gpu_kit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_are_spread_evenly_through_the_file():
    kit = _kit()
    assert kit.evenly(10, 4).tolist() == [0, 2, 5, 7]  # floor of 0, 2.5, 5, 7.5
    assert kit.evenly(12, 3).tolist() == [0, 4, 8]
    assert kit.evenly(3, 5).tolist() == [0, 1, 2]  # asking for more keeps all
    with pytest.raises(ValueError, match="positive"):
        kit.evenly(10, 0)


def test_each_split_keeps_the_same_rows_in_every_array_named_for_it():
    kit = _kit()
    arrays = {
        "x_train": np.arange(12).reshape(6, 2),
        "y_train": np.array([0, 1, 2, 0, 1, 2]),
        "train_rank": np.array([10, 11, 12, 13, 14, 15]),
        "x_test": np.arange(4) * 10,
        "y_test": np.array([1, 0, 1, 0]),
        "classes": np.array(["a", "b", "c"]),
    }
    small = kit.shrink(arrays, 3, 2)
    assert small["x_train"].tolist() == [[0, 1], [4, 5], [8, 9]]  # rows 0, 2, 4
    assert small["y_train"].tolist() == [0, 2, 1]
    assert small["train_rank"].tolist() == [10, 12, 14]
    assert small["x_test"].tolist() == [0, 20] and small["y_test"].tolist() == [1, 1]
    assert small["classes"].tolist() == ["a", "b", "c"]
    with pytest.raises(ValueError, match="'train_rank' has 5 rows"):
        kit.shrink({**arrays, "train_rank": np.arange(5)}, 3, 2)
    with pytest.raises(ValueError, match="both splits"):
        kit.shrink({**arrays, "train_test_map": np.arange(6)}, 3, 2)


def test_idx_files_written_read_back_equal(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    for name, arr, magic in (("i.gz", images, 2051), ("l", labels, 2049)):
        files.write_idx(tmp_path / name, arr)
        assert np.array_equal(files.read_idx(tmp_path / name, magic, len(arr)), arr)
    # MNIST's layout, by hand: magic 0x00000801 (uint8, one dimension), the count, the bytes
    files.write_idx(tmp_path / "two", np.array([3, 1], dtype=np.uint8))
    assert (tmp_path / "two").read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 2, 3, 1])
    with pytest.raises(ValueError, match="int64"):
        files.write_idx(tmp_path / "bad", labels.astype(np.int64))


def test_the_kit_data_loads_through_flkit_with_the_rows_chosen(tmp_path, monkeypatch):
    """A mirror of MNIST (IDX) and HAR (npz) made here, reduced by the kit's rule, read back by
    flkit.data.load from the kit's folder: the kept rows are the mirror's rows 0, 2, 5, 7 (of 10)
    and 0, 3 (of 6); a file kept whole is copied."""
    kit = _kit()
    rng = np.random.default_rng(1)
    mirror, dest = tmp_path / "mirror", tmp_path / "kit"
    raw = mirror / "MNIST" / "raw"
    raw.mkdir(parents=True)
    dest.mkdir()
    x = {"train": rng.integers(0, 256, (10, 28, 28), dtype=np.uint8)}
    x["test"] = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8)
    y = {
        "train": np.arange(10, dtype=np.uint8) % 10,
        "test": np.array([5, 4, 3, 2, 1, 0], np.uint8),
    }
    for split, (img, lab) in files.IDX_NAMES.items():
        files.write_idx(raw / f"{img}.gz", x[split])
        files.write_idx(raw / f"{lab}.gz", y[split])
    har = {
        "x_train": rng.normal(size=(10, 9, 128)).astype(np.float32),
        "y_train": np.arange(10) % 6,
        "subject_train": np.arange(10) // 2 + 1,
        "x_test": rng.normal(size=(6, 9, 128)).astype(np.float32),
        "y_test": np.arange(6) % 6,
        "subject_test": np.arange(6) + 20,
    }
    np.savez(mirror / "har.npz", **har)
    (mirror / "shakespeare.npz").write_bytes(b"kept whole")
    monkeypatch.setattr(kit, "SHRINK", {"mnist": (4, 2), "har": (4, 2), "shakespeare": None})
    kept = kit.write_data(mirror, dest)
    assert kept == {
        "mnist": {"train": [4, 10], "test": [2, 6]},
        "har": {"train": [4, 10], "test": [2, 6]},
        "shakespeare": {"whole": "shakespeare.npz"},
    }
    assert (dest / "shakespeare.npz").read_bytes() == b"kept whole"
    ds = data.load("mnist", root=dest, mirror="", device="cpu", download=False, normalize="none")
    assert ds.y_train.tolist() == [0, 2, 5, 7] and ds.y_test.tolist() == [5, 2]
    want = x["train"][[0, 2, 5, 7]].astype(np.float32) / 255
    assert np.allclose(ds.x_train.reshape(4, 28, 28).numpy(), want)
    with np.load(dest / "har.npz") as z:
        assert z["subject_train"].tolist() == [1, 2, 3, 4]  # rows 0, 2, 5, 7
        assert z["subject_test"].tolist() == [20, 23]
        assert np.array_equal(z["x_test"], har["x_test"][[0, 3]])


def test_the_kit_carries_the_notebook_tools_but_jupyterlab():
    kit = _kit()
    names = {r.split(">")[0].split("=")[0].split("<")[0] for r in kit.requirements()}
    assert names == {"ipywidgets", "ipykernel", "papermill", "nbformat", "nbclient"}


def test_a_kit_over_the_budget_is_refused_with_its_sizes():
    kit = _kit()
    kit.check_budget(50 * 2**20, 9 * 2**20, budget_mib=60)
    with pytest.raises(SystemExit, match=r"kit \(58.0 MiB\).*tree \(3.0 MiB\).*61.0 MiB"):
        kit.check_budget(58 * 2**20, 3 * 2**20, budget_mib=60)


def test_the_lease_script_without_a_kit_says_how_to_build_one(tmp_path):
    env = dict(os.environ, KIT=str(tmp_path / "none"), OUT=str(tmp_path / "out"))
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_lease.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "make gpu-kit" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing run, nothing written


def _wheel(folder: Path, name: str, requires: tuple = ()) -> None:
    """A pure-Python wheel with only its metadata, requiring ``requires``."""
    info = f"{name}-1.0.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    wheel = "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", wheel)
        z.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")


def test_the_kit_wheels_must_satisfy_the_requirements_alone(tmp_path):
    """Offline (pip --no-index): a folder whose wheel needs one that is not there is refused,
    naming the check; with the missing wheel added it passes."""
    kit = _kit()
    _wheel(tmp_path, "kitdemo", requires=("kitdep>=1",))
    with pytest.raises(SystemExit, match="from the kit's wheels alone"):
        kit.check_wheels(["kitdemo"], tmp_path, "3.12")
    _wheel(tmp_path, "kitdep")
    kit.check_wheels(["kitdemo"], tmp_path, "3.12")
