"""A CPU run's identity holds the torch intra-op thread count it computes with: the same config at
1 and at 2 threads gives different floats, so the two land in two run folders, the same count is
served from the cache, and a checkpoint is resumed only under the count that wrote it."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

import pandas as pd
import pytest
import torch
from run_folder_fixtures import no_round_trained, rounds_trained, stopped_in_round
from tiny_runs import TINY_FEDAVG

from flkit import run_config, store
from flkit.experiment import RUN_FILES, load, run, run_folder
from flkit.utils import FlkitError

CFG = TINY_FEDAVG.replace(rounds=4)


@contextmanager
def threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _folders(root) -> list:
    return sorted(p for p in root.iterdir() if p.is_dir())


@pytest.fixture()
def trained(monkeypatch):
    """Counts the client rounds trained (a cache hit trains none)."""
    return rounds_trained(monkeypatch)


def test_a_cpu_key_names_its_thread_count_and_a_cuda_key_none(monkeypatch):
    with threads(1):
        one = CFG.key()
    with threads(2):
        two = CFG.key()
    assert one["threads"] == 1 and two["threads"] == 2
    assert {k: v for k, v in one.items() if k != "threads"} == CFG.to_dict()
    assert store.config_hash(one) != store.config_hash(two)
    monkeypatch.setattr(run_config, "resolve_device", lambda d: torch.device("cuda", 0))
    with threads(1):
        gpu = CFG.replace(device="auto").key()
    assert gpu["device"] == "cuda" and "threads" not in gpu


def test_one_config_at_1_and_2_threads_lands_in_two_folders(tmp_path, trained):
    with threads(1):
        a = run(CFG, out_dir=tmp_path, progress=False)
    with threads(2):
        b = run(CFG, out_dir=tmp_path, progress=False)
    assert trained == [1, 2, 3, 4] * 2  # the second run was not served from the first
    assert a.run_dir != b.run_dir and _folders(tmp_path) == sorted([a.run_dir, b.run_dir])
    for res, n in ((a, 1), (b, 2)):
        assert store.RunFolder(res.run_dir, RUN_FILES).finished
        assert store.load_json(res.run_dir / "config.json")["threads"] == n
        assert store.load_json(res.run_dir / "meta.json")["threads"] == n
        assert res.history.attrs["config"]["threads"] == n


def test_the_same_thread_count_is_a_cache_hit(tmp_path, trained):
    with threads(1):
        first = run(CFG, out_dir=tmp_path, progress=False)
    with threads(2):
        run(CFG, out_dir=tmp_path, progress=False)
    trained.clear()
    with threads(1):
        again = run(CFG, out_dir=tmp_path, progress=False)
        assert run_folder(CFG, tmp_path) == first.run_dir
    assert trained == [] and again.run_dir == first.run_dir
    pd.testing.assert_frame_equal(again.history, first.history, check_dtype=False)
    # loaded in a process at another count, the history still says what it was computed with
    with threads(2):
        loaded = load(first.run_dir)
    assert loaded.config == CFG and loaded.history.attrs["config"]["threads"] == 1


def _stopped_at_1_thread(tmp_path, monkeypatch):
    """A run at 1 thread stopped in round 3, after its round-2 checkpoint; its folder."""
    with threads(1):
        return stopped_in_round(CFG, tmp_path, monkeypatch)


def test_another_thread_count_does_not_resume_the_checkpoint(tmp_path, monkeypatch):
    """At 2 threads the run trains from round 1 in its own folder and leaves the 1-thread
    checkpoint alone; back at 1 thread it resumes from it, to the history of a run never
    stopped."""
    with threads(1):
        whole = run(CFG, out_dir=tmp_path / "whole", progress=False).history
    folder = _stopped_at_1_thread(tmp_path / "c", monkeypatch)
    rounds = rounds_trained(monkeypatch)
    with threads(2):
        other = run(CFG, out_dir=tmp_path / "c", progress=False, checkpoint_every=2)
    assert rounds == [1, 2, 3, 4] and other.run_dir != folder
    assert (folder / store.CHECKPOINT).is_file() and not store.RunFolder(folder, RUN_FILES).finished
    rounds.clear()
    with threads(1):
        resumed = run(CFG, out_dir=tmp_path / "c", progress=False, checkpoint_every=2)
    assert rounds == [3, 4] and resumed.run_dir == folder
    pd.testing.assert_frame_equal(resumed.history, whole)


def test_a_checkpoint_of_another_thread_count_is_refused_naming_both(tmp_path, monkeypatch):
    """A 1-thread checkpoint copied into the 2-thread run's folder: a clear error, no round
    trained, the checkpoint kept."""
    folder = _stopped_at_1_thread(tmp_path, monkeypatch)
    with threads(2):
        target = run_folder(CFG, tmp_path)
    target.mkdir()
    for name in (store.CHECKPOINT, store.CHECKPOINT_SUM):
        shutil.copy(folder / name, target / name)
    no_round_trained(monkeypatch)
    match = rf"{target} holds a checkpoint \(round 2\) computed with 1 torch threads, but this "
    match += r"process computes with 2.*Accepted: resume with 1 threads"
    with threads(2), pytest.raises(FlkitError, match=match):
        run(CFG, out_dir=tmp_path, progress=False, checkpoint_every=2)
    assert (target / store.CHECKPOINT).is_file() and not store.RunFolder(target, RUN_FILES).finished


# ------------------------------------------------------------------------------ FedAST simulator
def _fedast_cfg():
    task = dict(
        dataset="synthetic",
        target=None,
        requests=4,
        buffer=2,
        samples_per_client=64,
        max_rounds=4,
        test_every=2,
    )
    return dict(
        method="fedast_d",
        num_clients=12,
        availability=0.75,
        ratio=2,
        k=2,
        tasks=[dict(task, name="a"), dict(task, name="b", delay_ratio=0.3)],
    )


def test_a_fedast_run_at_1_and_2_threads_lands_in_two_folders_and_hits_its_own(
    tmp_path, monkeypatch
):
    from flkit import asyncfl
    from flkit.asyncfl import runner

    cfg = asyncfl.FedASTRun.from_dict(_fedast_cfg()).validate()
    with threads(1):
        one = runner.cache_key(cfg, 0, torch.device("cpu"))
        asyncfl.run(cfg, 0, progress=False, device="cpu", root=tmp_path)
    with threads(2):
        two = runner.cache_key(cfg, 0, torch.device("cpu"))
        asyncfl.run(cfg, 0, progress=False, device="cpu", root=tmp_path)
    assert (one["threads"], two["threads"]) == (1, 2)
    assert "threads" not in runner.cache_key(cfg, 0, torch.device("cuda", 0))
    folders = _folders(tmp_path)
    assert len(folders) == 2
    assert sorted(store.load_json(f / "config.json")["threads"] for f in folders) == [1, 2]
    monkeypatch.setattr(runner, "EngineTrainer", None)  # any training would fail: cache hits
    for n in (1, 2):
        with threads(n):
            asyncfl.run(cfg, 0, progress=False, device="cpu", root=tmp_path)


def test_run_many_reads_the_workers_runs_under_their_thread_count(tmp_path, monkeypatch):
    """Workers at 1 thread while this process has 2: every result is read from the workers'
    folders (none is run again here), and a later serial call at 1 thread hits them too."""
    from flkit import asyncfl
    from flkit.asyncfl import parallel

    items = [(_fedast_cfg(), 0), (dict(_fedast_cfg(), method="sync_st"), 1)]
    with threads(2):
        asyncfl.run_many(items, jobs=2, threads=1, device="cpu", progress=False, root=tmp_path)
        assert torch.get_num_threads() == 2  # given back
    folders = _folders(tmp_path)
    assert len(folders) == 2
    assert [store.load_json(f / "config.json")["threads"] for f in folders] == [1, 1]
    monkeypatch.setattr(parallel, "_pool", lambda *a: pytest.fail("a run was sent to workers"))
    monkeypatch.setattr("flkit.asyncfl.runner.EngineTrainer", None)  # nor run here
    with threads(2):
        asyncfl.run_many(items, jobs=1, threads=1, device="cpu", progress=False, root=tmp_path)
        asyncfl.run_many(items, jobs=2, threads=1, device="cpu", progress=False, root=tmp_path)
