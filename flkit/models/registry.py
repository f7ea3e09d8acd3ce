"""Every paper's architecture, by name.

    >>> from flkit import models
    >>> net = models.build("lenet5_feddip")                 # defaults from the paper
    >>> models.count_params(net)
    61706
    >>> models.check_fits(net, (1, 28, 28), 10)             # raises FlkitError when it does not fit
    >>> line = models.describe("vgg11_star")  # one line: what it is, where it comes from

``build(name, num_classes=None, in_channels=None, **flags)``: ``None`` takes the paper's default;
``flags`` are model-specific (see ``describe`` / the builder docstrings in ``flkit.models``);
unknown names or flags raise ``FlkitError`` listing what is accepted. For vector inputs (HAR MLP)
``in_channels`` is the number of input features; the Shakespeare LSTM takes no ``in_channels``.

Every model obeys the engine compatibility rule of docs/ARCHITECTURE.md (flatten with
``torch.flatten(x, 1)``, only the listed leaf layers, stateless forward), returns logits (never
log-probabilities) and carries three attributes: ``flkit_name``, ``input_shape`` (one sample) and
``num_classes``. Seed with ``torch.manual_seed(derive_seed(seed, "init"))`` right before ``build``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..utils import FlkitError, check_choice, check_int
from . import deep, small


@dataclass(frozen=True)
class _Entry:
    builder: Callable
    num_classes: int
    in_channels: int | None
    description: str
    source: str


_REGISTRY: dict[str, _Entry] = {
    "cnn_mnist": _Entry(
        small.build_cnn_mnist,
        10,
        1,
        "LeNet variant 'CNNMnist' for 1x28x28 (2 conv + 2 FC, dropout), 21,840 params",
        "the staleness paper",
    ),
    "lenet5_cifar": _Entry(
        small.build_lenet5_cifar,
        10,
        3,
        "LeNet-5 'CNNCifar' for 3x32x32 (MNIST->SVHN stream), 62,006 params",
        "the staleness paper",
    ),
    "lenet5": _Entry(
        small.build_lenet5_feddip,
        10,
        1,
        "classic LeNet-5 for 1x28x28 (first conv padded, 6-16 conv, FC 120-84), 61,706 params; "
        "the same network as lenet5_feddip",
        "LeCun et al. 1998; the FedDIP paper",
    ),
    "logreg": _Entry(
        small.build_logreg,
        10,
        60,
        "multinomial logistic regression on flat features (60 -> 10: 610 params); "
        "hidden=H adds a ReLU layer",
        "Li et al. 2020 (FedProx), Synthetic(alpha, beta) experiments",
    ),
    "lenet5_feddip": _Entry(
        small.build_lenet5_feddip,
        10,
        1,
        "LeNet-5 for Fashion-MNIST, first conv padded (flatten 400), 61,706 params",
        "the FedDIP paper",
    ),
    "lenet5_fedast": _Entry(
        small.build_lenet5_fedast,
        10,
        1,
        "LeNet-5 for Fashion-MNIST, no padding (flatten 256), ReLU on logits by default, "
        "44,426 params",
        "the FedAST paper (askinb/FedAST)",
    ),
    "mlp_mnist": _Entry(
        small.build_mlp_mnist,
        10,
        1,
        "FedDyn MNIST MLP 784-200-200-10, 199,210 params",
        "the FedAST paper (FedDyn 'mnist')",
    ),
    "cnn_cifar10": _Entry(
        small.build_cnn_cifar10,
        10,
        3,
        "FedDyn CIFAR-10 CNN (2 conv 5x5 x64 + FC 384-192), 797,962 params",
        "the FedAST paper (FedDyn 'cifar10')",
    ),
    "cnn3_mnist": _Entry(
        small.build_cnn3_mnist,
        10,
        1,
        "assumed 3-conv MNIST CNN (32-64-64, FC 128) of the STC-projection paper, 130,890 params",
        "the STC-projection paper",
    ),
    "vgg11_star": _Entry(
        deep.build_vgg11_star,
        10,
        3,
        "simplified VGG11* (8 conv, no BN, He-normal conv init), 865,482 params",
        "the STC-projection paper (STC paper)",
    ),
    "alexnet_cifar": _Entry(
        deep.build_alexnet_cifar,
        10,
        3,
        "AlexNet variant for CIFAR-10 (5 conv + FC 4096-4096), 23,272,266 params",
        "the FedDIP paper",
    ),
    "resnet18": _Entry(
        deep.build_resnet18,
        10,
        3,
        "CIFAR ResNet-18 (kuangliu) with BatchNorm, 11,173,962 params "
        "(11,220,132 with 100 classes)",
        "the staleness paper; the FedDIP paper (CIFAR-100)",
    ),
    "resnet18_gn": _Entry(
        deep.build_resnet18_gn,
        100,
        3,
        "CIFAR ResNet-18 with GroupNorm(2) and kernel-3 average pool, 11,220,132 params",
        "the FedAST paper (FedAST CIFAR-100)",
    ),
    "resnet18_imagenet": _Entry(
        deep.build_resnet18_imagenet,
        5,
        3,
        "torchvision ResNet-18 (7x7 stem), optional ImageNet weights, 11,179,077 params "
        "(5 classes)",
        "the staleness paper (MDI model); the FedAST paper (FedDyn GN variant, norm='gn')",
    ),
    "vgg9": _Entry(
        deep.build_vgg9,
        62,
        1,
        "VGG9 with BatchNorm, bias-free hidden layers, 2,599,966 params (62 classes)",
        "the HideNseek paper (FedMA layout)",
    ),
    "mlp_har": _Entry(
        small.build_mlp_har,
        6,
        1152,
        "HAR MLP 1152-512-256-128-6, bias-free hidden layers, 754,438 params",
        "the HideNseek paper",
    ),
    "lstm_shakespeare": _Entry(
        small.build_lstm_shakespeare,
        80,
        None,
        "character LSTM Embedding(80,8) -> LSTM(100) -> Linear(100,80), 52,720 params; stateless",
        "the FedAST paper (Async-HFL / FedAST)",
    ),
}

MODELS: tuple[str, ...] = tuple(_REGISTRY)


def _entry(name: str) -> _Entry:
    check_choice("model", name, MODELS)
    return _REGISTRY[name]


def flags(name: str) -> dict:
    """The model-specific flags of ``name`` and their defaults."""
    sig = inspect.signature(_entry(name).builder)
    return {p.name: p.default for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}


def build(
    name: str, num_classes: int | None = None, in_channels: int | None = None, **kw
) -> nn.Module:
    """Build model ``name`` (one of ``MODELS``) with fresh random weights (torch's global RNG).

    ``num_classes`` / ``in_channels`` default to the paper's values (``describe(name)``)."""
    entry = _entry(name)
    accepted = flags(name)
    for key in kw:
        if key not in accepted:
            raise FlkitError(
                f"unknown flag {key!r} for model {name!r}; accepted: "
                f"{', '.join(accepted) or '(none)'}"
            )
    num_classes = entry.num_classes if num_classes is None else num_classes
    check_int("num_classes", num_classes, 1)
    if entry.in_channels is not None:
        in_channels = entry.in_channels if in_channels is None else in_channels
        check_int("in_channels", in_channels, 1)
    model, input_shape = entry.builder(num_classes, in_channels, **kw)
    model.flkit_name = name
    model.input_shape = tuple(input_shape)
    model.num_classes = num_classes
    return model


def count_params(model: nn.Module) -> int:
    """Number of trainable parameters (``requires_grad``); buffers such as BN statistics
    excluded."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def describe(name: str) -> str:
    """One line: what the model is, its default classes/input and the paper it follows."""
    e = _entry(name)
    fl = ", ".join(f"{k}={v!r}" for k, v in flags(name).items())
    inp = "tokens" if e.in_channels is None else f"in_channels={e.in_channels}"
    return (
        f"{name}: {e.description}; defaults num_classes={e.num_classes}, {inp}"
        f"{'; flags ' + fl if fl else ''} [{e.source}]"
    )


def _input_dtype(model: nn.Module) -> torch.dtype:
    dtype = getattr(model, "input_dtype", None)
    if dtype is not None:
        return dtype
    first = next((m for m in model.modules() if not list(m.children())), None)
    if isinstance(first, nn.Embedding):
        return torch.long
    p = next(model.parameters(), None)
    return p.dtype if p is not None and p.is_floating_point() else torch.float32


def check_fits(model: nn.Module, input_shape, num_classes: int) -> None:
    """Run a dummy batch of 2 samples of ``input_shape`` through ``model`` (eval mode, no grad, so
    no BN statistics or RNG state change) and raise ``FlkitError`` unless it yields ``[2,
    num_classes]`` logits. The message names the model, the input shape and the expected shapes."""
    name = getattr(model, "flkit_name", type(model).__name__)
    expected = getattr(model, "input_shape", None)
    expected_txt = (
        f"samples of shape {expected}" if expected is not None else "a different input shape"
    )
    input_shape = tuple(int(s) for s in input_shape)
    p = next(model.parameters(), None)
    device = p.device if p is not None else torch.device("cpu")
    x = torch.zeros((2,) + input_shape, dtype=_input_dtype(model), device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x)
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        raise FlkitError(
            f"model {name!r} does not fit inputs of shape {input_shape}: it expects {expected_txt} "
            f"(forward failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}); build it "
            f"with matching in_channels/image_size or pick another model"
        ) from None
    finally:
        model.train(was_training)
    want = (2, int(num_classes))
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise FlkitError(
            f"model {name!r} on inputs of shape {input_shape} gives output {got} for a batch of 2, "
            f"expected {want} (num_classes={num_classes}); "
            f"rebuild it with num_classes={num_classes}"
        )
