"""Engine hooks for masked training (pure functions for flkit.engine.train_clients).

Masks are ``{name: bool Tensor}`` of one model's shapes (shared by all clients) or stacked
``[K, ...]`` (one per client; the hooks' hook_args["clients"] selects the rows of the clients in a
step).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor


def _mask_for(mask: Mapping[str, Tensor], name: str, p: Tensor, hook_args) -> Tensor:
    m = mask[name]
    if m.dim() == p.dim():  # per-client masks [K_all, ...]
        m = m[hook_args["clients"]]
    return m.to(p.dtype)


def straight_through(mask: Mapping[str, Tensor]):
    """param_transform for dynamic pruning with error feedback: the forward pass sees w * m, and
    the gradient taken at w * m is applied to the dense w at every position (pruned ones too),
    because w + (w*m - w).detach() has value w*m and derivative 1 with respect to w."""

    def transform(params, hook_args):
        out = dict(params)
        for n in mask:
            p = params[n]
            out[n] = p + (p * _mask_for(mask, n, p, hook_args) - p).detach()
        return out

    return transform


def masked(mask: Mapping[str, Tensor]):
    """param_transform for masked training: the forward sees w * m and pruned positions get no
    gradient from the loss (SNIP, PruneFL, FedDST keep pruned weights at exactly zero)."""

    def transform(params, hook_args):
        out = dict(params)
        for n in mask:
            out[n] = params[n] * _mask_for(mask, n, params[n], hook_args)
        return out

    return transform


def mask_grads(mask: Mapping[str, Tensor]):
    """grad_transform zeroing the gradient at pruned positions (with a zero start and masked
    forward this keeps pruned weights at exactly 0 under weight decay too)."""

    def transform(grads, params, hook_args):
        out = dict(grads)
        for n in mask:
            out[n] = grads[n] * _mask_for(mask, n, grads[n], hook_args)
        return out

    return transform


def layer_l2_penalty(lam: float, mask: Mapping[str, Tensor] | None, names):
    """extra_loss lam * sum_z ||(w*m)_z||_2: the unsquared Frobenius norm of each pruned layer
    (a group-lasso-like penalty: constant-size shrinkage of each layer), per client [K]."""
    names = list(names)

    def penalty(params, hook_args):
        total = 0
        for n in names:
            p = params[n]
            w = p * _mask_for(mask, n, p, hook_args) if mask and n in mask else p
            total = total + w.flatten(1).norm(dim=1)
        return lam * total

    return penalty
