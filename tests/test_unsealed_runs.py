"""No run folder is served without a manifest that covers it: a finished folder whose
MANIFEST.json was deleted (or never written) is trained again, however readable its files, and a
manifest that leaves a file out does not vouch for it. A checkpoint records the run it belongs to
and is refused in any other run's folder."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from tiny_runs import TINY_FEDAVG

from flkit import methods, store
from flkit.experiment import RUN_FILES, load, run, run_folder
from flkit.utils import FlkitError

CFG = TINY_FEDAVG


@pytest.fixture()
def finished(tmp_path):
    """A finished run's folder and its history, as run() wrote them."""
    history = run(CFG, out_dir=tmp_path, progress=False).history
    return run_folder(CFG, tmp_path), history


def _edit_history(folder) -> None:
    """history.csv with every test accuracy set to 0.99: as many rows, well-formed, wrong."""
    path = folder / "history.csv"
    frame = pd.read_csv(path)
    frame["test_accuracy"] = 0.99
    frame.to_csv(path, index=False)


def _edit_config(folder) -> None:
    """config.json with another learning rate: still a valid config of as many rounds."""
    path = folder / "config.json"
    key = json.loads(path.read_text())
    key["lr"] = 0.5
    path.write_text(json.dumps(key))


@pytest.mark.parametrize("edit", [_edit_history, _edit_config], ids=["history", "config"])
def test_an_edited_folder_without_manifest_is_trained_again(finished, tmp_path, edit):
    """The issue's finding: MANIFEST.json deleted, then history.csv or config.json edited; the
    next run says why it trains again and returns the run's own numbers and config."""
    folder, history = finished
    (folder / store.MANIFEST).unlink()
    edit(folder)
    with pytest.warns(UserWarning, match=rf"{folder}.*no MANIFEST.json"):
        again = run(CFG, out_dir=tmp_path, progress=False)
    assert again.config == CFG
    pd.testing.assert_frame_equal(again.history, history)
    assert store.RunFolder(folder, RUN_FILES).damage(CFG.rounds) is None  # sealed by its own run
    pd.testing.assert_frame_equal(load(folder).history, history)


def test_a_whole_folder_without_manifest_is_not_loaded_nor_sealed(finished):
    folder, _ = finished
    (folder / store.MANIFEST).unlink()
    assert "no MANIFEST.json" in str(store.RunFolder(folder, RUN_FILES).damage(CFG.rounds))
    with pytest.raises(FlkitError, match=rf"run folder {folder} is damaged .*no MANIFEST.json"):
        load(folder)
    assert not (folder / store.MANIFEST).exists()


def test_a_manifest_that_leaves_a_file_out_does_not_vouch_for_it(finished, tmp_path):
    folder, history = finished
    path = folder / store.MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["files"]["history.csv"]
    path.write_text(json.dumps(manifest))
    _edit_history(folder)
    with pytest.warns(UserWarning, match=rf"{folder}.*does not list history.csv"):
        again = run(CFG, out_dir=tmp_path, progress=False)
    pd.testing.assert_frame_equal(again.history, history)


# ------------------------------------------------------------------------------ checkpoints
def _crash_after_round_2(cfg, root, monkeypatch):
    """``cfg`` run under ``root`` and killed in round 3, after its round-2 checkpoint."""
    cls = methods.get("fedavg")
    orig = cls.aggregate

    def crash(self, state, updates, rnd):
        if rnd == 3:
            raise KeyboardInterrupt("simulated crash")
        return orig(self, state, updates, rnd)

    monkeypatch.setattr(cls, "aggregate", crash)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out_dir=root, progress=False, checkpoint_every=2)
    monkeypatch.setattr(cls, "aggregate", orig)
    folder = run_folder(cfg, root)
    assert (folder / store.CHECKPOINT).is_file()
    return folder


def _no_round_trained(monkeypatch):
    cls = methods.get("fedavg")
    monkeypatch.setattr(cls, "aggregate", lambda *a: pytest.fail("a round was trained"))


def test_a_checkpoint_of_another_config_is_refused(tmp_path, monkeypatch):
    """The issue's finding: a checkpoint copied from a run with another config (same thread
    count) into this run's folder was resumed without a word."""
    other = _crash_after_round_2(CFG.replace(lr=0.2), tmp_path, monkeypatch)
    target = run_folder(CFG, tmp_path)
    target.mkdir()
    for name in (store.CHECKPOINT, store.CHECKPOINT_SUM):
        shutil.copy(other / name, target / name)
    _no_round_trained(monkeypatch)
    match = rf"{target} holds a checkpoint \(round 2\) that records run {other.name}, not this "
    match += rf"folder's run {target.name}.*delete {target / store.CHECKPOINT}"
    with pytest.raises(FlkitError, match=match):
        run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)
    assert (target / store.CHECKPOINT).is_file() and not store.RunFolder(target, RUN_FILES).finished


def test_a_checkpoint_that_records_no_run_is_refused(tmp_path, monkeypatch):
    """A checkpoint as written before checkpoints recorded their run: nothing binds it to this
    folder, so it is not resumed from."""
    folder = _crash_after_round_2(CFG, tmp_path, monkeypatch)
    saved = store.load_torch(folder / store.CHECKPOINT)
    saved.pop("run", None)
    store.save_torch(folder / store.CHECKPOINT, saved)
    record = {"round": 2, "sha256": store.file_digest(folder / store.CHECKPOINT)}
    store.save_json(folder / store.CHECKPOINT_SUM, record)
    _no_round_trained(monkeypatch)
    with pytest.raises(FlkitError, match=r"records no run .*delete"):
        run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)


def test_a_checkpoint_resumes_in_its_own_folder(tmp_path, monkeypatch):
    whole = run(CFG, out_dir=tmp_path / "whole", progress=False).history
    folder = _crash_after_round_2(CFG, tmp_path / "c", monkeypatch)
    assert store.load_json(folder / store.CHECKPOINT_SUM)["run"] == folder.name
    resumed = run(CFG, out_dir=tmp_path / "c", progress=False, checkpoint_every=2)
    pd.testing.assert_frame_equal(resumed.history, whole)
