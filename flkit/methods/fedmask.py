"""FedMask (Li et al., SenSys 2021) and Signed (its sign-supermask variant from HideNseek).

Every weight (classifier included) stays frozen at its random initialisation; clients learn a
latent score per weight. FedMask's mask is binary, 1[sigmoid(score) > 0.5], with an L1 sparsity
term on sigmoid(score); Signed's is a sign, sign(score), through tanh. The first time a client
takes part it trains one extra local epoch and then prunes, for good, all but the top `keep_ratio`
fraction of its scores in the prunable layers (ranked together; FedMask by score, Signed by
|score|): data-dependent, unstructured and per client. Clients upload their quantised masks at
the positions they kept; the server takes, per position, the sample-weighted mean over the
clients holding it and turns it back into a score (`writeback`, flkit.prune.supermask.WRITEBACKS):
by default the tangent of the inverse at the split vote, 4 (mean - 1/2) (FedMask) or the mean
(Signed), which keeps scores where the straight-through gradient is alive; "inverse" is
logit(clip(mean, eps, 1 - eps)) or arctanh(clip(mean, -1 + eps, 1 - eps)), where a unanimous
vote freezes. Either way a unanimous vote lands at the end of the write-back's range (|score| 2
or 1 for "linear"), which a local update must cross within one round to flip it; `normalize`
"all" weights the votes by n_k / n with n over all clients' samples, as HideNseek's eq. 1 does,
so the clients not holding a position count as undecided and the vote shrinks toward the split
by the holders' share of the data (flkit.prune.supermask.dilute_vote). A client's model is the
server's mask times its own pruning mask, with its own BatchNorm statistics; only clients that
have trained (and pruned) are scored by default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace

import torch

from ..prune import quantise, scaled_grads, supermask_transform
from ..prune.supermask import NORMALIZE, WRITEBACKS, dilute_vote, vote_to_score
from ..state import broadcast_state
from .base import ServerState
from .hidenseek import FrozenFeatures, FrozenParams, train_once
from .hyperparameters import choice, real
from .personal import bits_updates, client_copies, scatter_rows, uniform_latents
from .registry import register


@register
class FedMask(FrozenFeatures):
    name = "fedmask"
    kind = "binary"

    @dataclass(frozen=True)
    class Params(FrozenParams):
        sparsity: float = real(1e-4, 0.0)  # weight of the L1 term on sigmoid(score)
        writeback: str = choice("linear", WRITEBACKS)  # mean vote -> score, alive by default
        # n of the votes' weights n_k / n: the holders' samples ("sampled", the plain mean vote)
        # or all clients' ("all": the vote shrinks toward the split by the holders' share)
        normalize: str = choice("sampled", NORMALIZE)

    @dataclass
    class State(ServerState):
        scores: dict = field(default_factory=dict)  # {name: Tensor} the global latent scores
        # {name: Tensor[N, ...]} client-held tensors; "prune/<name>": each client's pruning mask
        client: dict = field(default_factory=dict)
        pruned: torch.Tensor | None = None  # [N] bool: the client has done its one-shot pruning

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        self._layout()
        self.masked = self.feat + [f"{self.head}.weight"]
        sd = ctx.model.state_dict()
        self.w0 = {n: sd[n].detach().clone() for n in self.masked}
        self.prunable = [f"{n}.weight" for n in self.layers]
        self.grad_scales = {n: 0.0 for n in self.param_names if n not in self.masked}
        self.entries = sum(v.numel() for v in self.w0.values())

    def init_state(self, model_state):
        scores = uniform_latents(model_state, self.masked, self.ctx.seed)
        n = len(self.ctx.parts)
        prune = {
            n_: torch.ones(
                (n, *model_state[n_].shape), dtype=torch.bool, device=model_state[n_].device
            )
            for n_ in self.prunable
        }
        return self.State(
            model=self._global_model(model_state, scores),
            scores=scores,
            client={
                **client_copies(model_state, self.buffer_names, n),
                **{"prune/" + k: v for k, v in prune.items()},
            },
            pruned=torch.zeros(n, dtype=torch.bool, device=self.ctx.x.device),
        )

    def _global_model(self, base, scores):
        return {**base, **{n: self.w0[n] * quantise(scores[n], self.kind) for n in self.masked}}

    def _prune_masks(self, state, idx):
        return {n: state.client["prune/" + n][idx].to(self.w0[n].dtype) for n in self.prunable}

    def _hooks(self, prune):
        hooks = {
            "param_transform": supermask_transform(self.w0, None, self.kind, per_client=prune),
            "grad_transform": scaled_grads(self.grad_scales),
        }
        if self.kind == "binary" and self.hp.sparsity > 0:
            coef, names = self.hp.sparsity, self.masked

            def l1(params, hook_args):
                return coef * sum(torch.sigmoid(params[n]).flatten(1).sum(1) for n in names)

            hooks["extra_loss"] = l1
        return hooks

    def _one_shot_prune(self, scores: dict) -> dict:
        """Per client: keep the top keep_ratio of the prunable layers' scores, ranked together."""
        rank = {
            n: (scores[n] if self.kind == "binary" else scores[n].abs()).flatten(1)
            for n in self.prunable
        }
        flat = torch.cat(list(rank.values()), dim=1)
        keep = int(round(self.hp.keep_ratio * flat.shape[1]))
        top = flat.topk(keep, dim=1).indices
        kept = torch.zeros_like(flat, dtype=torch.bool).scatter_(1, top, True)
        sizes = [v.shape[1] for v in rank.values()]
        return {n: m.view_as(scores[n]) for n, m in zip(self.prunable, kept.split(sizes, dim=1))}

    def client_update(self, state, clients, rnd):
        dev = self.ctx.x.device
        idx = torch.as_tensor(clients, device=dev)
        held = [n for n in state.client if not n.startswith("prune/")]
        starts = broadcast_state({**state.model, **state.scores}, len(clients))
        starts.update({n: state.client[n][idx].clone() for n in held})
        client_state = dict(state.client)
        new = [i for i, c in enumerate(clients) if not bool(state.pruned[c])]
        if new:  # first participation: one local epoch, then the one-shot pruning
            sub = {n: v[new] for n, v in starts.items()}
            prune = self._prune_masks(state, idx[new])
            spec = dataclasses.replace(self.ctx.spec, epochs=1, steps=None)
            res = train_once(
                self, sub, [clients[i] for i in new], rnd, self._hooks(prune), spec, "prune-epoch"
            )
            kept = self._one_shot_prune({n: res.state[n] for n in self.prunable})
            pos = torch.as_tensor(new, device=dev)
            for n, v in res.state.items():
                starts[n] = starts[n].index_copy(0, pos, v)
            client_state = scatter_rows(
                {"prune/" + n: client_state["prune/" + n] for n in self.prunable},
                [clients[i] for i in new],
                {"prune/" + n: kept[n] for n in kept},
            )
            client_state = {**state.client, **client_state}
        prune = {n: client_state["prune/" + n][idx].to(self.w0[n].dtype) for n in self.prunable}
        res = train_once(self, starts, clients, rnd, self._hooks(prune), self.ctx.spec, "batches")
        votes = {n: quantise(res.state[n], self.kind) for n in self.masked}
        holders = {n: prune[n] if n in prune else None for n in self.masked}
        client_state = {
            **client_state,
            **scatter_rows(
                {n: client_state[n] for n in held}, clients, {n: res.state[n] for n in held}
            ),
        }
        pruned = state.pruned.clone()
        pruned[list(clients)] = True
        kept_entries = [
            self.entries - sum(int((p[i] == 0).sum()) for p in prune.values())
            for i in range(len(clients))
        ]
        up = bits_updates(
            clients,
            votes,
            self.client_sizes(clients),
            res.train_loss,
            0,
            client=client_state,
            pruned=pruned,
            holders=holders,
            prune_epochs=len(new),
        )
        up.bits_up = [8 * k for k in kept_entries]
        return up

    def aggregate(self, state, updates, rnd):
        w = updates.weights.double().to(self.ctx.x.device)
        total = self.sizes.double().sum().to(w.device)
        scores = {}
        for n in self.masked:
            v, h = updates.state[n].double(), updates.extra["holders"][n]
            h = torch.ones_like(v) if h is None else h.double()
            wv = w.view(-1, *[1] * (v.dim() - 1))
            den = (wv * h).sum(0)
            mean = (wv * h * v).sum(0) / den.clamp(min=1e-300)
            if self.hp.normalize == "all":
                mean = dilute_vote(mean, den / total, self.kind)
            new = vote_to_score(mean, self.kind, self.hp.writeback, self.hp.eps)
            scores[n] = torch.where(den > 0, new, state.scores[n].double()).to(
                state.scores[n].dtype
            )
        # the clients' pruning masks and BN statistics are stored back for them, not aggregated
        return replace(
            state,
            scores=scores,
            model=self._global_model(state.model, scores),
            client=updates.extra["client"],
            pruned=updates.extra["pruned"],
        )

    def downlink_bits(self, state, clients):
        return [8 * self.entries] * len(clients)

    def round_metrics(self, state, updates):
        return {"prune_epochs": updates.extra["prune_epochs"]}

    def trained_clients(self, state):
        return state.pruned

    def global_masks(self, state):
        return {n: quantise(state.scores[n], self.kind) for n in self.masked}

    def client_models(self, state):
        for k in range(len(self.test_parts)):
            own = {n: v[k] for n, v in state.client.items() if not n.startswith("prune/")}
            model = {**state.model, **own}
            for n in self.prunable:
                model[n] = model[n] * state.client["prune/" + n][k].to(model[n].dtype)
            yield k, model


@register
class Signed(FedMask):
    name = "signed"
    kind = "sign"

    @dataclass(frozen=True)
    class Params(FedMask.Params):
        sparsity: float = real(0.0, 0.0)
