"""HideNseek (Vallapuram et al. 2022) and the whole-model baselines it is compared with.

hidenseek     server prunes whole channels / nodes once at initialisation (data-free SynFlow
              saliency, flkit.prune.synflow_group_mask); clients learn a global sign supermask
              over the frozen weights (latent scores, straight-through sign) and keep a personal
              real-valued classifier and their own BatchNorm statistics; the server aggregates the
              uploaded signs with arctanh(clip(weighted mean sign)).
fedavg_split  FedAvg scored like the others, on each client's local test split.
bnnavg        FedAvg of a binary network: weights and hidden activations binarised by sign, real
              latent weights trained through the hard-tanh straight-through estimator.

Message sizes follow the paper's PyTorch accounting: 1 byte per sign / binary entry, 4 bytes per
float; the one-time download of the frozen weights (or their seed) and of the structural mask is
not a per-round cost (see `one_time_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..models.binary import binarize_activations
from ..prune import (
    classifier_layer,
    default_prunable,
    hard_sign,
    resolve_layers,
    scaled_grads,
    structural_masks,
    supermask_transform,
    synflow_group_mask,
    weight_layers,
)
from ..prune.supermask import NORMALIZE, SURROGATES, WRITEBACKS, bnn_sign_ste, vote_to_score
from ..prune.synflow import GROUP_SCORES
from ..state import broadcast_state
from ..utils import FlkitError, check_range
from .base import ServerState
from .fedavg import FedAvg
from .hyperparameters import anything, choice, integer, real
from .personal import (
    SCORE_CLIENTS,
    LocalSplitMethod,
    LocalSplitParams,
    bits_updates,
    client_copies,
    scatter_rows,
    uniform_latents,
)
from .registry import register

#: a latent whose surrogate derivative is below this counts as saturated
SATURATED = 1e-3


def arctanh_aggregate(
    signs: torch.Tensor,
    weights: torch.Tensor,
    eps: float = 1e-6,
    total: float | None = None,
    writeback: str = "inverse",
) -> torch.Tensor:
    """HideNseek's server step: arctanh(clip(sum_k (n_k / n) s_k, -1 + eps, 1 - eps)).

    signs: [K, ...] in {-1, +1}; weights: [K] sample counts, normalised inside by n = their sum
    (the sampled clients) or by `total` (e.g. all clients' samples, the literal reading).
    Clipping keeps unanimous votes finite: |result| <= arctanh(1 - eps) (7.25 for eps = 1e-6).
    writeback="linear" returns the mean vote itself (the tangent of arctanh at 0), see
    ``flkit.prune.supermask.WRITEBACKS``."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise FlkitError(f"eps={eps!r} must be a number in (0, 1)")
    check_range("eps", eps, 0, 1, low_open=True, high_open=True)
    if signs.shape[0] != weights.shape[0]:
        raise FlkitError(
            f"{signs.shape[0]} sign tensors but {weights.shape[0]} weights; give one per client"
        )
    w = weights.to(torch.float64)
    n = w.sum() if total is None else torch.as_tensor(float(total), dtype=torch.float64)
    if not bool(n > 0):
        raise FlkitError("the aggregation weights sum to 0; give positive sample counts")
    p = (w / n).to(signs.device).view(-1, *[1] * (signs.dim() - 1))
    mean = (p * signs.to(torch.float64)).sum(0)
    out = vote_to_score(mean, "sign", writeback, eps)
    return out.to(signs.dtype if signs.is_floating_point() else torch.float32)


@dataclass(frozen=True)
class FrozenParams(LocalSplitParams):
    keep_ratio: float = real(0.8, 0.0, 1.0, low_open=True)  # fraction kept by the pruning
    prune_layers: list | None = anything(None)  # layer names; None: the model's default
    eps: float = real(1e-6, 0.0, 1.0, low_open=True, high_open=True)  # clip of the mean vote
    writeback: str = choice("inverse", WRITEBACKS)  # mean vote -> latent score (supermask.py)
    score_clients: str = choice("trained", SCORE_CLIENTS)  # who is scored (personal.py)


class FrozenFeatures(LocalSplitMethod):
    """Names shared by the methods that freeze weights: the classifier (last Linear), the feature
    extractor's weights (every other Conv2d / Linear weight) and the prunable layers."""

    Params = FrozenParams

    def _layout(self):
        model = self.ctx.model
        self.head = classifier_layer(model)
        self.head_names = [n for n, _ in model.named_parameters() if n.startswith(self.head + ".")]
        self.feat = [f"{n}.weight" for n in weight_layers(model) if n != self.head]
        if not self.feat:
            name = getattr(model, "flkit_name", type(model).__name__)
            raise FlkitError(
                f"{self.name} on model {name!r}: its only Conv2d / Linear layer is the classifier "
                f"{self.head!r}, so there is no weight layer to mask; accepted: a model with "
                "Conv2d / Linear layers before its classifier, e.g. 'vgg9', 'mlp_har', "
                "'cnn_mnist' (not 'logreg' or 'lstm_shakespeare')"
            )
        chosen = self.hp.prune_layers
        layers = chosen if chosen is not None else default_prunable(model)
        self.layers = resolve_layers(model, layers)
        self.w0 = {n: model.state_dict()[n].detach().clone() for n in self.feat}

    def check_params(self):
        if self.ctx.spec.weight_decay:
            raise FlkitError(
                f"weight_decay={self.ctx.spec.weight_decay!r}: per-tensor learning rates are "
                "gradient scalings, exact only for plain SGD; accepted: 0"
            )


@register
class HideNseek(FrozenFeatures):
    """RunConfig.lr: the latent scores' learning rate (paper: 10); head_lr: the classifier's."""

    name = "hidenseek"

    @dataclass(frozen=True)
    class Params(FrozenParams):
        prune_iterations: int = integer(100, 1)  # SynFlow iterations
        group_score: str = choice("l2", GROUP_SCORES)  # a channel's score from its weights'
        # sign votes weighted by n_k / n with n over all clients' samples (eq. 1, the literal
        # reading: the weights sum to about the sampled share, so |latent| stays small) or over
        # the sampled clients' ("sampled": unanimous votes land at the clip)
        normalize: str = choice("all", NORMALIZE)
        head_lr: float = real(0.01, 0.0, low_open=True)  # the classifier's learning rate
        surrogate: str = choice("tanh", SURROGATES)  # gradient of the sign

    @dataclass
    class State(ServerState):
        latent: dict = field(default_factory=dict)  # {name: Tensor} the global latent scores
        client: dict = field(default_factory=dict)  # {name: Tensor[N, ...]} client-held tensors
        trained: torch.Tensor | None = None  # [N] bool: the client has trained its head

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        self._layout()
        model = ctx.model
        shape = tuple(ctx.x.shape[1:])
        self.group_keep = synflow_group_mask(
            model,
            shape,
            self.hp.keep_ratio,
            self.layers,
            self.hp.prune_iterations,
            self.hp.group_score,
        )
        masks = structural_masks(model, self.group_keep, shape)
        self.masks = {n: masks[n].to(self.w0[n].dtype) for n in self.feat if n in masks}
        self.kept = {
            n: int(self.masks[n].sum()) if n in self.masks else self.w0[n].numel()
            for n in self.feat
        }
        self.sign_entries = sum(self.kept.values())
        self.client_held = self.head_names + self.buffer_names
        scale = self.hp.head_lr / ctx.spec.lr
        self.grad_scales = {
            n: (scale if n in self.head_names else 0.0)
            for n in self.param_names
            if n not in self.feat
        }

    def weight_fraction(self) -> float:
        """Fraction of the pruned layers' weights that survive server pruning."""
        names = [f"{n}.weight" for n in self.layers]
        return sum(self.kept[n] for n in names) / sum(self.w0[n].numel() for n in names)

    def one_time_bytes(self) -> dict:
        """Not per round: the frozen weights as floats (or only a seed) and the structural mask."""
        dense = sum(p.numel() for p in self.ctx.model.parameters())
        return {
            "weights_float": 4 * dense,
            "weights_seed": 8,
            "structural_mask": sum(k.numel() for k in self.group_keep.values()),
        }

    # -- state
    def _global_model(self, base: dict, latent: dict) -> dict:
        out = dict(base)
        for n in self.feat:
            out[n] = self.w0[n] * hard_sign(latent[n]) * self.masks.get(n, 1.0)
        return out

    def init_state(self, model_state):
        latent = uniform_latents(model_state, self.feat, self.ctx.seed)
        n = len(self.ctx.parts)
        return self.State(
            model=self._global_model(model_state, latent),
            latent=latent,
            client=client_copies(model_state, self.client_held, n),
            trained=torch.zeros(n, dtype=torch.bool, device=self.ctx.x.device),
        )

    def trained_clients(self, state):
        return state.trained

    def global_masks(self, state):
        return {
            n: hard_sign(state.latent[n])[self.masks[n] > 0]
            if n in self.masks
            else hard_sign(state.latent[n])
            for n in self.feat
        }

    # -- client side
    def local_hooks(self, starts):
        return {
            "param_transform": supermask_transform(self.w0, self.masks, "sign", self.hp.surrogate),
            "grad_transform": scaled_grads(self.grad_scales),
        }

    def client_update(self, state, clients, rnd):
        k = len(clients)
        idx = torch.as_tensor(clients, device=self.ctx.x.device)
        starts = broadcast_state({**state.model, **state.latent}, k)
        starts.update({n: v[idx].clone() for n, v in state.client.items()})
        res = self.train(starts, clients, rnd)
        signs = {n: hard_sign(res.state[n]) for n in self.feat}
        held = scatter_rows(state.client, clients, {n: res.state[n] for n in self.client_held})
        trained = state.trained.clone()
        trained[list(clients)] = True
        return bits_updates(
            clients,
            signs,
            self.client_sizes(clients),
            res.train_loss,
            8 * self.sign_entries,
            client=held,
            trained=trained,
        )

    # -- server side
    def aggregate(self, state, updates, rnd):
        total = float(self.sizes.sum()) if self.hp.normalize == "all" else None
        latent = {
            n: arctanh_aggregate(
                updates.state[n], updates.weights, self.hp.eps, total, self.hp.writeback
            )
            for n in self.feat
        }
        # what clients hold is stored back for them, never averaged or broadcast
        return replace(
            state,
            latent=latent,
            model=self._global_model(state.model, latent),
            client=updates.extra["client"],
            trained=updates.extra["trained"],
        )

    def downlink_bits(self, state, clients):
        return [8 * self.sign_entries] * len(clients)

    def round_metrics(self, state, updates):
        """saturated: share of the unpruned latents whose surrogate derivative 1 - tanh^2 is
        below 1e-3 (|latent| > 3.8): a local update of ordinary size cannot flip them."""
        live = torch.cat(
            [
                (state.latent[n][self.masks[n] > 0] if n in self.masks else state.latent[n])
                .abs()
                .flatten()
                for n in self.feat
            ]
        )
        return {"saturated": float((1 - torch.tanh(live) ** 2).lt(SATURATED).float().mean())}

    def client_models(self, state):
        for k in range(len(self.test_parts)):
            yield k, {**state.model, **{n: v[k] for n, v in state.client.items()}}


@register
class FedAvgSplit(FedAvg, LocalSplitMethod):
    """FedAvg of the whole model (an upper bound), scored on the clients' local test splits."""

    name = "fedavg_split"
    Params = LocalSplitParams

    def client_update(self, state, clients, rnd):
        up = super().client_update(state, clients, rnd)
        up.weights = self.client_sizes(clients)
        up.bits_up = [32 * self._n_params()] * len(clients)
        return up

    def _n_params(self):
        return sum(p.numel() for p in self.ctx.model.parameters())

    def downlink_bits(self, state, clients):
        return [32 * self._n_params()] * len(clients)


@register
class BNNAvg(FedAvgSplit):
    """Latent real weights, binarised (times a fixed per-layer scale, mean |w0|) when used;
    hidden activations binarised by sign; clients upload signs, the server's sample-weighted sum
    of them, over all clients' samples by default (`normalize`), is the next latent weights.
    Real: BN parameters, biases; 1 byte per parameter. RunConfig.lr: the latent weights'
    learning rate; `real_lr`: the real-valued parameters' (None: the same). The server rewrites
    the latents within the sampled share of 0 every round, but nothing bounds the real-valued
    parameters, so a latent learning rate large enough to flip signs can make them diverge."""

    name = "bnnavg"

    @dataclass(frozen=True)
    class Params(LocalSplitParams):
        # the signs' weights n_k / n, n over all clients' samples (eq. 1, as HideNseek): latents
        # within about the sampled share of 0, which a local update can cross; "sampled": the
        # plain mean vote, +-1 wherever the sampled clients agree
        normalize: str = choice("all", NORMALIZE)
        # learning rate of the real-valued parameters (BatchNorm affine, biases); None: lr
        real_lr: float | None = real(None, 0.0, low_open=True, optional=True)

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        classifier_layer(ctx.model)
        ctx.model = binarize_activations(ctx.model)
        sd = ctx.model.state_dict()
        self.bin = [f"{n}.weight" for n in weight_layers(ctx.model)]
        self.scale = {n: sd[n].abs().mean() for n in self.bin}
        real_names = [n for n, _ in ctx.model.named_parameters() if n not in self.scale]
        self.grad_scales = (
            {}
            if self.hp.real_lr is None
            else {n: self.hp.real_lr / ctx.spec.lr for n in real_names}
        )

    def check_params(self):
        super().check_params()
        if self.hp.real_lr is not None and self.ctx.spec.weight_decay:
            raise FlkitError(
                f"weight_decay={self.ctx.spec.weight_decay!r} with real_lr="
                f"{self.hp.real_lr!r}: a separate learning rate is a gradient scaling, exact "
                "only for plain SGD; accepted: weight_decay 0, or real_lr None"
            )

    def local_hooks(self, starts):
        scale = self.scale

        def binarise(params, hook_args):
            return {**params, **{n: bnn_sign_ste(params[n]) * scale[n] for n in scale}}

        hooks = {"param_transform": binarise}
        if self.grad_scales:
            hooks["grad_transform"] = scaled_grads(self.grad_scales)
        return hooks

    def client_update(self, state, clients, rnd):
        up = super().client_update(state, clients, rnd)
        up.state = {**up.state, **{n: hard_sign(up.state[n]) for n in self.bin}}
        up.bits_up = [8 * self._n_params()] * len(clients)
        return up

    def downlink_bits(self, state, clients):
        return [8 * self._n_params()] * len(clients)

    def aggregate(self, state, updates, rnd):
        new = super().aggregate(state, updates, rnd)
        if self.hp.normalize == "sampled":
            return new
        share = updates.weights.sum().to(torch.float64) / self.sizes.sum().to(torch.float64)
        scaled = {n: (new.model[n] * share).to(new.model[n].dtype) for n in self.bin}
        return replace(new, model={**new.model, **scaled})

    def global_masks(self, state):
        return {n: hard_sign(state.model[n]) for n in self.bin}

    def client_models(self, state):
        model = {
            **state.model,
            **{n: hard_sign(state.model[n]) * self.scale[n] for n in self.bin},
        }
        for k in range(len(self.test_parts)):
            yield k, model


def train_once(method, starts, clients, rnd, hooks, spec, stream):
    """One extra local training call (e.g. FedMask's pruning epoch) with its own batch seeds."""
    return method.train(starts, clients, rnd, hooks, spec=spec, stream=stream)


__all__ = [
    "arctanh_aggregate",
    "HideNseek",
    "FedAvgSplit",
    "BNNAvg",
]
