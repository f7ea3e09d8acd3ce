"""Pruning baselines that reconfigure masks from gradients: PruneFL and FedDST (as the FedDIP
authors' code runs them; shared machinery in :mod:`flkit.methods.pruning`).

``prunefl``  (Jiang et al. 2022) initial pruning on client 0 (``init_rounds`` local rounds, the mask
             recomputed every 5 of them and at the end from squared gradients at sparsity s0), then
             masked FL; every R rounds ((t+1) mod R == 0) the server averages the clients' squared
             gradients (one mini-batch each, at the client's final model) and keeps the largest
             ones at the cubic schedule's s_t (its ramp ends on s_p at the last
             reconfiguration inside the horizon).
``feddst``   (Bibikar et al. 2022) a random ERK mask at the target density from the start; clients
             keep their own masks; every R rounds ((t+1) mod R == 0) each participating client
             prunes d_t = (alpha/2)(1 + cos(pi t / T)) of its active weights per layer (smallest
             downloaded magnitudes) and regrows as many inactive ones with the largest squared
             mean gradient (at zero); the server averages and prunes every layer back to its ERK
             count by magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from ..engine import train_clients
from ..prune import (
    apply_mask,
    erk_densities,
    erk_mask,
    global_magnitude_mask,
    keep_counts,
    layerwise_magnitude_mask,
    mask_grads,
    mask_sparsity,
    masked,
    prune_and_regrow,
)
from ..state import broadcast_state
from ..utils import derive_seed, generator
from .base import ClientUpdates, weighted_average
from .hyperparameters import integer, real
from .pruning import HorizonParams, MaskState, PruningMethod, PruningState, ScheduleParams
from .registry import register

POSITION_BITS_PRUNEFL = 4  # the official code's cost of a downloaded mask position


def _masked_hooks(mask):
    return {"param_transform": masked(mask), "grad_transform": mask_grads(mask)}


@register
class PruneFL(PruningMethod):
    name = "prunefl"
    first_update = -1  # the initial pruning at s0, before round 1; then (t + 1) mod R == 0

    @dataclass(frozen=True)
    class Params(ScheduleParams):
        R: int = integer(20, 1)  # rounds between mask reconfigurations
        init_rounds: int = integer(5, 0)  # client 0's local rounds of initial pruning

    @dataclass
    class State(MaskState):
        official_init_down: float = 0.0  # official-formula bits of the initial mask broadcast

    def init_state(self, model_state):
        ctx = self.ctx
        state = broadcast_state(model_state, 1)
        mask = None
        for r in range(self.hp.init_rounds):
            hooks = _masked_hooks(mask) if mask else {}
            state = train_clients(
                ctx.model,
                state,
                ctx.x,
                ctx.y,
                [ctx.parts[0]],
                ctx.spec,
                [derive_seed(ctx.seed, "prunefl-init", r)],
                backend=ctx.backend,
                **hooks,
            ).state
            if (r + 1) % 5 == 0 or r == self.hp.init_rounds - 1:
                mask, state = self._mask_from_grads(state, self.s_0, r)
        if mask is None:
            mask, state = self._mask_from_grads(state, self.s_0, 0)
        model = {n: v[0] for n, v in state.items()}
        kept = sum(int(m.sum()) for m in mask.values())
        n = len(ctx.parts)
        init_down = n * (self.official_bits(self.s_0) + POSITION_BITS_PRUNEFL * kept)
        return self.State(model=model, mask=mask, official_init_down=init_down)

    def _mask_from_grads(self, stacked, sparsity, r):
        g2 = {n: v[0] ** 2 for n, v in self.client_grads(stacked, [0], -1 - r, full=False).items()}
        mask = global_magnitude_mask(g2, sparsity, scores=g2)
        return mask, apply_mask(stacked, mask)

    def client_update(self, state, clients, rnd):
        k, t = len(clients), rnd - 1
        mask = state.mask
        res = self.train(broadcast_state(state.model, k), clients, rnd, _masked_hooks(mask))
        bits = self.exact_bits(res.state, stacked=True)
        s = mask_sparsity(mask)
        up = k * self.official_bits(s)
        extra = {}
        if (t + 1) % self.hp.R == 0:
            extra["grad_sq"] = {
                n: g**2 for n, g in self.client_grads(res.state, clients, rnd, full=False).items()
            }
            dense_grad = 32 * sum(m.numel() for m in mask.values())
            bits = [b + dense_grad for b in bits]
            up += k * 32.0 * self.n_params
        extra["metrics"] = {"official_bits_up": up}
        return ClientUpdates(
            clients, res.state, res.samples.float(), res.train_loss, bits, extra=extra
        )

    def aggregate(self, state, updates, rnd):
        t, k = rnd - 1, len(updates.clients)
        s_t = self.target(t)
        avg = weighted_average(updates.state, updates.weights)
        mask = state.mask
        reconfig = "grad_sq" in updates.extra
        if reconfig:
            g2 = weighted_average(updates.extra["grad_sq"], updates.weights)
            mask = global_magnitude_mask(g2, s_t, scores=g2)
        model = apply_mask(avg, mask)
        s = mask_sparsity(mask)
        metrics = self._base_metrics(t, model, mask, s, k)
        metrics["sparsity_target"] = s_t
        metrics["reconfig"] = int(reconfig)
        if reconfig:
            metrics["official_bits_down"] += (
                k * POSITION_BITS_PRUNEFL * sum(int(m.sum()) for m in mask.values())
            )
        if t == 0:
            metrics["official_bits_down"] += state.official_init_down
        return replace(state, model=model, mask=mask, metrics=metrics)


@register
class FedDST(PruningMethod):
    name = "feddst"

    @dataclass(frozen=True)
    class Params(HorizonParams):
        R: int = integer(20, 1)  # rounds between prune-and-regrow steps
        alpha: float = real(0.5, 0.0, 1.0)  # largest fraction of active weights moved
        erk_power: float = real(1.0, 0.0)  # exponent of the ERK layer densities

    @dataclass
    class State(PruningState):
        erk: dict = field(default_factory=dict)  # the ERK mask every client starts from
        client_masks: dict = field(default_factory=dict)  # {client: its own mask}

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        # per-layer weight counts the server prunes back to: the ERK densities at s_p, the floors'
        # remainders handed out so that exactly round(s_p * n) weights are pruned
        n = sum(math.prod(s) for s in self.shapes.values())
        self.counts = keep_counts(
            self.shapes,
            erk_densities(self.shapes, 1.0 - self.s_p, self.hp.erk_power),
            total=n - round(self.s_p * n),
        )

    def init_state(self, model_state):
        density = 1.0 - self.s_p
        mask = erk_mask(
            self.shapes,
            density,
            generator(self.ctx.seed, "erk"),
            self.hp.erk_power,
            device=self.ctx.x.device,
            counts=self.counts,
        )
        return self.State(model=apply_mask(model_state, mask), erk=mask)

    def drop_fraction(self, t: int) -> float:
        """d_t = (alpha / 2) * (1 + cos(pi t / T))."""
        return self.hp.alpha / 2 * (1 + math.cos(math.pi * t / self.hp.horizon))

    def client_update(self, state, clients, rnd):
        k, t = len(clients), rnd - 1
        own = [state.client_masks.get(c, state.erk) for c in clients]
        masks = {n: torch.stack([m[n] for m in own]) for n in self.shapes}
        starts = apply_mask(broadcast_state(state.model, k), masks)
        res = self.train(starts, clients, rnd, _masked_hooks(masks))
        new_masks, moved = own, 0
        if (t + 1) % self.hp.R == 0:
            grads = self.client_grads(res.state, clients, rnd, full=True)
            frac = self.drop_fraction(t)
            new_masks = []
            for i in range(k):
                m, mv = prune_and_regrow(
                    own[i],
                    {n: starts[n][i] for n in self.shapes},
                    {n: grads[n][i] ** 2 for n in self.shapes},
                    frac,
                )
                new_masks.append(m)
                moved += sum(mv.values())
            stacked = {n: torch.stack([m[n] for m in new_masks]) for n in self.shapes}
            sent = apply_mask(res.state, stacked)
        else:
            sent = res.state
        metrics = {"official_bits_up": k * self.official_bits(self.s_p), "moved": moved}
        return ClientUpdates(
            clients,
            sent,
            res.samples.float(),
            res.train_loss,
            self.exact_bits(sent, stacked=True),
            extra={"metrics": metrics, "masks": dict(zip(clients, new_masks))},
        )

    def aggregate(self, state, updates, rnd):
        t, k = rnd - 1, len(updates.clients)
        avg = weighted_average(updates.state, updates.weights)
        mask = layerwise_magnitude_mask(self._prunable(avg), keep=self.counts)
        model = apply_mask(avg, mask)
        cm = {**state.client_masks, **updates.extra["masks"]}
        metrics = self._base_metrics(t, model, mask, self.s_p, k)
        metrics["official_bits_down"] = k * self.official_bits(self.s_p)
        if t == 0:
            metrics["official_bits_down"] += len(self.ctx.parts) * self.official_bits(self.s_p)
        return replace(state, model=model, client_masks=cm, metrics=metrics)
