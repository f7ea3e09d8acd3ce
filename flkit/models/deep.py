"""Deeper models: VGG11* (STC-projection paper), VGG9 (HideNseek), AlexNet (FedDIP) and
ResNet-18 (the staleness, FedDIP and FedAST papers). Builders take
``(num_classes, in_channels, **flags)`` and return ``(module, input_shape)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional

from ..utils import FlkitError, check_choice, check_range
from .small import INITS, SeqNet, flat_dim, kaiming_relu_uniform_


# --------------------------------------------------------------------------------- STC projection
def build_vgg11_star(num_classes, in_channels, *, image_size=32):
    """Simplified VGG11 of the STC paper, "VGG11*", d = 865,482: eight 3x3
    conv layers (padding 1) each followed by ReLU, no BN, no dropout, channel plan
    32 -> pool -> 64 -> pool -> 128, 128 -> pool -> 128, 128 -> pool -> 128, 128 -> pool
    (32x32 -> 1x1) -> Linear(128->128) -> ReLU -> Linear(128->128) -> ReLU -> Linear(128->10).
    Init as the paper states: conv weights ~ N(0, sqrt(2 / (9 * C_out))), conv biases 0; linear
    layers keep PyTorch's default."""
    layers, c = [], in_channels
    for v in (32, "M", 64, "M", 128, 128, "M", 128, 128, "M", 128, 128, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            conv = nn.Conv2d(c, v, 3, padding=1)
            nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / (9 * v)))
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.ReLU()]
            c = v
    features = nn.Sequential(*layers)
    n = flat_dim(features, in_channels, image_size, "vgg11_star")
    classifier = nn.Sequential(
        nn.Linear(n, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, num_classes)
    )
    return SeqNet(features, classifier), (in_channels, image_size, image_size)


# --------------------------------------------------------------------------------- HideNseek
#: where VGG9's max-pools sit in their block (``build_vgg9``)
POOL_POSITIONS = ("after_activation", "before_norm")


def build_vgg9(
    num_classes,
    in_channels,
    *,
    image_size=28,
    bias=False,
    bn_affine=True,
    init="kaiming_relu",
    width=1.0,
    pool_position="after_activation",
):
    """HideNseek's VGG9 with BatchNorm (the HideNseek paper; widths = the FedMA VGG-9 layout):
    ConvBlock(32) -> ConvBlock(64) -> MaxPool -> ConvBlock(128) -> ConvBlock(128) -> MaxPool ->
    ConvBlock(256) -> ConvBlock(256) -> MaxPool -> flatten (256x3x3 = 2304 for 28x28) ->
    FC 2304->512 -> ReLU -> FC 512->512 -> ReLU -> FC 512->{62, 10}; ConvBlock(N) = 3x3 conv
    (padding 1, no bias) -> BatchNorm2d -> ReLU.

    Feature extractor = ``features`` (six ConvBlocks; HideNseek prunes the last four convs) plus the
    two hidden FC layers; the personalised classifier is ``classifier[-1]`` (with bias). Hidden FC
    layers have no bias by default (our choice where the paper is silent; ``bias=True`` adds
    them). BN affine parameters are trainable by default (``bn_affine=False`` drops them;
    HideNseek freezes them at gamma=1, beta=0, which is the method's job). ``init``:
    "kaiming_relu" (default, the paper's) or "pytorch".
    62 classes: 1,124,640 conv + 1,728 BN + 1,179,648 + 262,144 + 31,744 + 62 = 2,599,966.
    ``width`` scales every conv and hidden FC width (0.5: 16-32-64-64-128-128, FC 256; a CPU-sized
    VGG9 for reduced runs).

    ``pool_position``: "after_activation" (default; the block order above) or "before_norm": each
    max-pool moves between its block's conv and BatchNorm (conv -> MaxPool -> BN -> activation),
    the order of binary networks (Courbariaux et al. 2016; XNOR-Net): a max-pool after a sign
    activation turns most of a balanced +-1 map into +1, while BN after the pool re-centres the
    pooled values before the sign. Same parameters and initial weights (each pooled block's BN
    sits one index later in the state dict); with ReLU and BN in eval mode with a positive
    scale both orders compute the same function (a maximum commutes with non-decreasing maps),
    in training mode BN's batch statistics are those of the pooled map."""
    check_choice("init", init, INITS)
    check_range("width", width, 0, None, low_open=True)
    check_choice("pool_position", pool_position, POOL_POSITIONS)
    layers, c = [], in_channels
    for v in (32, 64, "M", 128, 128, "M", 256, 256, "M"):
        if v == "M" and pool_position == "before_norm":
            layers.insert(len(layers) - 2, nn.MaxPool2d(2, 2))  # before the last block's BN
        elif v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            v = max(1, int(round(v * width)))
            layers += [
                nn.Conv2d(c, v, 3, padding=1, bias=False),
                nn.BatchNorm2d(v, affine=bn_affine),
                nn.ReLU(),
            ]
            c = v
    features = nn.Sequential(*layers)
    n = flat_dim(features, in_channels, image_size, "vgg9")
    fc = max(1, int(round(512 * width)))
    classifier = nn.Sequential(
        nn.Linear(n, fc, bias=bias),
        nn.ReLU(),
        nn.Linear(fc, fc, bias=bias),
        nn.ReLU(),
        nn.Linear(fc, num_classes),
    )
    model = SeqNet(features, classifier)
    if init == "kaiming_relu":
        kaiming_relu_uniform_(model)
    return model, (in_channels, image_size, image_size)


# --------------------------------------------------------------------------------- FedDIP
def build_alexnet_cifar(num_classes, in_channels, *, image_size=32):
    """FedDIP's AlexNet variant for CIFAR-10 (the FedDIP paper), 23,272,266 parameters
    (23,262,912 prunable weights): conv 3->64, 3x3, stride 2, pad 1 -> ReLU -> maxpool 2 ->
    conv 64->192, 3x3, pad 1 -> ReLU -> maxpool 2 -> conv 192->384 -> ReLU -> conv 384->256 ->
    ReLU -> conv 256->256 -> ReLU -> maxpool 2 -> adaptive avg-pool 2x2 -> flatten 1024 ->
    dropout 0.5 -> FC 1024->4096 -> ReLU -> dropout 0.5 -> FC 4096->4096 -> ReLU -> FC 4096->10."""
    features = nn.Sequential(
        nn.Conv2d(in_channels, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 192, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(192, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d((2, 2)),
    )
    flat_dim(features, in_channels, image_size, "alexnet_cifar")  # validates image_size
    classifier = nn.Sequential(
        nn.Dropout(0.5),
        nn.Linear(256 * 2 * 2, 4096),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(4096, 4096),
        nn.ReLU(),
        nn.Linear(4096, num_classes),
    )
    return SeqNet(features, classifier), (in_channels, image_size, image_size)


# --------------------------------------------------------------------------------- ResNet-18
NORMS = ("bn", "gn")


def _norm(kind: str, channels: int, gn_groups: int) -> nn.Module:
    return nn.BatchNorm2d(channels) if kind == "bn" else nn.GroupNorm(gn_groups, channels)


class BasicBlock(nn.Module):
    """conv3x3-norm-ReLU-conv3x3-norm + shortcut (1x1 conv + norm when the shape changes), ReLU."""

    def __init__(self, cin, cout, stride, norm, gn_groups):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _norm(norm, cout, gn_groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = _norm(norm, cout, gn_groups)
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _norm(norm, cout, gn_groups)
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return functional.relu(out + self.shortcut(x))


class ResNet18CIFAR(nn.Module):
    """CIFAR-style ResNet-18 (kuangliu layout): 3x3 stem, no max-pool, 4 stages x 2 BasicBlocks
    (64/128/256/512, strides 1/2/2/2), average pool, Linear(512 -> num_classes)."""

    def __init__(self, num_classes, in_channels, norm, gn_groups, pool_kernel):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = _norm(norm, 64, gn_groups)
        stages, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(
                nn.Sequential(
                    BasicBlock(cin, cout, stride, norm, gn_groups),
                    BasicBlock(cout, cout, 1, norm, gn_groups),
                )
            )
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = nn.AvgPool2d(pool_kernel)
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x):
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return self.linear(torch.flatten(self.pool(out), 1))


def _resnet_flags(norm, gn_groups, pool_kernel):
    check_choice("norm", norm, NORMS)
    check_range("gn_groups", gn_groups, 1)
    check_choice("pool_kernel", pool_kernel, (3, 4))  # both give 1x1 on the 4x4 map
    for c in (64, 128, 256, 512):
        if norm == "gn" and c % gn_groups:
            raise FlkitError(f"gn_groups={gn_groups} must divide every width 64/128/256/512")


def build_resnet18(num_classes, in_channels, *, norm="bn", gn_groups=2, pool_kernel=4):
    """CIFAR ResNet-18, kuangliu style, with BatchNorm (the staleness paper for CIFAR-10;
    the FedDIP paper for CIFAR-100, ~11.22 M parameters with 100 classes): Conv 3x3 (3->64,
    stride 1, pad 1, no bias) -> BN -> ReLU -> 4 stages of 2 BasicBlocks (64/128/256/512, strides
    1/2/2/2) -> 4x4 average pool -> Linear(512 -> num_classes). 11,173,962 parameters with 10
    classes, 11,220,132 with 100. ``norm="gn"`` swaps every BN for GroupNorm(gn_groups)."""
    _resnet_flags(norm, gn_groups, pool_kernel)
    return (
        ResNet18CIFAR(num_classes, in_channels, norm, gn_groups, pool_kernel),
        (in_channels, 32, 32),
    )


def build_resnet18_gn(num_classes, in_channels, *, norm="gn", gn_groups=2, pool_kernel=3):
    """FedAST's CIFAR-100 ResNet-18 with GroupNorm (the FedAST paper; the second ``Net`` class of
    ``models/CIFAR-100/fl_model.py``, the one actually used): the CIFAR layout of ``resnet18`` with
    every norm = GroupNorm(2 groups) and the official code's average pool with kernel 3 on the 4x4
    map (so only its top-left 3x3 window reaches the classifier; ``pool_kernel=4`` averages all
    of it). Same parameter count as the BN version: 11,220,132 with 100 classes."""
    _resnet_flags(norm, gn_groups, pool_kernel)
    return (
        ResNet18CIFAR(num_classes, in_channels, norm, gn_groups, pool_kernel),
        (in_channels, 32, 32),
    )


def build_resnet18_imagenet(
    num_classes, in_channels, *, image_size=224, norm="bn", gn_groups=2, pretrained=False
):
    """torchvision's ImageNet-style ResNet-18 (7x7 stride-2 stem + max-pool, adaptive average pool):
    the MDI model of the staleness paper (ImageNet weights, head replaced by a 5-class one;
    224x224 input) and, with ``norm="gn"``, FedDyn's GroupNorm(2) "Resnet18" named by the
    FedAST paper. 11,179,077 parameters with 5 classes (11,689,512 - 1000*513 + 5*513).

    ``pretrained=True`` loads torchvision's IMAGENET1K_V1 weights (BN, 3 channels only) from the
    torch hub cache, downloading them when online, and then replaces the head. The network is
    input-size agnostic; ``image_size`` only sets the expected shape recorded for ``check_fits``."""
    import torchvision

    check_choice("norm", norm, NORMS)
    check_range("image_size", image_size, 1)
    norm_layer = None if norm == "bn" else (lambda c: nn.GroupNorm(gn_groups, c))
    if pretrained:
        if norm != "bn" or in_channels != 3:
            raise FlkitError(
                "pretrained=True needs norm='bn' and in_channels=3 (the ImageNet weights); "
                f"got norm={norm!r}, in_channels={in_channels}"
            )
        weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
        try:
            model = torchvision.models.resnet18(weights=weights)
        except Exception as e:  # offline: urllib errors, hub cache missing
            raise FlkitError(
                f"pretrained ResNet-18 weights unavailable ({type(e).__name__}: {e}); put "
                f"{weights.url.rsplit('/', 1)[-1]} in {torch.hub.get_dir()}/checkpoints "
                "or use pretrained=False"
            ) from None
        model.fc = nn.Linear(512, num_classes)
    else:
        model = torchvision.models.resnet18(
            weights=None, num_classes=num_classes, norm_layer=norm_layer
        )
    if in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    for m in model.modules():  # in-place ReLU is fragile under functional/batched training
        if isinstance(m, nn.ReLU):
            m.inplace = False
    return model, (in_channels, image_size, image_size)
