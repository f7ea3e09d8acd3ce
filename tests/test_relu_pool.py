"""The engine's pool-before-ReLU reordering (flkit.engine.copies) changes no float: forward,
gradient and second derivative equal the model's own order bit for bit, ties and non-positive
windows included."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from flkit.engine.copies import pool_before_relu


def _tied_input(shape, seed=0):
    """Random values rounded to a coarse grid, so that windows hold equal maxima, negative
    windows and exact zeros."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 2).round() / 2


def test_swaps_exactly_the_relu_pool_pairs():
    net = nn.Sequential(
        nn.Conv2d(1, 2, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),  # swapped
        nn.ReLU(),
        nn.AvgPool2d(2),  # not a max-pool: kept
        nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, return_indices=True)),  # indices: kept
        nn.LeakyReLU(),
        nn.MaxPool2d(2),  # not a plain ReLU: kept
    )
    assert pool_before_relu(net) == 1
    kinds = [type(m).__name__ for m in net]
    assert kinds[:5] == ["Conv2d", "MaxPool2d", "ReLU", "ReLU", "AvgPool2d"]
    assert [type(m).__name__ for m in net[5]] == ["ReLU", "MaxPool2d"]


@pytest.mark.parametrize(
    "pool",
    [nn.MaxPool2d(2), nn.MaxPool2d(3, stride=2, padding=1), nn.MaxPool2d(2, ceil_mode=True)],
)
@pytest.mark.parametrize("channels_last", [False, True])
def test_same_floats_forward_backward_and_double_backward(pool, channels_last):
    ref = nn.Sequential(nn.ReLU(), pool)
    fast = copy.deepcopy(ref)
    assert pool_before_relu(fast) == 1
    x0 = _tied_input((3, 4, 9, 9))
    if channels_last:
        x0 = x0.contiguous(memory_format=torch.channels_last)
    outs = []
    for net in (ref, fast):
        x = x0.clone().requires_grad_(True)
        y = net(x)
        g = torch.linspace(-1, 1, y.numel()).view_as(y).requires_grad_(True)
        (gx,) = torch.autograd.grad(y, x, g, create_graph=True)
        # the second derivative with respect to the incoming gradient (the inversion's path)
        (gg,) = torch.autograd.grad((gx * torch.cos(x0)).sum(), g)
        outs.append((y.detach(), gx.detach(), gg))
    for a, b in zip(*outs):
        assert torch.equal(a, b)
    # the grid puts ties and all-non-positive windows in the input: the case the proof covers
    assert (outs[0][0] == 0).any() and (outs[0][1] == 0).any()


def test_wide_lenet_trains_the_same_floats_as_the_unswapped_wide_model(monkeypatch):
    from flkit import models
    from flkit.engine import LocalSpec, train_clients, wide
    from flkit.state import broadcast_state

    torch.manual_seed(0)
    net = models.build("lenet5", num_classes=10, in_channels=1)
    x = _tied_input((40, 1, 28, 28), seed=1)
    y = torch.arange(40) % 10
    parts = [torch.arange(0, 20), torch.arange(20, 40)]
    spec = LocalSpec(lr=0.1, batch_size=5, epochs=1)
    start = broadcast_state(net.state_dict(), 2)
    fast = train_clients(net, start, x, y, parts, spec, [1, 2], backend="wide")
    kinds = [type(m) for m in wide.wide_model(net).net.features]
    assert kinds[1:3] == [nn.MaxPool2d, nn.ReLU]  # the swapped order really ran
    monkeypatch.setattr("flkit.engine.copies.pool_before_relu", lambda m: 0)
    plain = train_clients(copy.deepcopy(net), start, x, y, parts, spec, [1, 2], backend="wide")
    for n in fast.state:
        assert torch.equal(fast.state[n], plain.state[n]), n
    assert torch.equal(fast.train_loss, plain.train_loss)
