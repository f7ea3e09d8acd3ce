"""Staleness methods: the formulas against hand-computed values, the FIFO lag, the baselines on
two-client examples, and the GI method's wiring (disabled = Unweighted; enabled changes the
model)."""

import math

import pytest
import torch
from torch import nn

from flkit import methods
from flkit.engine import LocalSpec
from flkit.methods import RunContext, ServerState
from flkit.methods.staleness import (
    AsynTiers,
    Unweighted,
    WPred,
    drift_prediction,
    first_order,
    gamma_ramp,
    prediction_error,
    round_robin,
    stale_clients,
    uniqueness_threshold,
    weighted_factor,
)
from flkit.state import model_state
from flkit.utils import FlkitError


def _ctx(n_clients=6, per=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_clients * per, 5, generator=g, dtype=dtype)
    y = torch.randint(0, 3, (n_clients * per,), generator=g)
    y[: 2 * per] = 2  # clients 0 and 1 hold the most samples of class 2
    parts = [torch.arange(i * per, (i + 1) * per) for i in range(n_clients)]
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3)).to(dtype)
    spec = LocalSpec(lr=0.1, batch_size=per, steps=2)
    return RunContext(model, x, y, parts, spec, seed, 3, "auto", 3)


def _run(cls, rounds, ctx=None, **params):
    ctx = ctx or _ctx()
    m = cls(ctx, **params)
    state = m.init_state(model_state(ctx.model))
    seen, logs = [], []
    for rnd in range(1, rounds + 1):
        seen.append({n: v.clone() for n, v in state.model.items()})
        state, log = m.round(state, m.select_clients(state, rnd), rnd)
        logs.append(log)
    return m, state, seen, logs


def _spy_adjust(m) -> dict:
    """Wrap m.adjust so that the next round's Delta_use and info are kept in the returned dict."""
    captured = {}
    orig = m.adjust

    def spy(st, info):
        use, met = orig(st, info)
        captured.update(use=use, info=info)
        return use, met

    m.adjust = spy
    return captured


def test_weighted_factor_paper_values():
    assert weighted_factor(10) == pytest.approx(0.5)
    assert weighted_factor(40) == pytest.approx(1 / (1 + math.exp(7.5)))
    assert weighted_factor(40) == pytest.approx(5.53e-4, rel=1e-2)
    assert weighted_factor(100) == pytest.approx(1.69e-10, rel=1e-2)


def test_first_order_hand_made():
    delta = torch.tensor([0.1, -0.2])
    out = first_order(delta, torch.tensor([3.0, 5.0]), torch.tensor([2.0, 3.0]), lam=4.0)
    assert torch.allclose(out, torch.tensor([0.1 - 4 * 0.01 * 1, -0.2 - 4 * 0.04 * 2]))


def test_uniqueness_threshold_both_variants():
    u = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    # pairwise cosine distances: d12 = 1, d13 = 0, d23 = 1; ordered pairs sum to 4
    assert uniqueness_threshold(u) == pytest.approx(4 / 9)
    assert uniqueness_threshold(u, off_diagonal=True) == pytest.approx(4 / 6)


def test_gamma_ramp_values():
    assert gamma_ramp(50, None) == 1.0
    assert gamma_ramp(99, 100, 0.1) == 1.0
    assert gamma_ramp(100, 100, 0.1) == 1.0
    assert gamma_ramp(105, 100, 0.1) == pytest.approx(0.5)
    assert gamma_ramp(110, 100, 0.1) == 0.0
    assert gamma_ramp(100, 100, 0.0) == 0.0
    assert gamma_ramp(101, 100, 0.2) == pytest.approx(0.95)
    with pytest.raises(FlkitError, match="gamma window"):
        gamma_ramp(1, 1, -0.1)


def test_round_robin_blocks_and_stale_set():
    assert round_robin(10, 3, 1) == [0, 1, 2]
    assert round_robin(10, 3, 3) == [6, 7, 8]
    assert round_robin(10, 3, 4) == [0, 1, 2]  # the block 9..11 would pass the last client
    ctx = _ctx()
    assert stale_clients(ctx.parts, ctx.y, 2, 2) == [0, 1]


def test_fifo_gives_exact_lag_and_stale_clients_normal_before_tau():
    tau = 3
    seen_then = {}

    class Probe(Unweighted):
        def adjust(self, state, info):
            seen_then[info["t"]] = {n: v.clone() for n, v in info["then"].items()}
            return super().adjust(state, info)

    ctx = _ctx()
    m, _, models, logs = _run(Probe, 9, ctx, tau=tau, affected_class=2, num_stale=2)
    # clients 0, 1 (stale) take part in rounds t = 0, 2, 4, 6, 8 (blocks of 3 over 6 clients)
    assert [lg.metrics["stale_participants"] for lg in logs] == [0, 0, 0, 0, 2, 0, 2, 0, 2]
    for t, then in seen_then.items():
        for n in then:
            assert torch.equal(then[n], models[t - tau][n]), (t, n)
    assert sorted(seen_then) == [4, 6, 8]
    # before tau: identical to the method without staleness
    _, _, m_unstale, _ = _run(
        methods.get("unstale"), 4, _ctx(), tau=tau, affected_class=2, num_stale=2
    )
    for n in models[3]:
        assert torch.equal(models[3][n], m_unstale[3][n])


def test_wpred_prediction_and_correction_by_hand():
    ctx = _ctx()
    m = WPred(ctx, tau=3, affected_class=2, num_stale=2)
    # full window: FIFO w^0..w^6 (2 tau + 1 models), w^(t-tau) = w^3 = 4, w^(t-2 tau) = w^0 = 1
    vals = [1.0, 2.0, 3.5, 4.0, 9.0, 9.0, 9.0]
    # default damping 0.5: 4 + 0.5 (4 - 1)
    pred = m.stale_start({}, [{"w": torch.tensor([v])} for v in vals])
    assert torch.allclose(pred["w"], torch.tensor([5.5]))
    undamped = WPred(ctx, tau=3, affected_class=2, num_stale=2, damping=1.0)
    full = undamped.stale_start({}, [{"w": torch.tensor([v])} for v in vals])
    assert torch.allclose(full["w"], torch.tensor([7.0]))
    # early: FIFO w^0..w^4, w^(t-tau) = w^1 = 2, one past round: 2 + 0.5 (2 - 1) (not 2 + 3 x 1)
    pred_early = m.stale_start({}, [{"w": torch.tensor([v])} for v in vals[:2] + [9.0] * 3])
    assert torch.allclose(pred_early["w"], torch.tensor([2.5]))
    m.param_names = ["w"]
    info = {"delta": {"w": torch.tensor([[0.1]])}, "now": {"w": torch.tensor([4.0])}, "start": pred}
    use, _ = m.adjust({}, info)
    assert torch.allclose(use["w"], torch.tensor([[0.1 - 4 * 0.01 * (4.0 - 5.5)]]))


def test_wpred_prediction_is_damped_on_a_decaying_trajectory():
    """Global steps that halve every round (large early steps, as in training): the prediction
    stays within the distance the model has already travelled, where extrapolating tau times the
    latest step (the diverging rule) overshoots by far."""
    tau = 10
    m = WPred(_ctx(), tau=tau, affected_class=2, num_stale=2)
    w = [sum(0.5**k for k in range(i)) for i in range(tau + 2)]  # w^i -> 2
    fifo = [{"w": torch.tensor([v])} for v in w]  # t - tau = 1: one past step
    then = w[1]
    pred = float(m.stale_start({}, fifo)["w"])
    assert pred == pytest.approx(then + 0.5 * (w[1] - w[0]))
    assert abs(pred - then) <= abs(then - w[0]) + 1e-12
    assert abs(then + tau * (w[1] - w[0]) - then) == pytest.approx(10.0)  # the old rule


def _drift_and_noise(tau, rounds, v, sigma):
    """w^t = t v e_0 + sigma (e_1 + ... + e_t): a steady drift plus a step of size sigma in a new
    orthogonal direction every round (the zig-zag of round-robin blocks pulling the model their
    own way). Norms are then exact: for t >= 2 tau and damping b,
    ||w_pred - w^t||^2 = (1 - b)^2 tau^2 v^2 + (b^2 + 1) tau sigma^2,
    ||w^(t-tau) - w^t||^2 = tau^2 v^2 + tau sigma^2."""
    dim = rounds + 2
    out, w = [], torch.zeros(dim, dtype=torch.float64)
    for t in range(rounds + 1):
        if t:
            w = w.clone()
            w[0] += v
            w[t + 1] += sigma
        out.append({"w": w})
    return out


@pytest.mark.parametrize(
    "damping, ratio", [(0.0, 1.0), (0.5, math.sqrt(44 / 48)), (1.0, math.sqrt(64 / 48))]
)
def test_prediction_error_by_hand(damping, ratio):
    # tau 4, v 1, sigma^2 8: drift^2 16, noise 4 x 8 = 32 (the measured run: noise ~ drift)
    models = _drift_and_noise(4, 20, 1.0, math.sqrt(8))
    got = prediction_error(models, 4, damping, start=8)
    assert got == pytest.approx(ratio, rel=1e-12)


def test_wpred_default_prediction_is_closer_than_no_prediction_on_a_noisy_drift():
    """On a trajectory whose round-to-round zig-zag is as large as its drift (as the Unstale run
    of the `cpu` preset is), the undamped drift lands farther from w^t than w^(t-tau) itself
    (ratio sqrt(64/48) = 1.15: the first-order correction then acts on a larger gap and W-Pred
    diverged); W-Pred's default prediction must be closer to w^t than not predicting."""
    tau = 4
    models = _drift_and_noise(tau, 20, 1.0, math.sqrt(8))
    m = WPred(_ctx(), tau=tau, affected_class=2, num_stale=2)
    for t in range(2 * tau, len(models)):
        fifo = models[t - 2 * tau : t + 1]
        pred = m.stale_start({}, fifo)["w"]
        now, then = models[t]["w"], models[t - tau]["w"]
        assert float((pred - now).norm()) == pytest.approx(math.sqrt(44), rel=1e-12)
        assert (pred - now).norm() < (then - now).norm()


def test_drift_prediction_and_prediction_error_refuse_bad_values():
    one = {"w": torch.tensor([1.0])}
    with pytest.raises(FlkitError, match="damping.*1.5"):
        drift_prediction(one, one, 1.5)
    with pytest.raises(FlkitError, match="damping"):
        WPred(_ctx(), tau=2, affected_class=2, num_stale=2, damping=-0.1)
    with pytest.raises(FlkitError, match="start=1"):
        prediction_error([one] * 5, 2, 0.5, start=1)


def test_wpred_round_uses_the_lagged_models_and_the_drift():
    """A whole W-Pred round with two stale clients (0, 1): they train from
    w^(t-tau) + 0.5 (w^(t-tau) - w^(t-2 tau)) built from the global models the run really had (lag
    tau, not tau - 1), their update is first-order corrected with w^t minus that prediction, and
    the mean takes w^t + Delta_use. At t = tau no past model exists: the start is w^0."""
    tau = 2
    m, state, models, _ = _run(WPred, 6, _ctx(), tau=tau, affected_class=2, num_stale=2)
    t = 6  # round 7 = t 6: block [0, 1, 2], clients 0 and 1 stale
    now = state.model
    models = models + [now]  # models[i] = w^i for i = 0..6
    captured = _spy_adjust(m)
    clients = m.select_clients(state, t + 1)
    assert clients == [0, 1, 2]
    new, log = m.round(state, clients, t + 1)
    assert log.metrics["stale_participants"] == 2
    then, past = models[t - tau], models[t - 2 * tau]
    pred = {n: then[n] + 0.5 * (then[n] - past[n]) for n in now}  # default damping 0.5
    for n in now:
        assert torch.allclose(captured["info"]["start"][n], pred[n], atol=1e-12)
    stale = m.train({n: torch.stack([pred[n]] * 2) for n in now}, [0, 1], t + 1)
    normal = m.train({n: now[n].unsqueeze(0) for n in now}, [2], t + 1)
    for n in now:
        d = stale.state[n] - pred[n]
        use = d - 4.0 * d * d * (now[n] - pred[n])
        assert torch.allclose(captured["use"][n], use, atol=1e-12)
        expect = (now[n] + use[0] + now[n] + use[1] + normal.state[n][0]) / 3
        assert torch.allclose(new.model[n], expect, atol=1e-12)
    # first stale round (t = tau): no model before w^(t-tau) = w^0, the client trains from w^0
    m2, _, models2, _ = _run(WPred, 2, _ctx(), tau=tau, affected_class=2, num_stale=2)
    first = {}
    m2.adjust = lambda st, info: (first.update(info) or info["delta"], {})
    s2 = m2.init_state(model_state(m2.ctx.model))
    for rnd in range(1, 4):
        s2, _ = m2.round(s2, m2.select_clients(s2, rnd), rnd)
    assert first["t"] == tau
    for n in first["start"]:
        assert torch.equal(first["start"][n], models2[0][n])


def test_asyn_tiers_population_weights_by_hand():
    ctx = _ctx(n_clients=4)
    m = AsynTiers(ctx, tau=1, affected_class=2, num_stale=1)
    m.stale = {1}
    now = {"w": torch.tensor([0.0])}
    m._clients = [0, 1]
    out = m.combine(
        ServerState(now), {"w": torch.tensor([[1.0], [3.0]])}, torch.tensor([False, True])
    )
    assert torch.allclose(out["w"], torch.tensor([(3 * 1.0 + 1 * 3.0) / 4]))
    m._clients = [0, 2]  # no stale-tier participant: that tier keeps w^t
    out = m.combine(
        ServerState(now), {"w": torch.tensor([[1.0], [3.0]])}, torch.tensor([False, False])
    )
    assert torch.allclose(out["w"], torch.tensor([(3 * 2.0 + 1 * 0.0) / 4]))


def test_weighted_scales_the_stale_delta():
    """Delta_use = s(tau) Delta with s = 1 / (1 + e^(a (tau - b))): a = 1, b = 2, tau = 3 gives
    1 / (1 + e) = 0.268941..., checked on the round's own stale delta."""
    m, state, _, _ = _run(
        methods.get("weighted"), 4, _ctx(), tau=3, affected_class=2, num_stale=2, b=2.0, a=1.0
    )
    captured = _spy_adjust(m)
    _, log = m.round(state, m.select_clients(state, 5), 5)
    assert log.metrics["stale_weight"] == pytest.approx(0.2689414213699951)
    for n, d in captured["info"]["delta"].items():
        assert torch.allclose(captured["use"][n], 0.2689414213699951 * d, atol=1e-12)


def test_gi_disabled_equals_unweighted_and_enabled_changes_the_model():
    kw = dict(tau=2, affected_class=2, num_stale=2)
    gi = methods.get("gi_staleness")
    _, s_off, _, _ = _run(gi, 6, _ctx(), gi=False, **kw)
    _, s_unw, _, _ = _run(methods.get("unweighted"), 6, _ctx(), **kw)
    for n in s_unw.model:
        assert torch.equal(s_off.model[n], s_unw.model[n])
    _, s_on, _, logs = _run(
        gi, 6, _ctx(), gi=True, gi_size=4, gi_iters=3, gi_topk=1.0, switch="none", box="none", **kw
    )
    assert any("gi_iters" in lg.metrics for lg in logs)
    assert any(not torch.allclose(s_on.model[n], s_unw.model[n]) for n in s_unw.model)


def test_gi_round_aggregates_the_estimate():
    """The aggregated model is the mean over participants with w^t + Delta_hat for the stale
    ones (the released code's defect replaced Delta_hat by the stale update)."""
    kw = dict(
        tau=2,
        affected_class=2,
        num_stale=2,
        gi_size=4,
        gi_iters=2,
        gi_topk=1.0,
        switch="none",
        box="none",
        track_error=True,
    )
    m, state, _, _ = _run(methods.get("gi_staleness"), 4, _ctx(), **kw)  # t = 0..3; stale at t=2
    captured = _spy_adjust(m)
    clients = m.select_clients(state, 5)  # t = 4: clients 0, 1, 2 with 0, 1 stale
    new, _ = m.round(state, clients, 5)
    est = captured["info"]["estimate"]
    for n in est:
        assert torch.allclose(captured["use"][n], est[n])  # gamma = 1: the estimate is used
    normal = m.train({k: v.unsqueeze(0) for k, v in state.model.items()}, [clients[2]], 5)
    for n in new.model:
        now = state.model[n]
        expect = (now + est[n][0] + now + est[n][1] + normal.state[n][0]) / 3
        assert torch.allclose(new.model[n], expect, atol=1e-10)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"tau": -1}, "tau"),
        ({"affected_class": 3}, "affected_class"),
        ({"num_stale": 7}, "num_stale"),
        ({"gi_topk": 0.0}, "topk"),
        ({"gi_topk": 1.5}, "topk"),
        ({"gi_size": 0}, "gi_size"),
        ({"gi_iters": 0}, "gi_iters"),
        ({"gamma_window": -0.5}, "gamma_window"),
        ({"participation": "random"}, "participation"),
        ({"tau": 2.5}, "tau"),
        ({"gi_tol": -0.1}, "gi_tol"),
    ],
)
def test_bad_input_is_refused_before_training(params, match):
    with pytest.raises(FlkitError, match=match):
        methods.get("gi_staleness")(_ctx(), **{"affected_class": 2, "num_stale": 2, **params})


def test_unknown_wpred_rule_names_the_accepted_ones():
    with pytest.raises(FlkitError, match="'extrapolate'.*drift"):
        WPred(_ctx(), tau=2, affected_class=2, num_stale=2, predict="extrapolate")


def test_gi_refuses_minibatch_clients():
    ctx = _ctx()
    ctx.spec = LocalSpec(lr=0.1, batch_size=4, steps=2)
    with pytest.raises(FlkitError, match="batch_size"):
        methods.get("gi_staleness")(ctx, tau=1, affected_class=2, num_stale=2)


def test_methods_registered():
    for name in (
        "unstale",
        "unweighted",
        "weighted",
        "first_order",
        "w_pred",
        "asyn_tiers",
        "gi_staleness",
    ):
        assert name in methods.names()
