"""Every paper's architecture, by name: the registry (`registry`) and the layer-by-layer
definitions (`small`: the MNIST/CIFAR CNNs, the LeNet-5 variants, MLPs and the character LSTM;
`deep`: VGG11*, VGG9, AlexNet and the ResNet-18 family; `binary`: sign activations).

    net = models.build("lenet5_feddip")          # defaults from the paper
    models.count_params(net)                     # 61706
"""

from .registry import MODELS, build, check_fits, count_params, describe, flags

__all__ = ["MODELS", "build", "check_fits", "count_params", "describe", "flags"]
