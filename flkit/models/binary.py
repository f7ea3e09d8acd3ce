"""Binarised activations for binary neural networks (BNNAvg): sign forward, hard-tanh backward."""

from __future__ import annotations

import copy

from torch import nn


class SignActivation(nn.Hardtanh):
    """sign(x) (sign(0) = +1) in the forward pass; the gradient of hard-tanh (1 where |x| <= 1) in
    the backward pass (Courbariaux et al. 2016). A Hardtanh subclass: element-wise and parameter
    free, so the wide engine runs it unchanged."""

    def forward(self, x):
        from ..prune.supermask import bnn_sign_ste

        return bnn_sign_ste(x)


def binarize_activations(model: nn.Module) -> nn.Module:
    """A copy of `model` whose ReLUs are SignActivations (the logits stay real; same weights)."""
    net = copy.deepcopy(model)
    for _name, mod in list(net.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.ReLU):
                setattr(mod, child_name, SignActivation())
    for attr in ("flkit_name", "input_shape", "num_classes"):
        if hasattr(model, attr):
            setattr(net, attr, getattr(model, attr))
    return net
