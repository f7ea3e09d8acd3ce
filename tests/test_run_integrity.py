"""A run folder is verified before it is served: a truncated or changed file of a finished run
is reported with the folder's path and trained again, never loaded; a damaged checkpoint is never
resumed from; ``load`` of a damaged folder is a clear error naming it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from run_folder_fixtures import cut_in_half, keep_rows, stopped_in_round
from tiny_runs import TINY_FEDAVG

from flkit import store
from flkit.experiment import RUN_FILES, is_cached, load, run
from flkit.utils import FlkitError

CFG = TINY_FEDAVG


def test_the_manifest_lists_every_file_and_the_row_count(finished_tiny_run):
    folder, history = finished_tiny_run
    manifest = json.loads((folder / store.MANIFEST).read_text())
    assert manifest["rows"] == len(history) == CFG.rounds
    assert set(manifest["files"]) == set(RUN_FILES)
    for name, digest in manifest["files"].items():
        assert store.file_digest(folder / name) == digest
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None


def test_a_truncated_history_is_reported_trained_again_and_sealed(finished_tiny_run):
    """history.csv cut to 3 of its rows: the run trains again, to its own numbers, repairs the
    folder and seals it, and is then served as it is."""
    folder, history = finished_tiny_run
    keep_rows(folder / "history.csv", 3)
    with pytest.warns(store.DamagedRunWarning, match=rf"{folder}.*history.csv"):
        again = run(CFG, out_dir=folder.parent, progress=False)
    pd.testing.assert_frame_equal(again.history, history, check_exact=True)
    assert len(pd.read_csv(folder / "history.csv")) == CFG.rounds
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None
    assert is_cached(CFG, folder.parent)


@pytest.mark.parametrize("name", RUN_FILES)
@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_a_damaged_file_is_a_clear_error_naming_the_folder(finished_tiny_run, name, damage):
    folder, _ = finished_tiny_run
    path = folder / name
    if damage == "empty":
        path.write_bytes(b"")
    else:
        cut_in_half(path)
    with pytest.raises(FlkitError, match=rf"run folder {folder} is damaged .*{name}"):
        load(folder)


def test_a_damaged_checkpoint_is_not_resumed_from(tiny_run, tmp_path, monkeypatch):
    """A crash after the round-2 checkpoint, then the checkpoint truncated: the run trains
    from round 1 again (the same numbers as a run that never stopped) and says why."""
    _, full = tiny_run
    folder = stopped_in_round(CFG, tmp_path, monkeypatch)
    ckpt = folder / store.CHECKPOINT
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    with pytest.warns(UserWarning, match=rf"{folder}.*checkpoint.pt.*round 1"):
        resumed = run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)
    pd.testing.assert_frame_equal(resumed.history, full)


def test_flkit_run_does_not_serve_a_truncated_history(tmp_path, capsys):
    """Through the CLI: the second run says it trains again, not "cached", and ``--out`` gets
    every round."""
    from flkit.cli import main

    cmd = ["run", "fedavg", "--dataset", "synthetic", "--partition", "natural", "--clients", "10"]
    cmd += ["--clients-per-round", "3", "--local-steps", "2", "--batch-size", "10"]
    cmd += ["--rounds", "5", "--backend", "wide", "--device", "cpu", "--no-progress"]
    cmd += ["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    assert main(cmd) == 0
    folder = next(p for p in (tmp_path / "cache").iterdir() if p.name.startswith("fedavg"))
    keep_rows(folder / "history.csv", 3)
    capsys.readouterr()
    with pytest.warns(UserWarning, match=rf"{folder}.*history.csv"):
        assert main(cmd) == 0
    assert "cached" not in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "out" / "history.csv")) == 5
