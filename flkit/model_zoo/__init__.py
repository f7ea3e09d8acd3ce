"""Layer-by-layer definitions of every paper's architecture.

Use :func:`flkit.models.build` (the registry, defaults and checks live there); this package only
holds the ``nn.Module`` classes and builders, split by size:

- ``small``: the MNIST/CIFAR CNNs, the LeNet-5 variants, MLPs and the character LSTM;
- ``deep``: VGG11*, VGG9, AlexNet and the ResNet-18 family.

Every model follows the engine compatibility rule of docs/ARCHITECTURE.md: forward passes flatten
with ``torch.flatten(x, 1)``, and the only leaf layers are Conv2d, Linear, BatchNorm1d/2d,
GroupNorm, ReLU, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout, Identity, Embedding and
LSTM (batch_first=True). No model keeps state between forward calls.
"""
