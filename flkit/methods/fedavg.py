"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .base import Method, weighted_average
from .hyperparameters import LearningRateDecay, real
from .registry import register


def proximal_loss(mu: float):
    """extra_loss (mu/2)·||w - w_start||² per client, against the frozen starting (global) model
    the engine passes as hook_args["start"] (a separate tensor, so the term is non-zero after a
    step)."""

    def proximal(params, hook_args):
        start = hook_args["start"]
        return 0.5 * mu * sum(((p - start[n]) ** 2).flatten(1).sum(1) for n, p in params.items())

    return proximal


@register
class FedAvg(Method):
    """Clients train from the global model; the server takes the data-size weighted average.
    lr_decay: learning rate lr * lr_decay^(round-1) (1 = constant)."""

    name = "fedavg"

    Params = LearningRateDecay

    def aggregate(self, state, updates, rnd):
        return replace(state, model=weighted_average(updates.state, updates.weights))


@register
class FedProx(FedAvg):
    """FedAvg plus the proximal term (mu/2)·||w - w_global||² in every client's local loss."""

    name = "fedprox"

    @dataclass(frozen=True)
    class Params(FedAvg.Params):
        mu: float = real(0.01, 0.0)  # proximal coefficient

    def local_hooks(self, starts):
        return {"extra_loss": proximal_loss(self.hp.mu)}
