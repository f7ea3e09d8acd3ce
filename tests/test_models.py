"""Tests for flkit.models: parameter counts from the papers, shapes, errors, engine rule.

Expected parameter counts are hard-coded from the papers' own counts (paper named per line);
where a paper gives no number, the count is derived by hand from its layer list in the comment.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import pytest
import torch
from torch import nn

from flkit import models
from flkit.models import deep, small
from flkit.utils import FlkitError

# name -> (build kwargs, expected trainable parameters, one-sample input shape, classes)
EXPECTED = {
    # the staleness paper: "21,840 parameters"
    "cnn_mnist": ({}, 21_840, (1, 28, 28), 10),
    # the staleness paper gives no count. conv1 3*6*25+6 = 456; conv2 6*16*25+16 = 2,416;
    # fc1 400*120+120 = 48,120; fc2 120*84+84 = 10,164; fc3 84*10+10 = 850 -> 62,006
    "lenet5_cifar": ({}, 62_006, (3, 32, 32), 10),
    # the FedDIP paper: "61,706 parameters"
    "lenet5_feddip": ({}, 61_706, (1, 28, 28), 10),
    # classic LeNet-5 = the same network as lenet5_feddip (the FedDIP paper): 61,706
    "lenet5": ({}, 61_706, (1, 28, 28), 10),
    # multinomial logistic regression 60 -> 10: 60*10 weights + 10 biases = 610
    "logreg": ({}, 610, (60,), 10),
    # the FedAST paper: "44,426 parameters"
    "lenet5_fedast": ({}, 44_426, (1, 28, 28), 10),
    # the FedAST paper: "199,210 parameters"
    "mlp_mnist": ({}, 199_210, (1, 28, 28), 10),
    # the FedAST paper: "797,962 parameters"
    "cnn_cifar10": ({}, 797_962, (3, 32, 32), 10),
    # the STC-PA paper: "d = 130,890"
    "cnn3_mnist": ({}, 130_890, (1, 28, 28), 10),
    # the STC-PA paper: "d = 865,482"
    "vgg11_star": ({}, 865_482, (3, 32, 32), 10),
    # the FedDIP paper: "23,272,266 parameters"
    "alexnet_cifar": ({}, 23_272_266, (3, 32, 32), 10),
    # the staleness paper (CIFAR-10) gives no count; the FedDIP paper gives the breakdown for
    # 100 classes: 10,987,200 3x3-conv + 172,032 shortcut weights + 51,200 FC weights. BN params:
    # 2 * (64 stem + 4*64 + 4*128 + 4*256 + 4*512 in blocks + 128+256+512 shortcut) = 9,600.
    # 10 classes: 10,987,200 + 172,032 + 9,600 + 512*10+10 = 11,173,962
    "resnet18": ({}, 11_173_962, (3, 32, 32), 10),
    # the FedAST paper "about 11.22 M"; GN has the same affine params as BN:
    # 10,987,200 + 172,032 + 9,600 + 512*100+100 = 11,220,132
    "resnet18_gn": ({}, 11_220_132, (3, 32, 32), 100),
    # the staleness paper (MDI, 5 classes) gives no count: torchvision ResNet-18 has 11,689,512
    # with a 1000-way head; 5-way head: 11,689,512 - 512*1000-1000 + 512*5+5 = 11,179,077
    "resnet18_imagenet": ({"image_size": 64}, 11_179_077, (3, 64, 64), 5),
    # the HideNseek paper: conv weights 1,124,640; FC weights 1,179,648 + 262,144 + 31,744
    # (62-way); plus BN affine 2*(32+64+128+128+256+256) = 1,728 and classifier bias 62 -> 2,599,966
    "vgg9": ({}, 2_599_966, (1, 28, 28), 62),
    # the HideNseek paper (our choice) 1152-512-256-128-6, hidden layers without bias (our choice):
    # 1152*512 + 512*256 + 256*128 + 128*6+6 = 589,824 + 131,072 + 32,768 + 774 = 754,438
    "mlp_har": ({}, 754_438, (1152,), 6),
    # the FedAST paper: "52,720 parameters"
    "lstm_shakespeare": ({}, 52_720, (80,), 80),
}

ALLOWED_LEAVES = (
    nn.Conv2d,
    nn.Linear,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.GroupNorm,
    nn.ReLU,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.Flatten,
    nn.Dropout,
    nn.Identity,
    nn.Embedding,
    nn.LSTM,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # one intra-op thread: small forwards gain little from two, and OpenMP spin-waiting makes a
    # loaded CI box (other test files running alongside) many times slower; restored afterwards
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


@functools.cache
def _built(name, **kw):
    torch.manual_seed(0)
    return models.build(name, **kw)


def built(name, **kw):
    return _built(name, **kw)


def sample(shape, batch, num_tokens=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    if len(shape) == 1 and shape[0] == 80 and num_tokens:  # token input of the LSTM
        return torch.randint(0, num_tokens, (batch,) + shape, generator=g)
    return torch.randn((batch,) + shape, generator=g)


def test_every_model_is_covered():
    assert set(models.MODELS) == set(EXPECTED)
    assert isinstance(models.MODELS, tuple)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_param_count_and_output_shape(name):
    kw, count, shape, classes = EXPECTED[name]
    m = built(name, **kw)
    assert models.count_params(m) == count
    assert m.flkit_name == name and m.input_shape == shape and m.num_classes == classes
    m.eval()
    with torch.no_grad():
        out = m(sample(shape, 2))
    assert out.shape == (2, classes)
    assert out.dtype == torch.float32


def _weights(m, cls, kernel=None):
    return sum(
        mod.weight.numel()
        for mod in m.modules()
        if isinstance(mod, cls) and (kernel is None or mod.kernel_size == kernel)
    )


def test_prunable_breakdowns_from_specs():
    # the FedDIP paper: LeNet-5 61,470 prunable weights; AlexNet 23,262,912 prunable weights
    assert _weights(built("lenet5_feddip"), (nn.Conv2d, nn.Linear)) == 61_470
    assert _weights(built("alexnet_cifar"), (nn.Conv2d, nn.Linear)) == 23_262_912
    # the FedDIP paper: ResNet-18 CIFAR-100, ~11.22 M; 10,987,200 conv + 51,200 FC weights
    # prunable, 172,032 shortcut weights not pruned
    r = built("resnet18", num_classes=100)
    assert models.count_params(r) == 11_220_132
    assert _weights(r, nn.Conv2d, (3, 3)) == 10_987_200
    assert _weights(r, nn.Conv2d, (1, 1)) == 172_032
    assert _weights(r, nn.Linear) == 51_200
    # the HideNseek paper: VGG9 conv weights 1,124,640, the last four convs 1,105,920,
    # FC weights 1,179,648 + 262,144 + 31,744
    v = built("vgg9")
    convs = [mod.weight.numel() for mod in v.modules() if isinstance(mod, nn.Conv2d)]
    assert convs == [288, 18_432, 73_728, 147_456, 294_912, 589_824]
    assert sum(convs[2:]) == 1_105_920
    assert [mod.weight.numel() for mod in v.classifier if isinstance(mod, nn.Linear)] == [
        1_179_648,
        262_144,
        31_744,
    ]


def test_variant_counts():
    # VGG9 10-way (the HideNseek paper, MNIST): 2,599,966 - 31,744 - 62 + 5,120 + 10 = 2,573,290
    assert models.count_params(built("vgg9", num_classes=10)) == 2_573_290
    # without BN affine parameters: 2,599,966 - 1,728
    assert models.count_params(built("vgg9", bn_affine=False)) == 2_598_238
    # HAR MLP with hidden biases: + 512 + 256 + 128
    assert models.count_params(built("mlp_har", bias=True)) == 755_334
    # 2-layer stacked LSTM (LEAF/FedDyn, the FedAST paper): second layer 4*100*(100+100) + 2*4*100
    # = 80,800 on top of 52,720
    assert models.count_params(built("lstm_shakespeare", num_layers=2)) == 133_520
    # FedDyn's GN torchvision ResNet-18: GN has as many affine params as BN
    assert models.count_params(built("resnet18_imagenet", norm="gn", image_size=64)) == 11_179_077
    # FedAST quirk flag changes no parameters
    assert models.count_params(built("lenet5_fedast", logit_relu=False)) == 44_426
    assert models.count_params(built("cnn_mnist", dropout2d=True)) == 21_840


@pytest.mark.parametrize("name", list(EXPECTED))
def test_overrides(name):
    kw, _, shape, _ = EXPECTED[name]
    if name == "lstm_shakespeare":
        m = models.build(name, num_classes=7, vocab_size=50, **kw)
        models.check_fits(m, shape, 7)
        return
    new_in = 100 if name == "mlp_har" else 2
    m = models.build(name, num_classes=7, in_channels=new_in, **kw)
    new_shape = (new_in,) + shape[1:]
    assert m.input_shape == new_shape and m.num_classes == 7
    models.check_fits(m, new_shape, 7)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_batch_size_agnostic(name):
    kw, _, shape, classes = EXPECTED[name]
    m = built(name, **kw)
    m.eval()
    x = sample(shape, 3, seed=1)
    with torch.no_grad():
        out3 = m(x)
        out1 = torch.cat([m(x[i : i + 1]) for i in range(3)])
    assert out3.shape == (3, classes)
    torch.testing.assert_close(out1, out3, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_engine_compatible_leaves(name):
    kw, _, _, _ = EXPECTED[name]
    m = built(name, **kw)
    for mod_name, mod in m.named_modules():
        if not list(mod.children()):
            assert type(mod) in ALLOWED_LEAVES, f"{name}.{mod_name} is a {type(mod).__name__}"
        if isinstance(mod, nn.LSTM):
            assert mod.batch_first
        if isinstance(mod, nn.ReLU):
            assert not mod.inplace


def test_no_view_reshapes_in_model_code():
    for module in (small, deep):
        src = inspect.getsource(module)
        assert ".view(" not in src and ".reshape(" not in src


def test_deterministic_given_seed_and_check_fits_is_side_effect_free():
    torch.manual_seed(123)
    a = models.build("vgg9")
    torch.manual_seed(123)
    b = models.build("vgg9")
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(va, vb), k
    before = {k: v.clone() for k, v in a.state_dict().items()}
    a.train()
    models.check_fits(a, (1, 28, 28), 62)
    assert a.training
    for k, v in a.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_lstm_is_stateless():
    m = built("lstm_shakespeare")
    m.eval()
    x = sample((80,), 4)
    with torch.no_grad():
        first, second = m(x), m(x)
    assert torch.equal(first, second)


def test_vgg11_star_init():
    # the STC-PA paper: conv weights N(0, sqrt(2/(9*C_out))), conv biases 0
    m = built("vgg11_star")
    convs = [mod for mod in m.modules() if isinstance(mod, nn.Conv2d)]
    assert len(convs) == 8
    for conv in convs:
        assert torch.count_nonzero(conv.bias) == 0
        want = math.sqrt(2 / (9 * conv.out_channels))
        assert abs(conv.weight.std().item() / want - 1) < 0.1
        assert abs(conv.weight.mean().item()) < 0.1 * want


def test_kaiming_relu_uniform_init():
    # the HideNseek paper (our choice): bound sqrt(6 / fan_in)
    m = built("mlp_har")
    first = m.classifier[0]
    bound = math.sqrt(6 / first.in_features)
    assert first.weight.abs().max().item() <= bound
    assert first.weight.abs().max().item() > 0.99 * bound
    pt = built("mlp_har", init="pytorch")
    assert pt.classifier[0].weight.abs().max().item() <= math.sqrt(1 / first.in_features) + 1e-7


def test_fedast_logit_relu_flag():
    x = sample((1, 28, 28), 8)
    with torch.no_grad():
        assert (built("lenet5_fedast").eval()(x) >= 0).all()  # default follows the code quirk
        assert (built("lenet5_fedast", logit_relu=False).eval()(x) < 0).any()


def test_norm_variants():
    assert any(isinstance(mod, nn.BatchNorm2d) for mod in built("resnet18").modules())
    gn = built("resnet18_gn")
    assert not any(isinstance(mod, nn.BatchNorm2d) for mod in gn.modules())
    assert all(mod.num_groups == 2 for mod in gn.modules() if isinstance(mod, nn.GroupNorm))
    assert gn.pool.kernel_size == 3


# ------------------------------------------------------------------------------------ errors
def test_unknown_model_lists_names():
    with pytest.raises(FlkitError) as e:
        models.build("lenet6")
    assert "lenet6" in str(e.value)
    for name in models.MODELS:
        assert name in str(e.value)
    with pytest.raises(FlkitError):
        models.describe("lenet6")


def test_unknown_flag_and_bad_values():
    with pytest.raises(FlkitError, match="logit_relu"):
        models.build("cnn_mnist", logit_relu=True)
    with pytest.raises(FlkitError, match="num_classes"):
        models.build("cnn_mnist", num_classes=0)
    with pytest.raises(FlkitError, match="num_classes"):
        models.build("cnn_mnist", num_classes="10")
    with pytest.raises(FlkitError, match="in_channels"):
        models.build("cnn_mnist", in_channels=True)
    # one integer rule (flkit.utils.check_int): a NumPy integer counts, as it does for partitions
    assert models.build("cnn_mnist", num_classes=np.int64(7)).num_classes == 7
    with pytest.raises(FlkitError, match="in_channels"):
        models.build("lstm_shakespeare", in_channels=1)
    with pytest.raises(FlkitError, match="image_size"):
        models.build("vgg11_star", image_size=16)
    with pytest.raises(FlkitError, match="norm"):
        models.build("resnet18", norm="ln")
    with pytest.raises(FlkitError, match="init"):
        models.build("vgg9", init="xavier")
    with pytest.raises(FlkitError, match="pretrained"):  # checked before any download
        models.build("resnet18_imagenet", norm="gn", pretrained=True)


def test_check_fits_wrong_channels():
    m = built("lenet5_cifar")
    with pytest.raises(FlkitError) as e:
        models.check_fits(m, (1, 28, 28), 10)  # 3-channel model on 1-channel MNIST
    msg = str(e.value)
    assert "lenet5_cifar" in msg and "(1, 28, 28)" in msg and "(3, 32, 32)" in msg
    with pytest.raises(FlkitError, match="cnn_mnist"):
        models.check_fits(built("cnn_mnist"), (3, 32, 32), 10)
    with pytest.raises(FlkitError, match="mlp_har"):
        models.check_fits(built("mlp_har"), (561,), 6)


def test_check_fits_wrong_num_classes():
    with pytest.raises(FlkitError) as e:
        models.check_fits(built("vgg9"), (1, 28, 28), 10)  # 62-way model, 10-class data
    msg = str(e.value)
    assert "vgg9" in msg and "(2, 62)" in msg and "(2, 10)" in msg


def test_describe():
    for name in models.MODELS:
        line = models.describe(name)
        assert (
            line.startswith(name + ":")
            and ("paper" in line or "et al." in line)
            and "\n" not in line
        )


@pytest.mark.parametrize("name", ["cnn_mnist", "vgg9"])
def test_per_client_gradients_under_vmap(name):
    # the batched engine's vmap backend: K stacked clients give each client's plain autograd
    # gradient
    from torch.func import functional_call, grad, stack_module_state, vmap

    kw, _, shape, classes = EXPECTED[name]
    torch.manual_seed(0)
    nets = [models.build(name, **kw).eval() for _ in range(2)]
    params, buffers = stack_module_state(nets)
    x = torch.stack([sample(shape, 4, seed=s) for s in (1, 2)])
    y = torch.randint(0, classes, (2, 4), generator=torch.Generator().manual_seed(3))
    base = nets[0]

    def loss(p, b, xb, yb):
        return nn.functional.cross_entropy(functional_call(base, (p, b), (xb,)), yb)

    grads = vmap(grad(loss))(params, buffers, x, y)
    for k, net in enumerate(nets):
        net.zero_grad()
        nn.functional.cross_entropy(net(x[k]), y[k]).backward()
        for pname, p in net.named_parameters():
            torch.testing.assert_close(grads[pname][k], p.grad, rtol=1e-4, atol=1e-6)
