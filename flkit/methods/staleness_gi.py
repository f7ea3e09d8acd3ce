"""The paper's method: the server inverts each stale update into surrogate data (flkit.inversion)
and re-runs the client's local program on it from the current global model,

    Delta_hat = U(w^t; X*, softmax(Y~*)),    Delta_use = gamma(t) Delta_hat + (1 - gamma(t)) Delta,

with top-K masked targets, warm-started surrogate data per client, an optional uniqueness test
(only stale updates far from the unstale ones of round t - tau are inverted) and the switch back
to plain aggregation: when the oracle shows that the estimate is worse than the stale update
(mean E1 > margin * mean E2 over the last `switch_window` inversion rounds, :func:`switch_due`),
the switch takes effect `switch_delay` rounds later (the truth about w^t only
arrives then) and gamma falls linearly to 0 over `gamma_window` x the rounds before the switch.

The inversion follows the divergence rule (:mod:`flkit.divergence`): a non-finite Disparity stops
the run with an error naming the round and the clients; a client whose inversion diverged (its
Disparity rose past the rule's limit) gets no estimate that round: its stale update is used as
it came, and the round's ``gi_diverged`` metric counts such clients (the column exists only in
runs where it happened). The paper does not say what to do with a failed inversion; an estimate
from surrogate data that drifted that far from the update's would only add noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..inversion import MODEL_MODES, InversionSpec, box_from_data, init_data, invert, unroll
from ..utils import FlkitError
from .hyperparameters import choice, flag, integer, real
from .registry import register
from .staleness import (
    StalenessParams,
    StalenessState,
    Unweighted,
    cosine_distance,
    gamma_ramp,
    relative_l1,
    uniqueness_threshold,
)


def switch_due(errors, window: int, margin: float = 1.0) -> bool:
    """The switching test on a window: `errors` holds (E1, E2) per inversion round (each the mean
    over that round's inverted clients); the switch is due once `window` rounds are there and
    their mean E1 exceeds `margin` x their mean E2. The paper compares E1 and E2 as curves over
    training averaged over clients (Fig. 5), so one round's comparison, often of one client, is
    read as too noisy to end the inversions."""
    last = list(errors)[-window:]
    if len(last) < window:
        return False
    e1 = sum(e for e, _ in last) / window
    e2 = sum(e for _, e in last) / window
    return e1 > margin * e2


class GIStaleness(Unweighted):
    name = "gi_staleness"

    @dataclass(frozen=True)
    class Params(StalenessParams):
        gi: bool = flag(True)  # False: Unweighted (the estimate is never made)
        gi_size: int = integer(64, 1)  # surrogate samples per client (R)
        gi_iters: int = integer(300, 1)  # inversion iterations (T_GI)
        gi_lr: float = real(0.1, 0.0, low_open=True)  # the inversion's learning rate
        gi_topk: float = real(0.05, 0.0, 1.0, low_open=True)  # fraction of the target matched
        gi_tol: float = real(0.0, 0.0)  # early-stopping tolerance of the inversion
        gi_window: int = integer(50, 1)  # iterations the tolerance looks back
        warm_start: bool = flag(True)  # a client's inversion starts from its last surrogate data
        model_mode: str = choice("eval", MODEL_MODES)
        box: str = choice("data", ("data", "none"))  # surrogate inputs clipped to the data's range
        uniqueness: bool = flag(False)  # invert only updates far from the unstale ones (Eq. 8)
        off_diagonal: bool = flag(False)  # Eq. 8's mean without the zero diagonal
        switch: str = choice("paper", ("paper", "none"))  # switch back to plain aggregation
        switch_metric: str = choice("l1", ("l1", "cos"))
        switch_margin: float = real(1.0, 0.0, low_open=True)
        switch_window: int = integer(5, 1)  # inversion rounds whose mean errors are compared
        switch_delay: int | None = integer(None, 0, optional=True)  # None: tau rounds
        switch_at: int | None = integer(None, 0, optional=True)  # a fixed switching round
        gamma_window: float = real(0.1, 0.0)  # ramp length, as a fraction of the switch round

    @dataclass
    class State(StalenessState):
        cache: dict = field(default_factory=dict)  # {client: (surrogate x, label logits)}
        unstale_hist: list = field(default_factory=list)  # flat unstale updates per round
        switch_errors: list = field(default_factory=list)  # (E1, E2) of each inversion round
        switch_detected: int | None = None  # the round the oracle showed the estimate worse
        switch_round: int | None = None  # the round gamma starts to fall

    def check_params(self):
        super().check_params()
        hp = self.hp
        self.ispec = InversionSpec(
            size=hp.gi_size,
            iters=hp.gi_iters,
            lr=hp.gi_lr,
            topk=hp.gi_topk,
            tol=hp.gi_tol,
            window=hp.gi_window,
            model_mode=hp.model_mode,
        )
        spec, sizes = self.ctx.spec, [len(p) for p in self.ctx.parts]
        if hp.gi and max(sizes) > spec.batch_size:
            raise FlkitError(
                f"gi_staleness models full-batch local training: batch_size="
                f"{spec.batch_size} is smaller than the largest client ({max(sizes)} "
                "samples); accepted: batch_size >= every client's size"
            )
        self.data_box = box_from_data(self.ctx.x) if hp.box == "data" else None

    def init_state(self, model_state):
        return self.State(model=model_state, switch_round=self.hp.switch_at)

    def needs_oracle(self, state, t):
        return self.hp.gi and self.hp.switch == "paper" and state.switch_detected is None

    def _flat(self, d):
        return torch.cat([d[n].reshape(d[n].shape[0], -1) for n in self.param_names], 1)

    def round(self, state, clients, rnd):
        new_state, log = super().round(state, clients, rnd)
        sw = new_state.switch_round
        log.metrics["switch_round"] = float("nan") if sw is None else float(sw)
        if self.hp.uniqueness:  # this round's unstale updates, the reference tau rounds later
            clients_, lagged, trained, starts = self._round_training
            normal = [i for i, s in enumerate(lagged) if not s]
            d = {n: trained[n][normal] - starts[n][normal] for n in self.param_names}
            hist = list(new_state.unstale_hist) + [self._flat(d).detach()]
            new_state = replace(new_state, unstale_hist=hist[-(self.hp.tau + 1) :])
        return new_state, log

    def _unique(self, state, delta_flat):
        """Which stale updates are farther from round t - tau's unstale updates than Eq. 8's
        threshold (mean cosine distance to them); all of them when no reference exists."""
        hist, tau = state.unstale_hist, self.hp.tau
        ref = hist[-tau] if len(hist) >= tau and tau > 0 else None
        if ref is None or ref.shape[0] == 0:
            return torch.ones(delta_flat.shape[0], dtype=torch.bool)
        theta = uniqueness_threshold(ref, self.hp.off_diagonal)
        dist = cosine_distance(delta_flat.unsqueeze(1), ref.unsqueeze(0)).mean(1)
        return (dist > theta).cpu()

    def adjust(self, state, info):
        t, delta = info["t"], info["delta"]
        gamma = gamma_ramp(t, state.switch_round, self.hp.gamma_window)
        metrics = {"gamma": gamma}
        if not self.hp.gi or gamma == 0:
            return delta, metrics
        names, clients = self.param_names, info["clients"]
        use_gi = (
            self._unique(state, self._flat(delta))
            if self.hp.uniqueness
            else torch.ones(len(clients), dtype=torch.bool)
        )
        metrics["gi_clients"] = int(use_gi.sum())
        if not use_gi.any():
            return delta, metrics
        sel = use_gi.nonzero().flatten().tolist()
        sub = [clients[i] for i in sel]
        dev = self.ctx.x.device
        k = len(sub)
        then = {n: v.unsqueeze(0).expand(k, *v.shape) for n, v in info["then"].items()}
        now = {n: v.unsqueeze(0).expand(k, *v.shape) for n, v in info["now"].items()}
        target = {n: delta[n][sel] for n in names}
        x0, y0 = init_data(
            k,
            self.ispec,
            self.ctx.x.shape[1:],
            self.ctx.num_classes,
            self.ctx.seed,
            [(c, info["rnd"] if not self.hp.warm_start else 0) for c in sub],
            dev,
            self.ctx.x.dtype,
        )
        cache = state.cache
        for j, c in enumerate(sub):
            if self.hp.warm_start and c in cache:
                x0[j], y0[j] = cache[c][0], cache[c][1]
        try:
            res = invert(
                self.ctx.model,
                then,
                target,
                self.ctx.spec,
                self.ispec,
                x0,
                y0,
                box=self.data_box,
                backend=self.ctx.backend,
            )
        except FlkitError as e:  # name the round and the clients, not only the iteration
            raise FlkitError(
                f"round {info['rnd']}, gradient inversion of the stale clients {sub} (in that "
                f"order in the batch): {e}"
            ) from e
        est = unroll(
            self.ctx.model,
            now,
            res.x,
            torch.softmax(res.y, -1),
            self.ctx.spec,
            train_mode=self.hp.model_mode == "train",
            backend=self.ctx.backend,
        )
        est = {n: v.detach() for n, v in est.items()}
        failed = [j for j, d in enumerate(res.diverged) if d is not None]
        if failed:  # no estimate from a diverged inversion: the stale update stands
            metrics["gi_diverged"] = len(failed)
            for n in names:
                est[n][failed] = delta[n][[sel[j] for j in failed]]
        self._new_cache = {  # a diverged inversion's data is no start for the next one
            c: (res.x[j].detach(), res.y[j].detach()) for j, c in enumerate(sub) if j not in failed
        }
        use = {n: v.clone() for n, v in delta.items()}
        for n in names:
            use[n][sel] = gamma * est[n] + (1 - gamma) * delta[n][sel]
        full_est = {n: v.clone() for n, v in delta.items()}
        for n in names:
            full_est[n][sel] = est[n]
        info["estimate"] = full_est
        metrics.update(
            {
                "gi_iters": float(res.iters.float().mean()),
                "gi_loss_ratio": float((res.final_loss / res.init_loss).mean()),
            }
        )
        return use, metrics

    def after_adjust(self, state, info):
        hp, new = self.hp, state
        if getattr(self, "_new_cache", None):
            cache = {**state.cache, **self._new_cache} if hp.warm_start else {}
            new = replace(new, cache=cache)
            self._new_cache = None
        if (
            "true" in info
            and "estimate" in info
            and state.switch_detected is None
            and hp.switch == "paper"
            and hp.switch_at is None
        ):
            errs = [*state.switch_errors, self._switch_errors(info)][-hp.switch_window :]
            new = replace(new, switch_errors=errs)
            if switch_due(errs, hp.switch_window, hp.switch_margin):
                delay = hp.tau if hp.switch_delay is None else hp.switch_delay
                new = replace(new, switch_detected=info["t"], switch_round=info["t"] + delay)
        return new

    def _switch_errors(self, info):
        f = cosine_distance if self.hp.switch_metric == "cos" else relative_l1
        true = self._flat(info["true"])
        return (
            float(f(self._flat(info["estimate"]), true).mean()),
            float(f(self._flat(info["delta"]), true).mean()),
        )

    def round_metrics(self, state, updates):
        return {}


register(GIStaleness)
