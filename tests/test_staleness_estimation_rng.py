"""Notebook 05's estimation studies give the same numbers whether the kernel trained the
comparison runs itself or read them from the run cache. Training draws the model's dropout masks
from torch's global generator and reading a finished run draws none, so the two leave the global
generator in different states; the clients' re-training in the studies must not draw from it."""

from __future__ import annotations

import pandas as pd
import torch

from flkit import store
from flkit.experiment import run_folder
from flkit.papers.staleness import estimation, study
from flkit.workbook import presets


def _tiny() -> dict:
    """The smoke preset cut to two compared methods of three rounds and the shortest inversions."""
    pre = dict(presets.load("05_staleness", "smoke"))
    pre.update(
        methods=["unstale", "unweighted"],
        rounds=3,
        est_taus=[1],
        est_iters=3,
        stop_iters=4,
        warm_changes=[0.2],
    )
    return pre


def _notebook_order(pre: dict) -> list[pd.DataFrame]:
    """The notebook's order: the trajectory, then the comparison runs, then the studies."""
    tr = estimation.Trajectory(pre, 0)
    study.compare(pre, 0, progress=False)
    return [estimation.estimation_error(pre, tr), estimation.warm_start(pre, tr)]


def test_estimation_numbers_are_the_same_after_trained_and_cached_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path))
    pre = _tiny()
    folders = [run_folder(c) for c in study.compare_configs(pre, 0)]
    assert not any(store.RunFolder(f, ()).finished for f in folders)
    trained = _notebook_order(pre)
    assert all(store.RunFolder(f, ()).finished for f in folders)  # the second pass reads every run
    cached = _notebook_order(pre)
    for a, b in zip(trained, cached):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    # the GI rows hold real estimates, so equal frames are not equal by being empty
    assert (trained[0]["cos"] > 0).all()


def test_an_update_leaves_the_global_generator_as_it_found_it():
    """The re-training neither reads nor advances the global generator, and a second dropout
    draw (another ``rnd``) of the same clients from the same model is another update."""
    pre = _tiny()
    tr = estimation.Trajectory(pre, 0)
    clients = tr.stale[:2]
    torch.manual_seed(123)
    first = tr.update(2, clients)
    after = torch.get_rng_state()
    torch.manual_seed(123)
    assert torch.equal(after, torch.get_rng_state())
    torch.manual_seed(456)
    again = tr.update(2, clients)
    assert all(torch.equal(first[n], again[n]) for n in tr.names)
    other = tr.update(2, clients, rnd=1)
    assert not all(torch.equal(first[n], other[n]) for n in tr.names)
