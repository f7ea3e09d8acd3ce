"""flkit.prune: ERK densities, magnitude masks, schedules, SNIP, straight-through hooks — checked
against hand computations on tiny examples."""

import math

import pytest
import torch
from torch import nn

from flkit import models
from flkit.engine import LocalSpec, train_clients
from flkit.methods.fedavg import proximal_loss
from flkit.prune import (
    cubic_sparsity,
    erk_densities,
    erk_mask,
    global_magnitude_mask,
    incremental_lambda,
    information_loss,
    keep_counts,
    layerwise_magnitude_mask,
    masked,
    prunable_names,
    prune_and_regrow,
    snip_mask,
    snip_scores,
    straight_through,
)
from flkit.state import model_state
from flkit.utils import FlkitError


# --------------------------------------------------------------------------- ERK
def test_erk_by_hand_with_a_forced_dense_layer():
    # raw scores (sum/prod): A 4/4 = 1, B 20/100 = 0.2, C 29/100 = 0.29; total 204, keep 102.
    # first eps = 102 / (4 + 20 + 29) ~ 1.92 -> eps * r_A > 1: A dense; then eps = 98 / 49 = 2.
    shapes = {"A": (2, 2), "B": (10, 10), "C": (4, 25)}
    d = erk_densities(shapes, 0.5)
    assert d["A"] == 1.0
    assert d["B"] == pytest.approx(0.4) and d["C"] == pytest.approx(0.58)
    counts = keep_counts(shapes, d)
    assert counts == {"A": 4, "B": 40, "C": 58} and sum(counts.values()) == 102
    m = erk_mask(shapes, 0.5, torch.Generator().manual_seed(0))
    assert {k: int(v.sum()) for k, v in m.items()} == counts
    assert all(m[k].shape == shapes[k] for k in shapes)


def test_erk_full_density_and_power():
    shapes = {"A": (3, 4), "B": (8, 8)}
    assert erk_densities(shapes, 1.0) == {"A": 1.0, "B": 1.0}
    # power 0: every raw score is 1, so uniform density (no layer exceeds 1)
    d = erk_densities(shapes, 0.25, power=1e-12)
    assert d["A"] == pytest.approx(0.25) and d["B"] == pytest.approx(0.25)


def test_lenet5_counts_and_prunable_selection():
    net = models.build("lenet5")
    names = prunable_names(net)
    assert sum(p.numel() for p in net.parameters()) == 61_706
    assert sum(dict(net.named_parameters())[n].numel() for n in names) == 61_470
    with pytest.raises(FlkitError, match="matches no layer"):
        prunable_names(net, include="nothing_like_this")


# --------------------------------------------------------------------------- magnitude masks
def _ab():
    return {"a": torch.tensor([3.0, -1.0, 2.0]), "b": torch.tensor([[-1.0, 5.0], [0.5, 1.0]])}


def test_global_magnitude_mask_exact_count_and_ties():
    t = _ab()
    # |w| sorted stably over a then b: 0.5(b[1,0]) 1(a[1]) 1(b[0,0]) 1(b[1,1]) 2 3 5
    m = global_magnitude_mask(t, 4 / 7)
    assert m["a"].tolist() == [True, False, True]
    assert m["b"].tolist() == [[False, True], [False, False]]
    m3 = global_magnitude_mask(t, 3 / 7)  # the tie at 1 is cut by position: b[1,1] kept
    assert m3["b"].tolist() == [[False, True], [False, True]]
    for s in (0.0, 0.2, 0.5, 0.9):
        mm = global_magnitude_mask(t, s)
        assert sum(int((~v).sum()) for v in mm.values()) == round(s * 7)


def test_global_mask_stacked_equals_per_client():
    g = torch.Generator().manual_seed(0)
    t = {"a": torch.randn(3, 4, 5, generator=g), "b": torch.randn(3, 7, generator=g)}
    st = global_magnitude_mask(t, 0.6, stacked=True)
    for i in range(3):
        one = global_magnitude_mask({n: v[i] for n, v in t.items()}, 0.6)
        assert all(torch.equal(st[n][i], one[n]) for n in t)


def test_layerwise_mask_and_information_loss():
    t = _ab()
    m = layerwise_magnitude_mask(t, keep={"a": 1, "b": 2})
    assert m["a"].tolist() == [True, False, False]
    assert m["b"].tolist() == [[False, True], [False, True]]
    # removed: 1 + 4 from a, 1 + 0.25 from b; total 14 + 27.25
    assert information_loss(t, m) == pytest.approx(6.25 / 41.25)
    with pytest.raises(FlkitError, match="shape"):
        information_loss(t, {"a": torch.ones(2, dtype=torch.bool)})


def test_prune_and_regrow_counts_per_layer():
    mask = {
        "w": torch.tensor([True, True, True, True, False, False, False, False]),
        "v": torch.tensor([True, False, True, False]),
    }
    mag = {"w": torch.tensor([4.0, 1.0, 3.0, 2.0, 0, 0, 0, 0]), "v": torch.tensor([1.0, 0, 2.0, 0])}
    score = {"w": torch.tensor([9.0, 9, 9, 9, 1, 5, 3, 4]), "v": torch.tensor([0.0, 7, 0, 8])}
    new, moved = prune_and_regrow(mask, mag, score, 0.5)
    assert moved == {"w": 2, "v": 1}
    assert new["w"].tolist() == [True, False, True, False, False, True, False, True]
    assert new["v"].tolist() == [False, False, True, True]
    assert all(int(new[n].sum()) == int(mask[n].sum()) for n in mask)


# --------------------------------------------------------------------------- schedules
def test_cubic_schedule_points():
    assert cubic_sparsity(0, 100, 0.5, 0.9) == pytest.approx(0.5)
    assert cubic_sparsity(50, 100, 0.5, 0.9) == pytest.approx(0.9 - 0.4 * 0.125)
    assert cubic_sparsity(99, 100, 0.5, 0.9) == pytest.approx(0.9 - 0.4 * 1e-6)
    with pytest.raises(FlkitError, match="s0"):
        cubic_sparsity(0, 10, 0.95, 0.9)
    with pytest.raises(FlkitError, match="s_final"):
        cubic_sparsity(0, 10, 0.5, 1.0)


def test_lambda_paper_segment_boundaries():
    f = lambda t: incremental_lambda(t, 100, 1e-3, 4, "paper")  # noqa: E731
    assert [f(0), f(24), f(25), f(49), f(50), f(74), f(75), f(99)] == pytest.approx(
        [0, 0, 2.5e-4, 2.5e-4, 5e-4, 5e-4, 7.5e-4, 7.5e-4]
    )


def test_lambda_code_segment_boundaries():
    f = lambda t: incremental_lambda(t, 100, 1e-3, 20, "code")  # noqa: E731
    assert f(0) == 0 and f(4) == 0
    assert f(5) == pytest.approx(5e-4) and f(9) == pytest.approx(5e-4)
    assert f(10) == pytest.approx(5e-4 + 5e-4 / 19)
    assert f(99) == pytest.approx(5e-4 + 5e-4 * 18 / 19)
    for bad in (dict(lambda_max=-1e-3, Q=4), dict(lambda_max=1e-3, Q=0)):
        with pytest.raises(FlkitError):
            incremental_lambda(0, 100, bad["lambda_max"], bad["Q"])
    with pytest.raises(FlkitError, match="variant"):
        incremental_lambda(0, 100, 1e-3, 4, "other")


# --------------------------------------------------------------------------- two-layer net by hand
def _two_layer():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 2, bias=False), nn.Linear(2, 2, bias=False)).double()
    x = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    y = torch.tensor([1])
    return net, x, y


def _hand_grads(w1, w2, x, y):
    """Gradients of CE(W2 W1 x) with respect to W1 and W2 (no nonlinearity), by hand."""
    h = w1 @ x[0]
    o = w2 @ h
    delta = torch.softmax(o, 0) - torch.nn.functional.one_hot(y, 2)[0].double()
    g2 = torch.outer(delta, h)
    g1 = torch.outer(w2.t() @ delta, x[0])
    return g1, g2


def test_snip_scores_by_hand():
    net, x, y = _two_layer()
    st = model_state(net)
    w1, w2 = st["0.weight"], st["1.weight"]
    g1, g2 = _hand_grads(w1, w2, x, y)
    raw = {"0.weight": (w1 * g1).abs(), "1.weight": (w2 * g2).abs()}
    total = sum(v.sum() for v in raw.values())
    got = snip_scores(net, st, x, y, ["0.weight", "1.weight"])
    for n in raw:
        assert torch.allclose(got[n], raw[n] / total)
    m = snip_mask(got, 0.5)
    assert sum(int(v.sum()) for v in m.values()) == 5


@pytest.mark.parametrize("backend", ["wide", "loop"])
def test_straight_through_update_by_hand(backend):
    net, x, y = _two_layer()
    st = model_state(net)
    w1, w2 = st["0.weight"], st["1.weight"]
    mask = {
        "0.weight": torch.tensor([[True, False, True], [False, True, True]]),
        "1.weight": torch.tensor([[True, False], [True, True]]),
    }
    lr = 0.3
    g1, g2 = _hand_grads(w1 * mask["0.weight"], w2 * mask["1.weight"], x, y)
    start = {n: v.unsqueeze(0) for n, v in st.items()}
    res = train_clients(
        net,
        start,
        x,
        y,
        [torch.tensor([0])],
        LocalSpec(lr=lr, batch_size=1, steps=1),
        [0],
        param_transform=straight_through(mask),
        backend=backend,
    )
    assert torch.allclose(res.state["0.weight"][0], w1 - lr * g1)
    assert torch.allclose(res.state["1.weight"][0], w2 - lr * g2)
    # the pruned coordinates of the dense weights moved (error feedback), unlike masked training
    assert not torch.allclose(res.state["0.weight"][0][~mask["0.weight"]], w1[~mask["0.weight"]])
    res2 = train_clients(
        net,
        start,
        x,
        y,
        [torch.tensor([0])],
        LocalSpec(lr=lr, batch_size=1, steps=1),
        [0],
        param_transform=masked(mask),
        backend=backend,
    )
    assert torch.equal(res2.state["0.weight"][0][~mask["0.weight"]], w1[~mask["0.weight"]])


def test_proximal_term_nonzero_after_one_step():
    net, x, y = _two_layer()
    st = model_state(net)
    start = {n: v.unsqueeze(0) for n, v in st.items()}
    mu, seen = 0.5, []
    prox = proximal_loss(mu)

    def record(params, hook_args):
        v = prox(params, hook_args)
        seen.append(float(v.detach().sum()))
        return v

    xx, yy = x.repeat(2, 1), torch.tensor([1, 0])
    spec = LocalSpec(lr=0.3, batch_size=1, steps=2)
    one = train_clients(
        net,
        start,
        xx,
        yy,
        [torch.tensor([0, 1])],
        LocalSpec(lr=0.3, batch_size=1, steps=1),
        [0],
        extra_loss=proximal_loss(mu),
        backend="loop",
    )
    train_clients(
        net, start, xx, yy, [torch.tensor([0, 1])], spec, [0], extra_loss=record, backend="loop"
    )
    w1 = {n: v[0] for n, v in one.state.items()}
    expected = 0.5 * mu * sum(float(((w1[n] - st[n]) ** 2).sum()) for n in st)
    assert seen[0] == 0.0 and seen[1] > 0
    assert seen[1] == pytest.approx(expected, rel=1e-9)
    assert math.isfinite(expected)


def test_ramp_ends_at_the_last_update_by_hand():
    from flkit.prune.schedules import last_update, ramp_sparsity

    assert last_update(61, 5) == 60 and last_update(61, 20) == 60 and last_update(1000, 5) == 995
    assert last_update(8, 3) == 6 and last_update(8, 3, first=-1) == 5
    # T = 8, R = 3: updates at 0, 3, 6; s = 0.9 - 0.4 (1 - t/6)^3
    got = [ramp_sparsity(t, 8, 3, 0.5, 0.9) for t in range(8)]
    want = [0.5, 0.9 - 0.4 * (5 / 6) ** 3, 0.9 - 0.4 * (4 / 6) ** 3, 0.85]
    want += [0.9 - 0.4 * (2 / 6) ** 3, 0.9 - 0.4 * (1 / 6) ** 3, 0.9, 0.9]
    assert got == pytest.approx(want)
    # first = -1 (PruneFL: initial pruning before round 1), T = 4, R = 1: ramp over 4 steps
    assert ramp_sparsity(1, 4, 1, 0.5, 0.8, first=-1) == pytest.approx(0.8 - 0.3 / 8)
    assert ramp_sparsity(3, 4, 1, 0.5, 0.8, first=-1) == 0.8
    assert ramp_sparsity(0, 1, 1, 0.9, 0.9) == 0.9  # s0 = s_p: nothing to ramp


def test_ramp_refuses_what_cannot_land():
    from flkit.prune.schedules import check_landing, check_segments

    with pytest.raises(FlkitError, match=r"R=8 cannot land .*T=8.*R <= 7"):
        check_landing(8, 8, 0.5, 0.9)
    with pytest.raises(FlkitError, match=r"rounds=1 leaves no mask update"):
        check_landing(1, 1, 0.5, 0.9)
    check_landing(8, 8, 0.5, 0.9, first=-1)  # PruneFL: the update at t = 7 lands
    with pytest.raises(FlkitError, match=r"T=4 rounds is below Q=5"):
        check_segments(4, 5)
    with pytest.raises(FlkitError, match=r"T=4 rounds is below Q=5"):
        incremental_lambda(0, 4, 1e-3, 5, "code")


def test_keep_counts_hands_out_the_remainder():
    shapes = {"a": (3,), "b": (3,)}
    # floors 1 and 1 (1.2 and 1.8); one left over goes to b, the larger fractional part
    assert keep_counts(shapes, {"a": 0.4, "b": 0.6}, total=3) == {"a": 1, "b": 2}
    assert keep_counts(shapes, {"a": 0.5, "b": 0.5}, total=3) == {"a": 2, "b": 1}  # tie: first
    assert keep_counts(shapes, {"a": 0.4, "b": 0.6}) == {"a": 1, "b": 1}
    with pytest.raises(FlkitError, match="total=7"):
        keep_counts(shapes, {"a": 0.4, "b": 0.6}, total=7)
    m = erk_mask(shapes, 0.5, torch.Generator().manual_seed(0), counts={"a": 3, "b": 0})
    assert int(m["a"].sum()) == 3 and int(m["b"].sum()) == 0
