"""Unlimited staleness with intertwined data and device heterogeneity (Wang and Gao, AAAI 2025):
the clients that hold most of one class are also the slow ones, and their updates arrive tau
rounds late. The baselines turn a stale update Delta (computed from w^(t-tau)) into a contribution
w^t + Delta_use; the paper's method (`gi_staleness`, in flkit.methods.staleness_gi) estimates the
unstale update by gradient inversion.

Round t (the run loop's round r is t = r - 1):
  1. push w^t into the FIFO of global models (deep copies, the last tau + 1 of them: w^(t-tau) is
     the oldest, an exact lag of tau);
  2. participants: round-robin blocks of m consecutive client ids (uniform sampling as an option);
  3. a normal client trains from w^t; a stale client (one of the `num_stale` holders of the most
     samples of `affected_class`) trains from w^(t-tau) once t >= tau, before that it is normal;
  4. the server takes the plain mean of the participants' models (stale ones: w^t + Delta_use).

Public formulas (students re-implement them in the exercise):
  weighted_factor(tau, a, b) = 1 / (1 + exp(a (tau - b)))
  first_order(delta, w_now, w_then, lam) = delta - lam * delta * delta * (w_now - w_then)
  uniqueness_threshold(updates) = mean over all pairs (j, k) of 1 - cos(u_j, u_k)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from ..engine import evaluate
from ..state import stack_states
from ..utils import FlkitError, check_range
from .base import Method, RoundLog, ServerState, weighted_average
from .hyperparameters import Hyperparameters, choice, flag, integer, real
from .registry import register

PARTICIPATION = ("round_robin", "uniform")


# ------------------------------------------------------------------------------ the formulas
def weighted_factor(tau: float, a: float = 0.25, b: float = 10) -> float:
    """Weight of a tau-stale update (sigmoid staleness weighting, Shi et al. 2020)."""
    check_range("tau", tau, 0)
    z = a * (tau - b)
    return 0.0 if z > 700 else 1.0 / (1.0 + math.exp(z))


def weighted_factor_exp(tau: float) -> float:
    """The official code's alternative weighting 2^(-tau/20)."""
    check_range("tau", tau, 0)
    return 2.0 ** (-tau / 20)


def first_order(
    delta: torch.Tensor, w_now: torch.Tensor, w_then: torch.Tensor, lam: float = 4.0
) -> torch.Tensor:
    """First-order (DC-ASGD) compensation of a stale update in delta form:
    delta - lam * delta ⊙ delta ⊙ (w_now - w_then)."""
    return delta - lam * delta * delta * (w_now - w_then)


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """1 - cos(a, b) row-wise for [..., d] tensors (Eq. 7)."""
    return 1 - torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12)


def relative_l1(est: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """||est - true||_1 / ||true||_1 row-wise: a scale-free L1 estimation error."""
    return (est - true).abs().sum(-1) / true.abs().sum(-1).clamp_min(1e-12)


def uniqueness_threshold(updates: torch.Tensor, off_diagonal: bool = False) -> float:
    """Eq. 8: mean pairwise cosine distance of m flattened updates [m, d]. Literal form divides
    by m^2 (the zero diagonal included); off_diagonal=True divides by m (m - 1)."""
    if updates.dim() != 2 or updates.shape[0] < 1:
        raise FlkitError(f"updates must be [m, d] with m >= 1; got shape {tuple(updates.shape)}")
    m = updates.shape[0]
    u = torch.nn.functional.normalize(updates.double(), dim=1, eps=1e-12)
    dist = (1 - u @ u.T).fill_diagonal_(0)
    if off_diagonal:
        if m < 2:
            raise FlkitError("off_diagonal=True needs at least 2 updates")
        return float(dist.sum() / (m * (m - 1)))
    return float(dist.sum() / m**2)


def gamma_ramp(t: int, switch_at: int | None, window: float = 0.1) -> float:
    """Weight of the GI estimate: 1 before the switching round, then falling linearly to 0 over
    L = max(1, round(window * switch_at)) rounds (window = 0: a hard switch)."""
    check_range("gamma window", window, 0)
    if switch_at is None or t < switch_at:
        return 1.0
    if window == 0:
        return 0.0
    length = max(1, round(window * switch_at))
    return max(0.0, 1.0 - (t - switch_at) / length)


def stale_clients(parts, y: torch.Tensor, affected_class: int, num_stale: int) -> list[int]:
    """The `num_stale` clients holding the most samples of `affected_class` (ties: lower id)."""
    counts = torch.stack([(y[ix] == affected_class).sum() for ix in parts]).cpu()
    order = sorted(range(len(parts)), key=lambda i: (-int(counts[i]), i))
    return sorted(order[:num_stale])


def round_robin(num_clients: int, m: int, rnd: int) -> list[int]:
    """Block of m consecutive ids; the block restarts at 0 when it would pass the last client."""
    blocks = max(1, num_clients // m)
    start = ((rnd - 1) % blocks) * m
    return list(range(start, start + m))


# ------------------------------------------------------------------------------ the methods
@dataclass(frozen=True)
class StalenessParams(Hyperparameters):
    tau: int = integer(40, 0)  # rounds a stale client's update lags behind
    affected_class: int = integer(5, 0)  # the class the stale clients hold most of
    num_stale: int = integer(10, 0)  # how many clients are stale
    participation: str = choice("round_robin", PARTICIPATION)
    track_error: bool = flag(False)  # also train the unstale update, to measure errors


@dataclass
class StalenessState(ServerState):
    fifo: list = field(default_factory=list)  # the last global models, oldest first


class StalenessMethod(Method):
    """Shared round of every staleness method; subclasses change `adjust` (and W-Pred the stale
    start, Asyn-Tiers the aggregation). `unstale` is this class with staleness switched off."""

    name = "unstale"
    Params = StalenessParams
    State = StalenessState
    stale_enabled = False
    extra_history = 0  # additional global models the FIFO keeps (W-Pred: tau)

    def check_params(self):
        ctx, hp = self.ctx, self.hp
        check_range("affected_class", hp.affected_class, 0, ctx.num_classes - 1)
        check_range("num_stale", hp.num_stale, 0, len(ctx.parts))
        self.stale = set(stale_clients(ctx.parts, ctx.y, hp.affected_class, hp.num_stale))

    def select_clients(self, state, rnd):
        if self.hp.participation == "uniform":
            return super().select_clients(state, rnd)
        n = len(self.ctx.parts)
        return round_robin(n, self.ctx.clients_per_round or n, rnd)

    def eval_metrics(self, state, x, y):
        _, _, per = evaluate(self.ctx.model, state.model, x, y, per_class=self.ctx.num_classes)
        return {"affected_accuracy": float(per[self.hp.affected_class])}

    # -- hooks
    def stale_start(self, state, fifo):
        """The model a stale client trains from: w^(t-tau)."""
        return fifo[-(self.hp.tau + 1)]

    def adjust(self, state, info: dict) -> tuple[dict, dict]:
        """Delta_use for the stale participants ({name: [S, ...]}) and extra round metrics."""
        return info["delta"], {}

    def combine(self, state, models: dict, stale_mask: torch.Tensor) -> dict:
        """Plain mean of the participants' models (the official code's aggregation)."""
        k = stale_mask.numel()
        return weighted_average(models, torch.ones(k, device=stale_mask.device))

    # -- the round
    def round(self, state, clients, rnd):
        t, tau = rnd - 1, self.hp.tau
        now = state.model
        keep = tau + 1 + self.extra_history
        fifo = (list(state.fifo) + [{n: v.clone() for n, v in now.items()}])[-keep:]
        lagged = self.stale_enabled and tau > 0 and len(fifo) >= tau + 1
        is_stale = [lagged and c in self.stale for c in clients]
        start_stale = self.stale_start(state, fifo) if any(is_stale) else None
        starts = stack_states([start_stale if s else now for s in is_stale])
        res = self.train(starts, clients, rnd)
        self._round_training = (clients, is_stale, res.state, starts)
        models = dict(res.state)
        mask = torch.tensor(is_stale, device=self.ctx.x.device)
        metrics = {"stale_participants": int(mask.sum())}
        if mask.any():
            si = mask.nonzero().flatten()
            sub = [clients[i] for i in si.tolist()]
            delta = {n: res.state[n][si] - starts[n][si] for n in now}
            info = {
                "t": t,
                "clients": sub,
                "delta": delta,
                "then": fifo[-(tau + 1)],
                "start": start_stale,
                "now": now,
                "rnd": rnd,
                "fifo": fifo,
            }
            if self.hp.track_error or self.needs_oracle(state, t):
                oracle = self.train(stack_states([now] * len(sub)), sub, rnd)
                info["true"] = {n: oracle.state[n] - now[n] for n in now}
            use, extra = self.adjust(state, info)
            metrics.update(extra)
            if "true" in info:
                metrics.update(self.errors(info))
            for n in now:
                models[n] = models[n].index_copy(0, si, (now[n] + use[n]).to(models[n].dtype))
            state = self.after_adjust(state, info)
        new_model = self.combine(state, models, mask)
        loss = float(res.train_loss.mean())
        bits = [32 * sum(v[0].numel() for v in res.state.values())] * len(clients)
        new_state = replace(state, model=new_model, fifo=fifo)
        return new_state, RoundLog(bits, self.downlink_bits(state, clients), loss, metrics)

    def needs_oracle(self, state, t) -> bool:
        return False

    def after_adjust(self, state, info) -> dict:
        return state

    def errors(self, info) -> dict:
        """Estimation errors vs the oracle unstale update (mean over this round's stale clients)."""
        names = self.param_names

        def flat(d):
            return torch.cat([d[n].reshape(d[n].shape[0], -1) for n in names], 1)

        true, stale = flat(info["true"]), flat(info["delta"])
        fo = flat(
            {n: first_order(info["delta"][n], info["now"][n], info["then"][n]) for n in names}
        )
        out = {
            "err_stale_cos": float(cosine_distance(stale, true).mean()),
            "err_stale_l1": float(relative_l1(stale, true).mean()),
            "err_fo_cos": float(cosine_distance(fo, true).mean()),
            "err_fo_l1": float(relative_l1(fo, true).mean()),
        }
        if "estimate" in info:
            est = flat(info["estimate"])
            out.update(
                {
                    "err_gi_cos": float(cosine_distance(est, true).mean()),
                    "err_gi_l1": float(relative_l1(est, true).mean()),
                }
            )
        return out


class Unweighted(StalenessMethod):
    """FedAvg with stale updates used as they are."""

    name = "unweighted"
    stale_enabled = True


class Weighted(Unweighted):
    """Stale update scaled by s(tau): the sigmoid with a, b (form='sigmoid') or 2^(-tau/20)."""

    name = "weighted"

    @dataclass(frozen=True)
    class Params(StalenessParams):
        a: float = real(0.25, 0.0)  # slope of the sigmoid
        b: float = real(10.0, 0.0)  # staleness at which the weight is 1/2
        form: str = choice("sigmoid", ("sigmoid", "exp"))

    def adjust(self, state, info):
        hp = self.hp
        s = (
            weighted_factor(hp.tau, hp.a, hp.b)
            if hp.form == "sigmoid"
            else weighted_factor_exp(hp.tau)
        )
        return {n: s * v for n, v in info["delta"].items()}, {"stale_weight": s}


def _first_order_all(delta, now, ref, lam, names):
    """first_order on the trainable tensors, buffers' deltas unchanged."""
    return {n: first_order(v, now[n], ref[n], lam) if n in names else v for n, v in delta.items()}


class FirstOrder(Unweighted):
    """Taylor (DC-ASGD style) compensation with lambda' (code value 4)."""

    name = "first_order"

    @dataclass(frozen=True)
    class Params(StalenessParams):
        lam: float = real(4.0, 0.0)  # lambda' of the compensation

    def adjust(self, state, info):
        return _first_order_all(
            info["delta"], info["now"], info["then"], self.hp.lam, set(self.param_names)
        ), {}


def drift_prediction(then: dict, past: dict, damping: float = 1.0) -> dict:
    """W-Pred's predicted global model: `then` = w^(t-tau) moved on by `damping` times the drift
    it made since `past` = w^(t-tau-span), span = min(tau, t - tau) rounds:
    then + damping (then - past). With span = tau and damping 1 this continues the mean global
    step of the last tau rounds for tau rounds; damping 0 is w^(t-tau) itself (no prediction).
    The prediction never moves farther than `damping` times what the model already moved over
    span rounds (a single early, large step is never scaled up by tau)."""
    check_range("damping", damping, 0, 1)
    return {
        n: then[n] + damping * (then[n] - past[n]) if then[n].is_floating_point() else then[n]
        for n in then
    }


def prediction_error(models: list, tau: int, damping: float, start: int | None = None) -> float:
    """Mean over t of ||w_pred^t - w^t|| / ||w^t - w^(t-tau)|| along a sequence of global models
    [w^0, w^1, ...] (dicts of floating tensors), for t from `start` (default tau) to the last:
    the error of W-Pred's prediction relative to not predicting at all (1 = as far from w^t as
    w^(t-tau) is, below 1 = the prediction helps)."""
    check_range("tau", tau, 1)
    start = tau if start is None else start
    if start < tau or start >= len(models):
        raise FlkitError(
            f"start={start}; accepted: tau={tau} <= start < {len(models)} (the models given)"
        )
    names = [n for n, v in models[0].items() if v.is_floating_point()]

    def flat(m):
        return torch.cat([m[n].double().flatten() for n in names])

    ratios = []
    for t in range(start, len(models)):
        span = min(tau, t - tau)
        then = models[t - tau]
        pred = flat(drift_prediction(then, models[t - tau - span], damping))
        now, base = flat(models[t]), flat(then)
        ratios.append(float((pred - now).norm() / (now - base).norm().clamp_min(1e-300)))
    return sum(ratios) / len(ratios)


#: how W-Pred predicts the future global model ("drift": the mean global step over the last
#: tau rounds, the smoothed step that Hakimi et al.'s look-ahead uses in place of the last one)
W_PRED_RULES = ("drift",)


class WPred(FirstOrder):
    """Future-weight prediction (Hakimi et al. 2019, as the paper describes it): the stale client
    trains from a prediction of w^t made at t - tau, then its update is first-order corrected by
    w^t minus that prediction. The prediction (`predict="drift"`, :func:`drift_prediction`) adds
    to w^(t-tau) `damping` times the drift of the last min(tau, t - tau) rounds (at t = tau, with
    no past model, it is w^(t-tau) itself). Undamped (damping 1), on a trajectory that zig-zags
    about as much as it drifts, the prediction lands farther from w^t than w^(t-tau) does, and the
    stale update trained from it, corrected by that larger gap, pulls the model away. The default
    adds half the drift; :func:`prediction_error` measures how close a damping's prediction lands
    on a trajectory, the measure a caller chooses it by."""

    name = "w_pred"

    @dataclass(frozen=True)
    class Params(StalenessParams):
        lam: float = real(4.0, 0.0)  # lambda' of the compensation
        predict: str = choice("drift", W_PRED_RULES)
        damping: float = real(0.5, 0.0, 1.0)  # share of the drift the prediction adds

    @property
    def extra_history(self):
        return self.hp.tau  # w^(t-2 tau): the start of the drift window

    def stale_start(self, state, fifo):
        tau = self.hp.tau
        then = fifo[-(tau + 1)]
        span = min(tau, len(fifo) - (tau + 1))
        return drift_prediction(then, fifo[-(tau + 1) - span], self.hp.damping)

    def adjust(self, state, info):
        return _first_order_all(
            info["delta"], info["now"], info["start"], self.hp.lam, set(self.param_names)
        ), {}


class AsynTiers(Unweighted):
    """Two tiers (non-stale F, stale S), FedAvg inside each, tiers weighted by their population:
    w = (N_F w_F + N_S w_S) / N; a tier without participants this round keeps w^t."""

    name = "asyn_tiers"

    def combine(self, state, models, stale_mask):
        now = state.model
        in_s = torch.tensor([c in self.stale for c in self._clients], device=stale_mask.device)
        tiers_in = [~in_s, in_s]
        n_s = len(self.stale)
        sizes = [len(self.ctx.parts) - n_s, n_s]
        out = {}
        for n, v in now.items():
            acc = torch.zeros_like(v, dtype=torch.float64)
            for sel, size in zip(tiers_in, sizes):
                tier = models[n][sel].double().mean(0) if sel.any() else v.double()
                acc = acc + size * tier
            out[n] = (acc / sum(sizes)).to(v.dtype) if v.is_floating_point() else v
        return out

    def round(self, state, clients, rnd):
        self._clients = clients  # tiers are by membership, also before staleness starts
        return super().round(state, clients, rnd)


METHODS = (StalenessMethod, Unweighted, Weighted, FirstOrder, WPred, AsynTiers)


for _cls in METHODS:
    register(_cls)
