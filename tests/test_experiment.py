"""Runs: aggregation by hand, determinism, cache, exact resume after a crash, bad input, CLI."""

import json

import pandas as pd
import pytest
import torch
from run_folder_fixtures import no_round_trained, stopped_in_round

from flkit import methods
from flkit.cli import main as cli_main
from flkit.experiment import RunConfig, Setup, run
from flkit.methods import sample_clients, weighted_average
from flkit.utils import FlkitError

BASE = dict(
    method="fedavg",
    dataset="synthetic",
    model="logreg",
    num_clients=30,
    partition="natural",
    clients_per_round=5,
    local_epochs=1,
    batch_size=10,
    lr=0.05,
    rounds=4,
    seed=3,
    device="cpu",
    dataset_kwargs={"alpha": 0.5, "beta": 0.5, "num_clients": 30},
)


def cfg(**kw):
    return RunConfig(**{**BASE, **kw})


def test_weighted_average_by_hand():
    stacked = {"w": torch.tensor([[1.0, 2.0], [3.0, 6.0]]), "n": torch.tensor([4, 7])}
    avg = weighted_average(stacked, torch.tensor([1.0, 3.0]))
    # (1*[1,2] + 3*[3,6]) / 4 = [2.5, 5.0]; integer counters take the max
    assert torch.allclose(avg["w"], torch.tensor([2.5, 5.0]))
    assert int(avg["n"]) == 7


def test_fedavg_round_equals_weighted_mean_of_client_models():
    c = cfg(rounds=1)
    setup = Setup.build(c)
    ctx = methods.RunContext(
        setup.model,
        setup.data.x_train,
        setup.data.y_train,
        setup.parts,
        c.local_spec(),
        c.seed,
        setup.data.num_classes,
    )
    m = methods.get("fedavg")(ctx)
    from flkit.state import model_state

    state = m.init_state(model_state(setup.model))
    clients = sample_clients(c.seed, 1, c.num_clients, c.clients_per_round)
    up = m.client_update(state, clients, 1)
    sizes = torch.tensor([len(setup.parts[i]) for i in clients], dtype=torch.float32)
    assert torch.equal(up.weights, sizes)  # one epoch: every sample seen once
    new = m.aggregate(state, up, 1).model
    for n, v in up.state.items():
        manual = sum(sizes[i] * v[i] for i in range(len(clients))) / sizes.sum()
        assert torch.allclose(new[n], manual, atol=1e-6)
    # dense uplink: 32 bits per float of the client model
    d = sum(v[0].numel() for v in up.state.values())
    assert up.bits_up == [32 * d] * len(clients)


def test_same_config_same_numbers_and_fedprox_mu0_is_fedavg(tmp_path):
    a = run(cfg(), cache=False, progress=False).history
    b = run(cfg(), cache=False, progress=False).history
    pd.testing.assert_frame_equal(a, b)
    p = run(cfg(method="fedprox", method_params={"mu": 0.0}), cache=False, progress=False).history
    assert torch.allclose(
        torch.tensor(a["test_accuracy"].values), torch.tensor(p["test_accuracy"].values)
    )
    other_seed = run(cfg(seed=4), cache=False, progress=False).history
    assert not a["train_loss"].equals(other_seed["train_loss"])


def test_fedprox_keeps_clients_closer_to_the_global_model():
    c = cfg(rounds=1, local_epochs=5, lr=0.2)
    setup = Setup.build(c)
    from flkit.state import model_state

    dist = {}
    for mu in (0.0, 1.0):
        ctx = methods.RunContext(
            setup.model,
            setup.data.x_train,
            setup.data.y_train,
            setup.parts,
            c.local_spec(),
            c.seed,
            setup.data.num_classes,
        )
        m = methods.get("fedprox")(ctx, mu=mu)
        st = m.init_state(model_state(setup.model))
        up = m.client_update(st, [0, 1, 2], 1)
        dist[mu] = sum(((v - st.model[n]) ** 2).sum() for n, v in up.state.items()).item()
    assert dist[1.0] < dist[0.0]


def test_cache_and_exact_resume(tmp_path, monkeypatch):
    c = cfg(rounds=6)
    full = run(c, out_dir=tmp_path / "a", progress=False, checkpoint_every=2).history
    folder = stopped_in_round(c, tmp_path / "b", monkeypatch, stop=5)  # after round 4's checkpoint
    resumed = run(c, out_dir=tmp_path / "b", progress=False, checkpoint_every=2)
    pd.testing.assert_frame_equal(full.drop(columns=[]), resumed.history)
    assert (folder / "DONE").exists() and not (folder / "checkpoint.pt").exists()
    # a finished run is loaded, not retrained: make training impossible and load again
    no_round_trained(monkeypatch)
    again = run(c, out_dir=tmp_path / "b", progress=False)
    pd.testing.assert_frame_equal(again.history, resumed.history, check_dtype=False)
    assert json.loads((folder / "config.json").read_text())["seed"] == c.seed


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(method="fedsgd"), "method"),
        (dict(dataset="imagenet"), "dataset"),
        (dict(model="gpt"), "model"),
        (dict(partition="random"), "partition"),
        (dict(partition="dirichlet", partition_kwargs={"alpha": 0.0}), "alpha"),
        (dict(clients_per_round=31), "clients_per_round"),
        (dict(lr=-1.0), "lr"),
        (dict(rounds=0), "rounds"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(FlkitError, match=match):
        cfg(**kw)


def test_unknown_method_parameter():
    with pytest.raises(FlkitError, match="unknown parameter"):
        run(cfg(method="fedprox", method_params={"nu": 1}), cache=False, progress=False)
    with pytest.raises(FlkitError, match="mu"):
        run(cfg(method="fedprox", method_params={"mu": -1}), cache=False, progress=False)


def test_model_that_does_not_fit_the_data():
    with pytest.raises(FlkitError, match="does not fit|expects"):
        Setup.build(cfg(model="vgg11_star"))


def test_cli_run_writes_history_and_config(tmp_path, capsys):
    out = tmp_path / "out"
    code = cli_main(
        [
            "run",
            "fedprox",
            "--dataset",
            "synthetic",
            "--model",
            "logreg",
            "--clients",
            "30",
            "--partition",
            "iid",
            "--clients-per-round",
            "3",
            "--rounds",
            "2",
            "--mu",
            "0.1",
            "--batch-size",
            "10",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "c"),
            "--no-progress",
        ]
    )
    assert code == 0
    h = pd.read_csv(out / "history.csv")
    assert list(h["round"]) == [1, 2] and {"test_accuracy", "bytes_up", "bytes_down"} <= set(
        h.columns
    )
    conf = json.loads((out / "config.json").read_text())
    assert conf["method_params"] == {"mu": 0.1} and conf["method"] == "fedprox"


def test_cli_reports_bad_values(capsys):
    assert cli_main(["run", "fedavg", "--dataset", "mnistt"]) == 2
    assert "mnistt" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main(["--help"])
    assert e.value.code == 0
