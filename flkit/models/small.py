"""Small models: MNIST/CIFAR CNNs, LeNet-5 variants, MLPs and the Shakespeare character LSTM.

Each builder takes ``(num_classes, in_channels, **flags)`` and returns ``(module, input_shape)``,
where ``input_shape`` is the shape of one sample the module expects (recorded for error messages).
Each model names the paper it follows.
"""

from __future__ import annotations

import torch
from torch import nn

from ..utils import FlkitError, check_choice, check_range


class SeqNet(nn.Module):
    """``features`` -> ``torch.flatten(x, 1)`` -> ``classifier``.

    The last layer of ``classifier`` that has parameters is the output head (the personalised
    classifier in HideNseek, the last FC layer in FedDIP's prunable set)."""

    def __init__(self, features: nn.Module, classifier: nn.Sequential):
        super().__init__()
        self.features = features
        self.classifier = classifier

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def flat_dim(features: nn.Module, in_channels: int, image_size: int, what: str) -> int:
    """Width of ``features``' flattened output for one ``in_channels x image_size^2`` image.

    Runs one zero image through the (freshly built) feature extractor in eval mode: this touches no
    random state and no BatchNorm statistics, so seeding before ``build`` stays deterministic."""
    check_range("image_size", image_size, 1)
    was_training = features.training
    features.eval()
    try:
        with torch.no_grad():
            n = features(torch.zeros(1, in_channels, image_size, image_size)).numel()
    except RuntimeError as e:
        raise FlkitError(
            f"image_size={image_size} is too small for {what}: {str(e).splitlines()[0]}"
        ) from None
    finally:
        features.train(was_training)
    if n == 0:
        raise FlkitError(
            f"image_size={image_size} is too small for {what}: the feature map vanishes"
        )
    return n


INITS = ("kaiming_relu", "pytorch")


def kaiming_relu_uniform_(module: nn.Module) -> nn.Module:
    """He et al. (2015) uniform init with the ReLU gain (bound sqrt(6 / fan_in)) for every
    Conv2d/Linear weight; biases keep PyTorch's default (the HideNseek paper)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
    return module


# --------------------------------------------------------------------------------- staleness
def build_cnn_mnist(num_classes, in_channels, *, image_size=28, dropout2d=False):
    """The staleness paper's "CNNMnist" LeNet variant, 21,840 parameters on MNIST:
    Conv(1->10, 5x5) -> MaxPool 2 -> ReLU -> Conv(10->20, 5x5) -> Dropout2d(0.5) -> MaxPool 2 ->
    ReLU -> flatten 320 -> Linear(320->50) -> ReLU -> Dropout(0.5) -> Linear(50->10).

    Deviations (documented): the final log-softmax is left out (models return logits; the
    cross-entropy loss applies log-softmax, and log_softmax is idempotent, so the loss and argmax
    are unchanged; a log-softmax over dim 1 would also mix clients in the engine's wide backend).
    The channel dropout after conv2 is element-wise ``nn.Dropout(0.5)`` by default because
    Dropout2d is not on the engine's list of leaf layers; ``dropout2d=True`` restores the code's
    ``nn.Dropout2d``. Parameter counts are identical either way."""
    features = nn.Sequential(
        nn.Conv2d(in_channels, 10, 5),
        nn.MaxPool2d(2),
        nn.ReLU(),
        nn.Conv2d(10, 20, 5),
        nn.Dropout2d(0.5) if dropout2d else nn.Dropout(0.5),
        nn.MaxPool2d(2),
        nn.ReLU(),
    )
    n = flat_dim(features, in_channels, image_size, "cnn_mnist")
    classifier = nn.Sequential(
        nn.Linear(n, 50), nn.ReLU(), nn.Dropout(0.5), nn.Linear(50, num_classes)
    )
    return SeqNet(features, classifier), (in_channels, image_size, image_size)


def _lenet5(num_classes, in_channels, image_size, padding, logit_relu, what):
    features = nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, padding=padding),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )
    n = flat_dim(features, in_channels, image_size, what)
    layers = [
        nn.Linear(n, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, num_classes),
    ]
    if logit_relu:
        layers.append(nn.ReLU())
    return SeqNet(features, nn.Sequential(*layers)), (in_channels, image_size, image_size)


def build_lenet5_cifar(num_classes, in_channels, *, image_size=32, logit_relu=False):
    """The staleness paper's "CNNCifar" LeNet-5, 3x32x32 input, used for the MNIST->SVHN
    stream (MNIST converted to 3-channel 32x32): Conv(3->6, 5x5) -> ReLU -> MaxPool 2 ->
    Conv(6->16, 5x5) -> ReLU -> MaxPool 2 -> flatten 400 -> Linear(400->120) -> ReLU ->
    Linear(120->84) -> ReLU -> Linear(84->10). 62,006 parameters (the paper gives no count:
    456 + 2,416 + 48,120 + 10,164 + 850). Log-softmax left out as in ``cnn_mnist``."""
    return _lenet5(num_classes, in_channels, image_size, 0, logit_relu, "lenet5_cifar")


def build_lenet5_feddip(num_classes, in_channels, *, image_size=28, logit_relu=False):
    """FedDIP's LeNet-5 for Fashion-MNIST (the FedDIP paper), 61,706 parameters (61,470
    prunable weights): conv 1->6, 5x5, pad 2 -> ReLU -> maxpool 2 -> conv 6->16, 5x5 -> ReLU ->
    maxpool 2 -> flatten 400 -> FC 400->120 -> ReLU -> FC 120->84 -> ReLU -> FC 84->10."""
    return _lenet5(num_classes, in_channels, image_size, 2, logit_relu, "lenet5_feddip")


def build_lenet5_fedast(num_classes, in_channels, *, image_size=28, logit_relu=True):
    """FedAST's Fashion-MNIST LeNet-5 (the FedAST paper, ``askinb/FedAST``), 44,426 parameters:
    Conv2d(1, 6, 5) (no padding) -> ReLU -> MaxPool 2 -> Conv2d(6, 16, 5) -> ReLU -> MaxPool 2 ->
    flatten 256 -> Linear(256, 120) -> ReLU -> Linear(120, 84) -> ReLU -> Linear(84, 10) -> ReLU.

    The ReLU on the logits is a quirk of the official code; we reproduce such quirks
    for fidelity or document the deviation, so it is on by default
    (``logit_relu=True``); ``logit_relu=False`` gives plain logits."""
    return _lenet5(num_classes, in_channels, image_size, 0, logit_relu, "lenet5_fedast")


# --------------------------------------------------------------------------------- STC projection
def build_cnn3_mnist(num_classes, in_channels, *, image_size=28):
    """Our reading of the STC-projection paper's "CNN with 3 convolutional layers" for MNIST
    (the paper gives no detail; an assumption to record), d = 130,890: three blocks
    Conv(3x3, pad 1) -> ReLU -> MaxPool 2 with 32, 64, 64 channels (28 -> 14 -> 7 -> 3) ->
    flatten 576 -> Linear(576->128) -> ReLU -> Linear(128->10). No batch norm."""
    features = nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )
    n = flat_dim(features, in_channels, image_size, "cnn3_mnist")
    classifier = nn.Sequential(nn.Linear(n, 128), nn.ReLU(), nn.Linear(128, num_classes))
    return SeqNet(features, classifier), (in_channels, image_size, image_size)


# --------------------------------------------------------------------------------- FedAST
def build_mlp_mnist(num_classes, in_channels, *, image_size=28):
    """FedDyn's MNIST MLP as used by FedAST (the FedAST paper), 199,210 parameters:
    flatten 28x28 -> Linear(784, 200) -> ReLU -> Linear(200, 200) -> ReLU -> Linear(200, 10).
    Input width = in_channels * image_size**2 (also accepts already flattened samples)."""
    check_range("image_size", image_size, 1)
    n = in_channels * image_size * image_size
    classifier = nn.Sequential(
        nn.Linear(n, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(), nn.Linear(200, num_classes)
    )
    return SeqNet(nn.Identity(), classifier), (in_channels, image_size, image_size)


def build_cnn_cifar10(num_classes, in_channels, *, image_size=32):
    """FedDyn's CIFAR-10 CNN as used by FedAST (the FedAST paper), 797,962 parameters:
    Conv2d(3, 64, 5) -> ReLU -> MaxPool 2 -> Conv2d(64, 64, 5) -> ReLU -> MaxPool 2 -> flatten 1600
    -> Linear(1600, 384) -> ReLU -> Linear(384, 192) -> ReLU -> Linear(192, 10)."""
    features = nn.Sequential(
        nn.Conv2d(in_channels, 64, 5),
        nn.ReLU(),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(64, 64, 5),
        nn.ReLU(),
        nn.MaxPool2d(2, 2),
    )
    n = flat_dim(features, in_channels, image_size, "cnn_cifar10")
    classifier = nn.Sequential(
        nn.Linear(n, 384), nn.ReLU(), nn.Linear(384, 192), nn.ReLU(), nn.Linear(192, num_classes)
    )
    return SeqNet(features, classifier), (in_channels, image_size, image_size)


class CharLSTM(nn.Module):
    """Embedding -> LSTM (batch_first) -> Linear on the last time step's output. Input: int64
    token indices ``[B, T]``; output: logits ``[B, num_classes]``. Stateless: every forward call
    starts from a zero (h, c) state."""

    input_dtype = torch.long

    def __init__(self, num_classes, vocab_size, embed_dim, hidden_size, num_layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        out, _ = self.lstm(self.embedding(x))
        return self.fc(out[:, -1, :])


def build_lstm_shakespeare(
    num_classes,
    in_channels,
    *,
    seq_len=80,
    vocab_size=80,
    embed_dim=8,
    hidden_size=100,
    num_layers=1,
):
    """Shakespeare next-character LSTM of Async-HFL / FedAST (the FedAST paper), 52,720
    parameters: Embedding(80, 8) -> LSTM(8 -> 100, 1 layer, batch_first) over the 80 steps ->
    Linear(100, 80) on the last step's output. ``num_layers=2`` gives the 2-layer stacked LSTM of
    LEAF/FedDyn named in the same section (FedDyn widths: 133,520 parameters).

    Documented deviation: the official code carries the detached (h, c) state from one mini-batch
    into the next (and across test batches); here every forward starts from zeros, because the
    batched engine needs stateless forward passes. ``in_channels`` does not apply (token input)."""
    if in_channels is not None:
        raise FlkitError(
            f"in_channels={in_channels!r} does not apply to 'lstm_shakespeare' (its "
            "input is int64 token indices [batch, seq_len]); accepted: None. "
            "Use vocab_size= to change the number of symbols"
        )
    for field, v in (
        ("seq_len", seq_len),
        ("vocab_size", vocab_size),
        ("embed_dim", embed_dim),
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
    ):
        check_range(field, v, 1)
    return CharLSTM(num_classes, vocab_size, embed_dim, hidden_size, num_layers), (seq_len,)


# --------------------------------------------------------------------------------- HideNseek
def build_mlp_har(num_classes, in_channels, *, bias=False, init="kaiming_relu"):
    """HideNseek's HAR MLP (the HideNseek paper; widths not retrieved from the paper):
    1152 -> 512 -> 256 -> 128 -> 6 with ReLU, no BN. Feature extractor = the three hidden layers,
    classifier = the last Linear (``classifier[-1]``), which always has a bias.

    Hidden-layer biases are not addressed by the paper (the HideNseek paper); our
    choice "no bias" is the default (``bias=False``): 589,824 + 131,072 + 32,768 + 774 = 754,438
    parameters. ``init="kaiming_relu"`` (default: Kaiming-uniform with the ReLU gain)
    or ``"pytorch"`` (PyTorch's default init). ``in_channels`` = input features (1152)."""
    check_choice("init", init, INITS)
    layers, widths = [], [in_channels, 512, 256, 128]
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b, bias=bias), nn.ReLU()]
    model = SeqNet(nn.Identity(), nn.Sequential(*layers, nn.Linear(128, num_classes)))
    if init == "kaiming_relu":
        kaiming_relu_uniform_(model)
    return model, (in_channels,)


def build_logreg(num_classes, in_channels, *, hidden=0):
    """Multinomial logistic regression on flat features (FedProx's model for
    Synthetic(alpha, beta)); hidden > 0 adds one ReLU layer of that width (a small MLP for quick
    demos)."""
    if hidden < 0:
        raise FlkitError(f"hidden={hidden!r} must be >= 0")
    layers = [nn.Flatten()]
    if hidden:
        layers += [nn.Linear(in_channels, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)]
    else:
        layers += [nn.Linear(in_channels, num_classes)]
    return nn.Sequential(*layers), (in_channels,)
