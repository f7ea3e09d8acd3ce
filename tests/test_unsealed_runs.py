"""No run folder is served without a manifest that covers it: a finished folder whose
MANIFEST.json was deleted (or never written) is trained again, however readable its files, and a
manifest that leaves a file out does not vouch for it. A checkpoint records the run it belongs to
and is refused in any other run's folder."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from run_folder_fixtures import edit_config, keep_rows, no_round_trained, stopped_in_round
from tiny_runs import TINY_FEDAVG

from flkit import store
from flkit.experiment import RUN_FILES, load, run, run_folder
from flkit.utils import FlkitError

CFG = TINY_FEDAVG


def _edit_history(path) -> None:
    """history.csv with every test accuracy set to 0.99: as many rows, well-formed, wrong."""
    frame = pd.read_csv(path)
    frame["test_accuracy"] = 0.99
    frame.to_csv(path, index=False)


def _truncate_history(path) -> None:
    keep_rows(path, 3)


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("history.csv", _edit_history),
        ("history.csv", _truncate_history),
        ("config.json", edit_config),
    ],
    ids=["history", "history-truncated", "config"],
)
def test_an_edited_folder_without_manifest_is_trained_again(finished_tiny_run, name, edit):
    """MANIFEST.json deleted, then history.csv edited or cut short, or config.json edited: the
    next run says why it trains again and returns the run's own numbers and config."""
    folder, history = finished_tiny_run
    (folder / store.MANIFEST).unlink()
    edit(folder / name)
    with pytest.warns(UserWarning, match=rf"{folder}.*no MANIFEST.json"):
        again = run(CFG, out_dir=folder.parent, progress=False)
    assert again.config == CFG
    pd.testing.assert_frame_equal(again.history, history)
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None  # sealed by its own run
    pd.testing.assert_frame_equal(load(folder).history, history)


def test_a_whole_folder_without_manifest_is_not_loaded_nor_sealed(finished_tiny_run):
    folder, _ = finished_tiny_run
    (folder / store.MANIFEST).unlink()
    assert "no MANIFEST.json" in str(store.RunFolder(folder, RUN_FILES).damage(CFG.rounds))
    with pytest.raises(FlkitError, match=rf"run folder {folder} is damaged .*no MANIFEST.json"):
        load(folder)
    assert not (folder / store.MANIFEST).exists()


def test_a_manifest_that_leaves_a_file_out_does_not_vouch_for_it(finished_tiny_run):
    folder, history = finished_tiny_run
    path = folder / store.MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["files"]["history.csv"]
    path.write_text(json.dumps(manifest))
    _edit_history(folder / "history.csv")
    with pytest.warns(UserWarning, match=rf"{folder}.*does not list history.csv"):
        again = run(CFG, out_dir=folder.parent, progress=False)
    pd.testing.assert_frame_equal(again.history, history)


# ------------------------------------------------------------------------------ checkpoints
def test_a_checkpoint_of_another_config_is_refused(tmp_path, monkeypatch):
    """A checkpoint copied from a run with another config (same thread count) into this run's
    folder: a clear error naming both runs, no round trained, the checkpoint kept."""
    other = stopped_in_round(CFG.replace(lr=0.2), tmp_path, monkeypatch)
    target = run_folder(CFG, tmp_path)
    target.mkdir()
    for name in (store.CHECKPOINT, store.CHECKPOINT_SUM):
        shutil.copy(other / name, target / name)
    no_round_trained(monkeypatch)
    match = rf"{target} holds a checkpoint \(round 2\) that records run {other.name}, not this "
    match += rf"folder's run {target.name}.*delete {target / store.CHECKPOINT}"
    with pytest.raises(FlkitError, match=match):
        run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)
    assert (target / store.CHECKPOINT).is_file() and not store.RunFolder(target, RUN_FILES).finished


def test_a_checkpoint_that_records_no_run_is_refused(tmp_path, monkeypatch):
    """A checkpoint as written before checkpoints recorded their run: nothing binds it to this
    folder, so it is not resumed from."""
    folder = stopped_in_round(CFG, tmp_path, monkeypatch)
    saved = store.load_torch(folder / store.CHECKPOINT)
    saved.pop("run", None)
    store.save_torch(folder / store.CHECKPOINT, saved)
    record = {"round": 2, "sha256": store.file_digest(folder / store.CHECKPOINT)}
    store.save_json(folder / store.CHECKPOINT_SUM, record)
    no_round_trained(monkeypatch)
    with pytest.raises(FlkitError, match=r"records no run .*delete"):
        run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)


def test_a_checkpoint_resumes_in_its_own_folder(tiny_run, tmp_path, monkeypatch):
    """The control of the two refusals above: in its own folder the checkpoint resumes, to the
    numbers of a run never stopped."""
    _, whole = tiny_run
    folder = stopped_in_round(CFG, tmp_path / "c", monkeypatch)
    assert store.load_json(folder / store.CHECKPOINT_SUM)["run"] == folder.name
    resumed = run(CFG, out_dir=tmp_path / "c", progress=False, checkpoint_every=2)
    pd.testing.assert_frame_equal(resumed.history, whole)
