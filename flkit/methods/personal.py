"""Methods scored on per-client local test splits, and the frozen-weight bookkeeping shared by the
supermask methods (HideNseek, FedMask, Signed) and BNNAvg.

Every client splits its data once (seeded, `local_test_frac`) into a local training part, the only
data it trains on, and a local test part: stratified by label (`local_split="stratified"`), or as
LEAF splits a writer (`"writer"`: a seeded random share of the writer's samples, classes in
proportion on average, so classes with few samples per writer still reach the test parts). The
reported accuracy is the test-size-weighted mean of each scored client's accuracy on its own test
part with its own model, i.e. correct / total over the union of their local test parts (the
paper's "inference accuracy"). A method whose clients hold a personal part (a head, a pruning
mask, BatchNorm statistics) scores, by default, only the clients that trained it
(`score_clients="trained"`; "all" also scores never-sampled clients with their initial personal
part); `coverage` is the share of clients with a local test part that are scored. The dataset's
global test set is not used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.func import functional_call
from torch.nn import functional

from ..data.partition import local_split, writer_split
from ..prune.supermask import flip_share
from ..state import broadcast_state
from ..utils import FlkitError, derive_seed, generator
from .base import ClientUpdates, Method, RoundLog, ServerState
from .hyperparameters import Hyperparameters, choice, real

LOCAL_SPLITS = ("stratified", "writer")
SCORE_CLIENTS = ("trained", "all")


@dataclass(frozen=True)
class LocalSplitParams(Hyperparameters):
    local_test_frac: float = real(0.25, 0.0, 1.0, low_open=True, high_open=True)
    local_split: str = choice("stratified", LOCAL_SPLITS)  # how a client's test part is drawn


class LocalSplitMethod(Method):
    """Base: carves the local test splits and evaluates `client_models(state)` on them."""

    Params = LocalSplitParams

    def __init__(self, ctx, **params):
        super().__init__(ctx, **params)
        split = local_split if self.hp.local_split == "stratified" else writer_split
        ctx.parts, self.test_parts = split(
            ctx.parts, ctx.y, self.hp.local_test_frac, derive_seed(ctx.seed, "local-test")
        )
        self.sizes = torch.tensor(
            [len(p) for p in ctx.parts], dtype=torch.float32, device=ctx.x.device
        )
        self.buffer_names = [n for n, _ in ctx.model.named_buffers()]

    # -- the model each client is scored with
    def client_models(self, state: ServerState):
        """Yield (client, {name: tensor}) for every client; default: the global model for all."""
        for k in range(len(self.test_parts)):
            yield k, state.model

    def trained_clients(self, state: ServerState):
        """[N] bool: which clients have trained their personal part; None for a method without
        one (every client is scored with the global model)."""
        return None

    def scored(self, state: ServerState) -> list[int]:
        """The clients whose local test part is scored (see the module docstring)."""
        trained = self.trained_clients(state)
        every = [k for k, ix in enumerate(self.test_parts) if len(ix)]
        if trained is None or getattr(self.hp, "score_clients", "all") == "all":
            return every
        return [k for k in every if bool(trained[k])]

    def coverage(self, state: ServerState) -> float:
        """Share of the clients with a local test part that are scored."""
        if self.trained_clients(state) is None:
            raise FlkitError(
                f"coverage of {self.name!r}: its clients hold no personal part (every client is "
                "scored with the global model); accepted: a method with per-client heads or "
                "masks, e.g. 'hidenseek', 'fedmask', 'signed'"
            )
        every = sum(1 for ix in self.test_parts if len(ix))
        return len(self.scored(state)) / every if every else 0.0

    def global_masks(self, state: ServerState):
        """{name: Tensor} the global mask / sign entries (for the flip share); None: no mask."""
        return None

    @torch.no_grad()
    def evaluate(self, state, x, y, per_class=None):
        """Test-size-weighted mean of the clients' local-test accuracies (x, y are not used)."""
        model, cx, cy = self.ctx.model, self.ctx.x, self.ctx.y
        was = model.training
        model.eval()
        correct, loss, n = 0, 0.0, 0
        hits = torch.zeros(self.ctx.num_classes, device=cy.device)
        scored = set(self.scored(state))
        try:
            for k, tensors in self.client_models(state):
                ix = self.test_parts[k]
                if len(ix) == 0 or k not in scored:
                    continue
                out = functional_call(model, dict(tensors), (cx[ix],))
                pred = out.argmax(1)
                correct += int((pred == cy[ix]).sum())
                loss += float(functional.cross_entropy(out, cy[ix], reduction="sum"))
                n += len(ix)
                hits.index_add_(0, cy[ix], (pred == cy[ix]).float())
        finally:
            model.train(was)
        if n == 0:
            if scored or not any(len(ix) for ix in self.test_parts):
                raise FlkitError("no client has local test samples; raise local_test_frac")
            # before any client has trained its personal part nothing is scored
            nan = float("nan")
            if per_class is None:
                return nan, nan
            return nan, nan, torch.full((per_class,), nan, device=cy.device)
        if per_class is None:
            return correct / n, loss / n
        yt = torch.cat([self.test_parts[k] for k in sorted(scored)])
        counts = torch.bincount(cy[yt], minlength=per_class).float()
        acc_c = torch.where(
            counts > 0, hits / counts.clamp(min=1), torch.full_like(counts, float("nan"))
        )
        return correct / n, loss / n, acc_c

    # -- helpers for the methods of this family
    def client_sizes(self, clients) -> torch.Tensor:
        return self.sizes[list(clients)].to(self.ctx.x.device)

    def round(self, state, clients, rnd):
        """As Method.round, with the local training time (seconds) in the round's metrics."""
        t0 = time.perf_counter()
        down = self.downlink_bits(state, clients)
        updates = self.client_update(state, clients, rnd)
        train_s = time.perf_counter() - t0
        new_state = self.aggregate(state, updates, rnd)
        w = updates.weights / updates.weights.sum()
        metrics = {"train_seconds": train_s, **self.round_metrics(new_state, updates)}
        before = self.global_masks(state)
        if before is not None:
            metrics["flip_share"] = flip_share(before, self.global_masks(new_state))
        if self.trained_clients(new_state) is not None:
            metrics["coverage"] = self.coverage(new_state)
        return new_state, RoundLog(
            list(updates.bits_up), list(down), float((w * updates.train_loss).sum()), metrics
        )


def uniform_latents(state: dict, names, seed: int) -> dict:
    """Latent scores ~ U(-1, 1), one seeded stream per tensor (shared by every supermask method)."""
    out = {}
    for n in names:
        v = state[n]
        u = torch.rand(v.shape, generator=generator(seed, "latent", n), dtype=torch.float32)
        out[n] = (2 * u - 1).to(device=v.device, dtype=v.dtype)
    return out


def client_copies(state: dict, names, num_clients: int) -> dict:
    """Per-client copies [N, ...] of the named entries (client-held state)."""
    return broadcast_state({n: state[n] for n in names}, num_clients)


def scatter_rows(stacked: dict, clients, rows: dict) -> dict:
    """A copy of {name: Tensor[N, ...]} with the rows of `clients` replaced."""
    if not stacked:
        return {}
    idx = torch.as_tensor(list(clients), device=next(iter(stacked.values())).device)
    return {n: v.index_copy(0, idx, rows[n].to(v.dtype)) for n, v in stacked.items()}


def bits_updates(clients, state, weights, loss, bits_each, **extra) -> ClientUpdates:
    return ClientUpdates(
        list(clients), state, weights, loss, [int(bits_each)] * len(clients), extra
    )
