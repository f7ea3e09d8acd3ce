"""A run folder is verified before it is served: a truncated or changed file of a finished run
is reported with the folder's path and trained again, never loaded; a damaged checkpoint is never
resumed from; ``load`` of a damaged folder is a clear error naming it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from tiny_runs import TINY_FEDAVG

from flkit import store
from flkit.experiment import RUN_FILES, load, run, run_folder
from flkit.utils import FlkitError

CFG = TINY_FEDAVG


@pytest.fixture()
def finished(tmp_path):
    """A finished run's folder and its history, as run() wrote them."""
    history = run(CFG, out_dir=tmp_path, progress=False).history
    return run_folder(CFG, tmp_path), history


def _truncate_history(folder):
    """history.csv cut to its header and first 3 rows: still a well-formed csv."""
    path = folder / "history.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:4]))


def test_the_manifest_lists_every_file_and_the_row_count(finished):
    folder, history = finished
    manifest = json.loads((folder / store.MANIFEST).read_text())
    assert manifest["rows"] == len(history) == CFG.rounds
    assert set(manifest["files"]) == set(RUN_FILES)
    for name, digest in manifest["files"].items():
        assert store.file_digest(folder / name) == digest
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None


def test_a_truncated_history_is_reported_and_trained_again(finished, tmp_path):
    folder, history = finished
    _truncate_history(folder)
    with pytest.warns(UserWarning, match=rf"{folder}.*history.csv"):
        again = run(CFG, out_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.history, history)  # trained again: all rows, same numbers
    assert len(pd.read_csv(folder / "history.csv")) == CFG.rounds  # and the folder repaired
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None


def test_a_truncated_history_without_a_manifest_is_trained_again(finished, tmp_path):
    """A folder without a manifest is never served, whole or not (tests/test_unsealed_runs.py)."""
    folder, history = finished
    (folder / store.MANIFEST).unlink()
    _truncate_history(folder)
    with pytest.warns(UserWarning, match="no MANIFEST.json"):
        again = run(CFG, out_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.history, history)


@pytest.mark.parametrize("name", RUN_FILES)
@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_a_damaged_file_is_a_clear_error_naming_the_folder(finished, name, damage):
    folder, _ = finished
    path = folder / name
    data = path.read_bytes()
    path.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    with pytest.raises(FlkitError, match=rf"run folder {folder} is damaged .*{name}"):
        load(folder)


def test_a_damaged_checkpoint_is_not_resumed_from(tmp_path, monkeypatch):
    """A crash after the round-2 checkpoint, then the checkpoint truncated: the run trains
    from round 1 again (the same numbers as a run that never stopped) and says why."""
    from flkit import methods

    full = run(CFG, out_dir=tmp_path / "a", progress=False).history
    cls = methods.get("fedavg")
    orig = cls.aggregate

    def crash(self, state, updates, rnd):
        if rnd == 3:
            raise KeyboardInterrupt("simulated crash")
        return orig(self, state, updates, rnd)

    monkeypatch.setattr(cls, "aggregate", crash)
    with pytest.raises(KeyboardInterrupt):
        run(CFG, out_dir=tmp_path / "b", progress=False, checkpoint_every=2)
    monkeypatch.setattr(cls, "aggregate", orig)
    folder = run_folder(CFG, tmp_path / "b")
    ckpt = folder / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    with pytest.warns(UserWarning, match=rf"{folder}.*checkpoint.pt.*round 1"):
        resumed = run(CFG, out_dir=tmp_path / "b", progress=False, checkpoint_every=2)
    pd.testing.assert_frame_equal(resumed.history, full)


def test_flkit_run_does_not_serve_a_truncated_history(tmp_path, capsys):
    """The issue's case through the CLI: the second run says it trains again, not "cached", and
    ``--out`` gets every round."""
    from flkit.cli import main

    cmd = ["run", "fedavg", "--dataset", "synthetic", "--partition", "natural", "--clients", "10"]
    cmd += ["--clients-per-round", "3", "--local-steps", "2", "--batch-size", "10"]
    cmd += ["--rounds", "5", "--backend", "wide", "--device", "cpu", "--no-progress"]
    cmd += ["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    assert main(cmd) == 0
    folder = next(p for p in (tmp_path / "cache").iterdir() if p.name.startswith("fedavg"))
    _truncate_history(folder)
    capsys.readouterr()
    with pytest.warns(UserWarning, match=rf"{folder}.*history.csv"):
        assert main(cmd) == 0
    assert "cached" not in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "out" / "history.csv")) == 5
