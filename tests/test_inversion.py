"""Gradient inversion on the engine: soft-label unroll = ordinary training with one-hot labels,
batched inversion = separate inversions, recovery on a linear model, the top-K mask, the box."""

import pytest
import torch
from torch import nn

from flkit import models
from flkit.engine import LocalSpec, train_clients
from flkit.engine.reference import train_clients_reference
from flkit.inversion import (
    InversionSpec,
    box_from_data,
    box_from_normalization,
    check_model_mode,
    init_data,
    invert,
    lr_milestones,
    topk_mask,
    unroll,
)
from flkit.state import broadcast_state, model_state
from flkit.utils import FlkitError


def _lenet(dtype=torch.float64):
    torch.manual_seed(0)
    return models.build("cnn_mnist", num_classes=10, in_channels=1).to(dtype)


@pytest.mark.parametrize("backend", ["wide", "vmap", "loop"])
def test_unroll_with_one_hot_equals_training_with_hard_labels(backend):
    model = _lenet()
    k, r = 2, 6
    g = torch.Generator().manual_seed(1)
    x = torch.randn(k, r, 1, 28, 28, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 10, (k, r), generator=g)
    start = broadcast_state(model_state(model), k)
    start = {n: v + 0.01 * i for i, (n, v) in enumerate(start.items())}
    local = LocalSpec(lr=0.1, batch_size=r, steps=3, momentum=0.5)
    onehot = nn.functional.one_hot(labels, 10).to(torch.float64)
    upd = unroll(model, start, x, onehot, local, differentiable=True, backend=backend)
    # independent reference: the plain torch.optim.SGD loop on hard labels, eval mode
    idx = [torch.arange(i * r, (i + 1) * r) for i in range(k)]
    ref = train_clients_reference(
        model,
        start,
        x.reshape(k * r, 1, 28, 28),
        labels.reshape(-1),
        idx,
        local,
        [5, 6],
        train_mode=False,
    )
    for n, v in upd.items():
        assert torch.allclose(v, ref.state[n] - start[n], atol=1e-10), n


def test_soft_labels_reach_inputs_and_labels_through_the_unroll():
    model = _lenet()
    x = torch.randn(1, 4, 1, 28, 28, dtype=torch.float64, requires_grad=True)
    ylog = torch.randn(1, 4, 10, dtype=torch.float64, requires_grad=True)
    local = LocalSpec(lr=0.1, batch_size=4, steps=2)
    upd = unroll(
        model,
        broadcast_state(model_state(model), 1),
        x,
        torch.softmax(ylog, -1),
        local,
        differentiable=True,
    )
    gx, gy = torch.autograd.grad(sum(v.abs().sum() for v in upd.values()), [x, ylog])
    assert gx.abs().sum() > 0 and gy.abs().sum() > 0
    # directional derivative vs finite difference through the whole 2-step unroll
    d = torch.randn_like(x)

    def f(xx):
        return sum(
            (v**2).sum()
            for v in unroll(
                model,
                broadcast_state(model_state(model), 1),
                xx,
                torch.softmax(ylog.detach(), -1),
                local,
            ).values()
        )

    xx = x.detach().clone().requires_grad_(True)
    val = sum(
        (v**2).sum()
        for v in unroll(
            model,
            broadcast_state(model_state(model), 1),
            xx,
            torch.softmax(ylog.detach(), -1),
            local,
            differentiable=True,
        ).values()
    )
    (gxx,) = torch.autograd.grad(val, [xx])
    eps = 1e-6
    fd = (f(x.detach() + eps * d) - f(x.detach() - eps * d)) / (2 * eps)
    assert float((gxx * d).sum()) == pytest.approx(float(fd), rel=1e-4)


def test_batched_inversion_equals_separate_inversions():
    model = _lenet()
    k, r = 2, 4
    local = LocalSpec(lr=0.1, batch_size=r, steps=2)
    start = broadcast_state(model_state(model), k)
    g = torch.Generator().manual_seed(3)
    target = {n: 1e-3 * torch.randn(v.shape, generator=g, dtype=v.dtype) for n, v in start.items()}
    spec = InversionSpec(size=r, iters=4, lr=0.1, topk=0.5)
    x0, y0 = init_data(k, spec, (1, 28, 28), 10, 0, [0, 1], "cpu", torch.float64)
    both = invert(model, start, target, local, spec, x0, y0)
    for i in range(k):
        one = invert(
            model,
            {n: v[i : i + 1] for n, v in start.items()},
            {n: v[i : i + 1] for n, v in target.items()},
            local,
            spec,
            x0[i : i + 1],
            y0[i : i + 1],
        )
        assert torch.allclose(both.x[i], one.x[0], atol=1e-9)
        assert torch.allclose(both.losses[:, i], one.losses[:, 0], rtol=1e-9)


def test_batched_stopping_and_per_client_masks_equal_separate_inversions():
    """Clients with their own top-K fraction and a stopping tolerance in one batch: a client that
    stopped leaves the computation, the others go on exactly as alone."""
    model = nn.Sequential(nn.Linear(6, 3)).double()
    r, k = 5, 3
    local = LocalSpec(lr=0.3, batch_size=r, steps=2)
    start = broadcast_state(model_state(model), k)
    g = torch.Generator().manual_seed(4)
    target = {n: 0.05 * torch.randn(v.shape, generator=g, dtype=v.dtype) for n, v in start.items()}
    fracs = [1.0, 0.5, 0.2]
    spec = InversionSpec(size=r, iters=120, lr=0.05, tol=0.02, window=5)
    x0, y0 = init_data(k, spec, (6,), 3, 0, [0, 1, 2], "cpu", torch.float64)
    both = invert(model, start, target, local, spec, x0, y0, topk=fracs)
    stops = []
    for i, f in enumerate(fracs):
        one = invert(
            model,
            {n: v[i : i + 1] for n, v in start.items()},
            {n: v[i : i + 1] for n, v in target.items()},
            local,
            InversionSpec(size=r, iters=120, lr=0.05, tol=0.02, window=5, topk=f),
            x0[i : i + 1],
            y0[i : i + 1],
        )
        stops.append(int(one.iters[0]))
        assert int(both.iters[i]) == stops[-1]
        assert torch.allclose(both.x[i], one.x[0], atol=1e-10)
        assert torch.allclose(both.final_loss[i], one.final_loss[0], rtol=1e-8)
    assert len(set(stops)) > 1 and min(stops) < 120  # clients did stop, at different times
    with pytest.raises(FlkitError, match="topk"):
        invert(model, start, target, local, spec, x0, y0, topk=[1.0])


def test_inversion_recovers_a_linear_models_update():
    """Linear softmax regression, one step: the update is -lr * X^T (softmax(XW) - Y) / R, so any
    data with the same such product reproduces it; the inversion must find one (Disparity down
    by 20x) and the estimate from another start must be close to the truth from there."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 3)).double()
    r = 8
    local = LocalSpec(lr=0.5, batch_size=r, steps=1)
    g = torch.Generator().manual_seed(2)
    x_true = torch.randn(1, r, 6, generator=g, dtype=torch.float64)
    y_true = nn.functional.one_hot(torch.randint(0, 3, (1, r), generator=g), 3).double()
    w0 = broadcast_state(model_state(model), 1)
    target = unroll(model, w0, x_true, y_true, local)
    spec = InversionSpec(size=r, iters=600, lr=0.05)
    x0, y0 = init_data(1, spec, (6,), 3, 0, [0], "cpu", torch.float64)
    res = invert(model, w0, target, local, spec, x0, y0)
    assert float(res.final_loss[0]) < float(res.init_loss[0]) / 20
    w1 = {n: v + 0.05 * torch.randn(v.shape, generator=g, dtype=v.dtype) for n, v in w0.items()}
    est = unroll(model, w1, res.x, torch.softmax(res.y, -1), local)
    true = unroll(model, w1, x_true, y_true, local)
    flat = lambda d: torch.cat([v.flatten() for v in d.values()])  # noqa: E731
    cos = torch.nn.functional.cosine_similarity(flat(est), flat(true), dim=0)
    assert float(cos) > 0.9


def test_topk_mask_keeps_exactly_k():
    flat = torch.randn(3, 1000)
    m = topk_mask(flat, 0.05)
    assert m.sum(1).tolist() == [50, 50, 50]
    kept_min = torch.where(m, flat.abs(), torch.inf).amin(1)
    dropped_max = torch.where(m, -torch.inf, flat.abs()).amax(1)
    assert bool((kept_min >= dropped_max).all())
    assert topk_mask(torch.ones(2, 10), 0.3).sum(1).tolist() == [3, 3]  # ties: still exactly K
    assert bool(topk_mask(flat, 1.0).all())
    with pytest.raises(FlkitError, match="topk"):
        topk_mask(flat, 0.0)


def test_stopping_tolerance_stops_where_the_rule_first_holds():
    """The stop iteration is the first it >= window at which the Disparity of an unstopped run
    (tol 0, same iterations and schedule) fell by at most tol x its value `window` iterations
    earlier; the stopped run's losses equal the unstopped run's up to there."""
    model = nn.Sequential(nn.Linear(4, 2)).double()
    w0 = broadcast_state(model_state(model), 1)
    local = LocalSpec(lr=0.1, batch_size=4, steps=1)
    target = {n: torch.zeros_like(v) for n, v in w0.items()}
    x0, y0 = init_data(1, InversionSpec(size=4), (4,), 2, 0, [0], "cpu", torch.float64)
    tol, window = 0.5, 5
    full = invert(model, w0, target, local, InversionSpec(size=4, iters=400, lr=0.05), x0, y0)
    loss = full.losses[:, 0]
    expect = next(
        it for it in range(window, 400) if loss[it - window] - loss[it] <= tol * loss[it - window]
    )
    spec = InversionSpec(size=4, iters=400, lr=0.05, tol=tol, window=window)
    res = invert(model, w0, target, local, spec, x0, y0)
    assert int(res.iters[0]) == expect
    assert torch.allclose(res.losses[:, 0], loss[: expect + 1], rtol=1e-12)


def test_snapshots_every_k_iterations_and_the_result():
    model = nn.Sequential(nn.Linear(4, 2)).double()
    w0 = broadcast_state(model_state(model), 1)
    local = LocalSpec(lr=0.1, batch_size=4, steps=1)
    target = {n: 0.01 * torch.ones_like(v) for n, v in w0.items()}
    x0, y0 = init_data(1, InversionSpec(size=4), (4,), 2, 0, [0], "cpu", torch.float64)
    res = invert(model, w0, target, local, InversionSpec(size=4, iters=5), x0, y0, snapshot_every=2)
    assert [it for it, _, _ in res.snapshots] == [0, 2, 4, 5]
    assert torch.equal(res.snapshots[0][1], x0) and torch.equal(res.snapshots[-1][1], res.x)
    assert (
        invert(model, w0, target, local, InversionSpec(size=4, iters=2), x0, y0).snapshots is None
    )


def test_box_and_schedule_and_modes():
    lo, hi = box_from_normalization((0.1307,), (0.3081,), 1)
    assert float(lo[0]) == pytest.approx(-0.1307 / 0.3081) and float(hi[0]) == pytest.approx(
        0.8693 / 0.3081
    )
    x = torch.tensor([[[[0.0, 1.0]]], [[[-2.0, 3.0]]]])
    blo, bhi = box_from_data(x)
    assert blo.tolist() == [-2.0] and bhi.tolist() == [3.0]
    assert lr_milestones(800) == [299, 500, 700]
    bn = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with pytest.raises(FlkitError, match="BatchNorm"):
        check_model_mode(bn, "train")
    check_model_mode(bn, "eval")
    for bad in ({"size": 0}, {"iters": 0}, {"topk": 1.5}, {"topk": 0}, {"model_mode": "x"}):
        with pytest.raises(FlkitError):
            InversionSpec(**bad)


def test_box_constraint_holds_after_inversion():
    model = nn.Sequential(nn.Linear(4, 2)).double()
    w0 = broadcast_state(model_state(model), 1)
    local = LocalSpec(lr=0.1, batch_size=4, steps=1)
    target = {n: 0.5 * torch.ones_like(v) for n, v in w0.items()}
    spec = InversionSpec(size=4, iters=30, lr=1.0)
    x0, y0 = init_data(1, spec, (4,), 2, 0, [0], "cpu", torch.float64)
    box = (torch.tensor([-0.5] * 4), torch.tensor([0.5] * 4))
    res = invert(model, w0, target, local, spec, x0.clamp(-0.5, 0.5), y0, box=box)
    assert float(res.x.abs().max()) <= 0.5 + 1e-12


def test_train_clients_soft_targets_match_hard_in_the_engine():
    model = _lenet()
    x = torch.randn(12, 1, 28, 28, dtype=torch.float64)
    y = torch.randint(0, 10, (12,))
    idx = [torch.arange(0, 6), torch.arange(6, 12)]
    spec = LocalSpec(lr=0.1, batch_size=3, epochs=1)
    start = broadcast_state(model_state(model), 2)
    a = train_clients(model, start, x, y, idx, spec, [1, 2], train_mode=False)
    b = train_clients(
        model, start, x, nn.functional.one_hot(y, 10).double(), idx, spec, [1, 2], train_mode=False
    )
    for n in a.state:
        assert torch.allclose(a.state[n], b.state[n], atol=1e-12)
    assert torch.allclose(a.train_loss, b.train_loss)
