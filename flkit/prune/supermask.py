"""Supermasks over frozen weights as pure functions (usable as an engine ``param_transform``).

A supermask method keeps the weights w0 at their random initialisation and trains a latent score
per weight; the forward pass uses w0 * m * q(latent):
- sign supermask (HideNseek, Signed): q = sign(latent) in {-1, +1} with sign(0) = +1, gradient
  through the tanh surrogate, d/ds tanh(s) = 1 - tanh(s)^2 ("tanh"), or the paper's literal
  1 - s^2 ("literal", an ablation: it turns negative for |s| > 1);
- binary supermask (FedMask): q = 1[sigmoid(latent) > 0.5] = 1[latent > 0], gradient through the
  sigmoid, sigmoid'(s);
- binarised weights (BNN): q = sign(w), gradient passed where |w| <= 1 (hard-tanh).
Each quantiser returns exactly q in the forward pass (q + (f - f.detach()) adds an exact zero).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from ..utils import FlkitError, check_choice

SURROGATES = ("tanh", "literal")
#: how a server turns the clients' mean vote back into a latent score:
#: "inverse" the inverse of the surrogate (arctanh for signs, logit for binary masks) of the
#:   clipped mean, the paper's eq. 8; a unanimous vote lands at the clip, where the surrogate's
#:   derivative is about eps, so the next local update cannot flip it;
#: "linear" the tangent of that inverse at the split vote (arctanh(m) ~ m, logit(p) ~ 4 (p - 1/2)):
#:   the same mask (same sign / same side of 0.5), with |score| <= 1 (signs) or <= 2 (binary),
#:   where the straight-through gradient is at least 0.42 (tanh') or 0.10 (sigmoid') of its peak.
WRITEBACKS = ("inverse", "linear")
#: over whose samples a server weights the votes (n of the paper's eq. 1):
#: "sampled" the sampled clients' (the plain mean vote: a unanimous vote is +-1, or 0 / 1);
#: "all" every client's: the clients that did not vote count as undecided, so the vote shrinks
#:   toward the undecided value by the voters' share of the data (``dilute_vote``); at 10 % of
#:   the clients a round a unanimous vote lands within about 0.1 of the split vote, where the next
#:   local update can cross it, instead of at the end of the write-back's range.
NORMALIZE = ("sampled", "all")


def hard_sign(x: torch.Tensor) -> torch.Tensor:
    """sign with sign(0) = +1 (the paper's eq. 7)."""
    return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))


def sign_ste(latent: torch.Tensor, surrogate: str = "tanh") -> torch.Tensor:
    """sign(latent) forward; backward grad * (1 - tanh^2(latent)) ("tanh") or * (1 - latent^2)."""
    check_choice("surrogate", surrogate, SURROGATES)
    f = torch.tanh(latent) if surrogate == "tanh" else latent - latent**3 / 3
    return hard_sign(latent).detach() + (f - f.detach())


def binary_ste(scores: torch.Tensor) -> torch.Tensor:
    """1[sigmoid(scores) > 0.5] forward; backward grad * sigmoid'(scores) (FedMask)."""
    f = torch.sigmoid(scores)
    return (scores > 0).to(scores.dtype).detach() + (f - f.detach())


def bnn_sign_ste(w: torch.Tensor) -> torch.Tensor:
    """sign(w) forward; backward grad * 1[|w| <= 1] (Courbariaux et al. 2016), the ends included
    (torch.clamp's gradient is 0 at exactly +-1, where BNNAvg's server puts unanimous votes)."""
    f = torch.where(w.abs() <= 1, w, w.detach())
    return hard_sign(w).detach() + (f - f.detach())


QUANTISERS = {"sign": sign_ste, "binary": binary_ste}


def vote_to_score(
    mean: torch.Tensor, kind: str = "sign", writeback: str = "inverse", eps: float = 1e-6
) -> torch.Tensor:
    """The latent score a server writes back for a mean vote (see ``WRITEBACKS``).

    kind "sign": mean in [-1, 1]; "inverse" arctanh(clip(mean, -1 + eps, 1 - eps)), "linear"
    clip(mean, -1, 1). kind "binary": mean in [0, 1]; "inverse" logit(clip(mean, eps, 1 - eps)),
    "linear" 4 (clip(mean, 0, 1) - 1/2). Both write-backs give every position the same mask."""
    check_choice("supermask kind", kind, tuple(QUANTISERS))
    check_choice("write-back", writeback, WRITEBACKS)
    if kind == "sign":
        if writeback == "inverse":
            return torch.atanh(mean.clamp(-1 + eps, 1 - eps))
        return mean.clamp(-1.0, 1.0)
    if writeback == "inverse":
        return torch.logit(mean.clamp(eps, 1 - eps))
    return 4.0 * (mean.clamp(0.0, 1.0) - 0.5)


def dilute_vote(
    mean: torch.Tensor, share: float | torch.Tensor, kind: str = "sign"
) -> torch.Tensor:
    """The mean vote over all clients when the voters hold only ``share`` of all samples and the
    others count as undecided (0 for signs, 1/2 for binary masks): share * mean (kind "sign"),
    1/2 + share * (mean - 1/2) (kind "binary"). ``share``: a number or a tensor broadcasting to
    ``mean``, each in [0, 1]. The side of the split vote is kept wherever share > 0, so the mask
    is the same; only the distance from the split vote shrinks."""
    check_choice("supermask kind", kind, tuple(QUANTISERS))
    s = torch.as_tensor(share, dtype=mean.dtype, device=mean.device)
    # a share computed as voters' samples / all samples may exceed 1 by rounding only
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()) or bool((s > 1 + 1e-9).any()):
        raise FlkitError(
            f"vote share {share!r} is outside [0, 1]; accepted: the voters' share of all "
            "clients' samples, a number from 0 to 1"
        )
    s = s.clamp(max=1.0)
    if kind == "sign":
        return s * mean
    return 0.5 + s * (mean - 0.5)


def flip_share(before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor]) -> float:
    """Share of the mask entries (the tensors of ``before``) whose value differs in ``after``."""
    changed = sum(int((before[n] != after[n]).sum()) for n in before)
    total = sum(v.numel() for v in before.values())
    return changed / total if total else 0.0


class _MaskedSign(torch.autograd.Function):
    """frozen * sign(latent) with the tanh (or literal) surrogate gradient, as one fused op: the
    same values and gradients as frozen * sign_ste(latent), with fewer passes over the weights
    (the element-wise work is a large share of a small model's local step)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(latent, frozen, neg_frozen, literal):
        return torch.where(latent >= 0, frozen, neg_frozen)

    @staticmethod
    def setup_context(ctx, inputs, output):
        latent, frozen, _, literal = inputs
        ctx.save_for_backward(latent, frozen)
        ctx.literal = literal

    @staticmethod
    def backward(ctx, grad):
        latent, frozen = ctx.saved_tensors
        t = latent if ctx.literal else torch.tanh(latent)
        # frozen * (1 - t^2) in one fused addcmul
        return grad * torch.addcmul(frozen, frozen * t, t, value=-1), None, None, None


def masked_sign(
    latent: torch.Tensor, frozen: torch.Tensor, surrogate: str = "tanh"
) -> torch.Tensor:
    """frozen * sign(latent) forward; gradient frozen * surrogate'(latent), none to frozen."""
    return _MaskedSign.apply(latent, frozen, -frozen, surrogate == "literal")


def quantise(latent: torch.Tensor, kind: str) -> torch.Tensor:
    """The mask values a latent stands for, without gradient: signs or {0, 1}."""
    return hard_sign(latent) if kind == "sign" else (latent > 0).to(latent.dtype)


def classifier_layer(model: nn.Module) -> str:
    """Module name of the output layer: the last Linear, which must map to model.num_classes."""
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    want = getattr(model, "num_classes", None)
    if not linears or (want is not None and linears[-1][1].out_features != want):
        raise FlkitError(
            f"model {getattr(model, 'flkit_name', type(model).__name__)!r} has no classifier "
            f"layer (a last nn.Linear with num_classes={want} outputs); a supermask method needs "
            "one: accepted models end in a Linear classifier, e.g. 'vgg9', 'mlp_har'"
        )
    return linears[-1][0]


def supermask_transform(
    frozen: Mapping[str, torch.Tensor],
    masks: Mapping[str, torch.Tensor] | None = None,
    kind: str = "sign",
    surrogate: str = "tanh",
    per_client: Mapping[str, torch.Tensor] | None = None,
) -> Callable:
    """param_transform for the engine: the parameter slots named in `frozen` hold latent scores and
    are replaced by frozen[name] * mask * q(latent); other parameters pass through unchanged.

    masks: one mask per name shared by every client; per_client: {name: Tensor[K, ...]} masks of
    the K clients of this engine call, picked by hook_args["clients"] (positions in that call)."""
    check_choice("supermask kind", kind, tuple(QUANTISERS))
    check_choice("surrogate", surrogate, SURROGATES)
    if masks is not None:  # shared masks fold into the frozen weights once
        frozen = {n: w0 * masks[n] if n in masks else w0 for n, w0 in frozen.items()}
    negative = {n: -w0 for n, w0 in frozen.items()}

    def transform(params, hook_args):
        out = dict(params)
        pick = None
        for n, w0 in frozen.items():
            eff = (
                _MaskedSign.apply(params[n], w0, negative[n], surrogate == "literal")
                if kind == "sign"
                else w0 * binary_ste(params[n])
            )
            if per_client is not None and n in per_client:
                if pick is None:
                    pick = torch.as_tensor(hook_args["clients"], device=eff.device)
                eff = eff * per_client[n][pick]
            out[n] = eff
        return out

    return transform


def scaled_grads(scales: Mapping[str, float]) -> Callable:
    """grad_transform giving tensor n the learning rate scales[n] * spec.lr (0 freezes it).

    Exact for SGD with momentum, no weight decay: the momentum buffer is linear in the gradient."""

    def transform(grads, params, hook_args):
        return {n: g * scales[n] if n in scales else g for n, g in grads.items()}

    return transform
