"""Method hyperparameters and server state: every method declares what it takes (Params) and what
its server keeps (State); bad values are refused by one shared check before any training, unknown
names with the accepted ones listed; the run configuration keeps the user's dict as given."""

import dataclasses
import math

import pytest
import torch
from torch import nn

from flkit import methods
from flkit.cli import main as cli_main
from flkit.engine import LocalSpec
from flkit.experiment import RunConfig, run
from flkit.methods import Method, RunContext, ServerState
from flkit.methods.hyperparameters import check_value
from flkit.state import model_state
from flkit.utils import FlkitError

# what each method needs beyond its defaults to run on the tiny context below
NEEDS = {
    "feddip": {"horizon": 2, "R": 1, "Q": 2},
    "feddp": {"horizon": 2, "R": 1},
    "dpf": {"horizon": 2, "R": 1},
    "feddip_prox": {"horizon": 2, "R": 1, "Q": 2},
    "prunefl": {"horizon": 2, "init_rounds": 1, "R": 2},
    "feddst": {"horizon": 2},
    "prunetrain": {"horizon": 2},
    "hidenseek": {"prune_iterations": 2},
    "gi_staleness": {"gi_iters": 2, "gi_size": 2},
}
STALENESS = {"tau": 1, "affected_class": 1, "num_stale": 2}


def _ctx(seed=0):
    n, per = 6, 8
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n * per, 12, generator=g)
    y = torch.randint(0, 3, (n * per,), generator=g)
    parts = [torch.arange(i * per, (i + 1) * per) for i in range(n)]
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(12, 10), nn.ReLU(), nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3)
    )
    spec = LocalSpec(lr=0.05, batch_size=per, steps=1)
    return RunContext(model, x, y, parts, spec, seed, 3, "auto", 3)


def _given(name):
    cls = methods.get(name)
    extra = STALENESS if "tau" in cls.Params.names() and "num_stale" in cls.Params.names() else {}
    return {**extra, **NEEDS.get(name, {})}


def _rules(name):
    return {f.name: f.metadata["rule"] for f in dataclasses.fields(methods.get(name).Params)}


ALL = methods.names()


# ------------------------------------------------------------------ declared, with a rule each
@pytest.mark.parametrize("name", ALL)
def test_every_hyperparameter_is_declared_with_a_rule(name):
    cls = methods.get(name)
    assert dataclasses.is_dataclass(cls.Params) and cls.Params.__dataclass_params__.frozen
    for f in dataclasses.fields(cls.Params):
        assert "rule" in f.metadata, f"{name}.{f.name} has no accepted range or choices"
    cls.Params()  # the defaults themselves pass the check


def test_hyperparameters_are_values_of_hp_not_loose_attributes():
    m = methods.get("fedprox")(_ctx(), mu=0.25)
    assert m.hp.mu == 0.25 and m.hp.lr_decay == 1.0
    assert not hasattr(m, "mu") and not hasattr(m, "lr_decay")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.hp.mu = 1.0


@pytest.mark.parametrize("name", ALL)
def test_no_hyperparameter_becomes_an_attribute_of_the_method(name):
    m = methods.get(name)(_ctx(), **_given(name))
    assert not set(vars(m)) & set(m.Params.names())


# ------------------------------------------------------------------ unknown names
@pytest.mark.parametrize("name", ALL)
def test_unknown_name_lists_the_accepted_ones(name):
    with pytest.raises(FlkitError) as e:
        methods.get(name)(_ctx(), bogus=1)
    msg = str(e.value)
    assert "bogus" in msg and name in msg
    for known in methods.get(name).Params.names():
        assert repr(known) in msg


def test_unknown_name_refused_by_the_run_config_and_the_cli(capsys):
    with pytest.raises(FlkitError, match=r"unknown parameter\(s\) \['nu'\].*'mu'"):
        RunConfig(method="fedprox", method_params={"nu": 1})
    code = cli_main(["run", "fedprox", "--dataset", "synthetic", "--param", "nu=1"])
    err = capsys.readouterr().err
    assert code == 2 and "nu" in err and "'lr_decay', 'mu'" in err


# ------------------------------------------------------------------ values
@pytest.mark.parametrize(
    "name, params, match",
    [
        ("fedprox", {"mu": float("inf")}, r"mu=inf must be a finite number .*\[0\.0, inf\)"),
        ("fedprox", {"mu": float("nan")}, r"mu=nan must be a finite number"),
        ("fedprox", {"mu": -0.5}, r"mu=-0\.5 is outside the accepted range \[0\.0, inf\)"),
        (
            "fedavg",
            {"lr_decay": 1.5},
            r"lr_decay=1\.5 is outside the accepted range \(0\.0, 1\.0\]",
        ),
        ("fedavg", {"lr_decay": 0}, r"lr_decay=0\.0 is outside the accepted range \(0\.0, 1\.0\]"),
        ("first_order", {"lam": float("nan")}, r"lam=nan must be a finite number"),
        ("weighted", {"a": float("inf")}, r"a=inf must be a finite number"),
        ("weighted", {"b": float("-inf")}, r"b=-inf must be a finite number"),
        ("stc", {"p": float("nan")}, r"p=nan must be a finite number .*\(0\.0, 1\.0\]"),
        ("stc_pa", {"alpha": 1.5}, r"alpha=1\.5 is outside the accepted range \[0\.0, 1\.0\]"),
        ("fedfv", {"tau": 1.5}, r"tau=1\.5 must be a whole number"),
        ("feddip", {"erk_power": float("nan")}, r"erk_power=nan must be a finite number"),
        ("feddip", {"lambda_max": float("inf")}, r"lambda_max=inf must be a finite number"),
        ("hidenseek", {"head_lr": float("inf")}, r"head_lr=inf must be a finite number"),
        ("fedmask", {"sparsity": float("inf")}, r"sparsity=inf must be a finite number"),
        ("gi_staleness", {"gi_lr": float("inf")}, r"gi_lr=inf must be a finite number"),
        ("gi_staleness", {"switch_margin": float("inf")}, r"switch_margin=inf must be"),
        ("unstale", {"track_error": "yes"}, r"track_error='yes' must be true or false"),
        ("fedfv", {"loss": "after"}, r"unknown loss 'after'; accepted: before, during"),
        ("unstale", {"tau": True}, r"tau=True must be a whole number"),
    ],
)
def test_bad_values_are_refused_naming_value_and_range(name, params, match):
    with pytest.raises(FlkitError, match=match):
        methods.get(name)(_ctx(), **{**_given(name), **params})
    with pytest.raises(FlkitError, match=match):
        RunConfig(method=name, method_params={**_given(name), **params})


def _outside(rule):
    """Values every real / whole-number rule must refuse: non-finite ones and one past each
    bound."""
    out = [float("nan"), float("inf"), float("-inf")]
    if rule["low"] is not None:
        out.append(rule["low"] if rule.get("low_open") else rule["low"] - 1)
    if rule["high"] is not None:
        out.append(rule["high"] if rule.get("high_open") else rule["high"] + 1)
    return out


@pytest.mark.parametrize("name", ALL)
def test_every_numeric_hyperparameter_refuses_non_finite_and_out_of_range(name):
    for field, rule in _rules(name).items():
        if rule["kind"] not in ("real", "integer"):
            continue
        for bad in _outside(rule):
            with pytest.raises(FlkitError, match=f"{field}="):
                methods.get(name).Params.build(name, {field: bad})


def test_whole_numbers_and_reals_are_normalised():
    hp = methods.get("stc_pa").Params(tau=2.0, alpha=1, p=1)
    assert hp.tau == 2 and isinstance(hp.tau, int)
    assert isinstance(hp.alpha, float) and isinstance(hp.p, float)
    optional = {"kind": "integer", "low": 0, "high": None, "optional": True}
    assert check_value("x", None, optional) is None
    assert math.isclose(check_value("x", 3, {"kind": "real", "low": 0, "high": None}), 3.0)


def test_bad_values_are_refused_before_any_training(monkeypatch):
    trained = []
    monkeypatch.setattr(Method, "round", lambda *a: trained.append(1))
    cfg = dict(dataset="synthetic", model="logreg", num_clients=4, clients_per_round=2)
    cfg.update(rounds=1, device="cpu", backend="loop")
    with pytest.raises(FlkitError, match="lam=nan"):
        run(RunConfig(method="first_order", method_params={"lam": math.nan}, **cfg), cache=False)
    assert trained == []


# ------------------------------------------------------------------ the config keeps the given dict
def test_the_run_config_keeps_method_params_as_given():
    given = {"mu": 1}  # an int: the method sees 1.0, the cache key still holds 1
    cfg = RunConfig(method="fedprox", method_params=given)
    assert cfg.key()["method_params"] == {"mu": 1}
    assert type(cfg.key()["method_params"]["mu"]) is int
    assert RunConfig(method="fedavg").key()["method_params"] == {}  # no defaults filled in


# ------------------------------------------------------------------ typed server state
@pytest.mark.parametrize("name", ALL)
def test_server_state_has_named_fields_through_a_round(name):
    m = methods.get(name)(_ctx(), **_given(name))
    state = m.init_state(model_state(m.ctx.model))
    assert isinstance(state, m.State) and isinstance(state, ServerState)
    fields = {f.name for f in dataclasses.fields(state)}
    assert "model" in fields
    for rnd in (1, 2):
        state, _ = m.round(state, m.select_clients(state, rnd), rnd)
        assert type(state) is m.State
        assert set(vars(state)) == fields  # nothing added beside the declared fields
    with pytest.raises(TypeError):
        state["model"]  # no untyped access


def test_a_method_declaring_the_old_params_dict_is_told_what_to_write():
    with pytest.raises(FlkitError, match=r"declares `params`.*`Params`.*self\.hp\.<name>"):

        class Old(methods.FedAvg):
            params = {"beta": 0.9, "lr_decay": 1.0}
