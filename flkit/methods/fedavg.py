"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020)."""

from __future__ import annotations

from ..utils import check_range
from .base import Method, weighted_average
from .registry import register


def check_lr_decay(decay) -> None:
    """Per-round learning-rate decay factor in (0, 1] (1 = constant learning rate)."""
    check_range("lr_decay", decay, 0.0, 1.0, low_open=True)


def proximal_loss(mu: float):
    """extra_loss (mu/2)·||w - w_start||² per client, against the frozen starting (global) model
    the engine passes as ctx["start"] (a separate tensor, so the term is non-zero after a step)."""

    def proximal(params, ctx):
        start = ctx["start"]
        return 0.5 * mu * sum(((p - start[n]) ** 2).flatten(1).sum(1) for n, p in params.items())

    return proximal


@register
class FedAvg(Method):
    """Clients train from the global model; the server takes the data-size weighted average.
    lr_decay: learning rate lr * lr_decay^(round-1) (1 = constant)."""

    name = "fedavg"
    params = {"lr_decay": 1.0}

    def check_params(self):
        check_lr_decay(self.hp.get("lr_decay", 1.0))

    def aggregate(self, state, updates, rnd):
        return {**state, "model": weighted_average(updates.state, updates.weights)}


@register
class FedProx(FedAvg):
    """FedAvg plus the proximal term (mu/2)·||w - w_global||² in every client's local loss."""

    name = "fedprox"
    params = {"mu": 0.01, "lr_decay": 1.0}

    def check_params(self):
        check_range("mu", self.mu, 0)
        check_lr_decay(self.hp.get("lr_decay", 1.0))

    def local_hooks(self, starts):
        return {"extra_loss": proximal_loss(self.mu)}
