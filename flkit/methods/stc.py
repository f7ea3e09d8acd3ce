"""STC (Sattler et al. 2019), FedFV (Wang et al. 2021) and STC-PA (Tian 2022).

All three exchange *pseudo-gradients* g = w_before − w_after (so the server applies w ← w − ḡ):

``stc``     bidirectional sparse ternary compression with error feedback on both sides: every
            client accumulates a_i = g_i + e_i, sends g~_i = STC_p(a_i) and keeps e_i = a_i − g~_i;
            the server averages the g~_i plainly, accumulates its own residual and broadcasts
            ḡ = STC_p(mean + e_s).
``fedfv``   projection without compression: dense g_i, internal conflict projection in
            loss-ascending order (α of the highest-loss clients kept unprojected), external
            projection against the remembered updates of the last τ rounds, norm rescaled to the
            plain mean's norm; dense model download.
``stc_pa``  the paper's method (Algorithm 4): STC up with client residuals, history
            GH_i ← (g~_i, t), internal then external projection of the *compressed* updates,
            norm rescaling, then server STC with its residual, w ← w − ḡ.

With α = 1 and τ = 0 STC-PA is exactly STC (every client kept, no external step, rescale factor
exactly 1). FedAvg stays :class:`flkit.methods.fedavg.FedAvg`.

State (:class:`ExchangeState`, checkpointed by :func:`flkit.experiment.run`)::

    model              the global model (state dict)
    client_residuals   {client id: {param name: Tensor}} the clients' error-feedback residuals
                       (the storage of a :class:`flkit.compress.ErrorFeedback`; a client keeps its
                       residual across rounds in which it is not selected)
    server_residual    {"server": {param name: Tensor}} the downlink residual
    history            {client id: (flat g~ [d], round)} last update sent by each client, for the
                       external projection (entries too old to be used again are dropped)
    last_round         {client id: round} latest participation of every client
    down_bits          bits of the latest broadcast ḡ (what a selected client downloads)
    metrics            numbers of the latest round, for the history (see ``round_metrics``)

Communication: uploads and the broadcast go through :class:`flkit.compress.STCCodec` with the
method's ``counter`` ("reference-simulator" by default, the counter behind the paper's 45×/47×).
The download of round t is the broadcast ḡ of round t − 1 (what a selected client needs to
synchronise; a client that skipped rounds would also fetch the updates it missed — not counted,
as in the paper's per-round sizes); in round 1 the clients download the dense initial model.

Options for the code variants the paper leaves open (our defaults first):
``loss="before"`` (default, FedFV: loss of the received global model on the client's training
data before local training) or ``"during"`` (mean training loss of the local epoch);
``external_variant="paper"`` (default, lags τ..1) or ``"easyfl-later"`` (lags τ−1..0).

STC-PA's ``links`` says which links carry STC (the ablation of which compression cancels the
projection's gain): ``"both"`` (default, the paper's Algorithm 4), ``"uplink"`` (STC up with client
residuals, dense ḡ = g_t down, no server residual), ``"downlink"`` (dense uploads, no client
residuals; server STC with its residual) or ``"none"`` (exactly FedFV).

Per-round counters (``round_metrics``, one history column each): ``kept``,
``internal_projections``, ``external_projections``, ``external_conflicts`` (projecting methods),
``update_norm`` (‖g_t‖ applied before the downlink compression), ``projected_norm`` (‖g_t‖ after
the projections, before rescaling) and ``mean_norm`` (‖plain mean of the uploads‖).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..compress import COUNTERS, DEFAULT_COUNTER, DenseCodec, ErrorFeedback, STCCodec
from ..engine import evaluate
from ..projection import (
    EXTERNAL_VARIANTS,
    keep_count,
    project_external,
    project_internal,
    rescale_to_mean_norm,
)
from ..state import broadcast_state, flatten, unflatten
from ..utils import FlkitError
from .base import ClientUpdates, Method, ServerState, weighted_average
from .hyperparameters import Hyperparameters, choice, integer, real
from .registry import register

__all__ = [
    "STC",
    "FedFV",
    "STCPA",
    "project_internal",
    "project_external",
    "rescale_to_mean_norm",
    "keep_count",
    "LOSS_MODES",
    "LINKS",
    "ExchangeState",
]

LOSS_MODES = ("before", "during")
#: STC-PA's ``links``: which links carry STC -> (uplink compressed, downlink compressed)
LINKS = {
    "both": (True, True),
    "uplink": (True, False),
    "downlink": (False, True),
    "none": (False, False),
}


# --------------------------------------------------------------------------- parameters, state
@dataclass(frozen=True)
class CompressionParams(Hyperparameters):
    p: float = real(0.1, 0.0, 1.0, low_open=True)  # fraction of entries STC keeps
    counter: str = choice(DEFAULT_COUNTER, COUNTERS)  # how a message's bits are counted
    residual_dtype: str = choice("float32", ("float32", "float16"))  # error-feedback storage


@dataclass(frozen=True)
class ProjectionParams(Hyperparameters):
    alpha: float = real(0.1, 0.0, 1.0)  # fraction of highest-loss clients kept unprojected
    tau: int = integer(1, 0)  # rounds of history for the external projection
    external_variant: str = choice("paper", EXTERNAL_VARIANTS)
    loss: str = choice("before", LOSS_MODES)


@dataclass
class ExchangeState(ServerState):
    """The fields are described in this module's docstring."""

    client_residuals: dict = field(default_factory=dict)
    server_residual: dict = field(default_factory=dict)
    history: dict = field(default_factory=dict)
    last_round: dict = field(default_factory=dict)
    down_bits: int | None = None
    metrics: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- the family
class _UpdateExchange(Method):
    """Shared round of STC / FedFV / STC-PA (flags ``compress`` and ``project``; a method whose
    Params have ``links`` compresses only the links it names)."""

    compress = True  # Params are CompressionParams
    project = False  # Params are ProjectionParams
    State = ExchangeState

    def check_params(self):
        links = getattr(self.hp, "links", "both" if self.compress else "none")
        self.compress_up, self.compress_down = LINKS[links]
        stc = STCCodec(self.hp.p, self.hp.counter) if self.compress else None
        self.codec = stc if self.compress_up else DenseCodec()
        self.down_codec = stc if self.compress_down else None
        self.uplink = self.codec

    def _ef(self, store: dict) -> ErrorFeedback:
        """An ErrorFeedback whose residuals live in ``store`` (a dict of the method state), so
        they are checkpointed with the state and persist across rounds."""
        dtype = torch.float16 if self.hp.residual_dtype == "float16" else None
        ef = ErrorFeedback(
            device="cpu" if self.ctx.x.device.type == "cpu" else self.ctx.x.device, dtype=dtype
        )
        ef._res = store  # the method state owns the tensors
        return ef

    # -- client side
    def client_losses(self, state, clients):
        """l_i: loss of the global model on each client's training data (before local training),
        one batched evaluation per client through flkit.engine.evaluate."""
        ctx = self.ctx
        out = []
        for c in clients:
            ix = ctx.parts[c]
            _, loss = evaluate(ctx.model, state.model, ctx.x[ix], ctx.y[ix])
            out.append(loss)
        return torch.tensor(out, dtype=torch.float64)

    def client_update(self, state, clients, rnd):
        clients = [int(c) for c in clients]
        if not clients:
            raise FlkitError("client_update got an empty client set; need at least one client")
        if len(set(clients)) != len(clients):
            raise FlkitError(f"clients must be distinct, got {clients}")
        n_all = len(self.ctx.parts)
        if len(clients) > n_all or not all(0 <= c < n_all for c in clients):
            raise FlkitError(
                f"{len(clients)} clients {clients} in a round of {n_all} clients; accepted: at "
                f"most {n_all} distinct ids in 0..{n_all - 1}"
            )
        n_clients = len(clients)
        starts = broadcast_state(state.model, n_clients)
        losses = None
        if self.project and self.hp.loss == "before":
            losses = self.client_losses(state, clients)
        res = self.train(starts, clients, rnd)
        if losses is None:
            losses = res.train_loss.detach().double().cpu()
        names = self.param_names
        g = {n: starts[n] - res.state[n] for n in names}  # pseudo-gradients [K, ...]
        if self.compress_up:
            ef = self._ef(state.client_residuals)
            sent = ef.step_stacked(clients, g, self.codec)  # a = g + e; g~ = STC(a); e = a − g~
            bits = list(ef.last_bits)
        else:
            sent, bits = g, list(self.codec.message_bits(g, stacked=True))  # dense: sent as is
        kept = [int(sum((sent[n][i] != 0).sum().item() for n in names)) for i in range(n_clients)]
        return ClientUpdates(
            clients,
            res.state,
            res.samples.float(),
            res.train_loss,
            bits,
            extra={"sent": sent, "losses": losses, "nonzeros": kept},
        )

    # -- server side
    def aggregate(self, state, updates, rnd):
        clients = list(updates.clients)
        if not clients:
            raise FlkitError("aggregate got no client updates; need at least one client")
        names = self.param_names
        sent = updates.extra["sent"]
        rows = flatten(sent, names)  # [m, d] whole-model rows
        m = rows.shape[0]
        metrics = {"clients": m, "up_nonzeros_mean": float(sum(updates.extra["nonzeros"]) / m)}
        mean_norm = float(torch.linalg.vector_norm(rows.mean(dim=0)))
        history = dict(state.history)
        last_round = dict(state.last_round)
        if self.project:
            losses = updates.extra["losses"]
            if len(losses) != m:
                raise FlkitError(
                    f"{len(losses)} losses for {m} client updates; give one loss per client"
                )
            for i, c in enumerate(clients):  # Alg. 4 line 14: GH_i <- (g~_i, t)
                history[c] = (rows[i].detach().clone(), rnd)
                last_round[c] = rnd
            g, info = project_internal(rows, losses, self.hp.alpha, return_info=True)
            g, einfo = project_external(
                g, history, rnd, self.hp.tau, self.hp.external_variant, return_info=True
            )
            projected_norm = float(torch.linalg.vector_norm(g))
            g = rescale_to_mean_norm(g, rows)
            oldest = rnd + 1 - self.hp.tau  # never visited again
            history = {c: v for c, v in history.items() if v[1] >= oldest}
            metrics.update(
                kept=info.kept,
                internal_projections=info.projections,
                external_projections=einfo.projections,
                external_conflicts=len(einfo.conflicting_clients),
                projected_norm=projected_norm,
            )
        else:
            g = rows.mean(dim=0)
            for c in clients:
                last_round[c] = rnd
        g_dict = unflatten(g, state.model, names)
        if self.compress_down:
            ef = self._ef(state.server_residual)
            down = ef.step("server", g_dict, self.down_codec)  # a_s = g + e_s; ḡ = STC(a_s)
            down_bits = int(ef.last_bits)
        else:
            down, down_bits = g_dict, None  # dense model download
        model = dict(state.model)
        for n in names:
            model[n] = state.model[n] - down[n].to(state.model[n].dtype)
        others = [n for n, v in state.model.items() if n not in names and v.is_floating_point()]
        if others:  # BN statistics: plain average
            avg = weighted_average({n: updates.state[n] for n in others}, updates.weights)
            model.update(avg)
        metrics["update_norm"] = float(torch.linalg.vector_norm(g))
        metrics["mean_norm"] = mean_norm
        if self.compress_down:
            metrics["down_nonzeros"] = int(sum((down[n] != 0).sum().item() for n in names))
        return replace(
            state,
            model=model,
            history=history,
            last_round=last_round,
            down_bits=down_bits,
            metrics=metrics,
        )

    def downlink_bits(self, state, clients):
        """Round t: the broadcast ḡ of round t − 1 (dense initial model in round 1; FedFV and a
        dense downlink: dense)."""
        if not self.compress_down or state.down_bits is None:
            return super().downlink_bits(state, clients)
        return [int(state.down_bits)] * len(clients)

    def round_metrics(self, state, updates):
        return dict(state.metrics)


@register
class STC(_UpdateExchange):
    """Sparse ternary compression both ways with error feedback; plain mean of the g~_i."""

    name = "stc"
    Params = CompressionParams
    compress, project = True, False


@register
class FedFV(_UpdateExchange):
    """FedFV: conflict projection (internal + external) and norm rescaling, no compression."""

    name = "fedfv"
    Params = ProjectionParams
    compress, project = False, True


@register
class STCPA(_UpdateExchange):
    """STC-PA (Tian 2022, Algorithm 4): STC up, projection aggregation, STC down; ``links``
    names the links that carry STC ("both", "uplink", "downlink", "none" = FedFV)."""

    name = "stc_pa"
    compress, project = True, True

    @dataclass(frozen=True)
    class Params(CompressionParams, ProjectionParams):
        links: str = choice("both", tuple(LINKS))  # which links carry STC
