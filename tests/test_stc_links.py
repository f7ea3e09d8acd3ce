"""STC-PA's ``links`` option (which links carry STC) and the projection counters per round
(flkit.methods.stc): equivalences with FedFV and the paper's STC-PA, and a hand-worked round."""

import math

import pytest
import torch

from flkit.methods.base import ClientUpdates
from flkit.methods.stc import STC, STCPA, FedFV
from flkit.state import flatten, model_state
from flkit.utils import FlkitError
from tests.test_stc_methods import SCHEDULE, _ctx, _run


def _same_runs(a, b):
    (sa, la), (sb, lb) = a, b
    for n in sa.model:
        assert torch.equal(sa.model[n], sb.model[n]), n
    for (ua, da, ma), (ub, db, mb) in zip(la, lb):
        assert da == db and list(ua.bits_up) == list(ub.bits_up)
        assert torch.equal(ua.extra["losses"], ub.extra["losses"])
        assert ma == mb


def test_no_compressed_link_is_exactly_fedfv():
    ctx = _ctx()
    _same_runs(_run(FedFV(ctx), SCHEDULE), _run(STCPA(ctx, links="none"), SCHEDULE))


def test_both_links_is_the_default_stc_pa_and_stc_at_alpha1_tau0():
    ctx = _ctx()
    _same_runs(_run(STCPA(ctx), SCHEDULE), _run(STCPA(ctx, links="both"), SCHEDULE))
    # with nobody projected STC-PA on both links is plain STC bit for bit (model and bits)
    s_stc, l_stc = _run(STC(ctx), SCHEDULE)
    s_pa, l_pa = _run(STCPA(ctx, links="both", alpha=1.0, tau=0), SCHEDULE)
    for n in s_stc.model:
        assert torch.equal(s_stc.model[n], s_pa.model[n]), n
    assert [d for _, d, _ in l_stc] == [d for _, d, _ in l_pa]


def test_uplink_only_sends_ternary_up_and_the_dense_aggregate_down():
    ctx = _ctx()
    m = STCPA(ctx, links="uplink", alpha=1.0, tau=0)  # nobody projected: g_t = mean of uploads
    st = m.init_state(model_state(ctx.model))
    up = m.client_update(st, [0, 1, 2], 1)
    for v in up.extra["sent"].values():  # per client and tensor: values in {-mu, 0, mu}
        for row in v:
            assert len(row.abs().unique()) <= 2
    st2 = m.aggregate(st, up, 1)
    names = m.param_names
    mean = flatten(up.extra["sent"], names).mean(dim=0)
    new = flatten({n: st2.model[n][None] for n in names}, names)[0]
    old = flatten({n: st.model[n][None] for n in names}, names)[0]
    torch.testing.assert_close(old - new, mean, rtol=0, atol=1e-7)
    assert st2.server_residual == {} and len(st2.client_residuals) == 3
    d = sum(st.model[n].numel() for n in names)
    assert m.downlink_bits(st2, [0]) == [32 * d]  # dense broadcast
    assert "down_nonzeros" not in m.round_metrics(st2, up)


def test_downlink_only_sends_dense_up_and_ternary_down():
    ctx = _ctx()
    m = STCPA(ctx, links="downlink", p=0.1)
    st = m.init_state(model_state(ctx.model))
    up = m.client_update(st, [0, 1, 2], 1)
    names = m.param_names
    d = sum(st.model[n].numel() for n in names)
    assert list(up.bits_up) == [32 * d] * 3 and st.client_residuals == {}
    st2 = m.aggregate(st, up, 1)
    k = sum(max(math.ceil(st.model[n].numel() * 0.1), 1) for n in names)
    assert m.round_metrics(st2, up)["down_nonzeros"] == k
    assert set(st2.server_residual) == {"server"}
    assert m.downlink_bits(st2, [0])[0] < 32 * d / 10


# ------------------------------------------------------------------------- counters, hand case
def test_two_conflicting_updates_give_one_internal_projection():
    # g0 = (1, 0), g1 = (-1, 1): g0.g1 = -1 < 0. m = 2, alpha = 0.1: keep_count = 2 - ceil(0.9)
    # = 1, so the higher-loss client 1 is kept and client 0 is projected once:
    # h0 = (1, 0) - (-1/2)(-1, 1) = (0.5, 0.5); mean h = (-0.25, 0.75), norm sqrt(10)/4;
    # plain mean (0, 0.5), norm 0.5 -> g_t = (-0.25, 0.75) * 0.5 / (sqrt(10)/4)
    from flkit.engine import LocalSpec
    from flkit.methods import RunContext
    from tests.test_stc_methods import _Vec2

    ctx = RunContext(
        _Vec2(),
        torch.zeros(2, 2),
        torch.zeros(2, dtype=torch.long),
        [torch.tensor([0]), torch.tensor([1])],
        LocalSpec(lr=0.1, batch_size=1, epochs=1),
        0,
        2,
    )
    rows = torch.tensor([(1.0, 0.0), (-1.0, 1.0)])
    up = ClientUpdates(
        [0, 1],
        {},
        torch.ones(2),
        torch.zeros(2),
        [64, 64],
        extra={
            "sent": {"w": rows},
            "losses": torch.tensor([0.1, 0.2], dtype=torch.float64),
            "nonzeros": [1, 2],
        },
    )
    for m in (FedFV(ctx, alpha=0.1, tau=1), STCPA(ctx, links="none", alpha=0.1, tau=1)):
        st = m.aggregate(m.init_state({"w": torch.zeros(2)}), up, 1)
        met = m.round_metrics(st, up)
        assert met["kept"] == 1 and met["internal_projections"] == 1
        assert met["external_projections"] == 0 and met["external_conflicts"] == 0
        assert met["projected_norm"] == pytest.approx(math.sqrt(10) / 4)
        assert met["mean_norm"] == pytest.approx(0.5)
        assert met["update_norm"] == pytest.approx(0.5)
        want = -torch.tensor([-0.25, 0.75]) * 0.5 / (math.sqrt(10) / 4)
        torch.testing.assert_close(st.model["w"], want, rtol=0, atol=1e-6)


def test_counters_reach_the_run_history(tmp_path):
    from flkit.experiment import RunConfig, run

    for method, params in (("fedfv", {}), ("stc_pa", {"links": "uplink"})):
        cfg = RunConfig(
            method=method,
            dataset="synthetic",
            model="logreg",
            num_clients=10,
            partition="iid",
            clients_per_round=4,
            rounds=2,
            batch_size=10,
            lr=0.05,
            method_params=params,
            device="cpu",
        )
        h = run(cfg, out_dir=tmp_path, progress=False).history
        for col in ("internal_projections", "external_projections", "update_norm"):
            assert col in h.columns and h[col].notna().all(), (method, col)
        assert (h["update_norm"] - h["mean_norm"]).abs().max() < 1e-5  # FedFV's rescaling


# --------------------------------------------------------------------------- bad input
def test_bad_link_option_names_value_and_choices():
    with pytest.raises(FlkitError, match=r"'up'.*both, uplink, downlink, none"):
        STCPA(_ctx(), links="up")
    with pytest.raises(FlkitError, match="links"):
        FedFV(_ctx(), links="none")  # FedFV has no compressed link to choose


def test_history_length_below_zero_and_too_many_clients():
    # tau = 0 (no external projection) is one of the paper's ablation values; below it is refused
    with pytest.raises(FlkitError, match=r"tau=-1.*accepted"):
        STCPA(_ctx(), tau=-1)
    m = STCPA(_ctx(num_clients=3))
    st = m.init_state(model_state(m.ctx.model))
    with pytest.raises(FlkitError, match=r"accepted: at most 3"):
        m.client_update(st, [0, 1, 2, 3], 1)
    from flkit.experiment import RunConfig

    with pytest.raises(FlkitError, match=r"clients_per_round=11.*accepted: 1\.\.10"):
        RunConfig(method="stc_pa", dataset="synthetic", num_clients=10, clients_per_round=11)
