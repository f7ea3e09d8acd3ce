"""Federated pruning (FedDIP paper family): FedDIP, FedDP, DPF, FedDIP+Prox, and the machinery
shared by the family (:class:`PruningMethod`). SNIP and PruneTrain are in
:mod:`flkit.methods.pruning_static`, PruneFL and FedDST in :mod:`flkit.methods.pruning_dst`.

``feddip``      dynamic pruning with error feedback: local training sees w * m, the SGD step updates
                the dense w with the gradient taken at w * m (a straight-through mask,
                :func:`flkit.prune.straight_through`), plus lambda_t * sum_z ||(w*m)_z||_2; every R
                rounds (t mod R == 0, t = round - 1) the server recomputes a global magnitude mask
                at the cubic schedule's s_t, whose ramp ends on s_p at the last update inside
                the horizon (:func:`flkit.prune.schedules.ramp_sparsity`); the round-0 mask is a
                random ERK mask at density 1 - s0.
``feddp``       FedDIP with lambda = 0.
``dpf``         FedDIP with s0 = 0 and lambda = 0 (no round-0 mask: dense first round).
``feddip_prox`` FedDIP plus (mu/2)||w - w_global||^2 against a frozen copy of the global model.

Options the paper leaves open: ``mask_order`` "code" (the new mask is computed from the average
already multiplied by the old mask: masks only shrink) or "dense" (from the dense average:
pruned weights whose error feedback grew large can come back); ``round0`` "server" (one seeded ERK
mask for everybody) or "client" (each client draws its own ERK mask in round 0).

Communication, both in the history: ``bits_up``/``bits_down`` (the run loop's bytes columns) count
exactly what a sparse message costs: per tensor the cheaper of dense float32 and float32 values plus
Golomb-coded positions (:func:`flkit.compress.message_size` "topk"/"exact"); ``official_bits_up``/
``official_bits_down`` follow the official code's formula 32 * (1 - s) * P per client (P = all
parameters, s as each method's code counts it), summed over the round's clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch.func import functional_call
from torch.nn import functional

from ..compress import DenseCodec, message_size
from ..prune import (
    apply_mask,
    erk_mask,
    global_magnitude_mask,
    incremental_lambda,
    information_loss,
    layer_l2_penalty,
    mask_sparsity,
    prunable_names,
    straight_through,
    zero_fraction,
)
from ..prune.schedules import LAMBDA_VARIANTS, check_landing, check_segments, ramp_sparsity
from ..state import broadcast_state
from ..utils import FlkitError, generator
from .base import ClientUpdates, Method, ServerState, weighted_average
from .fedavg import proximal_loss
from .hyperparameters import LearningRateDecay, anything, choice, integer, real
from .registry import register

MASK_ORDERS = ("code", "dense")
ROUND0_MASKS = ("server", "client")


def sparse_bits(t: torch.Tensor) -> int:
    """Exact bits of one tensor sent sparsely: the cheaper of dense float32 and float32 values of
    the non-zeros plus their Golomb-coded positions."""
    n = t.numel()
    nz = t.reshape(-1) != 0
    k = int(nz.sum())
    if k == 0:
        return 0
    dense = 32 * n
    if k == n:
        return dense
    return min(dense, message_size("topk", n, k, counter="exact", positions=nz.cpu()).bits)


@dataclass(frozen=True)
class PruningParams(LearningRateDecay):
    sparsity: float = real(0.9, 0.0, 1.0, high_open=True)  # final sparsity s_p
    prunable: list | None = anything(None)  # layer names; None: every Conv / Linear weight


@dataclass(frozen=True)
class HorizonParams(PruningParams):
    horizon: int | None = integer(None, 1, optional=True)  # rounds the schedules span (T)


@dataclass(frozen=True)
class ScheduleParams(HorizonParams):
    s0: float = real(0.5, 0.0, 1.0, high_open=True)  # initial sparsity of the cubic schedule


@dataclass
class PruningState(ServerState):
    metrics: dict = field(default_factory=dict)  # numbers of the latest round, for the history


@dataclass
class MaskState(PruningState):
    mask: dict | None = None  # {name: bool Tensor} the global mask; None: no mask yet


def _sum_losses(fns):
    return lambda params, hook_args: sum(f(params, hook_args) for f in fns)


class PruningMethod(Method):
    """Shared parts: hyperparameter checks, schedules, training with hooks and the decayed
    learning rate, client gradients, and both communication accountings."""

    Params = PruningParams
    State = PruningState
    #: round index of the first mask update on the schedule (-1: before round 1)
    first_update = 0

    def update_every(self) -> int:
        """Rounds between the mask updates that follow the schedule (``R``, else every round)."""
        return int(getattr(self.hp, "R", 1))

    def check_params(self):
        hp = self.hp
        if isinstance(hp, HorizonParams) and hp.horizon is None:
            raise FlkitError(
                f"method {self.name!r} needs horizon=T, the number of rounds its "
                "schedules span (usually RunConfig.rounds); accepted: an integer >= 1"
            )
        self.s_p = hp.sparsity
        self.s_0 = hp.s0 if isinstance(hp, ScheduleParams) else self.s_p
        if self.s_0 > self.s_p:
            raise FlkitError(
                f"s0={self.s_0!r} exceeds sparsity={self.s_p!r}; accepted: s0 <= sparsity"
            )
        model = self.ctx.model
        self.prune_names = prunable_names(model, hp.prunable)
        self.shapes = {
            n: tuple(p.shape) for n, p in model.named_parameters() if n in self.prune_names
        }
        self.n_params = sum(p.numel() for p in model.parameters())
        if isinstance(hp, ScheduleParams):
            check_landing(hp.horizon, self.update_every(), self.s_0, self.s_p, self.first_update)

    # -- schedules
    def target(self, t: int) -> float:
        """s_t of the cubic schedule (methods whose Params are ScheduleParams), ramped so that the
        last mask update inside the horizon lands on s_p
        (:func:`flkit.prune.schedules.ramp_sparsity`)."""
        horizon = self.hp.horizon
        if t >= horizon:
            raise FlkitError(
                f"round {t + 1} is past horizon={horizon}; accepted: horizon >= rounds"
            )
        return ramp_sparsity(t, horizon, self.update_every(), self.s_0, self.s_p, self.first_update)

    def client_grads(self, stacked: dict, clients, rnd, full: bool) -> dict:
        """Each client's loss gradient at its (masked) model: on all its data (full=True, the mean
        gradient) or on one seeded mini-batch of the local batch size. {name: [K, ...]}."""
        ctx, names = self.ctx, self.prune_names
        out = {n: [] for n in names}
        for i, c in enumerate(clients):
            ix = ctx.parts[c]
            if not full:
                perm = torch.randperm(len(ix), generator=generator(ctx.seed, "grad-batch", rnd, c))
                ix = ix[perm[: ctx.spec.batch_size].to(ix.device)]
            leaves = {
                n: v[i].detach().clone().requires_grad_(n in names) for n, v in stacked.items()
            }
            total = [torch.zeros_like(leaves[n]) for n in names]
            for lo in range(0, len(ix), 4096):
                b = ix[lo : lo + 4096]
                loss = functional.cross_entropy(
                    functional_call(ctx.model, leaves, (ctx.x[b],)), ctx.y[b], reduction="sum"
                ) / len(ix)
                for acc, g in zip(total, torch.autograd.grad(loss, [leaves[n] for n in names])):
                    acc.add_(g)
            for n, g in zip(names, total):
                out[n].append(g)
        return {n: torch.stack(v) for n, v in out.items()}

    # -- communication
    def official_bits(self, sparsity: float) -> float:
        """The official code's cost of one model at `sparsity`: 32 * (1 - s) * P bits."""
        return 32.0 * (1.0 - sparsity) * self.n_params

    def exact_bits(self, tensors: dict, stacked: bool) -> list[int] | int:
        """Exact sparse message bits (prunable tensors sparse, the rest dense float32)."""
        names = self.prune_names
        rest = {n: v for n, v in tensors.items() if n not in names}
        if not stacked:
            dense = DenseCodec().encode(rest)[1] if rest else 0
            return int(dense + sum(sparse_bits(tensors[n]) for n in names))
        k = next(iter(tensors.values())).shape[0]
        dense = list(DenseCodec().encode(rest, stacked=True)[1]) if rest else [0] * k
        return [int(dense[i] + sum(sparse_bits(tensors[n][i]) for n in names)) for i in range(k)]

    def downlink_bits(self, state, clients):
        return [self.exact_bits(state.model, stacked=False)] * len(clients)

    def round_metrics(self, state, updates):
        return {**state.metrics, **updates.extra.get("metrics", {})}

    def _prunable(self, tensors):
        return {n: tensors[n] for n in self.prune_names}

    def _base_metrics(self, t, model, mask, s_t, k):
        return {
            "sparsity_target": s_t,
            "lr": self.local_spec(t + 1).lr,
            "mask_sparsity": mask_sparsity(mask) if mask else 0.0,
            "model_sparsity": zero_fraction(model, self.prune_names),
            "official_bits_down": k * self.official_bits(s_t),
        }


# --------------------------------------------------------------------------- FedDIP family
@register
class FedDIP(PruningMethod):
    """FedDIP (Long et al. 2023): dynamic pruning with error feedback + incremental
    regularisation."""

    name = "feddip"

    @dataclass(frozen=True)
    class Params(ScheduleParams):
        R: int = integer(5, 1)  # rounds between mask reconfigurations
        lambda_max: float = real(1e-3, 0.0)  # largest regularisation coefficient
        Q: int = integer(20, 1)  # segments of the incremental lambda schedule
        lambda_variant: str = choice("code", LAMBDA_VARIANTS)
        mask_order: str = choice("code", MASK_ORDERS)
        round0: str = choice("server", ROUND0_MASKS)
        erk_power: float = real(1.0, 0.0)  # exponent of the ERK layer densities

    @dataclass
    class State(MaskState):
        erk: dict | None = None  # the round-0 ERK mask the server draws (round0 "server")

    def check_params(self):
        super().check_params()
        if self.hp.lambda_max:
            check_segments(self.hp.horizon, self.hp.Q)

    def proximal_mu(self) -> float:
        """Coefficient of the proximal term (FedDIP has none)."""
        return 0.0

    def lam(self, t: int) -> float:
        """lambda_t of the incremental regularisation schedule (0 when lambda_max is 0)."""
        hp = self.hp
        if not hp.lambda_max:
            return 0.0
        return incremental_lambda(t, hp.horizon, hp.lambda_max, hp.Q, hp.lambda_variant)

    def init_state(self, model_state):
        erk = None
        if self.s_0 > 0 and self.hp.round0 == "server":
            erk = erk_mask(
                self.shapes,
                1.0 - self.s_0,
                generator(self.ctx.seed, "erk"),
                self.hp.erk_power,
                device=self.ctx.x.device,
            )
        return self.State(model=model_state, erk=erk)

    def _training_mask(self, state, clients):
        if state.mask is not None:
            return state.mask
        if self.s_0 == 0:
            return None
        if self.hp.round0 == "server":
            return state.erk
        per = [
            erk_mask(
                self.shapes,
                1.0 - self.s_0,
                generator(self.ctx.seed, "erk", c),
                self.hp.erk_power,
                device=self.ctx.x.device,
            )
            for c in clients
        ]
        return {n: torch.stack([m[n] for m in per]) for n in self.shapes}

    def client_update(self, state, clients, rnd):
        k = len(clients)
        mask, lam = self._training_mask(state, clients), self.lam(rnd - 1)
        hooks, losses = {}, []
        if mask is not None:
            hooks["param_transform"] = straight_through(mask)
        if lam > 0:
            losses.append(layer_l2_penalty(lam, mask, self.prune_names))
        if self.proximal_mu() > 0:
            losses.append(proximal_loss(self.proximal_mu()))
        if losses:
            hooks["extra_loss"] = _sum_losses(losses)
        starts = broadcast_state(state.model, k)
        res = self.train(starts, clients, rnd, hooks)
        # in the code order the server keeps only w * m, so that is all a client needs to send
        keep = state.mask if self.hp.mask_order == "code" else None
        sent = apply_mask(res.state, keep) if keep is not None else res.state
        z = float(zero_fraction(res.state, self.prune_names, stacked=True).mean())
        metrics = {
            "lambda": lam,
            "official_bits_up": k * self.official_bits(z),
            "upload_zero_fraction": z,
        }
        return ClientUpdates(
            clients,
            res.state,
            res.samples.float(),
            res.train_loss,
            self.exact_bits(sent, stacked=True),
            extra={"metrics": metrics},
        )

    def aggregate(self, state, updates, rnd):
        t, k = rnd - 1, len(updates.clients)
        s_t = self.target(t)
        avg = weighted_average(updates.state, updates.weights)
        old = state.mask
        info, regrown = float("nan"), 0
        if t % self.hp.R == 0:
            pre = (
                apply_mask(avg, old) if (self.hp.mask_order == "code" and old is not None) else avg
            )
            new = global_magnitude_mask(self._prunable(pre), s_t)
            info = information_loss(self._prunable(pre), new)
            if old is not None:
                regrown = int(sum(int((new[n] & ~old[n]).sum()) for n in new))
        else:
            new = old
        model = apply_mask(avg, new)
        metrics = self._base_metrics(t, model, new, s_t, k)
        metrics.update(info_loss=info, reconfig=int(t % self.hp.R == 0), mask_regrown=regrown)
        return replace(state, model=model, mask=new, metrics=metrics)


@register
class FedDP(FedDIP):
    """FedDIP without regularisation (lambda = 0)."""

    name = "feddp"

    @dataclass(frozen=True)
    class Params(FedDIP.Params):
        lambda_max: float = real(0.0, 0.0)


@register
class DPF(FedDIP):
    """Dynamic pruning with feedback (Lin et al. 2020) in FL: FedDIP with s0 = 0 and lambda = 0."""

    name = "dpf"

    @dataclass(frozen=True)
    class Params(FedDIP.Params):
        lambda_max: float = real(0.0, 0.0)
        s0: float = real(0.0, 0.0, 1.0, high_open=True)


@register
class FedDIPProx(FedDIP):
    """FedDIP plus the FedProx proximal term (mu/2)||w - w_global||^2 on the dense local weights,
    against the frozen global model the round started from (non-zero after the first step)."""

    name = "feddip_prox"

    @dataclass(frozen=True)
    class Params(FedDIP.Params):
        mu: float = real(0.01, 0.0)  # proximal coefficient

    def proximal_mu(self) -> float:
        return self.hp.mu
