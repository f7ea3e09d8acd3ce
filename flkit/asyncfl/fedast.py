"""FedAST as a schedule over :mod:`flkit.asyncfl.clock`, training abstracted.

Everything about *when* requests are sent, kept, aggregated and reallocated lives here; *what*
an update is lives behind a :class:`Trainer` (the real one wraps the batched engine; the tests use
toy trainers). The FedAST paper in this project's words: the README of its folder under
``flkit/papers/``.

Methods
-------
- :class:`FedAST` — option ``"S"`` (static R_m, b_m) or ``"D"`` (Realloc and
  b_m = max(1, ceil(A_m/r))), ``realloc_rule="official"`` or ``"paper"``, method ``nobuffer``
  for FedAST-NoBuffer. Event semantics follow the paper's event loop exactly (K <= 2 refill with
  global slack, drop-not-redraw availability, cancellation and redistribution on completion,
  test every ``test_every`` server updates).
- :class:`flkit.asyncfl.sync.SyncST` (next module) — Sync-ST with first-k straggler mitigation
  (``k=None``: no mitigation), Sync-UCB-ST and Sync-Bayes-ST (BODS).

Training is lazy: a request is trained only when its arrival is popped, and then every
outstanding untrained request of the same (task, version) is trained in the same
``Trainer.train`` call (results cached until their arrivals). Requests still untrained when
their task finishes (cancelled) and Sync stragglers discarded by first-k are never trained; a
request already trained as the batch-mate of an earlier arrival and cancelled later has its
result dropped.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..utils import FlkitError, numpy_rng
from .clock import Simulator
from .config import FedASTRun
from .delays import DelayModel
from .rules import (
    estimate_variance_paper,
    k_rule,
    normalized_dispersion,
    realloc_official,
    realloc_paper,
    redistribute,
    round_half_up,
)
from .schedule import SimResult, Trainer, check_trainer, evaluate_task

__all__ = ["FedAST", "run_fedast"]

_MISSING = object()


class FedAST:
    """Event-driven FedAST over a :class:`~flkit.asyncfl.Simulator`.

    ``config``: a FedAST method's :class:`~flkit.asyncfl.FedASTRun` (validated here); ``seed``: the
    run seed (delay draws, client draws, redistribution). ``delays`` overrides the config's
    shifted-exponential model (e.g. :class:`~flkit.asyncfl.FixedDelays`); ``client_draws``
    scripts the uniform client draws (tests)."""

    def __init__(
        self,
        config: FedASTRun,
        trainer: Trainer,
        *,
        seed: int = 0,
        delays: DelayModel | None = None,
        client_draws=None,
    ):
        if not isinstance(config, FedASTRun) or config.is_sync:
            raise FlkitError(f"config must be a FedASTRun of a FedAST method; got {config!r:.80}")
        config.validate()
        check_trainer(trainer)
        self.cfg = config
        self.seed = int(seed)
        self.trainer = trainer
        self.specs = config.resolved_tasks()
        self.names = [t.name for t in self.specs]
        n_tasks = len(self.specs)
        self.sim = Simulator(
            config.num_clients,
            delays if delays is not None else config.delay_model(self.seed),
            num_tasks=n_tasks,
            max_busy=config.n_avail,
            seed=self.seed,
            record=config.record_events,
            client_draws=client_draws,
        )
        self.rng_redistribute = numpy_rng(self.seed, "redistribute")
        self._dispersion = getattr(trainer, "dispersion", None)
        # a trainer of placeholder updates (a timing run) gives Realloc nothing to measure
        self._measures = self._dispersion is not None or not getattr(
            trainer, "placeholder_updates", False
        )
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
        if v == 0 and self.cfg.version0 == "official":
            return self._update_aliased(req)
        group = self.pending.pop((m, v))
        updates = self.trainer.train(self.names[m], v, [r.client for r in group])
        if len(updates) != len(group):
            raise FlkitError(
                f"trainer.train returned {len(updates)} updates for {len(group)} clients "
                f"(task {self.names[m]!r}, version {v}); it must return one per client"
            )
        self.stats["train_calls"] += 1
        self.stats["trained_requests"] += len(group)
        self.trained_ids.extend(r.id for r in group)
        for r, u in zip(group, updates):
            if r is not req:
                self.results[r.id] = u
        if v != self.sim.version[m]:
            self._release_version(m, v)
        return updates[group.index(req)]

    def _update_aliased(self, req):
        """The official code's version 0 is the live model: a request sent with it trains, alone,
        from the model current when it arrives (trained lazily at arrival, as the official code
        trains each popped request)."""
        m = req.task
        group = self.pending[(m, 0)]
        group.remove(req)
        if not group:
            del self.pending[(m, 0)]
            if self.sim.version[m] != 0:
                self._release_version(m, 0)
        (u,) = self.trainer.train(self.names[m], self.sim.version[m], [req.client])
        self.stats["train_calls"] += 1
        self.stats["trained_requests"] += 1
        self.trained_ids.append(req.id)
        return u

    def _disp(self, m: int, updates) -> float:
        if self._dispersion is not None:
            return float(self._dispersion(self.names[m], list(updates)))
        return normalized_dispersion(
            list(updates), exclude_bias=self.cfg.realloc_rule == "official"
        )

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
                self.estimates[m].append(
                    spec.eta_s / (spec.eta_c * spec.tau**2) * d / 2.0
                )  # = estimate_variance_official
            if self.counter < self.c_period:
                return
            n_act = [not f for f in self.finished]
            if min(self.sim.version) > cfg.warmup_rounds and all(
                self.estimates[j] for j in range(self.M) if n_act[j]
            ):
                sigma = [
                    float(np.mean(self.estimates[j])) if n_act[j] else 0.0 for j in range(self.M)
                ]
                self.counter = 0
                self.estimates = [[] for _ in range(self.M)]
                self._check_estimates(sigma)
                self._apply_realloc(
                    realloc_official(sigma, self.sumR, cfg.realloc_unit or cfg.ratio, n_act),
                    sigma,
                )
        else:  # paper
            if self.counter < self.c_period:
                return
            n_act = [not f for f in self.finished]
            if all(len(self.windows[j]) >= cfg.window for j in range(self.M) if n_act[j]):
                s2 = []
                for j in range(self.M):
                    if n_act[j]:
                        sp = self.specs[j]
                        s2.append(
                            estimate_variance_paper(
                                None,
                                sp.eta_c,
                                sp.eta_s,
                                sp.tau,
                                dispersion=self._disp(j, self.windows[j]),
                            )
                        )
                    else:
                        s2.append(0.0)
                self.counter = 0
                self._check_estimates(s2)
                self._apply_realloc(realloc_paper(s2, self.sumR, n_act), s2)

    def _check_estimates(self, estimates):
        """Realloc moves requests by these variance estimates: a NaN or infinite one means a
        task's updates hold NaN or inf (a diverged run) or sum to zero, and no allocation
        follows from it."""
        bad = {n: e for n, e in zip(self.names, estimates) if not math.isfinite(e)}
        if bad:
            raise FlkitError(
                f"Realloc at simulated time {self.sim.now:g}: the variance estimate of "
                + ", ".join(f"task {n!r} is {e}" for n, e in bad.items())
                + "; accepted: finite estimates (check those tasks' updates for NaN or inf, "
                "or a mean update of zero)"
            )

    def _apply_realloc(self, new_requests, estimates):
        self.R = list(new_requests)
        self.sumR = sum(self.R)
        self.stats["reallocations"] += 1
        self.allocations.append(
            {
                "time": self.sim.now,
                "requests": dict(zip(self.names, self.R)),
                "estimates": dict(zip(self.names, estimates)),
            }
        )
        self._log((self.sim.now, None, None, None, None, "realloc"))

    # ------------------------------------------------------------------ server update / completion
    def _aggregate(self, m: int, staleness: list):
        name = self.names[m]
        updates = self.buf[m]
        self.buf[m] = []
        ret = self.trainer.aggregate(name, updates)
        new_v = self.sim.advance_version(m)
        if ret is not None and int(ret) != new_v:
            raise FlkitError(
                f"trainer.aggregate returned version {ret!r} for task {name!r}; expected {new_v}"
            )
        self._log((self.sim.now, m, None, new_v, None, "aggregate"))
        if (m, new_v - 1) not in self.pending:
            self._release_version(m, new_v - 1)
        spec = self.specs[m]
        acc = None
        if new_v % spec.test_every == 0:
            acc, extra = evaluate_task(self.trainer, name)
        else:
            extra = {}
        self.history.append(
            {
                "task": name,
                "round": new_v,
                "sim_time": self.sim.now,
                "accuracy": acc,
                "buffer": len(updates),
                "requests": self.R[m],
                "active": self.A[m],
                "mean_staleness": sum(staleness) / len(staleness) if staleness else 0.0,
                **extra,
            }
        )
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
                    self.b[j] = 1 if cfg.no_buffer else max(1, round_half_up(self.R[j] / cfg.ratio))
        self.sumR = sum(self.R)
        self.c_period = self.c_base * self.n_active
        if cfg.fedast_option == "S":
            for j in range(self.M):
                for _ in range(shares[j]):
                    self._send(j, check=False)  # official createNewJob: no availability check

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimResult:
        cfg, sim, specs = self.cfg, self.sim, self.specs
        n_tasks = self.M = len(specs)
        self.R = [t.requests for t in specs]
        self.sumR = sum(self.R)
        self.A = [0] * n_tasks
        self.sumA = 0
        self.b = [1 if cfg.no_buffer else t.buffer for t in specs]
        self.buf = [[] for _ in range(n_tasks)]
        self.bstale = [[] for _ in range(n_tasks)]
        self.finished = [False] * n_tasks
        self.n_active = n_tasks
        self.pending: dict = {}
        self.results: dict = {}
        self.trained_ids: list = []
        self.history: list = []
        self.allocations: list = []
        self.completion_time = {n: None for n in self.names}
        self.stats = {"train_calls": 0, "trained_requests": 0, "reallocations": 0, "events": 0}
        dynamic = cfg.fedast_option == "D"
        self.windows = [deque(maxlen=cfg.window) for _ in range(n_tasks)]
        self.estimates = [[] for _ in range(n_tasks)]
        self.counter = 0
        self.c_base = int(math.floor(cfg.period_factor * self.sumR))
        self.c_period = self.c_base * n_tasks
        r = cfg.ratio
        no_buffer = cfg.no_buffer
        max_new = cfg.max_new
        max_events = cfg.max_events if cfg.max_events is not None else math.inf
        max_time = cfg.time_limit

        for m in range(n_tasks):  # initial requests ignore the availability cap
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
            if dynamic and self._measures:
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
            n_new = k_rule(self.A[m], self.R[m], self.sumR, self.sumA, max_new)
            for _ in range(n_new):
                self._send(m, check=True)
            if no_buffer:
                self.b[m] = 1
            elif dynamic:
                a = self.A[m]
                self.b[m] = max(1, -(-a // r))
        self.stats["events"] = n_events
        self.stats["stop_reason"] = stop_reason
        self.stats.update(sim.counts)
        method = "FedAST-NoBuffer" if cfg.no_buffer else f"FedAST({cfg.fedast_option})"
        return SimResult(
            method,
            list(self.names),
            sim.log if sim.log is not None else [],
            self.history,
            dict(self.completion_time),
            sim.now,
            self.stats,
            self.allocations,
        )


def run_fedast(config: FedASTRun, trainer: Trainer, **kw) -> SimResult:
    """Shorthand for ``FedAST(config, trainer, **kw).run()``."""
    return FedAST(config, trainer, **kw).run()
