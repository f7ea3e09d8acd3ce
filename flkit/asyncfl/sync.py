"""The synchronous simultaneous-training baselines: Sync-ST (first-k straggler mitigation or
none), Sync-UCB-ST and Sync-Bayes-ST, over the same simulator and Trainer as FedAST."""

from __future__ import annotations

import numpy as np

from ..utils import FlkitError, numpy_rng
from .bandits import expected_improvement, ucb_scores
from .clock import Simulator
from .config import FedASTRun
from .delays import DelayModel
from .rules import client_units, redistribute, sync_shares
from .schedule import SimResult, Trainer, check_trainer, evaluate_task

__all__ = ["SyncST", "run_sync"]


class SyncST:
    """Sync-ST / Sync-UCB-ST / Sync-Bayes-ST over a :class:`~flkit.asyncfl.Simulator`.

    Each round: shares n_m from the weights, k_m = min(k, n_m) (k=None: n_m), clients assigned
    by the selector, every selected client timed FCFS from the round start, the k_m earliest
    finishers kept per task (only those are trained: one ``train`` call per task and round), the
    clock moves to max over tasks of the k_m-th earliest finish, every task with n_m > 0
    aggregates, and tasks are evaluated every ``sync_test_every`` rounds.

    ``config``: a Sync method's :class:`~flkit.asyncfl.FedASTRun` (validated here); ``seed``: the
    run seed; ``delays`` overrides the config's delay model."""

    def __init__(
        self,
        config: FedASTRun,
        trainer: Trainer,
        *,
        seed: int = 0,
        delays: DelayModel | None = None,
    ):
        if not isinstance(config, FedASTRun) or not config.is_sync:
            raise FlkitError(f"config must be a FedASTRun of a Sync method; got {config!r:.80}")
        config.validate()
        check_trainer(trainer)
        if config.sync_selector == "ucb" and not callable(getattr(trainer, "loss", None)):
            raise FlkitError(
                "method sync_ucb needs trainer.loss(task, update) -> float (reported local loss)"
            )
        self.cfg = config
        self.seed = int(seed)
        self.trainer = trainer
        self.specs = config.resolved_tasks()
        self.names = [t.name for t in self.specs]
        self.sim = Simulator(
            config.num_clients,
            delays if delays is not None else config.delay_model(self.seed),
            num_tasks=len(self.specs),
            max_busy=None,
            seed=self.seed,
            record=config.record_events,
        )
        self.rng = numpy_rng(self.seed, "sync_shares")
        self._release = getattr(trainer, "release", None)

    def _assign_random(self, n, perm):
        out, pos = [], 0
        for nm in n:
            out.append([int(c) for c in perm[pos : pos + nm]])
            pos += nm
        return out

    def _assign_ucb(self, n, rnd):
        cfg, n_tasks, n_clients = self.cfg, len(n), self.cfg.num_clients
        cand = self.sim.permutation()[: sum(n) + cfg.extra_candidates]
        is_cand = np.zeros(n_clients, bool)
        is_cand[cand] = True
        used = np.zeros(n_clients, bool)
        out = [[] for _ in range(n_tasks)]
        for i in range(n_tasks):
            m = (rnd + i) % n_tasks
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
        cfg, n_tasks, n_clients = self.cfg, len(n), self.cfg.num_clients
        cand = self.sim.permutation()[: sum(n) + cfg.extra_candidates].copy()
        encodings, options = [], []
        for _ in range(cfg.bods_candidates):
            self.rng_bods.shuffle(cand)
            a = self._assign_random(n, cand)
            x = np.zeros(n_tasks * n_clients)
            for m, cl in enumerate(a):
                x[np.asarray(cl, dtype=np.int64) + m * n_clients] = 1.0
            encodings.append(x)
            options.append(a)
        self.gp.fit(np.vstack(self.bods_X), np.asarray(self.bods_y))
        mu, sd = self.gp.predict(np.vstack(encodings), return_std=True)
        ei = expected_improvement(mu, sd, float(np.min(self.bods_y)))
        return options[int(np.argmax(ei))]

    def run(self) -> SimResult:
        cfg, sim, specs, trainer = self.cfg, self.sim, self.specs, self.trainer
        n_tasks, n_clients = len(specs), cfg.num_clients
        # weights in client units from the start (official code): a finished task's clients are
        # split in proportion to the others' shares, so identical tasks split them evenly
        weights = client_units([float(t.weight) for t in specs], cfg.n_avail)
        finished = [w <= 0 for w in weights]  # weight 0: never trained (our choice)
        completion = {n: None for n in self.names}
        history, stats = [], {"train_calls": 0, "trained_requests": 0, "rounds": 0}
        self.trained_ids: list = []
        if cfg.sync_selector == "ucb":
            self.ucb_N = [np.zeros(n_clients) for _ in range(n_tasks)]
            self.ucb_L = [np.zeros(n_clients) for _ in range(n_tasks)]
        if cfg.sync_selector == "bayes":
            from sklearn.gaussian_process import GaussianProcessRegressor
            from sklearn.gaussian_process.kernels import Matern

            self.gp = GaussianProcessRegressor(kernel=Matern(), random_state=0)
            self.bods_X, self.bods_y = [], []
            self.bods_counts = [np.zeros(n_clients) for _ in range(n_tasks)]
            self.rng_bods = numpy_rng(self.seed, "bods")
        rnd = 0
        stop_reason = "completed"
        while not all(finished):
            if cfg.sync_max_rounds is not None and rnd >= cfg.sync_max_rounds:
                stop_reason = "max_rounds"
                break
            if sim.now >= cfg.time_limit:
                stop_reason = "max_time"
                break
            w = [0.0 if finished[m] else weights[m] for m in range(n_tasks)]
            if cfg.sync_selector == "ucb" and rnd == 0:
                n = [n_clients if w[m] > 0 else 0 for m in range(n_tasks)]
                ks = list(n)
                assign = [list(range(n_clients)) if n[m] else [] for m in range(n_tasks)]
            else:
                n = sync_shares(w, cfg.n_avail, self.rng)
                ks = [nm if cfg.sync_k is None else min(cfg.sync_k, nm) for nm in n]
                if cfg.sync_selector == "random" or rnd == 0:
                    assign = self._assign_random(n, sim.permutation())
                elif cfg.sync_selector == "ucb":
                    assign = self._assign_ucb(n, rnd)
                else:
                    assign = self._assign_bayes(n)
            groups = [(m, assign[m], ks[m]) for m in range(n_tasks) if n[m] > 0]
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
                    raise FlkitError(
                        f"trainer.train returned {len(ups)} updates for {len(kept)} clients "
                        f"(task {self.names[m]!r}, version {v}); it must return one per client"
                    )
                stats["train_calls"] += 1
                stats["trained_requests"] += len(kept)
                self.trained_ids.extend(r.id for r in kept)
                updates[m] = ups
            # selector statistics
            if cfg.sync_selector == "ucb":
                for m in range(n_tasks):
                    kept_now = np.zeros(n_clients)
                    loss_now = np.zeros(n_clients)
                    for r, u in zip(kept_by_task.get(m, []), updates.get(m, [])):
                        kept_now[r.client] = 1.0
                        loss_now[r.client] = float(trainer.loss(self.names[m], u))
                    self.ucb_N[m] = cfg.ucb_gamma * self.ucb_N[m] + kept_now
                    self.ucb_L[m] = cfg.ucb_gamma * self.ucb_L[m] + loss_now
            if cfg.sync_selector == "bayes":
                x = np.zeros(n_tasks * n_clients)
                for m, cl in enumerate(assign):
                    if cl:
                        x[np.asarray(cl, dtype=np.int64) + m * n_clients] = 1.0
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
            for m in range(n_tasks):
                if n[m] == 0 or m not in updates:
                    continue
                ret = trainer.aggregate(self.names[m], updates[m])
                new_v = sim.advance_version(m)
                if ret is not None and int(ret) != new_v:
                    raise FlkitError(
                        f"trainer.aggregate returned version {ret!r} for task "
                        f"{self.names[m]!r}; expected {new_v}"
                    )
                if sim.log is not None:
                    sim.log.append((sim.now, m, None, new_v, None, "aggregate"))
                if self._release is not None:
                    self._release(self.names[m], new_v - 1)
                acc, extra = (
                    evaluate_task(trainer, self.names[m])
                    if new_v % cfg.sync_test_every == 0
                    else (None, {})
                )
                history.append(
                    {
                        "task": self.names[m],
                        "round": new_v,
                        "sim_time": sim.now,
                        "accuracy": acc,
                        "clients": n[m],
                        "kept": ks[m],
                        "mean_staleness": 0.0,
                        **extra,
                    }
                )
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
                weights[m] = 0
                active = [not f for f in finished]
                if any(active):
                    shares = redistribute(freed, weights, active, self.rng)
                    weights = [weights[j] + shares[j] for j in range(n_tasks)]
        stats["stop_reason"] = stop_reason
        stats.update(sim.counts)
        method = {
            "random": "Sync-ST" if cfg.sync_k is not None else "Sync-ST-NoStragMit",
            "ucb": "Sync-UCB-ST",
            "bayes": "Sync-Bayes-ST",
        }[cfg.sync_selector]
        return SimResult(
            method,
            list(self.names),
            sim.log if sim.log is not None else [],
            history,
            completion,
            sim.now,
            stats,
        )


def run_sync(config: FedASTRun, trainer: Trainer, **kw) -> SimResult:
    """Shorthand for ``SyncST(config, trainer, **kw).run()``."""
    return SyncST(config, trainer, **kw).run()
