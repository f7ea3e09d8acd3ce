"""One divergence rule for every runner (flkit.divergence): experiment.run, the FedAST runner (and a
schedule built by hand), its centralised reference and the gradient inversion (alone and inside
the staleness method). A non-finite loss stops the run
with its round (iteration) named and nothing cached; a loss above 1e3 x its start marks the run
diverged in its history and result, and such a run is never served as a normal finished one, nor
is a run cached before the rule that holds a non-finite loss."""

from __future__ import annotations

import json
import math
import warnings

import pandas as pd
import pytest
import torch
from tiny_runs import TINY_FEDAVG
from torch import nn

from flkit import divergence, store
from flkit.asyncfl import FedASTRun, runner
from flkit.divergence import DivergedWarning, LossWatch, judge
from flkit.engine import LocalSpec
from flkit.experiment import RUN_FILES, load, run, run_folder
from flkit.inversion import InversionSpec, init_data, invert, unroll
from flkit.state import broadcast_state, model_state
from flkit.utils import FlkitError


def _diverged_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, DivergedWarning)]


# ------------------------------------------------------------------------------ the rule
def test_the_rule_on_a_hand_made_series():
    """Start 2.0, limit 2000: 2000 itself is not above it, 2000.5 is (at step 4); a later fall
    does not undo the mark; a NaN stops with the step named."""
    w = LossWatch("training loss")
    for step, v in enumerate([2.0, 40.0, 1.0, 2000.0, 2000.5, 3.0], 1):
        w.see(step, v)
    assert w.diverged is not None
    assert (w.diverged.at, w.diverged.value, w.diverged.start) == (5, 2000.5, 2.0)
    assert w.diverged.limit == 2000.0 == divergence.FACTOR * 2.0
    with pytest.raises(FlkitError, match=r"its training loss is nan at round 7; it is stopped"):
        w.see(7, float("nan"))
    with pytest.raises(FlkitError, match=r"its test loss is -inf at iteration 0"):
        LossWatch("test loss", "iteration").see(0, float("-inf"))
    # a recorded series: missing values (not evaluated) are skipped, the start is the first value
    assert judge([(1, None), (2, float("nan")), (3, 0.5), (4, 499.0)], "test loss") is None
    assert judge([(1, None), (2, 0.5), (3, 500.5)], "test loss").at == 3


# ------------------------------------------------------------------------------ experiment.run
def test_a_finite_divergence_is_marked_trained_and_served(tmp_path):
    """lr 1e5, one local step: round 1's training loss is the untrained model's (about ln 10 on
    average), every later round starts from weights 1e5 times larger, so its loss is far above
    1e3 x round 1's, and stays finite. The same settings at lr 0.05 do not diverge."""
    cfg = TINY_FEDAVG.replace(lr=1e5, local_steps=1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fresh = run(cfg, out_dir=tmp_path, progress=False)
    h = fresh.history
    assert h["train_loss"].map(math.isfinite).all()
    assert h["train_loss"].iloc[0] < 5 and (h["train_loss"].iloc[1:] > 1e3 * 5).all()
    assert fresh.diverged is not None and fresh.diverged.what == "training loss"
    assert fresh.diverged.at == 2
    assert h["diverged"].tolist() == [False, True, True, True, True]
    assert h.attrs["diverged"]["at"] == 2
    (said,) = _diverged_warnings(record)
    assert "diverged: its training loss rose to" in said and "at round 2" in said
    # served from the cache: the same mark, and the warning again
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        served = run(cfg, out_dir=tmp_path, progress=False)
    assert served.diverged == fresh.diverged
    assert served.history["diverged"].tolist() == [False, True, True, True, True]
    assert len(_diverged_warnings(record)) == 1
    # a run that does not diverge: no mark, no column, no warning
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        calm = run(TINY_FEDAVG, out_dir=tmp_path, progress=False)
    assert calm.diverged is None and "diverged" not in calm.history
    assert calm.history.attrs["diverged"] is None and not _diverged_warnings(record)


def test_a_cached_run_with_a_non_finite_loss_is_not_served(tmp_path):
    """A run cached before the rule (here: a finished folder whose history holds a NaN training
    loss, sealed by its manifest) is refused by load and trained again by run."""
    cfg = TINY_FEDAVG
    run(cfg, out_dir=tmp_path, progress=False)
    folder = run_folder(cfg, tmp_path)
    history = pd.read_csv(folder / "history.csv")
    history.loc[2, "train_loss"] = float("nan")
    history.to_csv(folder / "history.csv", index=False)
    store.RunFolder(folder, RUN_FILES).seal(len(history))
    with pytest.raises(FlkitError, match=r"holds a training loss of nan at round 3"):
        load(folder)
    with pytest.warns(UserWarning, match=r"training loss of nan at round 3.*trained again"):
        again = run(cfg, out_dir=tmp_path, progress=False)
    assert again.history["train_loss"].map(math.isfinite).all()


# ------------------------------------------------------------------------------ FedAST runner
def _fedast(**task) -> FedASTRun:
    t = {"name": "a", "dataset": "synthetic", "requests": 4, "buffer": 2, "max_rounds": 6}
    return FedASTRun("fedast", ({**t, "test_every": 1, **task},), num_clients=20, max_time=None)


def test_fedast_stops_a_nan_run_and_caches_nothing(tmp_path):
    """The issue's finding: this run's test loss was NaN in every round and it was cached as
    completed; experiment.run stops the same kind of settings at round 1."""
    cfg = _fedast(lr=1e38)
    with pytest.raises(FlkitError, match=r"diverged: its training loss is nan at round 1 of task"):
        runner.run(cfg, 0, progress=False, root=tmp_path, device="cpu")
    assert runner.cached(cfg, 0, root=tmp_path, device="cpu") is None
    assert not list(tmp_path.rglob("DONE")) and not list(tmp_path.rglob("result.json"))


def test_fedast_marks_a_finite_divergence_trained_and_served(tmp_path):
    """A server step of 1e5 x the mean update: the clients that start from the stepped model
    train from weights about 1e5 times too large, so their loss passes 1e3 x the first server
    update's (the clients trained from the untrained model), finitely."""
    cfg = _fedast(server_lr=1e5)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = runner.run(cfg, 0, progress=False, root=tmp_path, device="cpu")
    d = res.stats["diverged"]["a"]
    assert d["what"] == "training loss" and d["value"] > 1e3 * d["start"] and d["start"] < 5
    assert all(math.isfinite(r["test_loss"]) for r in res.history)
    assert [r.get("diverged", False) for r in res.history] == [
        r["round"] >= d["at"] for r in res.history
    ]
    assert d["at"] > 1 and any(r.get("diverged") for r in res.history)
    (said,) = _diverged_warnings(record)
    assert f"task 'a' of run {tmp_path}" in said and f"at round {d['at']}" in said
    for read in (runner.cached, runner.run):  # served: the same marks, and the warning again
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            again = read(cfg, 0, root=tmp_path, device="cpu")
        assert again.stats["diverged"] == res.stats["diverged"]
        assert [r.get("diverged") for r in again.history] == [
            r.get("diverged") for r in res.history
        ]
        assert len(_diverged_warnings(record)) == 1


def test_fedast_never_serves_a_cached_run_with_a_nan_loss(tmp_path):
    """A run cached before the rule with a NaN test loss (sealed by its manifest) is not served
    by cached() and is run again by run()."""
    cfg = _fedast()
    runner.run(cfg, 0, progress=False, root=tmp_path, device="cpu")
    (folder,) = [p.parent for p in tmp_path.rglob("result.json")]
    result = json.loads((folder / "result.json").read_text())
    result["history"][1]["test_loss"] = float("nan")
    (folder / "result.json").write_text(json.dumps(result))
    store.RunFolder(folder, runner.RUN_FILES).seal(len(result["history"]))
    assert runner.cached(cfg, 0, root=tmp_path, device="cpu") is None
    with pytest.warns(UserWarning, match=r"holds a test loss of nan at round 2 of task 'a'"):
        again = runner.run(cfg, 0, progress=False, root=tmp_path, device="cpu")
    assert all(math.isfinite(r["test_loss"]) for r in again.history)


def test_a_schedule_built_by_hand_stops_at_a_nan():
    """build_schedule (a schedule run by hand, without the cache, as the benchmarks do) watches
    its tasks too: the settings that make runner.run stop at round 1 stop it there."""
    sched, trainer = runner.build_schedule(_fedast(lr=1e38), 0, device="cpu")
    with pytest.raises(FlkitError, match=r"diverged: its training loss is nan at round 1 of task"):
        sched.run()
    assert isinstance(trainer, runner.WatchedTrainer)


# ------------------------------------------------------------------------------ centralised
def _central(**task) -> dict:
    return {"name": "c", "dataset": "synthetic", **task}


def test_the_centralised_reference_stops_at_a_nan_and_caches_nothing(tmp_path):
    """Steps of 1e38 overflow the logistic regression's logits: the reference used to return
    an accuracy (and cache it) as if it had trained."""
    with pytest.raises(
        FlkitError, match=r"diverged: its training loss is (nan|inf) at steps 1-20 \(their mean\)"
    ):
        runner.centralised(_central(lr=1e38), 20, device="cpu", root=tmp_path)
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("DONE"))


def test_the_centralised_reference_marks_a_finite_divergence_trained_and_served(tmp_path):
    """Steps of 1e5: after the first, every step starts from weights about 1e5 times too large,
    so the mean training loss passes 1e3 x the untrained model's (about ln 10), finitely."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        acc = runner.centralised(_central(lr=1e5), 20, device="cpu", root=tmp_path)
    (said,) = _diverged_warnings(record)
    assert "the centralised reference" in said and "its training loss rose to" in said
    assert "at step 20" in said
    (path,) = tmp_path.rglob("result.json")
    result = json.loads(path.read_text())
    losses, d = result["losses"], result["diverged"]
    assert all(math.isfinite(v) for v in losses.values())
    assert losses["start"] < 5 and losses["train_loss"] > 1e3 * losses["start"]
    assert (d["what"], d["at"], d["unit"]) == ("training loss", 20, "step")
    assert (d["value"], d["start"]) == (losses["train_loss"], losses["start"])
    with warnings.catch_warnings(record=True) as record:  # served: the warning again
        warnings.simplefilter("always")
        again = runner.centralised(_central(lr=1e5), 20, device="cpu", root=tmp_path)
    assert again == acc and len(_diverged_warnings(record)) == 1
    # the default learning rate does not diverge: no mark, no warning
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        runner.centralised(_central(), 20, device="cpu", root=tmp_path)
    assert not _diverged_warnings(record)
    calm = [json.loads(p.read_text()) for p in tmp_path.rglob("result.json") if p != path]
    assert [r["diverged"] for r in calm] == [None]


def test_a_cached_centralised_reference_with_a_nan_loss_is_run_again(tmp_path):
    """A result whose recorded test loss is NaN (sealed by its manifest) is not served."""
    acc = runner.centralised(_central(), 20, device="cpu", root=tmp_path)
    (path,) = tmp_path.rglob("result.json")
    result = json.loads(path.read_text())
    result["losses"]["test_loss"] = float("nan")
    path.write_text(json.dumps(result))
    store.RunFolder(path.parent, runner.CENTRAL_FILES).seal(1)  # sealed as it is now
    with pytest.warns(UserWarning, match=r"holds a test loss of nan: it is run again"):
        again = runner.centralised(_central(), 20, device="cpu", root=tmp_path)
    assert again == acc and math.isfinite(json.loads(path.read_text())["losses"]["test_loss"])


def test_the_layer_update_of_fig_1_stops_at_a_training_loss_that_is_not_finite():
    """Notebook 01's one-epoch layer update (a figure, not cached): steps of 1e38 used to give
    a figure of NaNs."""
    from flkit.papers.stc_projection import study
    from flkit.workbook import presets

    preset = presets.load("01_stc_projection", "smoke", mnist_lr=1e38)
    with pytest.raises(
        FlkitError, match=r"training loss is (nan|inf) at the local epoch of client 0"
    ):
        study.layer_update(preset, device="cpu")


def test_the_estimation_studies_trajectory_stops_at_a_nan_and_so_does_an_update():
    """Notebook 05's Unstale trajectory (trained round by round in memory, for the estimation
    studies) and its clients' updates: steps of 1e38 used to give NaN models and estimates."""
    from flkit.papers.staleness import estimation
    from flkit.workbook import presets

    wild = presets.load("05_staleness", "smoke", lr=1e38)
    with pytest.raises(
        FlkitError, match=r"training loss is (nan|inf) at round 1 of the Unstale trajectory"
    ):
        estimation.Trajectory(wild, 0, rounds=2)
    tr = estimation.Trajectory(presets.load("05_staleness", "smoke"), 0, rounds=1)
    assert tr.diverged is None
    tr.models[1] = {n: v * 1e38 if v.is_floating_point() else v for n, v in tr.models[1].items()}
    with pytest.raises(FlkitError, match=r"training loss is (nan|inf) at the update of client"):
        tr.update(1, tr.stale)  # the clients' update from the (blown-up) model of round 1


# ------------------------------------------------------------------------------ inversion
def _inversion_case(k: int = 2):
    """A linear model's one-step update of ``k`` clients and a surrogate start."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 3)).double()
    r = 8
    local = LocalSpec(lr=0.5, batch_size=r, steps=1)
    g = torch.Generator().manual_seed(2)
    x_true = torch.randn(k, r, 6, generator=g, dtype=torch.float64)
    y_true = nn.functional.one_hot(torch.randint(0, 3, (k, r), generator=g), 3).double()
    w0 = broadcast_state(model_state(model), k)
    target = unroll(model, w0, x_true, y_true, local)
    return model, w0, target, local, r


def test_an_inversion_stops_at_a_nan_and_marks_a_diverged_client():
    model, w0, target, local, r = _inversion_case()
    spec = InversionSpec(size=r, iters=20, lr=0.05)
    x0, y0 = init_data(2, spec, (6,), 3, 0, [0, 1], "cpu", torch.float64)
    calm = invert(model, w0, target, local, spec, x0, y0)
    assert calm.diverged == [None, None]
    # an update holding a NaN (client 1 of the batch): stopped at once, the client named
    bad = {n: v.clone() for n, v in target.items()}
    bad["0.weight"][1, 0, 0] = float("nan")
    with pytest.raises(FlkitError, match=r"Disparity is nan at iteration 0 for client 1"):
        invert(model, w0, bad, local, spec, x0, y0)
    # steps of 1e6 on unbounded inputs: the unrolled update, linear in the inputs, grows by
    # about as much, so Disparity passes 1e3 x its start after the first step
    wild = invert(model, w0, target, local, InversionSpec(size=r, iters=5, lr=1e6), x0, y0)
    for j, d in enumerate(wild.diverged):
        assert d is not None and d.what == "Disparity" and d.unit == "iteration"
        assert d.at == 1 and d.value > 1e3 * float(wild.init_loss[j])


def _staleness(**params):
    base = {"tau": 1, "num_stale": 2, "gi_iters": 3, "gi_size": 4, "box": "none"}
    # full-batch local training (batch >= every client), the wide backend (differentiable)
    return TINY_FEDAVG.replace(
        method="gi_staleness",
        method_params={**base, **params},
        batch_size=10_000,
        rounds=4,
        backend="wide",
    )


def test_a_diverged_inversion_gives_no_estimate_in_the_staleness_method(tmp_path):
    """Every inversion diverges (gi_lr 1e6, no box), so every stale update stands as it came:
    the run is, number for number, the one that never inverts (gi=False); each inverted round
    says how many inversions diverged."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wild = run(_staleness(gi_lr=1e6), cache=False, progress=False).history
        plain = run(_staleness(gi=False), cache=False, progress=False).history
    for col in ("train_loss", "test_accuracy", "test_loss"):
        assert wild[col].tolist() == plain[col].tolist(), col
    inverted = wild["gi_clients"].notna() & (wild["gi_clients"] > 0)
    assert inverted.any()
    assert wild.loc[inverted, "gi_diverged"].tolist() == wild.loc[inverted, "gi_clients"].tolist()


def test_a_nan_in_the_staleness_methods_inversion_names_the_round_and_clients():
    with pytest.raises(
        FlkitError, match=r"round 2, gradient inversion of the stale clients \["
    ) as e:
        run(_staleness(gi_lr=1e30), cache=False, progress=False)
    assert "Disparity is nan at iteration" in str(e.value)
