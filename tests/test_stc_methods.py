"""STC, FedFV and STC-PA (flkit.methods.stc, the STC-PA paper) — independent expectations."""

import io
import math

import pytest
import torch
from torch import nn

from flkit import compress, methods, models
from flkit.engine import LocalSpec, evaluate
from flkit.methods import RunContext
from flkit.methods.base import ClientUpdates
from flkit.methods.stc import (
    STC,
    STCPA,
    FedFV,
    project_external,
    project_internal,
    rescale_to_mean_norm,
)
from flkit.state import flatten, model_state, param_names
from flkit.utils import FlkitError


# --------------------------------------------------------------------------- tiny setup
class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return self.net(x)


def _ctx(
    num_clients=8, per_client=12, model=None, x_shape=(12,), classes=3, lr=0.1, batch=4, seed=0
):
    g = torch.Generator().manual_seed(0)
    n = num_clients * per_client
    x = torch.randn(n, *x_shape, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    parts = [torch.arange(i * per_client, (i + 1) * per_client) for i in range(num_clients)]
    if model is None:
        torch.manual_seed(1)
        model = TinyNet()
    return RunContext(
        model, x, y, parts, LocalSpec(lr=lr, batch_size=batch, epochs=1), seed, classes
    )


def _run(method, rounds_clients):
    state = method.init_state(model_state(method.ctx.model))
    log = []
    for rnd, clients in enumerate(rounds_clients, start=1):
        down = method.downlink_bits(state, clients)
        up = method.client_update(state, clients, rnd)
        state = method.aggregate(state, up, rnd)
        log.append((up, down, method.round_metrics(state, up)))
    return state, log


SCHEDULE = [[0, 1, 2, 3], [4, 5, 6, 7], [0, 2, 4, 6], [1, 3, 5, 7], [0, 1, 6, 7]]


# --------------------------------------------------------------------------- registry
def test_registered_names():
    for name, cls in (("stc", STC), ("fedfv", FedFV), ("stc_pa", STCPA)):
        assert methods.get(name) is cls
    assert {"fedavg", "stc", "fedfv", "stc_pa"} <= set(methods.names())


# ------------------------------------------------------------------------ alpha = 1, tau = 0 is STC
def test_stc_pa_alpha1_tau0_is_exactly_stc():
    ctx = _ctx()
    s_stc, log_stc = _run(STC(ctx, p=0.1), SCHEDULE)
    s_pa, log_pa = _run(STCPA(ctx, p=0.1, alpha=1.0, tau=0), SCHEDULE)
    for n in s_stc.model:
        assert torch.equal(s_stc.model[n], s_pa.model[n]), n
    for c in range(8):
        for n in param_names(ctx.model):
            assert torch.equal(s_stc.client_residuals[c][n], s_pa.client_residuals[c][n])
    for (u1, d1, _), (u2, d2, m2) in zip(log_stc, log_pa):
        assert u1.bits_up == u2.bits_up and d1 == d2
        assert (
            m2["kept"] == 4 and m2["internal_projections"] == 0 and m2["external_projections"] == 0
        )
    # and the default STC-PA (alpha = 0.1, tau = 1) really does something else
    s_def, log_def = _run(STCPA(ctx, p=0.1), SCHEDULE)
    assert sum(m["internal_projections"] for _, _, m in log_def) > 0
    assert any(not torch.equal(s_def.model[n], s_stc.model[n]) for n in s_stc.model)


# --------------------------------------------------------------------------- residuals
def test_client_residuals_persist_when_not_selected_and_feed_back():
    ctx = _ctx()
    m = STC(ctx, p=0.1)
    state = m.init_state(model_state(ctx.model))
    up1 = m.client_update(state, [0, 1, 2], 1)
    state = m.aggregate(state, up1, 1)
    saved = {c: {n: t.clone() for n, t in state.client_residuals[c].items()} for c in (0, 1, 2)}
    assert all(any(t.abs().sum() > 0 for t in saved[c].values()) for c in saved)
    up2 = m.client_update(state, [3, 4], 2)  # 0, 1, 2 are not selected
    state = m.aggregate(state, up2, 2)
    assert set(state.client_residuals) == {0, 1, 2, 3, 4}
    for c in (0, 1, 2):
        for n, t in saved[c].items():
            assert torch.equal(state.client_residuals[c][n], t)
    # client 0 again: transmitted + new residual == its pseudo-gradient + the old residual
    w = state.model
    up3 = m.client_update(state, [0, 5], 3)
    for n in param_names(ctx.model):
        g = w[n] - up3.state[n][0]
        lhs = up3.extra["sent"][n][0] + state.client_residuals[0][n]
        assert torch.allclose(lhs, g + saved[0][n], atol=1e-6)
        # what was sent is ternary with exactly k non-zeros (or fewer when the tensor has zeros)
        k = compress.num_kept(g.numel(), 0.1)
        assert int((up3.extra["sent"][n][0] != 0).sum()) <= k
        assert len(up3.extra["sent"][n][0].abs().unique()) <= 2


def test_server_residual_conserves_mass():
    ctx = _ctx()
    m = STC(ctx, p=0.1)
    state = m.init_state(model_state(ctx.model))
    w0 = {n: v.clone() for n, v in state.model.items()}
    total_in = None
    for rnd, clients in enumerate(SCHEDULE[:3], start=1):
        up = m.client_update(state, clients, rnd)
        mean = flatten(up.extra["sent"], m.param_names).mean(0)
        total_in = mean if total_in is None else total_in + mean
        state = m.aggregate(state, up, rnd)
    sent = flatten(
        {n: (w0[n] - state.model[n]).unsqueeze(0) for n in m.param_names}, m.param_names
    )[0]
    resid = flatten(
        {n: state.server_residual["server"][n].unsqueeze(0) for n in m.param_names},
        m.param_names,
    )[0]
    assert torch.allclose(sent + resid, total_in, atol=1e-5)


def test_state_checkpoint_resumes_exactly():
    ctx = _ctx()
    m = STCPA(ctx, p=0.2, alpha=0.25, tau=2)
    full, _ = _run(m, SCHEDULE)
    state = m.init_state(model_state(ctx.model))
    for rnd, clients in enumerate(SCHEDULE[:2], start=1):
        state = m.aggregate(state, m.client_update(state, clients, rnd), rnd)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)
    m2 = STCPA(ctx, p=0.2, alpha=0.25, tau=2)
    for rnd, clients in enumerate(SCHEDULE[2:], start=3):
        state = m2.aggregate(state, m2.client_update(state, clients, rnd), rnd)
    for n in full.model:
        assert torch.equal(full.model[n], state.model[n])


# ------------------------------------------------ FedFV on a hand-worked 3-client example
class _Vec2(nn.Module):
    """One trainable 2-vector (d = 2), so every projection can be worked by hand."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x * self.w


def _updates(clients, rows, losses):
    """ClientUpdates as FedFV's client_update makes them: dense pseudo-gradients g = w - w'."""
    rows = torch.tensor(rows, dtype=torch.float32)
    return ClientUpdates(
        clients,
        {},
        torch.ones(len(clients)),
        torch.zeros(len(clients)),
        [64] * len(clients),
        extra={
            "sent": {"w": rows},
            "losses": torch.tensor(losses, dtype=torch.float64),
            "nonzeros": [2] * len(clients),
        },
    )


# Round 1, w = (0, 0), alpha = 0 (keep_count(3, 0) = 0: every client is projected), tau = 1.
# g0 = (1, 0), g1 = (-1, 1), g2 = (0, -2); losses 0.1, 0.2, 0.3 -> loss-ascending order 0, 1, 2.
#   h0: g0.g1 = -1 < 0 -> (1, 0) - (-1/2)(-1, 1) = (0.5, 0.5); then (0.5, 0.5).g2 = -1 < 0 ->
#       (0.5, 0.5) - (-1/4)(0, -2) = (0.5, 0)
#   h1: g1.g0 = -1 < 0 -> (-1, 1) - (-1/1)(1, 0) = (0, 1); (0, 1).g2 = -2 < 0 ->
#       (0, 1) - (-2/4)(0, -2) = (0, 0)
#   h2: g2.g0 = 0 (no conflict); g2.g1 = -2 < 0 -> (0, -2) - (-2/2)(-1, 1) = (-1, -1)
#   mean h = (-0.5/3, -1/3) = (-1/6, -1/3), norm sqrt(5)/6
#   external: lag 1 = round 0, nobody was there -> unchanged
#   rescale to the plain mean's norm: mean g = (0, -1/3), norm 1/3 -> factor (1/3)/(sqrt(5)/6)
#   = 2/sqrt(5): g_t = (-1/(3 sqrt 5), -2/(3 sqrt 5)); w1 = w - g_t = (1, 2)/(3 sqrt 5)
H1 = [(0.5, 0.0), (0.0, 0.0), (-1.0, -1.0)]
W1 = (1 / (3 * math.sqrt(5)), 2 / (3 * math.sqrt(5)))
# Round 2: client 3 alone, g3 = (1, 1). Internal: nothing to project against (m = 1).
#   external (tau = 1): the round-1 updates that conflict with (1, 1): only g2 ((1,1).g2 = -2;
#   g0 gives 1, g1 gives 0) -> g_con = (0, -2), g.g_con = -2 < 0 ->
#   (1, 1) - (-2/4)(0, -2) = (1, 0); rescale to |g3| = sqrt(2): g_t = (sqrt 2, 0)
W2 = (W1[0] - math.sqrt(2), W1[1])


def test_fedfv_matches_a_hand_worked_three_client_example():
    ctx = RunContext(
        _Vec2(),
        torch.zeros(4, 2),
        torch.zeros(4, dtype=torch.long),
        [torch.tensor([i]) for i in range(4)],
        LocalSpec(lr=0.1, batch_size=1, epochs=1),
        0,
        2,
    )
    m = FedFV(ctx, alpha=0.0, tau=1)
    state = m.init_state({"w": torch.zeros(2)})
    up1 = _updates([0, 1, 2], [(1, 0), (-1, 1), (0, -2)], [0.1, 0.2, 0.3])
    state = m.aggregate(state, up1, 1)
    torch.testing.assert_close(state.model["w"], torch.tensor(W1), rtol=0, atol=1e-6)
    met = m.round_metrics(state, up1)
    assert met["kept"] == 0 and met["internal_projections"] == 5  # h0: 2, h1: 2, h2: 1
    assert met["external_projections"] == 0
    up2 = _updates([3], [(1, 1)], [0.5])
    state = m.aggregate(state, up2, 2)
    torch.testing.assert_close(state.model["w"], torch.tensor(W2), rtol=0, atol=1e-6)
    met = m.round_metrics(state, up2)
    assert met["external_projections"] == 1 and met["external_conflicts"] == 1


def test_projection_functions_match_the_same_hand_worked_example():
    # the functions FedFV calls, one by one, against the hand-worked numbers above
    rows = torch.tensor([(1.0, 0.0), (-1.0, 1.0), (0.0, -2.0)])
    g, info = project_internal(rows, [0.1, 0.2, 0.3], 0.0, return_info=True)
    torch.testing.assert_close(info.projected, torch.tensor(H1), rtol=0, atol=1e-7)
    torch.testing.assert_close(g, torch.tensor([-1 / 6, -1 / 3]), rtol=0, atol=1e-7)
    hist = {c: (rows[c], 1) for c in range(3)}
    assert torch.equal(project_external(g, hist, 1, 1), g)  # lag 1 = round 0: empty
    torch.testing.assert_close(rescale_to_mean_norm(g, rows), -torch.tensor(W1), rtol=0, atol=1e-7)
    g2 = project_external(torch.tensor([1.0, 1.0]), hist, 2, 1)
    torch.testing.assert_close(g2, torch.tensor([1.0, 0.0]), rtol=0, atol=1e-7)


def test_loss_before_vs_during():
    ctx = _ctx()
    before = STCPA(ctx, loss="before")
    during = STCPA(ctx, loss="during")
    st = before.init_state(model_state(ctx.model))
    ub = before.client_update(st, [0, 1], 1)
    ud = during.client_update(st, [0, 1], 1)
    want = torch.tensor(
        [
            evaluate(ctx.model, st.model, ctx.x[ctx.parts[c]], ctx.y[ctx.parts[c]])[1]
            for c in (0, 1)
        ],
        dtype=torch.float64,
    )
    assert torch.allclose(ub.extra["losses"], want)
    assert torch.allclose(ud.extra["losses"], ud.train_loss.double())


# ---------------------------------------------------- bits per round (the paper's worked examples)
@pytest.mark.parametrize(
    "name,shape,fedavg_mbit,stc_kb,factor",
    [
        ("vgg11_star", (3, 32, 32), 27.70, 73.09, 47.4),
        ("cnn3_mnist", (1, 28, 28), 4.19, 11.06, 47.4),
    ],
)
def test_bits_per_round_match_worked_example(name, shape, fedavg_mbit, stc_kb, factor):
    torch.manual_seed(0)
    model = models.build(name)
    ctx = _ctx(
        num_clients=2, per_client=4, model=model, x_shape=shape, classes=10, lr=0.05, batch=4
    )
    m = STCPA(ctx, p=0.1)  # simulator counter by default
    state = m.init_state(model_state(model))
    d = models.count_params(model)
    assert m.downlink_bits(state, [0, 1]) == [32 * d] * 2  # round 1: dense initial model
    up = m.client_update(state, [0, 1], 1)
    state = m.aggregate(state, up, 1)
    nominal = compress.STCCodec(0.1).expected_bits(model)
    assert up.bits_up == [nominal, nominal]
    assert m.downlink_bits(state, [0, 1]) == [nominal, nominal]  # round 2: the broadcast ḡ
    assert round(32 * d / 1e6, 2) == fedavg_mbit
    assert round(nominal / 8 / 1e3, 2) == stc_kb
    assert round(32 * d / nominal, 1) == factor
    if name == "vgg11_star":
        assert d == 865_482 and round(nominal / 1e6, 3) == 0.585
        assert compress.format_bytes(32 * d / 8) == "3.46 MB"
    else:
        assert d == 130_890 and compress.format_bytes(32 * d / 8) == "523.56 KB"


def test_mnist_cnn_message_size_by_hand():
    # cnn3_mnist (README: conv 32-64-64, 3x3, each followed by a 2x2 max-pool -> 576 -> 128 -> 10):
    # conv1 1*32*9 + 32 = 320; conv2 32*64*9 + 64 = 18,496; conv3 64*64*9 + 64 = 36,928;
    # fc1 576*128 + 128 = 73,856; fc2 128*10 + 10 = 1,290; total d = 130,890
    sizes = [288, 32, 18_432, 64, 36_864, 64, 73_728, 128, 1_280, 10]
    assert sum(sizes) == 130_890
    model = models.build("cnn3_mnist")
    assert [p.numel() for p in model.parameters()] == sizes
    # FedAvg: 32 bits per parameter = 4,188,480 bits = 523,560 bytes per client and direction
    assert compress.DenseCodec().expected_bits(model) == 4_188_480
    # STC at p = 0.1 keeps k = ceil(n/10) per tensor: 29 + 4 + 1,844 + 7 + 3,687 + 7 + 7,373 + 13
    # + 128 + 1 = 13,093 non-zeros
    ks = [29, 4, 1_844, 7, 3_687, 7, 7_373, 13, 128, 1]
    assert sum(ks) == 13_093
    # paper counter: k (b_pos + 1 sign bit) + 32 (mu) per tensor, b_pos(0.1) = b* + 1/(1 - 0.9^2^b*)
    # with b* = 3: 3 + 1/(1 - 0.43046721) = 4.755825; 13,093 x 5.755825 + 10 x 32 = 75,681.02
    # bits, plus at most 1 bit per tensor from rounding each tensor's size up
    paper_bits = compress.STCCodec(0.1, "paper").expected_bits(model)
    assert 75_681.02 <= paper_bits <= 75_681.02 + 10
    # the STC simulator's counter: k (b_pos(q) + 1 + 1) with q = (k+1)/(n+1) ~ 0.1, no mu:
    # 13,093 x 6.755825 = 88,454 bits (q is not exactly 0.1 per tensor: within 0.1 %) = 11.06 KB,
    # 4,188,480 / 88,454 = 47.4x below FedAvg
    sim_bits = compress.STCCodec(0.1).expected_bits(model)
    assert abs(sim_bits - 88_454) / 88_454 < 1e-3
    assert round(sim_bits / 8 / 1e3, 2) == 11.06 and round(4_188_480 / sim_bits, 1) == 47.4


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "cls,kw,field",
    [
        (STC, {"p": 0}, "p"),
        (STC, {"p": 1.5}, "p"),
        (STC, {"p": -0.1}, "p"),
        (STC, {"p": float("nan")}, "p"),
        (STC, {"p": "0.1"}, "p"),
        (STC, {"counter": "bogus"}, "counter"),
        (STCPA, {"alpha": -0.1}, "alpha"),
        (STCPA, {"alpha": 1.01}, "alpha"),
        (FedFV, {"alpha": 2}, "alpha"),
        (STCPA, {"tau": -1}, "tau"),
        (STCPA, {"tau": 1.5}, "tau"),
        (FedFV, {"tau": True}, "tau"),
        (STCPA, {"loss": "after"}, "loss"),
        (STCPA, {"external_variant": "v2"}, "external_variant"),
        (FedFV, {"p": 0.1}, "p"),
        (STC, {"alpha": 0.1}, "alpha"),
    ],
)
def test_bad_hyperparameters(cls, kw, field):
    with pytest.raises(FlkitError, match=field):
        cls(_ctx(), **kw)


def test_p_one_is_accepted_and_still_ternary():
    ctx = _ctx()
    m = STC(ctx, p=1.0)
    st = m.init_state(model_state(ctx.model))
    up = m.client_update(st, [0], 1)
    for _n, v in up.extra["sent"].items():
        assert len(v[0].abs().unique()) <= 2


def test_empty_client_set_and_mismatched_losses():
    ctx = _ctx()
    for cls in (STC, FedFV, STCPA):
        m = cls(ctx)
        st = m.init_state(model_state(ctx.model))
        with pytest.raises(FlkitError, match="empty client set"):
            m.client_update(st, [], 1)
    m = STCPA(ctx)
    st = m.init_state(model_state(ctx.model))
    up = m.client_update(st, [0, 1, 2], 1)
    up.extra["losses"] = up.extra["losses"][:2]
    with pytest.raises(FlkitError, match="losses"):
        m.aggregate(st, up, 1)
    with pytest.raises(FlkitError, match="losses"):
        project_internal(torch.randn(3, 5), [0.1, 0.2], 0.1)
    with pytest.raises(FlkitError, match="no clients"):
        project_internal(torch.randn(0, 5), [], 0.1)


def test_runs_through_experiment_and_reports_metrics(tmp_path):
    from flkit.experiment import RunConfig, run

    cfg = RunConfig(
        method="stc_pa",
        dataset="synthetic",
        model="logreg",
        num_clients=10,
        partition="iid",
        clients_per_round=4,
        rounds=3,
        batch_size=10,
        lr=0.05,
        per_client_eval=True,
        method_params={"p": 0.1, "alpha": 0.1, "tau": 1},
        device="cpu",
    )
    res = run(cfg, out_dir=tmp_path, progress=False)
    h = res.history
    for col in (
        "kept",
        "internal_projections",
        "external_projections",
        "client_acc_var",
        "bytes_up",
    ):
        assert col in h.columns
    assert (h["kept"] == 1).all()  # 4 - ceil(3 * 0.9) = 1
    dense = 32 * 610 * 4 / 8
    assert h["bytes_down"].iloc[0] == dense and h["bytes_down"].iloc[1] < dense / 10
    assert math.isfinite(float(h["test_accuracy"].iloc[-1]))
