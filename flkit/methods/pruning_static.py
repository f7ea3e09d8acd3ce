"""The FedDIP paper's pruning baselines that carry no error feedback or regrowth between rounds:
SNIP (one mask, fixed before training) and PruneTrain (magnitude pruning at the cubic schedule's
s_t every round). Shared machinery in :mod:`flkit.methods.pruning`.

``snip``        one-shot SNIP mask before training, fixed; masked local training.
``prunetrain``  the FedDIP authors' FL adaptation of PruneTrain (see :class:`PruneTrain`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..prune import (
    apply_mask,
    global_magnitude_mask,
    layer_l2_penalty,
    mask_grads,
    mask_sparsity,
    masked,
    snip_mask,
    snip_scores,
    zero_fraction,
)
from ..state import broadcast_state
from ..utils import FlkitError, generator
from .base import ClientUpdates, weighted_average
from .hyperparameters import real
from .pruning import MaskState, PruningMethod, ScheduleParams
from .registry import register


# --------------------------------------------------------------------------- SNIP
@register
class SNIP(PruningMethod):
    """SNIP (Lee et al. 2019): one mini-batch of client 0 at the initial weights scores every
    connection by |w * dL/dw|; the top (1 - sparsity) share is kept for the whole run (masked
    training: pruned weights stay exactly zero)."""

    name = "snip"
    State = MaskState

    def init_state(self, model_state):
        ctx = self.ctx
        ix = ctx.parts[0]
        perm = torch.randperm(len(ix), generator=generator(ctx.seed, "snip-batch"))
        ix = ix[perm[: ctx.spec.batch_size].to(ix.device)]
        scores = snip_scores(ctx.model, model_state, ctx.x[ix], ctx.y[ix], self.prune_names)
        mask = snip_mask(scores, self.s_p)
        return self.State(model=apply_mask(model_state, mask), mask=mask)

    def client_update(self, state, clients, rnd):
        mask = state.mask
        hooks = {"param_transform": masked(mask), "grad_transform": mask_grads(mask)}
        res = self.train(broadcast_state(state.model, len(clients)), clients, rnd, hooks)
        s = mask_sparsity(mask)
        metrics = {"official_bits_up": len(clients) * self.official_bits(s)}
        return ClientUpdates(
            clients,
            res.state,
            res.samples.float(),
            res.train_loss,
            self.exact_bits(res.state, stacked=True),
            extra={"metrics": metrics},
        )

    def aggregate(self, state, updates, rnd):
        mask = state.mask
        model = apply_mask(weighted_average(updates.state, updates.weights), mask)
        s = mask_sparsity(mask)
        metrics = self._base_metrics(rnd - 1, model, mask, s, len(updates.clients))
        return replace(state, model=model, metrics=metrics)


# --------------------------------------------------------------------------- PruneTrain
@register
class PruneTrain(PruningMethod):
    """PruneTrain as the FedDIP authors adapt it to FL: every client magnitude-prunes the
    downloaded model globally at s_t (all prunable layers), trains with CE + coef * sum of the
    unsquared norms of the prunable layers except the first and last (mask not enforced), then
    prunes again at s_t excluding the first and last layers; the server averages and prunes the
    global model the same way. s_t follows the cubic schedule from s0."""

    name = "prunetrain"

    @dataclass(frozen=True)
    class Params(ScheduleParams):
        coef: float = real(0.01, 0.0)  # weight of the layer-norm penalty

    def check_params(self):
        super().check_params()
        if len(self.prune_names) < 3:
            raise FlkitError(
                f"prunetrain needs >= 3 prunable layers (first and last are kept out "
                f"of the penalty), got {self.prune_names}"
            )
        self.inner = self.prune_names[1:-1]

    def client_update(self, state, clients, rnd):
        k, s_t = len(clients), self.target(rnd - 1)
        start = apply_mask(state.model, global_magnitude_mask(self._prunable(state.model), s_t))
        hooks = {"extra_loss": layer_l2_penalty(self.hp.coef, None, self.inner)}
        res = self.train(broadcast_state(start, k), clients, rnd, hooks)
        local = global_magnitude_mask({n: res.state[n] for n in self.inner}, s_t, stacked=True)
        sent = apply_mask(res.state, local)
        z = float(zero_fraction(sent, self.prune_names, stacked=True).mean())
        metrics = {"official_bits_up": k * self.official_bits(z), "upload_zero_fraction": z}
        return ClientUpdates(
            clients,
            sent,
            res.samples.float(),
            res.train_loss,
            self.exact_bits(sent, stacked=True),
            extra={"metrics": metrics},
        )

    def aggregate(self, state, updates, rnd):
        s_t = self.target(rnd - 1)
        avg = weighted_average(updates.state, updates.weights)
        mask = global_magnitude_mask({n: avg[n] for n in self.inner}, s_t)
        model = apply_mask(avg, mask)
        metrics = self._base_metrics(rnd - 1, model, mask, s_t, len(updates.clients))
        return replace(state, model=model, metrics=metrics)
