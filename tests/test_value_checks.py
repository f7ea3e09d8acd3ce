"""Values, not only types, are refused before any work: preset values and overrides named after
a RunConfig number follow RunConfig's own rule (presets.load and flkit reproduce, before any
notebook starts); an unknown device is refused by reproduce, one this machine lacks by the local
executor; data are checked at load (labels whole numbers in range, inputs finite) with the file
named; file-system problems (out path a file, run cache not writable, a failed write) are
FlkitErrors naming the path and what to do."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import torch
from tiny_runs import TINY_FEDAVG

from flkit import data, methods, store
from flkit.experiment import run
from flkit.reproduce.executors import LocalExecutor
from flkit.reproduce.plan import plan
from flkit.utils import FlkitError
from flkit.workbook import presets


# ------------------------------------------------------------------------------ presets
def test_a_negative_round_count_is_refused_by_presets_load():
    with pytest.raises(FlkitError, match=r"override key 'rounds' = -1: .*\[1, inf\)"):
        presets.load("00_fl_primer", "smoke", rounds=-1)
    with pytest.raises(FlkitError, match=r"'lr' = 0.0: .*\(0, inf\)"):
        presets.load("02_feddip", "smoke", lr=0.0)
    with pytest.raises(FlkitError, match=r"'backend' = 'fast': unknown backend 'fast'; accepted"):
        presets.load("05_staleness", "smoke", backend="fast")


def test_a_dataset_prefixed_round_count_follows_the_rounds_rule():
    """01's MNIST runs last mnist_rounds rounds; 04's HAR runs har_rounds."""
    with pytest.raises(FlkitError, match=r"'mnist_rounds' = -3 \(the rule of RunConfig.rounds\)"):
        presets.load("01_stc_projection", "smoke", mnist_rounds=-3)
    with pytest.raises(FlkitError, match=r"'har_rounds' = 0 \(the rule of RunConfig.rounds\)"):
        presets.load("04_hidenseek", "smoke", har_rounds=0)


def test_client_and_epoch_counts_are_named_and_checked_as_their_fields():
    """A preset key that sets a run's clients or local epochs is the RunConfig field's name,
    alone or after the dataset's, so its value follows that field's rule."""
    with pytest.raises(FlkitError, match=r"'num_clients' = 0: .*\[1, inf\)"):
        presets.load("02_feddip", "smoke", num_clients=0)
    rule = r"'mnist_clients_per_round' = 0 \(the rule of RunConfig.clients_per_round\)"
    with pytest.raises(FlkitError, match=rule):
        presets.load("04_hidenseek", "smoke", mnist_clients_per_round=0)
    rule = r"'cifar10_local_epochs' = 0 \(the rule of RunConfig.local_epochs\)"
    with pytest.raises(FlkitError, match=rule):
        presets.load("01_stc_projection", "smoke", cifar10_local_epochs=0)


@pytest.mark.parametrize(
    "nb, key, field",
    [
        ("02_feddip", "clients", "num_clients"),
        ("05_staleness", "per_round", "clients_per_round"),
        ("04_hidenseek", "mnist_subset", "mnist_train_subset"),
        ("01_stc_projection", "mnist_epochs", "mnist_local_epochs"),
    ],
)
def test_a_key_in_other_words_than_its_field_is_refused_naming_the_accepted_keys(nb, key, field):
    with pytest.raises(FlkitError, match=rf"unknown override '{key}' .*accepted: .*\b{field}\b"):
        presets.load(nb, "smoke", **{key: 1})


def test_a_paper_key_is_left_to_its_own_rule():
    """prunefl_init_rounds is a PruneFL parameter whose rule accepts 0, not a run's rounds."""
    assert methods.get("prunefl").Params.build("prunefl", {"init_rounds": 0}).init_rounds == 0
    assert presets.load("02_feddip", "smoke", prunefl_init_rounds=0)["prunefl_init_rounds"] == 0


def test_a_preset_file_with_a_bad_value_is_refused_naming_it(tmp_path, monkeypatch):
    text = "[meta]\nnotebook = 'nb_x.ipynb'\n"
    text += "".join(f"[{p}]\nrounds = {r}\nlr = 0.1\n" for p, r in (("smoke", 2), ("cpu", -2)))
    text += "[paper]\nrounds = 5\nlr = 0.1\n"
    (tmp_path / "nb_x.toml").write_text(text)
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(tmp_path))
    with pytest.raises(FlkitError, match=rf"{tmp_path / 'nb_x.toml'}: \[cpu\] key 'rounds' = -2"):
        presets.load("nb_x", "smoke")


# ------------------------------------------------------------------------------ reproduce
def test_reproduce_refuses_bad_values_before_any_notebook(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FlkitError, match=r"'rounds' = -1"):
        plan(preset="smoke", only=["00"], overrides={"rounds": -1}, out=out)
    with pytest.raises(FlkitError, match=r"unknown device 'tpu'; accepted: 'auto', 'cpu'"):
        plan(preset="smoke", only=["00"], device="tpu", out=out)
    with pytest.raises(FlkitError, match=r"unknown device 'gpu'"):
        plan(preset="smoke", only=["00"], overrides={"device": "gpu"}, out=out)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_a_device_this_machine_lacks_is_refused_by_the_local_executor(tmp_path):
    """'cuda' is a device name (a Ray cluster's nodes may have one): the plan takes it, the
    local executor, whose notebooks would run here, refuses it before any starts."""
    runs = plan(preset="smoke", only=["00"], device="cuda", out=tmp_path)["runs"]
    with pytest.raises(FlkitError, match="CUDA is not available"):
        LocalExecutor(1).prepare(runs)


def test_an_out_path_that_is_a_file_is_named(tmp_path):
    target = tmp_path / "report"
    target.write_text("not a folder")
    with pytest.raises(
        FlkitError, match=rf"{target}' is not writable: '{target}' is a file, not a folder"
    ):
        plan(preset="smoke", only=["00"], out=target)
    with pytest.raises(
        FlkitError, match=rf"'{target}' is a file, not a folder; accepted: a folder path"
    ):
        plan(preset="smoke", only=["00"], out=target / "below")


def test_a_run_cache_that_cannot_be_written_is_refused_before_any_notebook(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("FLKIT_RUNS", str(blocker / "cache"))
    runs = plan(preset="smoke", only=["00"], out=tmp_path / "out")["runs"]
    with pytest.raises(FlkitError, match=rf"the run cache '{blocker / 'cache'}'.*\$FLKIT_RUNS"):
        LocalExecutor(1).prepare(runs)


# ------------------------------------------------------------------------------ writes
def test_a_run_cache_under_a_file_is_a_clear_error_before_training(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cls = methods.get("fedavg")
    monkeypatch.setattr(cls, "aggregate", lambda *a: pytest.fail("a round was trained"))
    with pytest.raises(FlkitError, match=rf"cannot write {blocker}/.*config.json \(a file stands"):
        run(TINY_FEDAVG, out_dir=blocker / "cache", progress=False)


def test_a_full_disk_is_a_clear_error_naming_the_file(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "replace", full)
    target = tmp_path / "a" / "history.json"
    with pytest.raises(FlkitError, match=rf"cannot write {target} \(the disk is full.*FLKIT_RUNS"):
        store.save_json(target, {"x": 1})
    with pytest.raises(OSError):  # callers that tolerate a failed write still catch it
        store.save_text(target, "x")
    assert sorted(p.name for p in target.parent.iterdir()) == []  # no temporary file left


# ------------------------------------------------------------------------------ data
@pytest.fixture
def no_mirror(monkeypatch):
    monkeypatch.setenv("FLKIT_MIRROR", "")
    data.clear_cache()
    yield
    data.clear_cache()


def _cifar(root, y_train):
    rng = np.random.default_rng(0)
    root.mkdir()
    n = len(y_train)
    np.savez(
        root / "cifar10.npz",
        x_train=rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
        y_train=np.asarray(y_train),
        x_test=rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8),
        y_test=np.arange(10),
    )
    return root


def _load(name, root):
    return data.load(name, root=root, mirror="", device="cpu", download=False)


def test_labels_out_of_range_are_refused_naming_the_file(tmp_path, no_mirror):
    root = _cifar(tmp_path / "r", [0, 1, 2, 10])
    want = rf"{root / 'cifar10.npz'} \(array 'y_train'\) run from 0 to 10; accepted: whole "
    with pytest.raises(FlkitError, match=want + r"numbers in 0..9"):
        _load("cifar10", root)


def test_labels_that_are_not_whole_numbers_are_refused_not_truncated(tmp_path, no_mirror):
    root = _cifar(tmp_path / "r", [0.0, 1.0, 2.5, 3.0])
    with pytest.raises(FlkitError, match=r"cifar10.npz \(array 'y_train'\) are not whole numbers"):
        _load("cifar10", root)


def test_whole_float_labels_load_as_those_classes(tmp_path, no_mirror):
    root = _cifar(tmp_path / "r", [0.0, 1.0, 2.0, 9.0])
    assert _load("cifar10", root).y_train.tolist() == [0, 1, 2, 9]


def test_inputs_that_are_not_finite_are_refused_naming_the_file(tmp_path, no_mirror):
    rng = np.random.default_rng(0)
    x_train = rng.normal(size=(12, 9, 128)).astype(np.float32)
    x_train[3, 2, 7] = np.nan
    x_train[5, 0, 0] = np.inf
    root = tmp_path / "r"
    root.mkdir()
    np.savez(
        root / "har.npz",
        x_train=x_train,
        y_train=np.arange(12) % 6,
        subject_train=np.arange(12) % 3 + 1,
        x_test=rng.normal(size=(6, 9, 128)).astype(np.float32),
        y_test=np.arange(6),
        subject_test=np.full(6, 4),
    )
    with pytest.raises(FlkitError, match=r"har.npz \(array 'x_train'\) hold 2 values that are NaN"):
        _load("har", root)
