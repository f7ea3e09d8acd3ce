"""A run folder (flkit.store.RunFolder) damaged in any of its files is reported with the file and
why, and never served as finished: each file of a finished FedAvg run and of a finished FedAST
run, its seal (MANIFEST.json, DONE), its identity (a folder copied to another run's name) and
each file of a checkpoint. A run killed with SIGKILL resumes from its last checkpoint and writes
the numbers of a run never stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from run_folder_fixtures import cut_in_half, edit_config, keep_rows, rounds_trained
from tiny_runs import TINY_FEDAVG

from flkit import store
from flkit.asyncfl import FedASTRun, runner
from flkit.experiment import RUN_FILES, RunConfig, is_cached, load, run, run_folder
from flkit.utils import FlkitError

CFG = TINY_FEDAVG
TESTS = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------ damage by hand
def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_text("{not json")


#: (file, what is done to it, what the report says): every file a finished run's folder holds
FINISHED = [
    ("config.json", edit_config, "does not match its checksum in MANIFEST.json"),
    ("history.csv", cut_in_half, "does not match its checksum in MANIFEST.json"),
    ("final_state.pt", _flip_last_byte, "does not match its checksum in MANIFEST.json"),
    ("meta.json", Path.unlink, "meta.json is missing"),
    ("MANIFEST.json", Path.unlink, "it has no MANIFEST.json"),
    ("MANIFEST.json", _garbage, "MANIFEST.json cannot be read"),
    ("DONE", Path.unlink, "DONE is missing"),
]
IDS = [f"{name}-{damage.__name__.strip('_')}" for name, damage, _ in FINISHED]


@pytest.fixture()
def finished(finished_tiny_run):
    """A fresh copy of the finished tiny run, as the RunFolder run() opens, and its history."""
    path, history = finished_tiny_run
    folder = store.RunFolder(path, RUN_FILES, CFG.key())
    assert folder.finished and folder.damage(CFG.rounds) is None
    return folder, history


@pytest.mark.parametrize(("name", "damage", "said"), FINISHED, ids=IDS)
def test_a_finished_run_damaged_in_any_file_is_reported_and_never_served(
    finished, name, damage, said
):
    folder, _ = finished
    damage(folder.path / name)
    found = folder.damage(CFG.rounds)
    assert found is not None and found.file == name and said in found.reason
    assert not is_cached(CFG, folder.path.parent)
    with pytest.raises(FlkitError, match=rf"run folder {folder.path} is damaged \(.*{said}"):
        load(folder.path)
    with pytest.warns(store.DamagedRunWarning, match=rf"{folder.path} is damaged: .*{said}") as w:
        assert folder.serve(lambda f: pytest.fail("a damaged folder was read")) is None
    assert [x.message.damage for x in w if isinstance(x.message, store.DamagedRunWarning)] == [
        found
    ]
    assert not folder.finished  # its finished files are gone: the next run trains it again


def test_a_history_that_is_not_its_configs_is_refused_by_the_reader(finished):
    """A folder sealed again over a history of other rows (manifest and checksums agree): the
    reader names history.csv."""
    folder, _ = finished
    keep_rows(folder.path / "history.csv", 2)
    store.RunFolder(folder.path, RUN_FILES).seal(CFG.rounds)
    with pytest.raises(FlkitError, match=r"history.csv cannot be used .*2 rows, its config 5"):
        load(folder.path)


# ------------------------------------------------------------------------------ identity
OTHER = CFG.replace(lr=0.2)


def _copy_into_other(folder: store.RunFolder) -> Path:
    """The finished CFG run copied to OTHER's folder name under the same root."""
    target = run_folder(OTHER, folder.path.parent)
    shutil.copytree(folder.path, target)
    return target


def test_a_folder_copied_to_another_runs_name_is_not_served(finished, tmp_path):
    """A sealed folder of one config under another config's name: its manifest seals the first
    run. Served as the second run before manifests named their run."""
    folder, history = finished
    target = _copy_into_other(folder)
    with pytest.warns(UserWarning, match=rf"{target}.*MANIFEST.json seals run {folder.name}"):
        got = run(OTHER, out_dir=folder.path.parent, progress=False)
    own = run(OTHER, out_dir=tmp_path / "own", progress=False).history
    pd.testing.assert_frame_equal(got.history, own, check_exact=True)
    assert not got.history["train_loss"].equals(history["train_loss"])


def test_a_copied_folder_under_a_manifest_that_names_no_run_is_not_served(finished, tmp_path):
    """The same copy with a manifest as written before manifests named their run: config.json
    records the first run's key, not the second's."""
    folder, _ = finished
    target = _copy_into_other(folder)
    manifest = json.loads((target / store.MANIFEST).read_text())
    del manifest["run"]
    (target / store.MANIFEST).write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match=rf"{target}.*config.json records another run"):
        got = run(OTHER, out_dir=folder.path.parent, progress=False)
    own = run(OTHER, out_dir=tmp_path / "own", progress=False).history
    pd.testing.assert_frame_equal(got.history, own, check_exact=True)


# ------------------------------------------------------------------------------ checkpoints
def _checkpointed(tmp_path) -> store.RunFolder:
    """A folder holding a round-2 checkpoint written by RunFolder.checkpoint (nothing trained)."""
    folder = store.RunFolder(tmp_path / "fedavg-0123456789ab", RUN_FILES)
    rows = [{"round": 1, "train_loss": 0.5}, {"round": 2, "train_loss": 0.25}]
    folder.checkpoint(store.Checkpoint({"w": torch.arange(3.0)}, rows, 2, threads=2))
    return folder


def test_a_checkpoint_is_the_dict_it_always_was_and_resumes(tmp_path):
    """On disk a checkpoint stays a plain dict (a run interrupted under an earlier flkit resumes)
    and reads back as the Checkpoint written, bound to its folder."""
    folder = _checkpointed(tmp_path)
    saved = store.load_torch(folder.path / store.CHECKPOINT)
    assert sorted(saved) == ["rng", "round", "rows", "run", "state", "threads"]
    assert saved["run"] == folder.name
    got = folder.resume(threads=2)
    assert got.round == 2 and got.threads == 2 and got.run == folder.name and got.rng is None
    assert got.rows == saved["rows"] and torch.equal(got.state["w"], torch.arange(3.0))


def _cut_checkpoint(folder: store.RunFolder) -> None:
    cut_in_half(folder.path / store.CHECKPOINT)


def _reseal(folder: store.RunFolder, obj, round_: int = 2) -> None:
    """checkpoint.pt replaced by ``obj``, with its checksum and ``round_`` in checkpoint.json."""
    store.save_torch(folder.path / store.CHECKPOINT, obj)
    digest = store.file_digest(folder.path / store.CHECKPOINT)
    store.save_json(folder.path / store.CHECKPOINT_SUM, {"round": round_, "sha256": digest})


def _not_a_checkpoint(folder: store.RunFolder) -> None:
    _reseal(folder, {"weights": [1, 2, 3]})


def _rows_lost(folder: store.RunFolder) -> None:
    saved = store.load_torch(folder.path / store.CHECKPOINT)
    _reseal(folder, {**saved, "rows": saved["rows"][:1]})


def _round_3(folder: store.RunFolder) -> None:
    path = folder.path / store.CHECKPOINT_SUM
    path.write_text(json.dumps({**json.loads(path.read_text()), "round": 3}))


def _sum_gone(folder: store.RunFolder) -> None:
    (folder.path / store.CHECKPOINT_SUM).unlink()


def _sum_garbage(folder: store.RunFolder) -> None:
    _garbage(folder.path / store.CHECKPOINT_SUM)


#: (what is done to a checkpointed folder, the file at fault, what the report says)
CHECKPOINTS = [
    (_cut_checkpoint, "checkpoint.pt", "does not match its checksum in checkpoint.json"),
    (_not_a_checkpoint, "checkpoint.pt", "checkpoint.pt cannot be read (TypeError"),
    (_rows_lost, "checkpoint.pt", "inconsistent (round 2, 1 rows)"),
    (_round_3, "checkpoint.json", "checkpoint.json records round 3, checkpoint.pt round 2"),
    (_sum_gone, "checkpoint.json", "checkpoint.json is missing"),
    (_sum_garbage, "checkpoint.json", "checkpoint.json cannot be read"),
]


@pytest.mark.parametrize(
    ("damage", "name", "said"), CHECKPOINTS, ids=[d.__name__.strip("_") for d, _, _ in CHECKPOINTS]
)
def test_a_damaged_checkpoint_is_reported_and_never_resumed(tmp_path, damage, name, said):
    folder = _checkpointed(tmp_path)
    damage(folder)
    with pytest.warns(store.DamagedRunWarning, match=r"starts again from round 1") as w:
        assert folder.resume(threads=2) is None
    (found,) = [x.message.damage for x in w if isinstance(x.message, store.DamagedRunWarning)]
    assert found.file == name and said in found.reason, found
    assert not (folder.path / store.CHECKPOINT).exists()
    assert not (folder.path / store.CHECKPOINT_SUM).exists()


def test_a_checkpoint_of_another_run_or_thread_count_is_refused_and_kept(tmp_path):
    folder = _checkpointed(tmp_path)
    with pytest.raises(FlkitError, match=r"computed with 2 torch threads, but this process"):
        folder.resume(threads=1)
    moved = store.RunFolder(tmp_path / "fedavg-ba9876543210", RUN_FILES)
    folder.path.rename(moved.path)
    with pytest.raises(FlkitError, match=rf"records run {folder.name}, not this folder's run"):
        moved.resume(threads=2)
    assert (moved.path / store.CHECKPOINT).is_file()


# ------------------------------------------------------------------------------ kill -9, resume
KILLED = """
import sys, time
import torch
torch.set_num_threads(int(sys.argv[2]))
from tiny_runs import TINY_FEDAVG
from flkit import methods
from flkit.experiment import run
cls = methods.get("fedavg")
orig = cls.aggregate
def stalled(self, state, updates, rnd):
    if rnd == 3:
        time.sleep(600)  # killed here, after round 2's checkpoint
    return orig(self, state, updates, rnd)
cls.aggregate = stalled
run(TINY_FEDAVG, out_dir=sys.argv[1], progress=False, checkpoint_every=1)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL on this platform")
def test_a_run_killed_with_sigkill_resumes_to_the_same_numbers(tiny_run, tmp_path, monkeypatch):
    root, whole = tiny_run
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    cmd = [sys.executable, "-c", KILLED, str(tmp_path), str(torch.get_num_threads())]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    record = run_folder(CFG, tmp_path) / store.CHECKPOINT_SUM
    try:
        deadline = time.monotonic() + 300
        while not (record.exists() and json.loads(record.read_text())["round"] == 2):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no round-2 checkpoint"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    trained_rounds = rounds_trained(monkeypatch)
    resumed = run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=1)
    assert trained_rounds == [3, 4, 5]
    assert (run_folder(CFG, tmp_path) / "history.csv").read_bytes() == (
        run_folder(CFG, root) / "history.csv"
    ).read_bytes()
    pd.testing.assert_frame_equal(resumed.history, whole, check_exact=True)


# ------------------------------------------------------------------------------ FedAST runner
FEDAST = FedASTRun(
    "fedast",
    ({"name": "a", "dataset": "synthetic", "requests": 4, "buffer": 2, "max_rounds": 4},),
    num_clients=20,
    max_time=None,
)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A finished FedAST run's cache root and result, run once for the module."""
    root = tmp_path_factory.mktemp("simulated")
    return root, runner.run(FEDAST, 0, progress=False, root=root, device="cpu")


#: every file a finished FedAST run's folder holds
SIMULATED = [
    ("config.json", edit_config, "does not match its checksum in MANIFEST.json"),
    ("data.json", cut_in_half, "does not match its checksum in MANIFEST.json"),
    ("result.json", _flip_last_byte, "does not match its checksum in MANIFEST.json"),
    ("MANIFEST.json", Path.unlink, "it has no MANIFEST.json"),
    ("DONE", Path.unlink, "DONE is missing"),
]


@pytest.mark.parametrize(
    ("name", "damage", "said"), SIMULATED, ids=[f"{n}-{d.__name__}" for n, d, _ in SIMULATED]
)
def test_a_finished_fedast_run_damaged_in_any_file_is_never_served(
    simulated, tmp_path, name, damage, said
):
    root, _ = simulated
    shutil.copytree(root, tmp_path / "cache")
    folder = runner.open_folder(FEDAST.validate(), 0, CPU, tmp_path / "cache")
    assert folder.damage() is None
    damage(folder.path / name)
    found = folder.damage()
    assert found is not None and found.file == name and said in found.reason
    files = sorted(p.name for p in folder.path.iterdir())
    assert runner.cached(FEDAST, 0, root=tmp_path / "cache", device="cpu") is None
    assert sorted(p.name for p in folder.path.iterdir()) == files  # cached() changes nothing
    with pytest.warns(store.DamagedRunWarning, match=rf"{folder.path} is damaged: .*{said}"):
        assert not folder.whole()
    assert not folder.finished


def test_a_fedast_folder_copied_to_another_seeds_name_is_not_served(simulated, tmp_path):
    root, first = simulated
    shutil.copytree(root, tmp_path / "cache")
    source = runner.open_folder(FEDAST.validate(), 0, CPU, tmp_path / "cache")
    target = runner.open_folder(FEDAST.validate(), 1, CPU, tmp_path / "cache")
    shutil.copytree(source.path, target.path)
    assert runner.cached(FEDAST, 1, root=tmp_path / "cache", device="cpu") is None
    with pytest.warns(UserWarning, match=rf"{target.path}.*seals run {source.name}"):
        got = runner.run(FEDAST, 1, progress=False, root=tmp_path / "cache", device="cpu")
    own = runner.run(FEDAST, 1, progress=False, root=tmp_path / "own", device="cpu")
    assert got.history == own.history and got.history != first.history


def test_a_fedast_run_under_a_file_fails_before_simulating(tmp_path, monkeypatch):
    """An unwritable run cache is found before the simulation, not after it."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setattr(runner, "WatchedTrainer", lambda *a, **k: pytest.fail("simulated"))
    with pytest.raises(FlkitError, match=rf"cannot write {blocker}/.*config.json \(a file stands"):
        runner.run(FEDAST, 0, progress=False, root=blocker / "cache", device="cpu")


def test_run_config_is_importable_where_notebooks_import_it():
    from flkit import experiment, run_config

    assert experiment.RunConfig is run_config.RunConfig is RunConfig
