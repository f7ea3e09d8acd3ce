"""FedAST and its synchronous baselines as schedules over :mod:`flkit.sim`, training abstracted.

Everything about *when* requests are sent, kept, aggregated and reallocated lives here; *what*
an update is lives behind a :class:`Trainer` (the real one wraps the batched engine; the tests use
toy trainers). Spec: ``papers/003-fedast.md`` (section numbers below refer to it).

Methods
-------
- :class:`FedAST` — option ``"S"`` (static R_m, b_m) or ``"D"`` (Realloc + b_m = max(1, ceil(A_m/r))),
  ``realloc_rule="official"`` (§3.5) or ``"paper"`` (§3.4), ``no_buffer=True`` for FedAST-NoBuffer.
  Event semantics follow §3.3 exactly (K <= 2 refill with global slack, drop-not-redraw availability,
  cancellation and redistribution on completion, test every ``test_every`` server updates).
- :class:`SyncST` — Sync-ST with first-k straggler mitigation (``k=None``: no mitigation), and the
  selectors ``"ucb"`` (Sync-UCB-ST, §5.3) and ``"bayes"`` (Sync-Bayes-ST / BODS, §5.2).

Training is lazy (§8.3): a request is trained only when its arrival is popped, and then every
outstanding untrained request of the same (task, version) is trained in the same
``Trainer.train`` call (results cached until their arrivals). Requests still untrained when
their task finishes (cancelled) and Sync stragglers discarded by first-k are never trained; a
request already trained as the batch-mate of an earlier arrival and cancelled later has its
result dropped.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from .sim import (LOCAL_STEPS_MULTIPLIER, SPEED_GROUP_FACTORS, SPEED_GROUP_FRACTIONS, DelayModel,
                  ShiftedExponentialDelays, Simulator)
from .utils import FlkitError, check_choice, check_range, numpy_rng

__all__ = [
    "DELAY_RATIOS", "Trainer", "TaskSpec", "FedASTConfig", "SyncConfig", "SimResult",
    "FedAST", "SyncST", "run_fedast", "run_sync",
    "k_rule", "realloc_paper", "realloc_official", "redistribute", "sync_shares",
    "normalized_dispersion", "estimate_variance_paper", "estimate_variance_official",
    "ucb_scores", "expected_improvement",
]

#: per-step delay ratio of each paper task (§3.8); the normal-speed shift is ratio/2, mean ratio.
DELAY_RATIOS = {"mnist": 0.148, "fmnist": 0.240, "cifar10": 0.228, "shakespeare": 0.555, "cifar100": 2.071}

_MISSING = object()


# ============================================================================================
# the training interface
# ============================================================================================
@runtime_checkable
class Trainer(Protocol):
    """What the schedulers need from training. ``task`` is the task name (``TaskSpec.name``).

    Required
    - ``train(task, version, client_ids) -> list`` — one update per entry of ``client_ids``
      (same order; a client may appear twice), each trained from the stored model ``version``.
    - ``aggregate(task, updates) -> int | None`` — apply the mean of ``updates`` to the *current*
      model of ``task`` (FedAST: x <- x + eta_s * mean(diffs)); returns the new version (must be
      the old one + 1) or None.
    - ``evaluate(task) -> float`` — test accuracy of the current model in [0, 1]; or
      ``(accuracy, {"test_loss": ..., ...})``, whose extra numbers go into the history row.

    Optional
    - ``dispersion(task, updates) -> float`` — normalised dispersion
      ``sum_k ||u_k - mean||^2 / (len * ||mean||^2)`` (default: :func:`normalized_dispersion`;
      the official rule excludes bias tensors).
    - ``loss(task, update) -> float`` — reported local training loss (Sync-UCB-ST only).
    - ``release(task, version)`` — the scheduler no longer needs that stored version.
    """

    def train(self, task: str, version: int, client_ids: list) -> list: ...

    def aggregate(self, task: str, updates: list) -> int | None: ...

    def evaluate(self, task: str) -> float: ...


# ============================================================================================
# pure allocation / estimation functions
# ============================================================================================
def k_rule(A_m: int, R_m: int, sum_R: int, sum_A: int, max_new: int = 2) -> int:
    """Number of new requests after an arrival of task m (§3.3 step 7).

    ``A_m`` is task m's outstanding count after decrementing the arrival, ``sum_A`` the total
    over all tasks (after that decrement). K = min(R_m - A_m, sum_R - sum_A, max_new) if
    A_m < R_m, else 0; never negative."""
    if A_m < R_m:
        return max(0, min(R_m - A_m, sum_R - sum_A, max_new))
    return 0


def _active(n, active_mask):
    if active_mask is None:
        return [True] * n
    mask = [bool(a) for a in active_mask]
    if len(mask) != n:
        raise FlkitError(f"active_mask has {len(mask)} entries for {n} tasks")
    return mask


def _check_estimates(name, values):
    arr = [float(v) for v in values]
    for i, v in enumerate(arr):
        if not (math.isfinite(v) and v >= 0):
            raise FlkitError(f"{name}[{i}]={v!r} is outside the accepted range [0, inf) (finite)")
    return arr


def realloc_paper(sigma2_hat: Sequence[float], R_total: int, active_mask=None, min_per_task: int = 1) -> list:
    """Paper Realloc (§3.4): R_m proportional to sqrt(sigma2_hat_m), integers summing to R_total.

    Rounding [R]: every active task first gets ``min_per_task`` (a task with 0 requests could
    never progress), the rest is split proportionally to sqrt(sigma2_hat) by the largest-remainder
    method (ties to the lower index). All-zero estimates give an equal split. Inactive (finished)
    tasks get 0."""
    s = _check_estimates("sigma2_hat", sigma2_hat)
    act = _active(len(s), active_mask)
    idx = [i for i in range(len(s)) if act[i]]
    R_total = int(R_total)
    out = [0] * len(s)
    if not idx:
        return out
    check_range("R_total", R_total, min_per_task * len(idx))
    w = [math.sqrt(s[i]) for i in idx]
    if sum(w) <= 0:
        w = [1.0] * len(idx)
    for i in idx:
        out[i] = min_per_task
    rest = R_total - min_per_task * len(idx)
    tot = sum(w)
    quotas = [rest * wi / tot for wi in w]
    floors = [int(math.floor(q)) for q in quotas]
    left = rest - sum(floors)
    order = sorted(range(len(idx)), key=lambda j: (-(quotas[j] - floors[j]), j))
    for j in order[:left]:
        floors[j] += 1
    for j, i in enumerate(idx):
        out[i] += floors[j]
    return out


def realloc_official(sigma: Sequence[float], R_total: int, r: int = 32, active_mask=None) -> list:
    """Official-code Realloc (§3.5 item 5): quantised in units of ``r`` with a floor of ``r``.

    Every active task gets r; residual_m = floor(R_total * sigma_m / sum(sigma)) - r; the rest
    is handed out r at a time to the active task with the largest residual (ties: lower index),
    whose residual then drops by r. Inactive tasks get 0.
    [R] when R_total is not a multiple of r, the remainder (< r) goes to the task with the
    largest residual after the loop, so the total is preserved; when R_total < r * active the
    unit shrinks to floor(R_total / active); all-zero sigma counts as equal sigma."""
    s = _check_estimates("sigma", sigma)
    check_range("r", r, 1)
    act = _active(len(s), active_mask)
    idx = [i for i in range(len(s)) if act[i]]
    R_total = int(R_total)
    out = [0] * len(s)
    if not idx:
        return out
    check_range("R_total", R_total, len(idx))
    unit = min(int(r), R_total // len(idx))
    sig = [s[i] if act[i] else 0.0 for i in range(len(s))]
    tot = sum(sig)
    if tot <= 0:
        sig = [1.0 if act[i] else 0.0 for i in range(len(s))]
        tot = float(len(idx))
    resid = {i: int(math.floor(R_total * sig[i] / tot)) - unit for i in idx}
    for i in idx:
        out[i] = unit
    left = R_total - unit * len(idx)

    def best():
        return max(idx, key=lambda i: (resid[i], -i))

    while left >= unit:
        i = best()
        out[i] += unit
        resid[i] -= unit
        left -= unit
    if left > 0:
        out[best()] += left
    return out


def redistribute(freed: int, targets: Sequence[int], active_mask, rng: np.random.Generator) -> list:
    """Shares of ``freed`` requests for the remaining tasks (§3.6 item 2).

    share_j = floor(freed * R_j / sum R_active); leftover units go one at a time to uniformly
    random active tasks. Returns a list of shares (0 for inactive tasks)."""
    act = _active(len(targets), active_mask)
    idx = [i for i in range(len(targets)) if act[i]]
    out = [0] * len(targets)
    if not idx or freed <= 0:
        return out
    tot = sum(targets[i] for i in idx)
    for i in idx:
        out[i] = int(freed * targets[i] // tot) if tot > 0 else 0
    for _ in range(int(freed) - sum(out)):
        out[idx[int(rng.integers(len(idx)))]] += 1
    return out


def sync_shares(weights: Sequence[float], n_avail: int, rng: np.random.Generator) -> list:
    """Sync client shares (§5.1 step 1): n_m = max(min(w_m, 1), floor(n_avail w_m / sum w));
    the ``n_avail - sum n`` leftover slots go +1 each to tasks drawn uniformly with replacement
    among tasks with w_m > 0. Tasks with w_m = 0 get 0."""
    w = [float(x) for x in weights]
    tot = sum(w)
    if tot <= 0:
        return [0] * len(w)
    n = [max(min(wi, 1.0), math.floor(n_avail * wi / tot)) if wi > 0 else 0 for wi in w]
    n = [int(x) for x in n]
    alive = [i for i, wi in enumerate(w) if wi > 0]
    left = n_avail - sum(n)
    if left > 0:
        for i in rng.choice(alive, size=left, replace=True):
            n[int(i)] += 1
    return n


def _flat(u, exclude_bias: bool):
    """An update as one float64 vector: array/tensor, or a dict name -> tensor."""
    if isinstance(u, dict):
        parts = [_flat(v, False) for k, v in u.items() if not (exclude_bias and "bias" in str(k))]
        return np.concatenate(parts) if parts else np.zeros(0)
    if hasattr(u, "detach"):
        u = u.detach().cpu().numpy()
    return np.asarray(u, dtype=np.float64).ravel()


def normalized_dispersion(updates: Sequence[Any], exclude_bias: bool = False) -> float:
    """sum_k ||u_k - mean||^2 / (K ||mean||^2) over updates (arrays, tensors or dicts of tensors).

    With ``exclude_bias`` dict entries whose name contains "bias" are skipped (official code).
    Returns inf when the mean update is zero."""
    if len(updates) < 1:
        raise FlkitError("normalized_dispersion needs at least 1 update; got 0")
    X = np.stack([_flat(u, exclude_bias) for u in updates])
    mean = X.mean(axis=0)
    den = float(mean @ mean) * len(updates)
    num = float(((X - mean) ** 2).sum())
    if den == 0.0:
        return math.inf if num > 0 else 0.0
    return num / den


def estimate_variance_paper(updates, eta_c: float, eta_s: float, tau: float, dispersion: float | None = None) -> float:
    """Algorithm 4: sigma2_hat = eta_c * eta_s * tau * normalised dispersion of ``updates`` (V of them).

    Pass ``dispersion`` to reuse a value computed elsewhere (then ``updates`` is ignored)."""
    d = normalized_dispersion(updates) if dispersion is None else float(dispersion)
    return eta_c * eta_s * tau * d


def estimate_variance_official(updates, eta_c: float, eta_s: float, tau: float,
                               dispersion: float | None = None) -> float:
    """Official code's per-arrival estimate (§3.5 item 2): (eta_s / (eta_c tau^2)) * dispersion / 2,
    dispersion over non-bias tensors (the intended square root is, by operator precedence, a
    halving). Pass ``dispersion`` to reuse a value computed elsewhere."""
    d = normalized_dispersion(updates, exclude_bias=True) if dispersion is None else float(dispersion)
    return eta_s / (eta_c * tau ** 2) * d / 2.0


def ucb_scores(L: np.ndarray, N: np.ndarray, t: int, gamma: float) -> np.ndarray:
    """Discounted UCB score A = L/N + sqrt(2 ln(sum_{s<t} gamma^s) / N); inf where N = 0 [R]."""
    S = sum(gamma ** s for s in range(int(t)))
    bonus_num = 2.0 * math.log(S) if S > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        A = L / N + np.sqrt(max(bonus_num, 0.0) / N)
    A = np.where(N > 0, A, np.inf)
    return A


def expected_improvement(mu, sigma, best: float) -> np.ndarray:
    """Expected improvement for minimisation: (best - mu) Phi(z) + sigma phi(z), z = (best - mu)/sigma.

    sigma = 0 gives max(best - mu, 0)."""
    from scipy.stats import norm
    mu = np.asarray(mu, float)
    sigma = np.asarray(sigma, float)
    imp = best - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        z = imp / sigma
        ei = imp * norm.cdf(z) + sigma * norm.pdf(z)
    return np.where(sigma > 0, ei, np.maximum(imp, 0.0))


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


# ============================================================================================
# configuration
# ============================================================================================
@dataclass
class TaskSpec:
    """One task (model) trained simultaneously with the others.

    ``dataset`` selects the delay ratio from :data:`DELAY_RATIOS` (default: ``name``) unless
    ``delay_ratio`` is given. ``requests``/``buffer`` are FedAST's initial R_m and b_m;
    ``weight`` is the Sync client-share weight w_m; ``test_every`` the FedAST test period in
    server updates; eta_c, eta_s, tau scale the Realloc estimates; ``target=None`` never stops
    on accuracy; ``max_rounds`` stops the task after that many server updates."""
    name: str
    target: float | None = None
    dataset: str | None = None
    delay_ratio: float | None = None
    delay_multiplier: float | None = None
    requests: int = 96
    buffer: int = 3
    test_every: int = 4
    eta_c: float = 0.1
    eta_s: float = 0.1
    tau: float = 27
    weight: float = 1.0
    max_rounds: int | None = None

    def resolved_ratio(self) -> float:
        if self.delay_ratio is not None:
            return float(self.delay_ratio)
        key = self.dataset or self.name
        check_choice("task dataset (for its delay ratio)", key, DELAY_RATIOS)
        return DELAY_RATIOS[key]


@dataclass
class _Common:
    tasks: Sequence[TaskSpec] = ()
    num_clients: int = 1000
    availability: float = 0.3
    seed: int = 0
    group_seed: int = 64
    delay_multiplier: float = LOCAL_STEPS_MULTIPLIER
    shift_fraction: float = 0.5
    group_fractions: tuple = SPEED_GROUP_FRACTIONS
    group_factors: tuple = SPEED_GROUP_FACTORS
    max_time: float = math.inf
    record_events: bool = True

    @property
    def n_avail(self) -> int:
        """Available clients: round(availability * num_clients), at least 1."""
        return max(1, _round_half_up(self.availability * self.num_clients))

    def _validate_common(self):
        if not self.tasks:
            raise FlkitError("tasks is empty; give at least one TaskSpec")
        for t in self.tasks:
            if not isinstance(t, TaskSpec):
                raise FlkitError(f"tasks must hold TaskSpec objects; got {type(t).__name__}")
        names = [t.name for t in self.tasks]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise FlkitError(f"task names must be unique; repeated: {', '.join(dup)}")
        check_range("num_clients", self.num_clients, 1)
        check_range("availability", self.availability, 0, 1, low_open=True)
        check_range("delay_multiplier", self.delay_multiplier, 0)
        check_range("shift_fraction", self.shift_fraction, 0)
        for f in self.group_factors:
            check_range("speed group factor", f, 0)
        if len(self.group_factors) != len(self.group_fractions):
            raise FlkitError("group_factors and group_fractions must have the same length")
        check_range("max_time", self.max_time, 0, low_open=True)
        for t in self.tasks:
            t.resolved_ratio()  # unknown dataset names raise here
            check_range(f"delay_ratio of task {t.name!r}", t.resolved_ratio(), 0)
            if t.delay_multiplier is not None:
                check_range(f"delay_multiplier of task {t.name!r}", t.delay_multiplier, 0)
            if t.target is not None:
                check_range(f"target of task {t.name!r}", t.target, 0, 1, low_open=True)
            check_range(f"test_every of task {t.name!r}", t.test_every, 1)
            if t.max_rounds is not None:
                check_range(f"max_rounds of task {t.name!r}", t.max_rounds, 1)
            check_range(f"eta_c of task {t.name!r}", t.eta_c, 0, low_open=True)
            check_range(f"eta_s of task {t.name!r}", t.eta_s, 0, low_open=True)
            check_range(f"tau of task {t.name!r}", t.tau, 0, low_open=True)
            check_range(f"weight of task {t.name!r}", t.weight, 0)

    def delay_model(self) -> ShiftedExponentialDelays:
        return ShiftedExponentialDelays(
            self.num_clients, [t.resolved_ratio() for t in self.tasks],
            multiplier=[self.delay_multiplier if t.delay_multiplier is None else t.delay_multiplier for t in self.tasks],
            shift_fraction=self.shift_fraction, group_fractions=self.group_fractions,
            group_factors=self.group_factors, group_seed=self.group_seed, seed=self.seed)


@dataclass
class FedASTConfig(_Common):
    """FedAST run settings (defaults: the official demo, §3.8)."""
    option: str = "D"
    realloc_rule: str = "official"
    no_buffer: bool = False
    ratio: int = 32               # r = R/b
    window: int = 8               # V (official: estimates over the 7 most recent, §3.5 item 1)
    period_factor: float = 0.75   # c_period = floor(period_factor * sum R^(0)) * active tasks
    warmup_rounds: int = 8        # official trigger: every task has > warmup_rounds server updates
    max_new: int = 2              # K <= max_new
    max_events: int | None = None

    def __post_init__(self):
        self._validate_common()
        check_choice("option", self.option, ("S", "D"))
        check_choice("realloc_rule", self.realloc_rule, ("paper", "official"))
        check_range("ratio", self.ratio, 1)
        check_range("window", self.window, 2)
        check_range("period_factor", self.period_factor, 0, low_open=True)
        check_range("warmup_rounds", self.warmup_rounds, 0)
        check_range("max_new", self.max_new, 1)
        if self.max_events is not None:
            check_range("max_events", self.max_events, 1)
        for t in self.tasks:
            check_range(f"buffer of task {t.name!r}", t.buffer, 1)
            check_range(f"requests of task {t.name!r}", t.requests, 1, self.num_clients)
        tot = sum(t.requests for t in self.tasks)
        if tot > self.num_clients:
            raise FlkitError(f"total active requests sum(requests)={tot} is outside the accepted range "
                             f"[{len(self.tasks)}, {self.num_clients}] (at most one per client of the pool)")


@dataclass
class SyncConfig(_Common):
    """Synchronous simultaneous-training baselines (§5)."""
    k: int | None = 30            # first-k; None = no straggler mitigation (keep all)
    selector: str = "random"      # random (Sync-ST) | ucb (Sync-UCB-ST) | bayes (Sync-Bayes-ST)
    test_every: int = 1           # rounds between evaluations
    max_rounds: int | None = None
    ucb_gamma: float = 0.99
    bods_alpha: float = 0.25
    bods_candidates: int = 75
    extra_candidates: int = 5

    def __post_init__(self):
        self._validate_common()
        check_choice("selector", self.selector, ("random", "ucb", "bayes"))
        if self.k is not None:
            check_range("k", self.k, 1)
        check_range("test_every", self.test_every, 1)
        if self.max_rounds is not None:
            check_range("max_rounds", self.max_rounds, 1)
        check_range("ucb_gamma", self.ucb_gamma, 0, 1, low_open=True, high_open=True)
        check_range("bods_alpha", self.bods_alpha, 0, 1)
        check_range("bods_candidates", self.bods_candidates, 1)
        check_range("extra_candidates", self.extra_candidates, 0)
        if sum(t.weight for t in self.tasks) <= 0:
            raise FlkitError("the task weights sum to 0; at least one task needs weight > 0")
        if self.n_avail < sum(1 for t in self.tasks if t.weight > 0):
            raise FlkitError(f"availability gives {self.n_avail} clients per round, fewer than the "
                             f"{len(self.tasks)} tasks; accepted: at least one client per task")


# ============================================================================================
# results
# ============================================================================================
EVENT_COLUMNS = ("time", "task", "client", "version", "staleness", "kind")


@dataclass
class SimResult:
    """Outcome of one simulated run.

    - ``events``: rows ``(time, task_index, client, version, staleness, kind)``; kinds from the
      simulator (dispatch, drop, arrive, cancel, discard) plus aggregate, complete, stop, realloc.
    - ``history``: one dict per server update: task, round, sim_time, accuracy (None when not
      evaluated), buffer, requests (R), active (A), mean_staleness.
    - ``completion_time``: task -> time its target was reached (None if not reached).
    """
    method: str
    tasks: list
    events: list
    history: list
    completion_time: dict
    total_time: float
    stats: dict = field(default_factory=dict)
    allocations: list = field(default_factory=list)

    @property
    def all_completed(self) -> bool:
        return all(v is not None for v in self.completion_time.values())

    def events_frame(self):
        import pandas as pd
        df = pd.DataFrame([list(e) for e in self.events], columns=list(EVENT_COLUMNS))
        # rows without a task (aggregations, reallocations) hold None, which pandas turns into NaN
        df["task"] = pd.Series([self.tasks[int(t)] if t is not None and t == t else None for t in df["task"]],
                               dtype=object, index=df.index)
        return df

    def history_frame(self):
        import pandas as pd
        return pd.DataFrame(self.history)


# ============================================================================================
# FedAST
# ============================================================================================
def evaluate_task(trainer, task: str) -> tuple[float, dict]:
    """The trainer's evaluation as (accuracy, extra history columns)."""
    res = trainer.evaluate(task)
    if isinstance(res, tuple):
        return float(res[0]), dict(res[1])
    return float(res), {}


class FedAST:
    """Event-driven FedAST (§3.3) over a :class:`~flkit.sim.Simulator`.

    ``delays`` overrides the config's shifted-exponential model (e.g. :class:`~flkit.sim.FixedDelays`);
    ``client_draws`` scripts the uniform client draws (tests)."""

    def __init__(self, config: FedASTConfig, trainer: Trainer, *, delays: DelayModel | None = None,
                 client_draws=None):
        if not isinstance(config, FedASTConfig):
            raise FlkitError(f"config must be a FedASTConfig; got {type(config).__name__}")
        for meth in ("train", "aggregate", "evaluate"):
            if not callable(getattr(trainer, meth, None)):
                raise FlkitError(f"trainer lacks the required method {meth}(); see flkit.fedast_sched.Trainer")
        self.cfg = config
        self.trainer = trainer
        self.names = [t.name for t in config.tasks]
        self.specs = list(config.tasks)
        M = len(self.specs)
        self.sim = Simulator(config.num_clients, delays if delays is not None else config.delay_model(),
                             num_tasks=M, max_busy=config.n_avail, seed=config.seed,
                             record=config.record_events, client_draws=client_draws)
        self.rng_redistribute = numpy_rng(config.seed, "redistribute")
        self._dispersion = getattr(trainer, "dispersion", None)
        self._release = getattr(trainer, "release", None)

    # ------------------------------------------------------------------ helpers
    def _log(self, row):
        if self.sim.log is not None:
            self.sim.log.append(row)

    def _send(self, m: int, check: bool) -> bool:
        req = self.sim.dispatch_random(m, check_availability=check)
        if req is None:
            return False
        key = (m, req.version)
        grp = self.pending.get(key)
        if grp is None:
            self.pending[key] = [req]
        else:
            grp.append(req)
        self.A[m] += 1
        self.sumA += 1
        return True

    def _release_version(self, m: int, v: int):
        if self._release is not None:
            self._release(self.names[m], v)

    def _update_of(self, req):
        """The update of an arrived request: cached, or train its whole (task, version) group."""
        u = self.results.pop(req.id, _MISSING)
        if u is not _MISSING:
            return u
        m, v = req.task, req.version
        group = self.pending.pop((m, v))
        updates = self.trainer.train(self.names[m], v, [r.client for r in group])
        if len(updates) != len(group):
            raise FlkitError(f"trainer.train returned {len(updates)} updates for {len(group)} clients "
                             f"(task {self.names[m]!r}, version {v}); it must return one per client")
        self.stats["train_calls"] += 1
        self.stats["trained_requests"] += len(group)
        self.trained_ids.extend(r.id for r in group)
        for r, u in zip(group, updates):
            if r is not req:
                self.results[r.id] = u
        if v != self.sim.version[m]:
            self._release_version(m, v)
        return updates[group.index(req)]

    def _disp(self, m: int, updates) -> float:
        if self._dispersion is not None:
            return float(self._dispersion(self.names[m], list(updates)))
        return normalized_dispersion(list(updates), exclude_bias=self.cfg.realloc_rule == "official")

    # ------------------------------------------------------------------ Realloc (option D)
    def _bookkeeping(self, m: int, upd):
        cfg = self.cfg
        spec = self.specs[m]
        self.counter += 1
        win = self.windows[m]
        win.append(upd)
        if cfg.realloc_rule == "official":
            if len(win) >= cfg.window:
                win.popleft()
                d = self._disp(m, win)
                self.estimates[m].append(spec.eta_s / (spec.eta_c * spec.tau ** 2) * d / 2.0)  # = estimate_variance_official
            if self.counter < self.c_period:
                return
            n_act = [not f for f in self.finished]
            if (min(self.sim.version) > cfg.warmup_rounds
                    and all(self.estimates[j] for j in range(self.M) if n_act[j])):
                sigma = [float(np.mean(self.estimates[j])) if n_act[j] else 0.0 for j in range(self.M)]
                self.counter = 0
                self.estimates = [[] for _ in range(self.M)]
                if all(math.isfinite(s) for s in sigma):
                    self._apply_realloc(realloc_official(sigma, self.sumR, cfg.ratio, n_act), sigma)
        else:  # paper
            if self.counter < self.c_period:
                return
            n_act = [not f for f in self.finished]
            if all(len(self.windows[j]) >= cfg.window for j in range(self.M) if n_act[j]):
                s2 = []
                for j in range(self.M):
                    if n_act[j]:
                        sp = self.specs[j]
                        s2.append(estimate_variance_paper(None, sp.eta_c, sp.eta_s, sp.tau,
                                                          dispersion=self._disp(j, self.windows[j])))
                    else:
                        s2.append(0.0)
                self.counter = 0
                if all(math.isfinite(s) for s in s2):
                    self._apply_realloc(realloc_paper(s2, self.sumR, n_act), s2)

    def _apply_realloc(self, newR, estimates):
        self.R = list(newR)
        self.sumR = sum(self.R)
        self.stats["reallocations"] += 1
        self.allocations.append({"time": self.sim.now, "requests": dict(zip(self.names, self.R)),
                                 "estimates": dict(zip(self.names, estimates))})
        self._log((self.sim.now, None, None, None, None, "realloc"))

    # ------------------------------------------------------------------ server update / completion
    def _aggregate(self, m: int, staleness: list):
        name = self.names[m]
        updates = self.buf[m]
        self.buf[m] = []
        ret = self.trainer.aggregate(name, updates)
        new_v = self.sim.advance_version(m)
        if ret is not None and int(ret) != new_v:
            raise FlkitError(f"trainer.aggregate returned version {ret!r} for task {name!r}; expected {new_v}")
        self._log((self.sim.now, m, None, new_v, None, "aggregate"))
        if (m, new_v - 1) not in self.pending:
            self._release_version(m, new_v - 1)
        spec = self.specs[m]
        acc = None
        if new_v % spec.test_every == 0:
            acc, extra = evaluate_task(self.trainer, name)
        else:
            extra = {}
        self.history.append({"task": name, "round": new_v, "sim_time": self.sim.now, "accuracy": acc,
                             "buffer": len(updates), "requests": self.R[m], "active": self.A[m],
                             "mean_staleness": sum(staleness) / len(staleness) if staleness else 0.0, **extra})
        if acc is not None and spec.target is not None and acc >= spec.target:
            self._finish(m, completed=True)
        elif spec.max_rounds is not None and new_v >= spec.max_rounds:
            self._finish(m, completed=False)

    def _finish(self, m: int, completed: bool):
        cfg, sim = self.cfg, self.sim
        self.finished[m] = True
        self.n_active -= 1
        if completed:
            self.completion_time[self.names[m]] = sim.now
        self._log((sim.now, m, None, sim.version[m], None, "complete" if completed else "stop"))
        for r in sim.cancel_task(m):
            self.results.pop(r.id, None)
        for key in [k for k in self.pending if k[0] == m]:
            del self.pending[key]
            if key[1] != sim.version[m]:
                self._release_version(m, key[1])
        self.sumA -= self.A[m]
        self.A[m] = 0
        freed = self.R[m]
        self.R[m] = 0
        self.buf[m] = []
        self.bstale[m] = []
        active = [not f for f in self.finished]
        if not any(active):
            return
        old = list(self.R)
        shares = redistribute(freed, self.R, active, self.rng_redistribute)
        for j in range(self.M):
            if shares[j] and active[j]:
                self.R[j] += shares[j]
                if old[j] > 0:
                    self.b[j] = 1 if cfg.no_buffer else max(1, _round_half_up(self.R[j] / cfg.ratio))
        self.sumR = sum(self.R)
        self.c_period = self.c_base * self.n_active
        if cfg.option == "S":
            for j in range(self.M):
                for _ in range(shares[j]):
                    self._send(j, check=False)   # official createNewJob: no availability check

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimResult:
        cfg, sim, specs = self.cfg, self.sim, self.specs
        M = self.M = len(specs)
        self.R = [t.requests for t in specs]
        self.sumR = sum(self.R)
        self.A = [0] * M
        self.sumA = 0
        self.b = [1 if cfg.no_buffer else t.buffer for t in specs]
        self.buf = [[] for _ in range(M)]
        self.bstale = [[] for _ in range(M)]
        self.finished = [False] * M
        self.n_active = M
        self.pending: dict = {}
        self.results: dict = {}
        self.trained_ids: list = []
        self.history: list = []
        self.allocations: list = []
        self.completion_time = {n: None for n in self.names}
        self.stats = {"train_calls": 0, "trained_requests": 0, "reallocations": 0, "events": 0}
        dynamic = cfg.option == "D"
        self.windows = [deque(maxlen=cfg.window) for _ in range(M)]
        self.estimates = [[] for _ in range(M)]
        self.counter = 0
        self.c_base = int(math.floor(cfg.period_factor * self.sumR))
        self.c_period = self.c_base * M
        r = cfg.ratio
        no_buffer = cfg.no_buffer
        max_new = cfg.max_new
        max_events = cfg.max_events if cfg.max_events is not None else math.inf
        max_time = cfg.max_time

        for m in range(M):                      # initial requests ignore the availability cap
            for _ in range(self.R[m]):
                self._send(m, check=False)

        n_events = 0
        stop_reason = "completed"
        while self.n_active > 0:
            if n_events >= max_events:
                stop_reason = "max_events"
                break
            t_next = sim.peek_time()
            if t_next is None:
                stop_reason = "no_outstanding_requests"
                break
            if t_next > max_time:
                sim.advance_to(max_time)
                stop_reason = "max_time"
                break
            req = sim.pop()
            n_events += 1
            m = req.task
            upd = self._update_of(req)
            if dynamic:
                self._bookkeeping(m, upd)
            self.buf[m].append(upd)
            self.bstale[m].append(req.staleness)
            if len(self.buf[m]) >= self.b[m]:
                st = self.bstale[m]
                self.bstale[m] = []
                self._aggregate(m, st)
            if self.A[m] > 0:
                self.A[m] -= 1
                self.sumA -= 1
            K = k_rule(self.A[m], self.R[m], self.sumR, self.sumA, max_new)
            for _ in range(K):
                self._send(m, check=True)
            if no_buffer:
                self.b[m] = 1
            elif dynamic:
                a = self.A[m]
                self.b[m] = max(1, -(-a // r))
        self.stats["events"] = n_events
        self.stats["stop_reason"] = stop_reason
        self.stats.update(sim.counts)
        method = "FedAST-NoBuffer" if cfg.no_buffer else f"FedAST({cfg.option})"
        return SimResult(method, list(self.names), sim.log if sim.log is not None else [], self.history,
                         dict(self.completion_time), sim.now, self.stats, self.allocations)


def run_fedast(config: FedASTConfig, trainer: Trainer, **kw) -> SimResult:
    """Shorthand for ``FedAST(config, trainer, **kw).run()``."""
    return FedAST(config, trainer, **kw).run()


# ============================================================================================
# synchronous baselines
# ============================================================================================
class SyncST:
    """Sync-ST / Sync-UCB-ST / Sync-Bayes-ST (§5) over a :class:`~flkit.sim.Simulator`.

    Each round: shares n_m from the weights, k_m = min(k, n_m) (k=None: n_m), clients assigned
    by the selector, every selected client timed FCFS from the round start, the k_m earliest
    finishers kept per task (only those are trained: one ``train`` call per task and round), the
    clock moves to max over tasks of the k_m-th earliest finish, every task with n_m > 0
    aggregates, and tasks are evaluated every ``test_every`` rounds."""

    def __init__(self, config: SyncConfig, trainer: Trainer, *, delays: DelayModel | None = None):
        if not isinstance(config, SyncConfig):
            raise FlkitError(f"config must be a SyncConfig; got {type(config).__name__}")
        for meth in ("train", "aggregate", "evaluate"):
            if not callable(getattr(trainer, meth, None)):
                raise FlkitError(f"trainer lacks the required method {meth}(); see flkit.fedast_sched.Trainer")
        if config.selector == "ucb" and not callable(getattr(trainer, "loss", None)):
            raise FlkitError("selector='ucb' needs trainer.loss(task, update) -> float (reported local loss)")
        self.cfg = config
        self.trainer = trainer
        self.names = [t.name for t in config.tasks]
        self.specs = list(config.tasks)
        self.sim = Simulator(config.num_clients, delays if delays is not None else config.delay_model(),
                             num_tasks=len(self.specs), max_busy=None, seed=config.seed,
                             record=config.record_events)
        self.rng = numpy_rng(config.seed, "sync_shares")
        self._release = getattr(trainer, "release", None)

    def _assign_random(self, n, perm):
        out, pos = [], 0
        for nm in n:
            out.append([int(c) for c in perm[pos:pos + nm]])
            pos += nm
        return out

    def _assign_ucb(self, n, rnd):
        cfg, M, N = self.cfg, len(n), self.cfg.num_clients
        cand = self.sim.permutation()[:sum(n) + cfg.extra_candidates]
        is_cand = np.zeros(N, bool)
        is_cand[cand] = True
        used = np.zeros(N, bool)
        out = [[] for _ in range(M)]
        for i in range(M):
            m = (rnd + i) % M
            if n[m] == 0:
                continue
            score = ucb_scores(self.ucb_L[m], self.ucb_N[m], rnd, cfg.ucb_gamma)
            order = np.argsort(-score, kind="stable")
            for c in order:
                if len(out[m]) >= n[m]:
                    break
                if is_cand[c] and not used[c]:
                    used[c] = True
                    out[m].append(int(c))
        return out

    def _assign_bayes(self, n):
        cfg, M, N = self.cfg, len(n), self.cfg.num_clients
        cand = self.sim.permutation()[:sum(n) + cfg.extra_candidates].copy()
        X, options = [], []
        for _ in range(cfg.bods_candidates):
            self.rng_bods.shuffle(cand)
            a = self._assign_random(n, cand)
            x = np.zeros(M * N)
            for m, cl in enumerate(a):
                x[np.asarray(cl, dtype=np.int64) + m * N] = 1.0
            X.append(x)
            options.append(a)
        self.gp.fit(np.vstack(self.bods_X), np.asarray(self.bods_y))
        mu, sd = self.gp.predict(np.vstack(X), return_std=True)
        ei = expected_improvement(mu, sd, float(np.min(self.bods_y)))
        return options[int(np.argmax(ei))]

    def run(self) -> SimResult:
        cfg, sim, specs, trainer = self.cfg, self.sim, self.specs, self.trainer
        M, N = len(specs), cfg.num_clients
        weights = [float(t.weight) for t in specs]
        finished = [w <= 0 for w in weights]       # weight 0: never trained [R]
        completion = {n: None for n in self.names}
        history, stats = [], {"train_calls": 0, "trained_requests": 0, "rounds": 0}
        self.trained_ids: list = []
        if cfg.selector == "ucb":
            self.ucb_N = [np.zeros(N) for _ in range(M)]
            self.ucb_L = [np.zeros(N) for _ in range(M)]
        if cfg.selector == "bayes":
            from sklearn.gaussian_process import GaussianProcessRegressor
            from sklearn.gaussian_process.kernels import Matern
            self.gp = GaussianProcessRegressor(kernel=Matern(), random_state=0)
            self.bods_X, self.bods_y = [], []
            self.bods_counts = [np.zeros(N) for _ in range(M)]
            self.rng_bods = numpy_rng(cfg.seed, "bods")
        rnd = 0
        stop_reason = "completed"
        while not all(finished):
            if cfg.max_rounds is not None and rnd >= cfg.max_rounds:
                stop_reason = "max_rounds"
                break
            if sim.now >= cfg.max_time:
                stop_reason = "max_time"
                break
            w = [0.0 if finished[m] else weights[m] for m in range(M)]
            if cfg.selector == "ucb" and rnd == 0:
                n = [N if w[m] > 0 else 0 for m in range(M)]
                ks = list(n)
                assign = [list(range(N)) if n[m] else [] for m in range(M)]
            else:
                n = sync_shares(w, cfg.n_avail, self.rng)
                ks = [nm if cfg.k is None else min(cfg.k, nm) for nm in n]
                if cfg.selector == "random" or rnd == 0:
                    assign = self._assign_random(n, sim.permutation())
                elif cfg.selector == "ucb":
                    assign = self._assign_ucb(n, rnd)
                else:
                    assign = self._assign_bayes(n)
            groups = [(m, assign[m], ks[m]) for m in range(M) if n[m] > 0]
            res = sim.sync_round(groups)
            kept_by_task = {g[0]: kept for g, kept in zip(groups, res.kept)}
            # train only the kept requests: one batch per task
            updates = {}
            for m, kept in kept_by_task.items():
                if not kept:
                    continue
                v = sim.version[m]
                ups = trainer.train(self.names[m], v, [r.client for r in kept])
                if len(ups) != len(kept):
                    raise FlkitError(f"trainer.train returned {len(ups)} updates for {len(kept)} clients "
                                     f"(task {self.names[m]!r}, version {v}); it must return one per client")
                stats["train_calls"] += 1
                stats["trained_requests"] += len(kept)
                self.trained_ids.extend(r.id for r in kept)
                updates[m] = ups
            # selector statistics
            if cfg.selector == "ucb":
                for m in range(M):
                    kept_now = np.zeros(N)
                    loss_now = np.zeros(N)
                    for r, u in zip(kept_by_task.get(m, []), updates.get(m, [])):
                        kept_now[r.client] = 1.0
                        loss_now[r.client] = float(trainer.loss(self.names[m], u))
                    self.ucb_N[m] = cfg.ucb_gamma * self.ucb_N[m] + kept_now
                    self.ucb_L[m] = cfg.ucb_gamma * self.ucb_L[m] + loss_now
            if cfg.selector == "bayes":
                x = np.zeros(M * N)
                for m, cl in enumerate(assign):
                    if cl:
                        x[np.asarray(cl, dtype=np.int64) + m * N] = 1.0
                for m, kept in kept_by_task.items():
                    for r in kept:
                        self.bods_counts[m][r.client] += 1
                work = sum(max(r.duration for r in kept) for kept in kept_by_task.values() if kept)
                fair = sum(float(np.var(c)) for c in self.bods_counts)
                self.bods_X.append(x)
                self.bods_y.append(cfg.bods_alpha * work + (1 - cfg.bods_alpha) * fair)
            # aggregate, evaluate, finish
            rnd += 1
            stats["rounds"] = rnd
            newly_done = []
            for m in range(M):
                if n[m] == 0 or m not in updates:
                    continue
                ret = trainer.aggregate(self.names[m], updates[m])
                new_v = sim.advance_version(m)
                if ret is not None and int(ret) != new_v:
                    raise FlkitError(f"trainer.aggregate returned version {ret!r} for task {self.names[m]!r}; expected {new_v}")
                if sim.log is not None:
                    sim.log.append((sim.now, m, None, new_v, None, "aggregate"))
                if self._release is not None:
                    self._release(self.names[m], new_v - 1)
                acc, extra = evaluate_task(trainer, self.names[m]) if new_v % cfg.test_every == 0 else (None, {})
                history.append({"task": self.names[m], "round": new_v, "sim_time": sim.now, "accuracy": acc,
                                "clients": n[m], "kept": ks[m], "mean_staleness": 0.0, **extra})
                spec = specs[m]
                if acc is not None and spec.target is not None and acc >= spec.target:
                    completion[self.names[m]] = sim.now
                    newly_done.append(m)
                elif spec.max_rounds is not None and new_v >= spec.max_rounds:
                    newly_done.append(m)
            for m in newly_done:
                finished[m] = True
                if sim.log is not None:
                    kind = "complete" if completion[self.names[m]] is not None else "stop"
                    sim.log.append((sim.now, m, None, sim.version[m], None, kind))
                freed = weights[m]
                weights[m] = 0.0
                active = [not f for f in finished]
                if any(active):
                    if float(freed).is_integer() and all(float(x).is_integer() for x in weights):
                        shares = redistribute(int(freed), [int(x) for x in weights], active, self.rng)
                    else:  # [R] non-integer weights: exact proportional split
                        tot = sum(weights[j] for j in range(M) if active[j])
                        shares = [freed * weights[j] / tot if active[j] else 0.0 for j in range(M)]
                    weights = [weights[j] + shares[j] for j in range(M)]
        stats["stop_reason"] = stop_reason
        stats.update(sim.counts)
        method = {"random": "Sync-ST" if cfg.k is not None else "Sync-ST-NoStragMit",
                  "ucb": "Sync-UCB-ST", "bayes": "Sync-Bayes-ST"}[cfg.selector]
        return SimResult(method, list(self.names), sim.log if sim.log is not None else [], history,
                         completion, sim.now, stats)


def run_sync(config: SyncConfig, trainer: Trainer, **kw) -> SimResult:
    """Shorthand for ``SyncST(config, trainer, **kw).run()``."""
    return SyncST(config, trainer, **kw).run()
