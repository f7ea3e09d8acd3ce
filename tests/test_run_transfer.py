"""Run-cache folders carried between machines (flkit.reproduce.run_transfer): what a Ray task
trained comes back whole into this machine's cache, and a node takes only what it lacks."""

from __future__ import annotations

import pytest

from flkit.reproduce.run_transfer import folder_files, holds, install, manifest


def _folder(root, name, files):
    for rel, data in files.items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root / name


def test_a_folder_goes_and_comes_back_byte_for_byte(tmp_path):
    a = _folder(tmp_path / "a", "fedavg-1", {"config.json": b"{}", "sub/history.csv": b"1,2\n"})
    (a / ".history.csv.tmp").write_bytes(b"half")  # a writer's temporary file stays behind
    files = folder_files(tmp_path / "a", [a, tmp_path / "a" / "missing"])
    assert files == {"fedavg-1/config.json": b"{}", "fedavg-1/sub/history.csv": b"1,2\n"}
    assert install(tmp_path / "b", files) == ["fedavg-1"]
    assert folder_files(tmp_path / "b", [tmp_path / "b" / "fedavg-1"]) == files
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["fedavg-1"]  # nothing left aside


def test_install_replaces_a_shorter_run_whole(tmp_path):
    # the node's checkpoint of round 2 gives way to the finished run: no file of it stays
    _folder(tmp_path, "r", {"checkpoint.pt": b"round 2", "checkpoint.json": b"{}"})
    install(tmp_path, {"r/history.csv": b"rows", "r/meta.json": b"{}"})
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["history.csv", "meta.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_holds_compares_every_file_and_no_more(tmp_path):
    files = {"r/a": b"12", "r/b": b"345"}
    sizes = manifest(files)
    assert sizes == {"r/a": 2, "r/b": 3}
    assert not holds(tmp_path, sizes)  # nothing there
    install(tmp_path, files)
    assert holds(tmp_path, sizes)
    (tmp_path / "r" / "b").write_bytes(b"34")  # cut short
    assert not holds(tmp_path, sizes)
    install(tmp_path, files)
    (tmp_path / "r" / "c").write_bytes(b"")  # a file the sender had not
    assert not holds(tmp_path, sizes)


@pytest.mark.parametrize("rel", ["../x/a", "/abs/a", "a", "r/../../a"])
def test_a_path_outside_the_cache_is_refused_before_writing(tmp_path, rel):
    with pytest.raises(ValueError, match="is not FOLDER/FILE inside the cache"):
        install(tmp_path / "c", {"ok/a": b"1", rel: b"2"})
    assert not (tmp_path / "c").exists()
