"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020)."""
from __future__ import annotations

from ..utils import check_range
from .base import Method, weighted_average
from .registry import register


@register
class FedAvg(Method):
    """Clients train from the global model; the server takes the data-size weighted average."""
    name = "fedavg"

    def aggregate(self, state, updates, rnd):
        return {**state, "model": weighted_average(updates.state, updates.weights)}


@register
class FedProx(FedAvg):
    """FedAvg plus the proximal term (mu/2)·||w - w_global||² in every client's local loss."""
    name = "fedprox"
    params = {"mu": 0.01}

    def check_params(self):
        check_range("mu", self.mu, 0)

    def local_hooks(self, starts):
        mu = self.mu

        def proximal(params, ctx):
            start = ctx["start"]
            return 0.5 * mu * sum(((p - start[n]) ** 2).flatten(1).sum(1) for n, p in params.items())
        return {"extra_loss": proximal}
