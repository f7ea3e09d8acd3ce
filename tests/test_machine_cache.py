"""The machine cache (decoded arrays under ``$FLKIT_MACHINE_DIR/data``) is checked like the run
cache: an array edited in place, or an entry.json changed, is reported, removed and rebuilt from
the source files, never served under the clean copy's content key; an unchanged file is hashed
once per process; ``flkit data verify`` checks the entry and exits 1 when it checked nothing; the
grader gives every student's kernel a machine folder of its own."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from flkit import data
from flkit.data import admin, decoded

N_TRAIN, N_TEST = 40, 20


def _fake_mnist(root: Path) -> Path:
    """MNIST's four IDX files, unpacked; the pixels are seeded, the labels 0..9 in turn."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for stem, m in (("train", N_TRAIN), ("t10k", N_TEST)):
        for kind, magic, arr in (
            ("images-idx3", 2051, rng.integers(0, 256, (m, 28, 28))),
            ("labels-idx1", 2049, np.arange(m) % 10),
        ):
            head = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
            (raw / f"{stem}-{kind}-ubyte").write_bytes(head + arr.astype(np.uint8).tobytes())
    return raw


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fresh machine folder that keeps every copy's arrays, and a data root with MNIST."""
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("FLKIT_MIRROR", "")
    monkeypatch.setattr(decoded, "MIN_ARRAY_BYTES", 0)
    _fake_mnist(tmp_path / "root")
    data.clear_cache()
    yield tmp_path / "machine" / "data"
    data.clear_cache()


def _load(tmp_path):
    return data.load("mnist", root=tmp_path / "root", device="cpu", download=False)


def _entry(machine: Path) -> Path:
    (entry,) = [p for p in machine.iterdir() if not p.name.startswith(".")]
    return entry


def _invert_in_place(path: Path) -> None:
    """255 - every pixel, written over the array's bytes in the same file (header kept)."""
    array = np.load(path)
    header = path.stat().st_size - array.nbytes
    with open(path, "r+b") as fh:
        fh.seek(header)
        fh.write((255 - array).astype(array.dtype).tobytes())


def test_an_array_edited_in_place_is_reported_rebuilt_and_never_served(machine, tmp_path):
    """The issue's finding: x_train.npy inverted in place in the machine folder. The next load
    says which entry and file, and trains on the clean pixels (255 - x is not served)."""
    clean = _load(tmp_path)
    target = _entry(machine) / "x_train.npy"
    _invert_in_place(target)
    assert not np.array_equal(np.load(target), 255 - np.load(target))  # really changed
    data.clear_cache()  # what a new process starts with
    with pytest.warns(UserWarning, match=r"machine cache entry .* is damaged: x_train\.npy"):
        again = _load(tmp_path)
    assert torch.equal(again.x_train, clean.x_train)
    assert again.meta["identity"] == clean.meta["identity"]
    # rebuilt: the entry holds the clean pixels again and is read back without a word
    data.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = _load(tmp_path)
    assert torch.equal(third.x_train, clean.x_train)


def test_a_changed_record_is_reported_and_rebuilt(machine, tmp_path):
    """entry.json's content checksum edited: the identity served is the copy's true one."""
    clean = _load(tmp_path)
    path = _entry(machine) / "entry.json"
    entry = json.loads(path.read_text())
    entry["facts"]["content_sha256"] = "0" * 64
    path.write_text(json.dumps(entry))
    data.clear_cache()
    with pytest.warns(UserWarning, match="entry.json does not match its seal"):
        again = _load(tmp_path)
    assert again.meta["identity"] == clean.meta["identity"]


def test_a_truncated_array_is_found_by_its_size(machine, tmp_path):
    clean = _load(tmp_path)
    target = _entry(machine) / "y_train.npy"
    target.write_bytes(target.read_bytes()[:-3])
    data.clear_cache()
    with pytest.warns(UserWarning, match=r"y_train\.npy holds \d+ bytes"):
        again = _load(tmp_path)
    assert torch.equal(again.y_train, clean.y_train)


def test_an_unchanged_file_is_hashed_once_per_process(machine, tmp_path, monkeypatch):
    _load(tmp_path)  # writes the entry
    calls = []
    real = decoded.array_sha256
    monkeypatch.setattr(decoded, "array_sha256", lambda a: calls.append(a.shape) or real(a))
    for _ in range(2):
        data.clear_cache()
        _load(tmp_path)
    assert len(calls) == 4  # each of the four arrays once, the second load none
    target = _entry(machine) / "x_test.npy"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # the file changed: hashed again
    data.clear_cache()
    _load(tmp_path)
    assert calls[4:] == [(N_TEST, 28, 28)]


def _verify(tmp_path, *names) -> int:
    return admin.main(["data", "verify", *names, "--root", str(tmp_path / "root"), "--mirror", ""])


def test_verify_checks_the_machine_entry_and_rebuilds_a_damaged_one(machine, tmp_path, capsys):
    _load(tmp_path)
    entry = _entry(machine)
    assert _verify(tmp_path, "mnist") == 0
    assert f"OK       mnist        {entry} (machine cache" in capsys.readouterr().out
    _invert_in_place(entry / "x_train.npy")
    assert _verify(tmp_path, "mnist") == 1
    out = capsys.readouterr().out
    assert f"DAMAGED  mnist        {entry} (machine cache): x_train.npy" in out and "1 bad" in out
    assert _verify(tmp_path, "mnist") == 0  # rebuilt from the source files
    assert "(machine cache" in capsys.readouterr().out


def test_verify_fails_when_nothing_was_checked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLKIT_MIRROR", "")
    (tmp_path / "root").mkdir()
    assert _verify(tmp_path, "mnist") == 1
    assert "nothing was checked" in capsys.readouterr().out
    assert _verify(tmp_path) == 1  # every dataset, none found


def test_verify_fails_when_a_named_dataset_is_found_nowhere(machine, tmp_path, capsys):
    assert _verify(tmp_path, "mnist", "cifar10") == 1
    out = capsys.readouterr().out
    assert "missing  cifar10" in out and "not found: cifar10" in out


def test_the_grader_gives_each_kernel_a_machine_folder_of_its_own(tmp_path, monkeypatch):
    """Whatever $FLKIT_MACHINE_DIR the instructor set, a student's kernel (started inside
    nbgrader's autograde) sees a machine folder inside its own task folder."""
    from flkit.course import autograde
    from flkit.course.course_dir import ASSIGNMENT

    instructor = tmp_path / "instructor-machine"
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(instructor))
    root = tmp_path / "course"
    (root / "source").mkdir(parents=True)
    (root / "gradebook.db").write_bytes(b"")
    sub = root / "submitted" / "alice" / ASSIGNMENT
    sub.mkdir(parents=True)
    (sub / "00_fl_primer.ipynb").write_text("{}")
    seen = {}

    class StopError(Exception):
        pass

    class FakeApi:
        def autograde(self, assignment, student):
            seen.update(os.environ)
            raise StopError

    monkeypatch.setattr(autograde, "course_api", lambda *a, **k: FakeApi())
    task = autograde.Task(str(root), "alice", "00_fl_primer", 10)
    with pytest.raises(StopError):
        autograde.grade_one(task)
    kernel_machine = Path(seen["FLKIT_MACHINE_DIR"])
    assert kernel_machine != instructor
    assert task.folder in kernel_machine.parents
    assert os.environ["FLKIT_MACHINE_DIR"] == str(instructor)  # restored afterwards
