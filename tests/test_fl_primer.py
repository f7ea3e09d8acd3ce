"""The FL primer's code: the exercise checker, client drift, the partition demo, the runs,
the claims and the from-scratch comparison."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch.nn import functional

from flkit import data
from flkit.engine import LocalSpec
from flkit.experiment import RunConfig, Setup
from flkit.methods import ServerState, weighted_average
from flkit.papers.fl_primer import exercise as ex
from flkit.papers.fl_primer import study as primer
from flkit.utils import FlkitError
from flkit.workbook import presets


# ------------------------------------------------------------------------------ exercise checker
def _mean(s, w):
    return {n: v.mean(0) for n, v in s.items()}


def _unnormalised(s, w):
    return {n: (w.view(-1, *[1] * (v.dim() - 1)) * v).sum(0) for n, v in s.items()}


def _wrong_axis(
    s, w
):  # weights broadcast along the last dimension (silently wrong when it equals K)
    p = w / w.sum()
    return {
        n: (p * v).sum(0)
        if v.shape[-1] == len(w)
        else (p.view(-1, *[1] * (v.dim() - 1)) * v).sum(0)
        for n, v in s.items()
    }


def _in_place(s, w):
    p = w / w.sum()
    return {n: v.mul_(p.view(-1, *[1] * (v.dim() - 1))).sum(0) for n, v in s.items()}


def _stub(s, w):
    raise NotImplementedError


@pytest.mark.parametrize(
    "fn, ok, hint",
    [
        (ex.reference_solution, True, "right"),
        (weighted_average, True, "right"),
        (_mean, False, "plain mean"),
        (_unnormalised, False, "normalise"),
        (_wrong_axis, False, "last dimension"),
        (_in_place, False, "in place"),
        (lambda s, w: {n: v.mean(1) for n, v in s.items()}, False, "dim"),
        (lambda s, w: {n: v for n, v in s.items()}, False, "client dimension"),
        (lambda s, w: [1, 2], False, "dict"),
        (lambda s, w: {"fc.bias": s["fc.bias"].mean(0)}, False, "missing keys"),
        (lambda s, w: {n: (w * v).sum(0) for n, v in s.items()}, False, "reshape the weights"),
    ],
)
def test_checker_verdicts_and_hints(fn, ok, hint, capsys):
    assert ex.check_weighted_average(fn) is ok
    out = capsys.readouterr().out
    assert ("right" if ok else "wrong") in out
    assert hint in out


def test_untouched_stub_is_not_attempted_never_right(capsys):
    assert ex.check_weighted_average(_stub) is None
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "right" not in out and "wrong" not in out


def test_checker_quiet_and_reference_fallback(capsys):
    assert ex.check_weighted_average(_mean, quiet=True) is False
    assert capsys.readouterr().out == ""
    assert ex.check_or_reference(_stub) is None  # not attempted; the worked solution passes
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "worked solution below passes" in out
    assert "right" not in out
    assert ex.check_or_reference(_mean) is False  # an implemented function is checked itself


def test_reference_solution_by_hand():
    stacked = {"w": torch.tensor([[1.0, 2.0], [3.0, 6.0]])}
    out = ex.reference_solution(stacked, torch.tensor([1.0, 3.0]))
    assert torch.allclose(out["w"], torch.tensor([0.25 * 1 + 0.75 * 3, 0.25 * 2 + 0.75 * 6]))


# ------------------------------------------------------------------------------ client drift
@pytest.fixture(scope="module")
def syn():
    return data.load("synthetic", device="cpu", num_clients=6, seed=0)


def _setup(syn, lr=0.1, steps=1, batch_size=10_000, num_clients=4):
    cfg = RunConfig(
        dataset="synthetic",
        model="logreg",
        num_clients=num_clients,
        partition="iid",
        clients_per_round=2,
        local_epochs=None,
        local_steps=steps,
        batch_size=batch_size,
        lr=lr,
        rounds=1,
        seed=3,
        device="cpu",
        backend="auto",
    )
    return Setup.build(cfg, data_obj=syn)


def _zero_state(setup):
    return {n: torch.zeros_like(v) for n, v in setup.model.state_dict().items()}


def test_drift_hand_computed_on_a_linear_model(syn):
    """One full-batch SGD step of multinomial logistic regression from w = 0: the gradient is
    (softmax(0) - onehot)^T x / n = (1/C - onehot)^T x / n, so the client moves lr * ||grad||."""
    lr = 0.1
    setup = _setup(syn, lr=lr)
    clients = [0, 2, 3]
    d = primer.client_drift(setup, _zero_state(setup), clients)
    x, y, c = syn.x_train, syn.y_train, syn.num_classes
    models, sizes = [], []
    for k in clients:
        ix = setup.parts[k]
        xs, ys = x[ix].double(), y[ix]
        r = (
            torch.full((len(ix), c), 1.0 / c, dtype=torch.float64)
            - functional.one_hot(ys, c).double()
        )
        gw, gb = r.T @ xs / len(ix), r.mean(0)
        models.append(-lr * torch.cat([gw.reshape(-1), gb]))
        sizes.append(len(ix))
    models = torch.stack(models)
    p = torch.tensor(sizes, dtype=torch.float64) / sum(sizes)
    avg = (p[:, None] * models).sum(0)
    assert d["client"].tolist() == clients and d["samples"].tolist() == sizes
    assert d["dist_global"].tolist() == pytest.approx(models.norm(dim=1).tolist(), rel=1e-4)
    assert d["dist_avg"].tolist() == pytest.approx(
        (models - avg).norm(dim=1).tolist(), rel=1e-4, abs=1e-7
    )


def test_drift_vanishes_with_a_tiny_learning_rate(syn):
    setup = _setup(syn, lr=1e-9, steps=5, batch_size=16)
    d = primer.client_drift(setup, setup.model.state_dict(), [0, 1, 2])
    assert d["dist_global"].max() < 1e-6 and d["dist_avg"].max() < 1e-6


def test_drift_stops_at_a_training_loss_that_is_not_finite(syn):
    """Steps of 1e38 overflow the logits: the drift used to come back as NaN distances."""
    setup = _setup(syn, lr=1e38, steps=3, batch_size=8)
    with pytest.raises(
        FlkitError, match=r"training loss is (nan|inf) at the local round of client"
    ):
        primer.client_drift(setup, setup.model.state_dict(), [0, 1, 2])


def test_drift_is_deterministic_and_accepts_a_method_state(syn):
    setup = _setup(syn, lr=0.05, steps=4, batch_size=8)
    state = ServerState(setup.model.state_dict())
    a = primer.client_drift(setup, state, [1, 3])
    b = primer.client_drift(setup, state.model, [1, 3])
    pd.testing.assert_frame_equal(a, b)
    assert (a["dist_global"] > 0).all()


def test_fedprox_drift_shrinks_with_mu(syn):
    setup = _setup(syn, lr=0.05, steps=10, batch_size=8)
    d = primer.drift_sweep(setup, setup.model.state_dict(), [0, 1, 2], [0.0, 0.1, 1.0, 10.0])
    means = d.groupby("mu")["dist_global"].mean()
    assert list(means.index) == [0.0, 0.1, 1.0, 10.0]
    assert (means.diff().dropna() < 0).all()
    # mu = 0 is FedAvg's local objective
    fedavg = primer.client_drift(setup, setup.model.state_dict(), [0, 1, 2])
    assert d[d["mu"] == 0.0]["dist_global"].tolist() == pytest.approx(
        fedavg["dist_global"].tolist(), rel=1e-6
    )


def test_drift_rejects_bad_clients(syn):
    setup = _setup(syn)
    with pytest.raises(FlkitError, match="out of range"):
        primer.client_drift(setup, setup.model.state_dict(), [0, 99])
    with pytest.raises(FlkitError, match="at least one"):
        primer.client_drift(setup, setup.model.state_dict(), [])


def test_drift_with_an_explicit_spec(syn):
    setup = _setup(syn, lr=0.1)
    zero = _zero_state(setup)
    one = primer.client_drift(setup, zero, [0], spec=LocalSpec(lr=0.1, batch_size=10_000, steps=1))
    half = primer.client_drift(
        setup, zero, [0], spec=LocalSpec(lr=0.05, batch_size=10_000, steps=1)
    )
    assert one["dist_global"].iloc[0] == pytest.approx(2 * half["dist_global"].iloc[0], rel=1e-5)


# ------------------------------------------------------------------------------ partition demo
def test_repartition_matches_partition_module():
    labels = torch.arange(10).repeat(50)
    parts, counts, summary = primer.repartition(labels, 8, alpha=0.5, seed=1)
    assert counts.shape == (8, 10) and int(counts.sum()) == 500
    for i, p in enumerate(parts):
        assert torch.equal(counts[i], torch.bincount(labels[p], minlength=10))
    again = primer.repartition(labels, 8, alpha=0.5, seed=1)[1]
    assert torch.equal(counts, again)
    near_iid = primer.repartition(labels, 8, alpha=1000.0, seed=1)[2]
    skewed = primer.repartition(labels, 8, alpha=0.01, seed=1)[2]
    assert near_iid["label_entropy_mean"] > skewed["label_entropy_mean"]


# ------------------------------------------------------------------------------ runs and presets
def test_preset_file_and_configs():
    for name in ("smoke", "cpu", "paper"):
        preset = presets.load("00_fl_primer", name)
        cfgs = primer.configs(preset, seed=0, device="cpu")
        assert list(cfgs)[:2] == [primer.label_iid(), primer.label_noniid(preset["alpha"])]
        assert len(cfgs) == 2 + len(preset["mus"])
        prox = cfgs[primer.label_fedprox(preset["mus"][0], preset["alpha"])]
        assert prox.method == "fedprox" and prox.partition == "dirichlet"
        assert prox.method_params == {"mu": preset["mus"][0]}
    cpu = presets.load("00_fl_primer", "cpu")
    assert cpu["dataset"] == "mnist" and cpu["train_subset"] == 0 and cpu["num_clients"] == 100


def test_compare_runs_and_caches(tmp_path, syn):
    cfg = RunConfig(
        dataset="synthetic",
        model="logreg",
        num_clients=6,
        partition="iid",
        clients_per_round=2,
        local_epochs=1,
        batch_size=16,
        lr=0.05,
        rounds=3,
        seed=0,
        device="cpu",
        dataset_kwargs={"num_clients": 6},
    )
    cfgs = {"a": cfg, "b": cfg.replace(method="fedprox", method_params={"mu": 0.5})}
    df = primer.compare(cfgs, syn, progress=False, out_dir=tmp_path)
    assert set(df["run"]) == {"a", "b"} and len(df) == 6
    again = primer.compare(cfgs, None, progress=False, out_dir=tmp_path)  # cached: no data needed
    assert again["test_accuracy"].tolist() == pytest.approx(df["test_accuracy"].tolist())
    fin = primer.final_accuracy(df, last=2)
    h = df[df["run"] == "a"]["test_accuracy"]
    assert fin["a"] == pytest.approx(h.iloc[-2:].mean())
    assert not math.isnan(fin["b"])


def test_figures_render_from_results_only():
    import matplotlib

    matplotlib.use("Agg")
    from flkit.papers.fl_primer import figures as figs

    curves = pd.DataFrame(
        {
            "run": ["A"] * 3 + ["B"] * 3,
            "round": [1, 2, 3] * 2,
            "test_accuracy": [0.1, 0.5, 0.7, 0.1, 0.3, 0.4],
            "train_loss": [2, 1, 0.5, 2, 1.5, 1.0],
        }
    )
    drift = pd.DataFrame(
        {
            "mu": [0.0, 0.0, 1.0, 1.0],
            "client": [1, 2, 1, 2],
            "samples": [10, 20, 10, 20],
            "dist_global": [0.3, 0.4, 0.2, 0.3],
            "dist_avg": [0.1, 0.2, 0.1, 0.1],
        }
    )
    assert len(figs.iid_vs_noniid(curves, "A", "B").axes) == 2
    assert len(figs.fedprox(curves, ["A", "B"], drift_by_mu=drift).axes) == 2
    assert len(figs.drift_iid_vs_noniid(drift.assign(data=["x", "y", "x", "y"])).axes) == 2
    assert len(figs.partitions(torch.arange(10).repeat(20), 10, 5, [100.0, 0.1]).axes) >= 2


# ------------------------------------------------------------------ claims on hand-built tables
def test_claims_by_hand():
    from flkit.papers.fl_primer import claims

    final = pd.Series({"iid": 0.91, "dir": 0.85})
    c = claims.noniid_slows_fedavg(final, "iid", "dir", alpha=0.1, rounds=20)
    assert c["holds"] is True and "gap 6.0 points" in c["evidence"] and not c["judge_at_smoke"]
    assert claims.noniid_slows_fedavg(final, "iid", "dir", 0.1, 20, min_gap=0.1)["holds"] is False
    assert (
        claims.noniid_slows_fedavg(final[::-1].set_axis(["iid", "dir"]), "iid", "dir", 0.1, 20)[
            "holds"
        ]
        is False
    )
    cols = pd.MultiIndex.from_tuples([("dist_avg", "mean"), ("dist_avg", "std")])
    summ = pd.DataFrame([[0.2, 0.0], [0.5, 0.0]], index=["IID", "Dir(0.1)"], columns=cols)
    d = claims.noniid_drifts_apart(summ, "IID", "Dir(0.1)")
    assert (
        d["holds"] is True and d["judge_at_smoke"] and "IID 0.200, non-IID 0.500" in d["evidence"]
    )
    assert claims.noniid_drifts_apart(summ, "Dir(0.1)", "IID")["holds"] is False
    # strictly decreasing in mu, whatever order the series comes in
    assert claims.prox_reduces_drift(pd.Series({1.0: 0.1, 0.0: 0.3, 0.1: 0.2}))["holds"] is True
    assert claims.prox_reduces_drift(pd.Series({0.0: 0.3, 0.1: 0.3, 1.0: 0.1}))["holds"] is False


def test_same_curve_accepts_rounding_and_names_bad_rounds():
    h = pd.DataFrame({"round": [1, 2, 3], "test_accuracy": [0.5, 0.6, 0.7]})
    ok = primer.same_curve([0.5, 0.6001, 0.7], h)
    assert ok["|difference|"].max() == pytest.approx(1e-4)
    with pytest.raises(FlkitError, match=r"rounds \[2\]"):
        primer.same_curve([0.5, 0.62, 0.7], h)
    with pytest.raises(FlkitError, match="eval_every"):
        primer.same_curve([0.5, 0.6], h)


def test_describe_says_the_smoke_setting_by_hand():
    # [smoke] of flkit/papers/fl_primer/preset.toml: MNIST, mlp_mnist, 20 clients, 5 per round,
    # 4 rounds; 2000 training samples as the caller counted them
    text = primer.describe(presets.load("00_fl_primer", "smoke"), 3, "cpu", 2000)
    assert text == (
        "**Preset `smoke`**, seed 3, device `cpu`: mnist (2,000 training samples), model "
        "`mlp_mnist`, 20 clients, 5 per round, 4 rounds."
    )
