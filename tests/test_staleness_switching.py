"""The switch back to plain aggregation and the warm start of gradient inversion: detection on a
window of inversion rounds, the delay, the gamma ramp inside the aggregated update, and the reuse
of a client's surrogate data, each against hand values."""

import pytest
import torch
from torch import nn

from flkit import methods
from flkit.engine import LocalSpec
from flkit.methods import RunContext, staleness_gi
from flkit.methods.staleness_gi import switch_due
from flkit.state import model_state


def _ctx(n_clients=6, per=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_clients * per, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (n_clients * per,), generator=g)
    y[: 2 * per] = 2  # clients 0 and 1 hold the most samples of class 2: the stale ones
    parts = [torch.arange(i * per, (i + 1) * per) for i in range(n_clients)]
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3)).double()
    return RunContext(
        model, x, y, parts, LocalSpec(lr=0.1, batch_size=per, steps=2), seed, 3, "auto", 3
    )


GI = dict(tau=2, affected_class=2, num_stale=2, gi_size=2, gi_iters=2, gi_topk=1.0, box="none")


def test_switch_due_on_a_window_by_hand():
    errs = [(0.2, 0.3), (0.5, 0.3)]  # means: E1 0.35, E2 0.3
    assert switch_due(errs, 2)
    assert not switch_due(errs, 3)  # fewer rounds than the window: not yet
    assert not switch_due(errs, 2, margin=1.2)  # 0.35 < 1.2 x 0.3
    assert switch_due(errs, 1)  # window 1: the last round alone, 0.5 > 0.3
    assert switch_due([(0.5, 0.3), (0.2, 0.3)], 1) is False  # last round: 0.2 < 0.3


def test_detection_and_delay_from_the_window_means():
    m = methods.get("gi_staleness")(_ctx(), switch_window=2, **GI)
    state = m.init_state(model_state(m.ctx.model))
    errs = iter([(0.2, 0.3), (0.5, 0.3)])
    m._switch_errors = lambda info: next(errs)
    info = {"true": {}, "estimate": {}}
    state = m.after_adjust(state, {**info, "t": 5})
    assert state.switch_detected is None and state.switch_round is None  # one round, window 2
    state = m.after_adjust(state, {**info, "t": 6})
    assert state.switch_detected == 6 and state.switch_round == 6 + 2  # delay = tau
    m2 = methods.get("gi_staleness")(_ctx(), switch_window=1, switch_delay=5, **GI)
    s2 = m2.init_state(model_state(m2.ctx.model))
    m2._switch_errors = lambda info: (0.4, 0.3)
    s2 = m2.after_adjust(s2, {**info, "t": 7})
    assert (s2.switch_detected, s2.switch_round) == (7, 12)


def test_gamma_ramp_blends_the_estimate_and_the_stale_update():
    """switch_at 9, gamma_window 0.2: L = round(1.8) = 2 rounds, so at t = 10 gamma = 1 - 1/2 and
    the stale clients contribute 0.5 Delta_hat + 0.5 Delta."""
    m = methods.get("gi_staleness")(
        _ctx(), switch="none", switch_at=9, gamma_window=0.2, track_error=True, **GI
    )
    state = m.init_state(model_state(m.ctx.model))
    seen = {}
    orig = m.adjust

    def spy(st, info):
        use, met = orig(st, info)
        seen[info["t"]] = (use, dict(info), met)
        return use, met

    m.adjust = spy
    for rnd in range(1, 12):
        state, _ = m.round(state, m.select_clients(state, rnd), rnd)
    use, info, met = seen[10]
    assert met["gamma"] == pytest.approx(0.5)
    for n in m.param_names:
        expect = 0.5 * info["estimate"][n] + 0.5 * info["delta"][n]
        assert torch.allclose(use[n], expect, atol=1e-12)
    assert seen[8][2]["gamma"] == 1.0  # before the switching round: the estimate alone


def test_warm_start_reuses_the_clients_last_surrogate_data(monkeypatch):
    calls = []
    orig = staleness_gi.invert

    def spy(model, start, target, local, spec, x0, y0, **kw):
        res = orig(model, start, target, local, spec, x0, y0, **kw)
        calls.append((x0.clone(), res.x.clone()))
        return res

    monkeypatch.setattr(staleness_gi, "invert", spy)
    m = methods.get("gi_staleness")(_ctx(), switch="none", **GI)
    state = m.init_state(model_state(m.ctx.model))
    for rnd in range(1, 6):  # stale clients 0, 1 inverted at t = 2 and t = 4
        state, _ = m.round(state, m.select_clients(state, rnd), rnd)
    assert len(calls) == 2
    assert torch.equal(calls[1][0], calls[0][1])  # second start = first result
    assert not torch.equal(calls[0][0], calls[0][1])
    assert torch.equal(state.cache[0][0], calls[1][1][0])


def test_detected_round_is_tau_before_the_switch_takes_effect():
    import math

    import pandas as pd

    from flkit.papers.staleness.switching import detected_round

    nan = math.nan
    sw = pd.DataFrame({"round": [5, 10, 15], "switch_round": [nan, 52, 52]})
    assert detected_round(sw, 40) == 12  # effective at 52, detected 40 rounds earlier
    assert detected_round(pd.DataFrame({"round": [5]}), 40) is None  # the rule never ran
    assert detected_round(pd.DataFrame({"switch_round": [nan, nan]}), 40) is None
