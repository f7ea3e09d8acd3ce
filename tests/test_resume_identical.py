"""Resume and backend choice are bit-identical: a run of a model with dropout stopped after a
checkpoint and resumed writes the same history.csv, byte for byte, as one never stopped; a run
whose backend "auto" is measured on a fresh cache (the probe trains the model, drawing dropout
masks) writes the same history.csv as the same run with that backend pinned; the same run in
another cache writes the same final_state.pt, byte for byte."""

from __future__ import annotations

import pytest
import torch

from flkit import methods
from flkit.data import Dataset
from flkit.experiment import RunConfig, Setup, computed_history, run, run_folder

CFG = RunConfig(
    method="fedavg",
    dataset="mnist",
    model="cnn_mnist",  # the CLI's default MNIST model: two dropout layers
    num_clients=6,
    partition="iid",
    clients_per_round=3,
    local_epochs=None,
    local_steps=2,
    batch_size=8,
    lr=0.05,
    rounds=4,
    seed=5,
    device="cpu",
    backend="wide",
)


def _images() -> Dataset:
    """A small MNIST-shaped data set (random pixels, random labels)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(96, 1, 28, 28, generator=g)
    y = torch.randint(10, (96,), generator=g)
    return Dataset("mnist", x[:72], y[:72], x[72:], y[72:], 10, (1, 28, 28))


@pytest.fixture(autouse=True)
def _no_mirror(monkeypatch):
    """The runs read the data set above, not the MNIST files: the cache key names the config."""
    monkeypatch.setattr(RunConfig, "data_identity", lambda self: {"name": "test images"})
    monkeypatch.setattr(RunConfig, "cache_key", lambda self: self.key())


def _run(cfg, out, **kw):
    """A run as a fresh process makes it: its Setup built (model initialised) just before."""
    return run(cfg, out_dir=out, progress=False, setup=Setup.build(cfg, _images()), **kw)


def _history(cfg, out) -> bytes:
    """What the run computed: its history less the wall-clock columns, the only ones a rerun may
    change."""
    return computed_history(run_folder(cfg, out))


_STALE = {"tau": 1, "num_stale": 2}  # stale clients from round 2 on, inside the 4 rounds
# the few settings a 4-round run on 72 images needs; every other method runs at its defaults
_PARAMS = {
    **dict.fromkeys(("asyn_tiers", "unstale", "unweighted", "weighted", "first_order"), _STALE),
    "w_pred": _STALE,
    "gi_staleness": {**_STALE, "gi_iters": 2, "gi_size": 4},
    **dict.fromkeys(("dpf", "feddp", "feddst", "prunefl"), {"horizon": 4, "R": 2}),
    **dict.fromkeys(("feddip", "feddip_prox"), {"horizon": 4, "R": 2, "Q": 2}),
    "prunetrain": {"horizon": 4},
}
_BATCH = {"gi_staleness": 12}  # it trains full-batch: the batch holds a whole client (12 images)


def test_every_registered_method_is_covered_below():
    assert set(_PARAMS) <= set(methods.names())


@pytest.mark.parametrize("method", sorted(methods.names()))
def test_every_method_resumes_to_the_same_history(method, tmp_path, monkeypatch):
    """Every registered method, whatever its server state holds (residuals, a FIFO of global
    models, masks and their schedules, personal heads, surrogate data): killed after round 2's
    checkpoint, resumed from another global random state, the same bytes."""
    cfg = CFG.replace(
        method=method,
        method_params=_PARAMS.get(method, {}),
        batch_size=_BATCH.get(method, CFG.batch_size),
    )
    _run(cfg, tmp_path / "whole")
    cls = methods.get(method)
    orig = cls.round

    def crash(self, state, clients, rnd):
        if rnd == 3:
            raise KeyboardInterrupt("simulated kill")
        return orig(self, state, clients, rnd)

    monkeypatch.setattr(cls, "round", crash)
    with pytest.raises(KeyboardInterrupt):
        _run(cfg, tmp_path / "stopped", checkpoint_every=1)
    monkeypatch.setattr(cls, "round", orig)
    torch.manual_seed(4321)  # whatever the process drew in between
    _run(cfg, tmp_path / "stopped", checkpoint_every=1)
    assert _history(cfg, tmp_path / "stopped") == _history(cfg, tmp_path / "whole")


def test_the_auto_backend_probe_does_not_change_the_numbers(tmp_path):
    auto = _run(CFG.replace(backend="auto"), tmp_path / "auto")  # measured: a fresh cache
    chosen = auto.config.backend
    assert chosen != "auto"
    pinned = CFG.replace(backend=chosen)
    _run(pinned, tmp_path / "pinned")
    assert _history(pinned, tmp_path / "auto") == _history(pinned, tmp_path / "pinned")


def test_dropout_changes_the_numbers_so_the_tests_above_can_fail(tmp_path):
    """The same run from another global random state: another history (dropout draws from it)."""
    setup = Setup.build(CFG, _images())
    torch.manual_seed(99)
    run(CFG, out_dir=tmp_path / "other", progress=False, setup=setup)
    _run(CFG, tmp_path / "same")
    assert _history(CFG, tmp_path / "other") != _history(CFG, tmp_path / "same")


def test_the_final_state_file_is_the_same_bytes_in_another_cache(tmp_path):
    """Not only the same tensors: the same file, so a rerun's checksums match the first run's."""
    _run(CFG, tmp_path / "a")
    _run(CFG, tmp_path / "b")
    a, b = (run_folder(CFG, tmp_path / d) / "final_state.pt" for d in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
