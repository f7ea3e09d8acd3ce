"""Non-finite and meaningless values are refused before any training, with an error naming the
value and what is accepted (RunConfig, ``flkit run``, sweep grids, preset overrides, devices); a
run whose loss becomes NaN stops with an error naming the round and is not cached as finished."""

from __future__ import annotations

import pytest

from flkit.cli import main as cli_main
from flkit.experiment import RunConfig, run, run_folder
from flkit.reproduce.sweep import parse_grid
from flkit.utils import FlkitError, resolve_device
from flkit.workbook import presets

BASE = dict(
    dataset="synthetic",
    model="logreg",
    partition="natural",
    num_clients=10,
    clients_per_round=3,
    local_epochs=None,
    local_steps=2,
    batch_size=10,
    rounds=3,
    device="cpu",
    backend="wide",
    dataset_kwargs={"num_clients": 10},
)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(lr=float("inf")), r"lr=inf must be a finite number .*\(0, inf\)"),
        (dict(lr=float("nan")), r"lr=nan must be a finite number"),
        (dict(lr="0.1"), r"lr='0.1' must be a finite number"),
        (dict(momentum=float("nan")), r"momentum=nan .*\[0, 1\)"),
        (dict(weight_decay=float("-inf")), r"weight_decay=-inf"),
        (dict(num_clients="10"), r"num_clients='10' must be a whole number in \[1, inf\)"),
        (dict(num_clients=2.5), r"num_clients=2.5 must be a whole number"),
        (dict(seed=1.5), r"seed=1.5 must be a whole number"),
        (dict(seed="a"), r"seed='a' must be a whole number"),
        (dict(rounds=2.5), r"rounds=2.5 must be a whole number"),
        (dict(local_steps=0), r"local_steps=0 is outside the accepted range \[1, inf\)"),
        (dict(device="tpu"), r"unknown device 'tpu'; accepted: 'auto', 'cpu', 'cuda'"),
        (dict(partition="dirichlet", partition_kwargs={"alpha": float("inf")}), r"alpha=inf"),
        (
            dict(method="first_order", method_params={"tau": 1000}),
            r"tau=1000 never lets a client be stale within rounds=3; accepted: tau in 1..2",
        ),
        (
            dict(method="feddip", method_params={"horizon": 2}),
            r"horizon=2 is shorter than rounds=3.*accepted: horizon >= 3",
        ),
        (
            dict(method="prunefl", method_params={"horizon": 25}, rounds=30),
            r"horizon=25 is shorter than rounds=30.*accepted: horizon >= 30",
        ),
        (
            dict(method="feddip", method_params={"lambda_max": float("inf"), "horizon": 3}),
            r"lambda_max=inf must be a finite number .*\[0.0, inf\)",
        ),
        (
            dict(method="first_order", method_params={"lam": float("nan"), "tau": 1}),
            r"lam=nan must be a finite number .*\[0.0, inf\)",
        ),
        (
            dict(method="first_order", method_params={"lam": -4, "tau": 1}),
            r"lam=-4.0 is outside the accepted range \[0.0, inf\)",
        ),
        (
            dict(method="weighted", method_params={"a": -1, "tau": 1}),
            r"a=-1.0 is outside the accepted range \[0.0, inf\)",
        ),
        (
            dict(method="first_order", method_params={"tau": float("inf")}),
            r"tau=inf must be a whole number in \[0, inf\)",
        ),
    ],
)
def test_run_config_refuses(kw, match):
    with pytest.raises(FlkitError, match=match.replace("; accepted", r".*accepted")):
        RunConfig(**{**BASE, **kw})


def test_a_whole_float_round_count_runs_as_an_int():
    assert RunConfig(**{**BASE, "rounds": 3.0}) == RunConfig(**BASE)


def test_an_unknown_device_from_the_environment_is_named(monkeypatch):
    monkeypatch.setenv("FLKIT_DEVICE", "tpu")
    with pytest.raises(FlkitError, match="unknown FLKIT_DEVICE 'tpu'; accepted"):
        resolve_device("auto")


@pytest.mark.parametrize(
    "args,match",
    [
        (["--lr", "inf"], "lr=inf must be a finite number"),
        (["--train-subset", "0"], r"train_subset=0 is outside the accepted range \[1"),
        (["--local-steps", "0"], r"local_steps=0 is outside the accepted range \[1"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--checkpoint-every", "0"], r"checkpoint_every=0 .*\[1, inf\)"),
        (["--checkpoint-seconds", "nan"], "checkpoint_seconds=nan must be a finite number"),
    ],
)
def test_flkit_run_refuses_before_training(args, match, tmp_path, capsys):
    cmd = ["run", "fedavg", "--dataset", "synthetic", "--partition", "natural", "--clients", "10"]
    code = cli_main([*cmd, "--rounds", "2", "--cache", str(tmp_path), "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert pytest.importorskip("re").search(match, err), err
    assert not any(p.name.startswith("fedavg") for p in tmp_path.iterdir())  # nothing trained


@pytest.mark.parametrize(
    "method,args,match",
    [
        (
            "feddip",
            ["--param", "lambda_max=Infinity", "--param", "horizon=2"],
            "lambda_max=inf must",
        ),
        ("first_order", ["--param", "lam=NaN", "--param", "tau=1"], "lam=nan must"),
        ("first_order", ["--param", "lam=-4", "--param", "tau=1"], r"lam=-4.0 is outside .*\[0.0"),
        ("weighted", ["--param", "a=-1", "--param", "tau=1"], r"a=-1.0 is outside .*\[0.0"),
        ("first_order", ["--param", "tau=inf"], r"tau='inf' must be a whole number in \[0, inf\)"),
        ("first_order", ["--param", "tau=1000"], r"tau=1000 never lets .*accepted: tau in 1..1"),
        ("hidenseek", [], r"hidenseek on model 'logreg'.*classifier '1'.*accepted: a model with"),
        ("fedavg", ["--seed", "1.5"], r"argument --seed: invalid int value: '1.5'"),
        ("fedavg", ["--rounds", "2.0"], r"argument --rounds: invalid int value: '2.0'"),
        ("fedavg", ["--clients", "2.5"], r"argument --clients: invalid int value: '2.5'"),
        ("fedavg", ["--lr", "abc"], r"argument --lr: invalid float value: 'abc'"),
    ],
)
def test_flkit_run_refuses_method_values_before_training(method, args, match, tmp_path, capsys):
    """One line naming the value (and the accepted ones), exit 2, no traceback, nothing cached."""
    cmd = ["run", method, "--dataset", "synthetic", "--partition", "natural", "--clients", "10"]
    cmd += ["--rounds", "2", "--cache", str(tmp_path), "--no-progress", *args]
    try:
        code = cli_main(cmd)
    except SystemExit as exit_:  # argparse's own type errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert pytest.importorskip("re").search(match, err), err
    assert list(tmp_path.iterdir()) == []


def test_flkit_run_names_an_unknown_device_from_the_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FLKIT_DEVICE", "tpu")
    cmd = ["run", "fedavg", "--dataset", "synthetic", "--partition", "natural", "--clients", "10"]
    code = cli_main([*cmd, "--rounds", "2", "--cache", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "unknown FLKIT_DEVICE 'tpu'; accepted: 'auto', 'cpu'" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("item", ["tau=1,,2", "tau=1,2,", "tau=,1"])
def test_a_grid_with_an_empty_value_is_refused(item):
    with pytest.raises(FlkitError, match=rf"--grid '{item}' has an empty value"):
        parse_grid([item])


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_preset_override_is_refused(value):
    with pytest.raises(FlkitError, match="override lr = .* is not a finite number"):
        presets.load("00_fl_primer", "smoke", lr=value)


def test_a_local_ray_cannot_get_more_cpus_per_task_than_the_machine(monkeypatch):
    import os

    from flkit.reproduce import executors

    monkeypatch.setattr(executors.importlib.util, "find_spec", lambda name: object())
    cores = os.cpu_count() or 1
    with pytest.raises(FlkitError, match=rf"--cpus-per-task {cores + 62} is more than .* {cores}"):
        executors.make_executor("ray", cpus_per_task=cores + 62)


def test_a_diverging_run_stops_at_its_round_and_is_not_cached(tmp_path):
    cfg = RunConfig(**{**BASE, "lr": 1e38, "rounds": 4})
    with pytest.raises(
        FlkitError, match=r"diverged: its (training|test) loss is (nan|inf) at round"
    ):
        run(cfg, out_dir=tmp_path, progress=False)
    folder = run_folder(cfg, tmp_path)
    assert not (folder / "DONE").exists() and not (folder / "history.csv").exists()


def test_an_unknown_papermill_parameter_is_refused_by_the_notebook(tmp_path):
    """``papermill -p bogus 3``: papermill only warns; the notebook's first presets.load fails,
    naming the parameter and the ones the parameters cell defines (``-p seed 3`` runs)."""
    nbformat = pytest.importorskip("nbformat")
    pm = pytest.importorskip("papermill")
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('preset = "smoke"\nseed = 0\n')
    params.metadata["tags"] = ["parameters"]
    use = 'from flkit.workbook import presets\nP = presets.load("00_fl_primer", preset)\n'
    nb.cells = [params, nbformat.v4.new_code_cell(use)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    pm.execute_notebook(
        str(path), str(tmp_path / "ok.ipynb"), parameters={"seed": 3}, progress_bar=False
    )
    with pytest.raises(pm.PapermillExecutionError, match="unknown notebook parameter.* bogus"):
        pm.execute_notebook(
            str(path), str(tmp_path / "bad.ipynb"), parameters={"bogus": 3}, progress_bar=False
        )
    out = (tmp_path / "bad.ipynb").read_text(encoding="utf-8")
    assert "accepted: preset, seed" in out
