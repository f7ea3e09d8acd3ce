"""The engine's private copies of a model: the wide model (flkit.engine.wide) and the inference
copy (flkit.engine.inference) are each a deep copy of the user's model, built once per model, in
which some layers are swapped for faster ones that give the same floats.

Every such copy also runs a ReLU directly followed by a max-pool as max-pool then ReLU: the ReLU
and its backward then touch a quarter of the elements (a 2x2 pool). Why the order does not change
a number:
- forward: a maximum commutes with any non-decreasing function, relu(max(x)) == max(relu(x));
- backward: max-pool sends a window's gradient to the first position holding its maximum.
  When that maximum is positive, the first maximum of x and of relu(x) is the same position, and
  the ReLU's derivative there is 1 in both orders. When it is <= 0, relu-then-pool routes the
  gradient to a position where the ReLU's output is 0 (gradient 0), and pool-then-relu zeroes it
  before routing: every position of the window gets 0 either way. Both steps only route and mask
  a gradient, so second derivatives (the inversion's double backward) agree too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from torch import nn

# pools whose window maximum commutes with ReLU (any kernel, stride, padding or ceil mode)
_POOLS = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)


def pool_before_relu(net: nn.Module) -> int:
    """Swap every ReLU directly followed by a max-pool inside an nn.Sequential of `net` (in
    place; give it a copy). Returns how many pairs were swapped. Only nn.Sequential children
    are touched: their forward is the order of their modules, so the swap is all that changes."""
    swapped = 0
    for mod in net.modules():
        if not isinstance(mod, nn.Sequential):
            continue
        keys = list(mod._modules)
        i = 0
        while i + 1 < len(keys):
            a, b = mod._modules[keys[i]], mod._modules[keys[i + 1]]
            if type(a) is nn.ReLU and type(b) in _POOLS and not b.return_indices:
                mod._modules[keys[i]], mod._modules[keys[i + 1]] = b, a
                swapped += 1
                i += 2
            else:
                i += 1
    return swapped


def engine_copy(
    model: nn.Module, replace: Callable[[str, nn.Module], nn.Module | None]
) -> nn.Module:
    """A deep copy of `model` with ReLU/max-pool pairs reordered (`pool_before_relu`) and every
    submodule for which `replace(name, module)` returns a module swapped for it (the root, name
    "", included)."""
    net = copy.deepcopy(model)
    pool_before_relu(net)
    for name, mod in list(net.named_modules()):
        new = replace(name, mod)
        if new is None:
            continue
        if not name:
            net = new
            continue
        parent, _, child = name.rpartition(".")
        setattr(net.get_submodule(parent) if parent else net, child, new)
    return net


def per_model(cache, model, build):
    """`build(model)`, built once per model object and structure: `cache` is a
    weakref.WeakKeyDictionary (an entry goes with its model), and a model whose layers changed
    since (another repr) is built again."""
    shape = repr(model)
    hit = cache.get(model)
    if hit is None or hit[0] != shape:
        hit = cache[model] = (shape, build(model))
    return hit[1]


__all__ = ["engine_copy", "per_model", "pool_before_relu"]
