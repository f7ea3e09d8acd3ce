"""VGG9's ``pool_position``: the binary networks' block order (conv -> max-pool -> BN -> sign) that
notebook 04 builds BNNAvg's model with, and how the notebook's settings pass it to BNNAvg only."""

from __future__ import annotations

import pytest
import torch
from test_relu_pool import _tied_input
from torch import nn

from flkit import models
from flkit.engine import LocalSpec
from flkit.methods.base import RunContext
from flkit.methods.hidenseek import BNNAvg
from flkit.models.binary import SignActivation, binarize_activations
from flkit.papers.hidenseek import study
from flkit.state import model_state
from flkit.utils import FlkitError
from flkit.workbook import presets

WIDTH = 0.25  # convs 8-16-32-32-64-64, FC 128


def _vgg(pool_position, seed=0, num_classes=10):
    torch.manual_seed(seed)
    return models.build("vgg9", num_classes, 1, width=WIDTH, pool_position=pool_position)


def test_before_norm_moves_each_pool_between_conv_and_norm():
    kinds = [type(m).__name__ for m in _vgg("before_norm").features]
    block = ["Conv2d", "BatchNorm2d", "ReLU"]
    pooled = ["Conv2d", "MaxPool2d", "BatchNorm2d", "ReLU"]
    assert kinds == (block + pooled) * 3
    default = [type(m).__name__ for m in _vgg("after_activation").features]
    assert default == (block + block + ["MaxPool2d"]) * 3


def test_same_parameters_and_initial_weights_as_the_default_order():
    a, b = _vgg("after_activation"), _vgg("before_norm")
    pa, pb = list(a.state_dict().values()), list(b.state_dict().values())
    assert [t.shape for t in pa] == [t.shape for t in pb]
    assert all(torch.equal(x, y) for x, y in zip(pa, pb))
    assert models.count_params(a) == models.count_params(b)
    # each pooled block's BatchNorm sits one index later (after the moved pool)
    names = set(b.state_dict()) - set(a.state_dict())
    assert {n.rsplit(".", 1)[0] for n in names} == {"features.5", "features.12", "features.19"}


def test_eval_mode_relu_network_computes_the_same_function_in_both_orders():
    # BN in eval mode with a positive scale is a non-decreasing map per channel, as is ReLU, and
    # a window's maximum commutes with every non-decreasing map: the two orders agree exactly
    a, b = _vgg("after_activation"), _vgg("before_norm")
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in a.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.1)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g))
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    b.load_state_dict(dict(zip(b.state_dict(), a.state_dict().values())))
    a.eval(), b.eval()
    x = _tied_input((6, 1, 28, 28), seed=1)
    assert torch.equal(a(x), b(x))
    # in training mode BN normalises with the batch's statistics, which are those of the pooled
    # map in one order and of the full map in the other
    a.train(), b.train()
    assert not torch.allclose(a(x), b(x))


def _share_plus_after_first_pool(pool_position):
    """Share of +1 entries in the sign map that leaves the first pooled block (training mode)."""
    net = binarize_activations(_vgg(pool_position)).train()
    feats = list(net.features)
    first_pool = next(i for i, m in enumerate(feats) if isinstance(m, nn.MaxPool2d))
    # the map the next conv reads: the pool's output (default) or the sign after it (before_norm)
    after = feats[first_pool] if pool_position == "after_activation" else feats[first_pool + 2]
    if pool_position == "before_norm":
        assert isinstance(after, SignActivation)
    seen = {}
    after.register_forward_hook(lambda _m, _i, out: seen.setdefault("out", out))
    net(torch.randn(64, 1, 28, 28, generator=torch.Generator().manual_seed(3)))
    return float((seen["out"] > 0).float().mean())


def test_before_norm_keeps_the_binary_map_balanced_after_pooling():
    # the reason for the order: BN centres each channel just before the sign, so about half the
    # entries are +1 wherever the sign sits; a 2x2 max of four balanced independent signs is +1
    # unless all four are -1, 15/16 of the time, and neighbouring conv outputs are correlated,
    # which lowers that share without bringing it near one half
    assert _share_plus_after_first_pool("before_norm") == pytest.approx(0.5, abs=0.05)
    assert _share_plus_after_first_pool("after_activation") > 0.75


def _two_clients(backend, net, lr, method=None):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(48, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (48,), generator=g)
    parts = [torch.arange(i * 16, (i + 1) * 16) for i in range(3)]
    spec = LocalSpec(lr=lr, batch_size=8, epochs=1, momentum=0.9)
    ctx = RunContext(net, x, y, parts, spec, 0, 10, backend=backend)
    m = (method or BNNAvg)(ctx)
    start = m.init_state(model_state(ctx.model)).model
    starts = {n: v.unsqueeze(0).repeat(2, *[1] * v.dim()) for n, v in start.items()}
    return m, starts, m.train(starts, [0, 2], 1)


def test_the_wide_engine_trains_the_moved_pools_as_the_plain_loop_does():
    # the wide engine runs a Sequential in its modules' order; in float64 its grouped convolutions
    # and the loop's plain ones agree to rounding (in float32 a near-tie in a max-pool window can
    # route a gradient elsewhere, in either block order)
    from flkit.methods.hidenseek import FedAvgSplit

    out = {
        b: _two_clients(b, _vgg("before_norm").double(), 0.05, FedAvgSplit)[2]
        for b in ("wide", "loop")
    }
    for n in out["wide"].state:
        assert torch.allclose(out["wide"].state[n], out["loop"].state[n], rtol=0, atol=1e-12), n


def test_bnnavg_on_the_before_norm_vgg9_same_forward_on_both_engines_and_latents_move():
    # BNNAvg's binarised weights make every conv output after the first block a multiple of the
    # layer's scale, so a pool window often holds exact ties, and max-pool breaks them by memory
    # layout (the wide engine's channels-last against the loop's contiguous maps): the gradients
    # are then different but equally valid. The forward pass must agree: at a vanishing learning
    # rate the losses and BatchNorm statistics of both engines are the same
    runs = {b: _two_clients(b, _vgg("before_norm").double(), 1e-20) for b in ("wide", "loop")}
    (m, starts, wide), (_, _, loop) = runs["wide"], runs["loop"]
    assert torch.allclose(wide.train_loss.double(), loop.train_loss.double(), rtol=0, atol=1e-6)
    for n in m.buffer_names:
        assert torch.allclose(wide.state[n], loop.state[n], rtol=0, atol=1e-12), n
    # at BNNAvg's own rate local training moves every client's latent weights
    m, starts, res = _two_clients("wide", _vgg("before_norm").double(), 0.05)
    for n in m.bin:
        assert bool(((res.state[n] - starts[n]).flatten(1).abs().amax(1) > 0).all()), n


def test_the_notebook_builds_only_bnnavgs_vgg9_in_the_binary_order():
    p = presets.load("04_hidenseek", "cpu")
    width = float(p["vgg_width"])
    for task in ("mnist_a1", "femnist"):
        assert study.config(p, task, "bnnavg", 0).model_kwargs == {
            "width": width,
            "pool_position": "before_norm",
        }
        for m in ("fedavg_split", "fedmask", "signed", "hidenseek"):
            assert study.config(p, task, m, 0).model_kwargs == {"width": width}
    assert study.config(p, "har", "bnnavg", 0).model_kwargs == {}  # an MLP: nothing to move


def test_unknown_pool_position_is_refused_naming_the_accepted_ones():
    with pytest.raises(FlkitError) as e:
        models.build("vgg9", 10, 1, pool_position="before_conv")
    msg = str(e.value)
    assert "before_conv" in msg and "after_activation" in msg and "before_norm" in msg
