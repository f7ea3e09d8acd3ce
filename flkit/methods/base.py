"""The pattern every method follows: a client update and a server aggregation around a state.

A method is a subclass of `Method` that declares its hyperparameters (`Params`, a frozen dataclass,
see flkit.methods.hyperparameters), what its server keeps between rounds (`State`, a dataclass with
the global model in `model`), and overrides a few hooks:

    class FedAvgM(FedAvg):                          # server momentum in a dozen lines
        name = "fedavgm"

        @dataclass(frozen=True)
        class Params(FedAvg.Params):
            beta: float = real(0.9, 0.0, 1.0, high_open=True)

        @dataclass
        class State(ServerState):
            buf: dict | None = None                 # momentum buffer, none before round 1

        def aggregate(self, state, up, rnd):
            avg = weighted_average(up.state, up.weights)
            delta = {n: state.model[n] - avg[n] for n in self.param_names}
            buf = delta if state.buf is None else {
                n: self.hp.beta * state.buf[n] + delta[n] for n in delta}
            model = {**avg, **{n: state.model[n] - buf[n] for n in buf}}
            return replace(state, model=model, buf=buf)

The state holds tensors and plain containers only, so it checkpoints with torch.save and resumes
exactly.

One round is one call, `Method.round(state, clients, rnd) -> (state, RoundLog)`; the run loop in
flkit.experiment only selects clients (`select_clients`), calls `round`, and evaluates
(`evaluate`). A method overrides the hooks `round` composes, or one of the three calls themselves:
a method whose participation is not uniform sampling overrides `select_clients`; one whose model is
personalised per client overrides `evaluate`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from ..compress import Codec, DenseCodec
from ..engine import LocalSpec, evaluate, train_clients
from ..state import broadcast_state, param_names
from ..utils import FlkitError, derive_seed, numpy_rng
from .hyperparameters import Hyperparameters, LearningRateDecay


@dataclass
class RunContext:
    """What a method needs to train clients: everything is on `device` already."""

    model: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    parts: list  # client id -> LongTensor of sample indices
    spec: LocalSpec
    seed: int
    num_classes: int
    backend: str = "auto"
    clients_per_round: int | None = None  # None: every client takes part in every round


@dataclass
class RoundLog:
    """What one round reports to the run loop: bytes per direction, the clients' training loss,
    and the method's own numbers for the history."""

    bits_up: list[int]  # per selected client
    bits_down: list[int]  # per selected client
    train_loss: float  # data-size weighted over the selected clients
    metrics: dict = field(default_factory=dict)

    @property
    def bytes_up(self) -> float:
        return sum(self.bits_up) / 8

    @property
    def bytes_down(self) -> float:
        return sum(self.bits_down) / 8


@dataclass
class ClientUpdates:
    clients: list[int]
    state: dict  # {name: Tensor[K, ...]} the clients' models after training
    weights: torch.Tensor  # [K] number of training samples (data-size weights)
    train_loss: torch.Tensor  # [K]
    bits_up: list[int]  # per client
    extra: dict = field(default_factory=dict)


@dataclass
class ServerState:
    """What the server keeps between rounds: the global model (a state dict). A method with more
    to keep subclasses this as its ``State`` and names each field."""

    model: dict


def sample_clients(seed: int, rnd: int, num_clients: int, m: int) -> list[int]:
    """Round `rnd`'s participants: `m` of `num_clients` drawn uniformly without replacement from
    the run seed's stream for that round, sorted."""
    return sorted(
        numpy_rng(seed, "sample", rnd).choice(num_clients, size=m, replace=False).tolist()
    )


def weighted_average(stacked: Mapping[str, torch.Tensor], weights: torch.Tensor) -> dict:
    """Data-size weighted mean over clients; integer buffers (BatchNorm counters) take the max."""
    w = weights.double() / weights.double().sum()
    out = {}
    for n, v in stacked.items():
        if v.is_floating_point():
            out[n] = (w.to(v.device).view(-1, *[1] * (v.dim() - 1)) * v.double()).sum(0).to(v.dtype)
        else:
            out[n] = v.max(0).values
    return out


class Method:
    """Base class. Subclasses set `name`, declare `Params` (hyperparameters) and `State` (server
    state) when they have any, and override `aggregate`, and optionally `init_state`,
    `local_hooks`, `client_update`, `downlink_bits`."""

    name = "base"
    Params: type[Hyperparameters] = Hyperparameters
    State: type[ServerState] = ServerState
    uplink: Codec = DenseCodec()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "params" in vars(cls):  # a dict of defaults would be ignored without a word
            raise FlkitError(
                f"{cls.__name__} declares `params`; declare hyperparameters as a frozen dataclass "
                "`Params` (see flkit.methods.hyperparameters) and read them as self.hp.<name>"
            )

    def __init__(self, ctx: RunContext, **params):
        self.ctx = ctx
        # checked before any work; unknown names are refused with the accepted ones listed
        self.hp = self.Params.build(self.name, params)
        self.param_names = param_names(ctx.model)
        self.check_params()

    def check_params(self) -> None:
        """Checks that need the run context or several hyperparameters together (each value alone
        is checked by `Params`): raise FlkitError naming the value and what is accepted."""

    # -- state
    def init_state(self, model_state: dict) -> ServerState:
        return self.State(model=model_state)

    # -- client side
    def local_hooks(self, starts: dict) -> dict:
        """extra_loss / param_transform / grad_transform for the engine (see flkit.engine.train),
        given the stacked start states of this round's clients."""
        return {}

    def train(
        self,
        starts: dict,
        clients: list[int],
        rnd: int,
        hooks: dict | None = None,
        spec: LocalSpec | None = None,
        stream: str = "batches",
    ):
        """Local training of `clients` from `starts` on the engine. hooks / spec default to the
        method's own (`local_hooks(starts)`, `local_spec(rnd)`); `stream` names the seeded batch
        order, so an extra training call (a pruning epoch) draws batches of its own."""
        ctx = self.ctx
        seeds = [derive_seed(ctx.seed, stream, rnd, c) for c in clients]
        return train_clients(
            ctx.model,
            starts,
            ctx.x,
            ctx.y,
            [ctx.parts[c] for c in clients],
            self.local_spec(rnd) if spec is None else spec,
            seeds,
            backend=ctx.backend,
            **(self.local_hooks(starts) if hooks is None else hooks),
        )

    def local_spec(self, rnd: int) -> LocalSpec:
        """Round rnd's local SGD settings: the run's spec, with lr * lr_decay^(rnd-1) for methods
        that take an ``lr_decay`` parameter (a per-round decay, constant inside a round)."""
        decay = self.hp.lr_decay if isinstance(self.hp, LearningRateDecay) else 1.0
        if decay == 1.0:
            return self.ctx.spec
        return dataclasses.replace(self.ctx.spec, lr=self.ctx.spec.lr * decay ** (rnd - 1))

    def client_update(self, state: ServerState, clients: list[int], rnd: int) -> ClientUpdates:
        starts = broadcast_state(state.model, len(clients))
        res = self.train(starts, clients, rnd)
        bits = self.uplink.message_bits(res.state, stacked=True)
        return ClientUpdates(clients, res.state, res.samples.float(), res.train_loss, list(bits))

    # -- server side
    def aggregate(self, state: ServerState, updates: ClientUpdates, rnd: int) -> ServerState:
        raise NotImplementedError

    def downlink_bits(self, state: ServerState, clients: list[int]) -> list[int]:
        """Bits each selected client downloads this round (dense global model by default)."""
        return [DenseCodec().message_bits(state.model)] * len(clients)

    def round_metrics(self, state: ServerState, updates: ClientUpdates) -> dict:
        """Extra per-round numbers for the history (e.g. how many clients were projected)."""
        return {}

    # -- the three calls of the run loop
    def select_clients(self, state: ServerState, rnd: int) -> list[int]:
        """This round's participants: uniform sampling without replacement (seeded per round)."""
        n = len(self.ctx.parts)
        return sample_clients(self.ctx.seed, rnd, n, self.ctx.clients_per_round or n)

    def round(
        self, state: ServerState, clients: list[int], rnd: int
    ) -> tuple[ServerState, RoundLog]:
        """Download, local training, upload, aggregation: the new state and what the round cost."""
        down = self.downlink_bits(state, clients)
        updates = self.client_update(state, clients, rnd)
        new_state = self.aggregate(state, updates, rnd)
        w = updates.weights / updates.weights.sum()
        log = RoundLog(
            list(updates.bits_up),
            list(down),
            float((w * updates.train_loss).sum()),
            self.round_metrics(new_state, updates),
        )
        return new_state, log

    def evaluate(
        self, state: ServerState, x: torch.Tensor, y: torch.Tensor, per_class: int | None = None
    ):
        """Test accuracy and loss of the global model (and per-class accuracy when asked)."""
        return evaluate(self.ctx.model, state.model, x, y, per_class=per_class)

    def eval_metrics(self, state: ServerState, x: torch.Tensor, y: torch.Tensor) -> dict:
        """Extra numbers recorded at each evaluation (e.g. accuracy on one class)."""
        return {}
