"""Estimation studies of notebook 05 on a trajectory of global models: how far the stale update,
1st-Order and the gradient-inversion estimate are from the unstale update (Fig. 4), top-K
sparsification and warm starts of the inversion (Tables 4-5; ``efficiency`` judges each by the
iterations to a common estimation error), the interactive demo, uniqueness detection (Table 8 /
Fig. 9) and the loss landscape (Fig. 3). Every study returns a DataFrame (the demo and the
landscape return arrays)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import torch

from ... import divergence, methods, rng_state
from ...data.partition import partition
from ...inversion import InversionSpec, box_from_data, init_data, invert, unroll
from ...methods.staleness import (
    cosine_distance,
    first_order,
    relative_l1,
    round_robin,
    uniqueness_threshold,
)
from ...state import model_state, stack_states
from ...utils import derive_seed
from . import numbers
from .study import config, fresh_setup

#: what a training loss past the divergence rule points to
ADVICE = "a smaller learning rate usually keeps it finite"


class Trajectory:
    """Global models w^0..w^T of an Unstale run (kept in memory) and what re-training needs.

    The clients' re-training (:meth:`update`) draws its dropout masks from a stream of its own,
    never from the global generator as the kernel left it: how many runs the notebook trained
    before, or read from the run cache, changes the global generator's state, and must not change
    the estimation studies' numbers."""

    def __init__(
        self,
        preset,
        seed: int,
        rounds: int | None = None,
        progress: bool = False,
        device: str = "auto",
    ):
        cfg = config(preset, "unstale", seed, device=device)
        self.P, self.setup = preset, fresh_setup(cfg)
        s = self.setup
        ctx = methods.RunContext(
            s.model,
            s.data.x_train,
            s.data.y_train,
            s.parts,
            cfg.local_spec(),
            seed,
            s.data.num_classes,
            cfg.backend,
            cfg.clients_per_round,
        )
        self.method = methods.get("unstale")(ctx, **cfg.method_params)
        state = self.method.init_state(model_state(s.model))
        self.models = [state.model]
        # the divergence rule of every training loop: a non-finite loss stops it, one past the
        # limit is kept in `diverged` and said (every study here would read a diverged run)
        watch = divergence.LossWatch("training loss", "round", ADVICE)
        for rnd in range(1, (rounds or preset["traj_rounds"]) + 1):
            state, log = self.method.round(state, self.method.select_clients(state, rnd), rnd)
            watch.see(rnd, log.train_loss, f"round {rnd} of the Unstale trajectory")
            self.models.append(state.model)
        self.diverged = watch.diverged
        divergence.warn("the Unstale trajectory of the estimation studies", self.diverged)
        self.stale = sorted(self.method.stale)
        self.box = box_from_data(s.data.x_train)
        self.names = self.method.param_names

    def update(self, at: int, clients: list[int], rnd: int = 0, parts=None) -> dict:
        """The clients' updates (trainable tensors) from the global model of round ``at``.

        ``rnd`` names the batch-order stream; the dropout masks come from the stream named by
        (seed, at, rnd, clients), drawn with the global generators saved and put back around
        it: the same call gives the same update whatever ran before, and two trainings of the
        same clients from the same model differ by their dropout draws when ``rnd`` differs."""
        m, start = self.method, self.models[at]
        if parts is not None:
            saved, m.ctx.parts = m.ctx.parts, parts
        with rng_state.untouched(self.setup.device):
            torch.manual_seed(
                derive_seed(m.ctx.seed, "estimation dropout", at, rnd, *map(int, clients))
            )
            res = m.train(stack_states([start] * len(clients)), clients, rnd)
        if parts is not None:
            m.ctx.parts = saved
        for c, loss in zip(clients, res.train_loss.tolist()):
            divergence.check_finite(loss, "training loss", f"the update of client {c}", ADVICE)
        return {n: res.state[n] - start[n] for n in self.names}

    def flat(self, d: dict) -> torch.Tensor:
        return torch.cat([d[n].reshape(d[n].shape[0], -1) for n in self.names], 1)

    def invert(
        self,
        start: dict,
        target: dict,
        size: int,
        iters: int,
        topk: float,
        tol=0.0,
        window=50,
        init=None,
        keys=None,
        snapshot_every: int = 0,
    ):
        """Invert K updates from one global model; topk: one fraction, or one per client (the
        inversions of several masks then share one batched computation)."""
        k = next(iter(target.values())).shape[0]
        per_client = None if isinstance(topk, (int, float)) else list(topk)
        spec = InversionSpec(
            size=size,
            iters=iters,
            lr=self.P["gi_lr"],
            topk=min(per_client) if per_client else topk,
            tol=tol,
            window=window,
        )
        x = self.setup.data.x_train
        x0, y0 = (
            init
            if init is not None
            else init_data(
                k,
                spec,
                x.shape[1:],
                self.setup.data.num_classes,
                self.method.ctx.seed,
                keys or list(range(k)),
                x.device,
                x.dtype,
            )
        )
        starts = {n: v.unsqueeze(0).expand(k, *v.shape) for n, v in start.items()}
        return invert(
            self.setup.model,
            starts,
            target,
            self.method.ctx.spec,
            spec,
            x0,
            y0,
            box=self.box,
            topk=per_client,
            snapshot_every=snapshot_every,
        )

    def estimate(self, now: dict, res) -> dict:
        k = res.x.shape[0]
        starts = {n: v.unsqueeze(0).expand(k, *v.shape) for n, v in now.items()}
        upd = unroll(
            self.setup.model, starts, res.x, torch.softmax(res.y, -1), self.method.ctx.spec
        )
        return {n: v.detach() for n, v in upd.items()}


def _errors(tr: Trajectory, est: dict, true: dict) -> tuple[float, float]:
    a, b = tr.flat(est), tr.flat(true)
    return float(cosine_distance(a, b).mean()), float(relative_l1(a, b).mean())


def estimation_error(preset, tr: Trajectory) -> pd.DataFrame:
    """Fig. 4: error of the stale update, 1st-Order and the GI estimate vs the unstale update,
    for each staleness, at the trajectory's last round, mean over `est_clients` stale clients.
    The row "dropout floor" is the same clients' training from the same model with another
    dropout draw: the error no estimator that replays training without the clients' dropout
    draws can go below."""
    t = len(tr.models) - 1
    now, clients = tr.models[t], tr.stale[: preset["est_clients"]]
    true = tr.update(t, clients)
    floor = _errors(tr, tr.update(t, clients, rnd=1), true)
    rows = []
    for tau in [x for x in preset["est_taus"] if x <= t]:
        then = tr.models[t - tau]
        stale = tr.update(t - tau, clients)
        fo = {n: first_order(stale[n], now[n], then[n]) for n in tr.names}
        res = tr.invert(then, stale, preset["est_size"], preset["est_iters"], preset["gi_topk"])
        gi = tr.estimate(now, res)
        for name, est in (("stale", stale), ("1st-Order", fo), ("GI", gi)):
            cos, l1 = _errors(tr, est, true)
            rows.append({"tau": tau, "estimator": name, "cos": cos, "l1": l1})
        rows.append({"tau": tau, "estimator": "dropout floor", "cos": floor[0], "l1": floor[1]})
        tr.last_inversion, tr.last_then = res, then
    return pd.DataFrame(rows)


def _repeat(d: dict, times: int) -> dict:
    return {n: v.repeat(times, *([1] * (v.dim() - 1))) for n, v in d.items()}


def _rows(res, lo: int, hi: int):
    """Rows lo..hi of an inversion result, as a result of its own (x, y, iters)."""
    return type(res)(
        res.x[lo:hi],
        res.y[lo:hi],
        res.losses[:, lo:hi],
        res.iters[lo:hi],
        res.init_loss[lo:hi],
        res.final_loss[lo:hi],
    )


def sparsification(preset, tr: Trajectory) -> pd.DataFrame:
    """Table 4: GI iterations to the stopping tolerance and estimation error per top-K fraction
    (every fraction's inversions in one batched computation, each client from the same init)."""
    t = len(tr.models) - 1
    tau = min(int(preset["tau"]), t)
    now, then, clients = tr.models[t], tr.models[t - tau], tr.stale[: preset["est_clients"]]
    true, stale = tr.update(t, clients), tr.update(t - tau, clients)
    nc, fracs = len(clients), list(preset["topk_fracs"])
    res = tr.invert(
        then,
        _repeat(stale, len(fracs)),
        preset["est_size"],
        preset["stop_iters"],
        [f for f in fracs for _ in range(nc)],
        preset["stop_tol"],
        preset["stop_window"],
        keys=list(range(nc)) * len(fracs),
    )
    rows = []
    for j, frac in enumerate(fracs):
        part = _rows(res, j * nc, (j + 1) * nc)
        cos, _ = _errors(tr, tr.estimate(now, part), true)
        rows.append(
            {
                "sparsification": 1 - frac,
                "iterations": float(part.iters.float().mean()),
                "error": cos,
            }
        )
    df = pd.DataFrame(rows)
    df["computation_reduction"] = 1 - df["iterations"] / df["iterations"].iloc[0]
    return df


def cold_start(tr: Trajectory, clients, size: int):
    """The random surrogate data a cold-started inversion of ``clients`` begins from (seeded per
    client, so the cold runs of Table 5 and of the efficiency study start from the same data)."""
    x = tr.setup.data.x_train
    return init_data(
        len(clients),
        InversionSpec(size=size),
        x.shape[1:],
        tr.setup.data.num_classes,
        tr.method.ctx.seed,
        [("cold", c) for c in clients],
        x.device,
        x.dtype,
    )


def warm_start(preset, tr: Trajectory, gap: int | None = None) -> pd.DataFrame:
    """Table 5: iterations to the stopping tolerance of the next inversion of the same clients,
    warm-started from the previous surrogate data vs random, when a fraction of their data
    changed (changed samples are drawn at random from the whole training set). The cold and warm
    inversions of every change run as one batched computation."""
    t = len(tr.models) - 1
    gap = gap or max(1, preset["num_clients"] // preset["clients_per_round"])
    tau = min(int(preset["tau"]), t - gap)
    clients = tr.stale[: preset["est_clients"]]
    nc = len(clients)
    t1 = t - gap
    stop = (
        preset["est_size"],
        preset["stop_iters"],
        preset["gi_topk"],
        preset["stop_tol"],
        preset["stop_window"],
    )
    first = tr.invert(tr.models[t1 - tau], tr.update(t1 - tau, clients), *stop)
    n_train = len(tr.setup.data.y_train)
    then = tr.models[t - tau]
    targets, xs, ys = [], [], []
    for change in preset["warm_changes"]:
        parts = list(tr.method.ctx.parts)
        g = torch.Generator().manual_seed(int(1000 * change) + 7)
        for c in clients:
            ix = parts[c].clone()
            k = int(round(change * len(ix)))
            pos = torch.randperm(len(ix), generator=g)[:k]
            ix[pos] = torch.randint(0, n_train, (k,), generator=g).to(ix.device)
            parts[c] = ix
        stale = tr.update(t - tau, clients, parts=parts)
        x0, y0 = cold_start(tr, clients, preset["est_size"])
        targets += [stale, stale]
        xs += [x0, first.x]
        ys += [y0, first.y]
    target = {n: torch.cat([d[n] for d in targets]) for n in targets[0]}
    res = tr.invert(then, target, *stop, init=(torch.cat(xs), torch.cat(ys)))
    rows = []
    for j, change in enumerate(preset["warm_changes"]):
        cold = res.iters[2 * j * nc : (2 * j + 1) * nc]
        warm = res.iters[(2 * j + 1) * nc : (2 * j + 2) * nc]
        ic, iw = float(cold.float().mean()), float(warm.float().mean())
        rows.append(
            {
                "data_changed": change,
                "cold_iterations": ic,
                "warm_iterations": iw,
                "saved": 1 - iw / ic if ic > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def error_curve(tr: Trajectory, now: dict, res, true: dict) -> tuple[list, torch.Tensor]:
    """Estimation error (cosine distance to `true`) of the estimate from every snapshot of an
    inversion: (iterations, errors [snapshots, K])."""
    its, rows = [], []
    names = tr.names
    t_flat = torch.cat([true[n].reshape(true[n].shape[0], -1) for n in names], 1)
    for it, x, y in res.snapshots:
        est = tr.estimate(now, SimpleNamespace(x=x, y=y))
        e_flat = torch.cat([est[n].reshape(est[n].shape[0], -1) for n in names], 1)
        its.append(it)
        rows.append(cosine_distance(e_flat, t_flat).cpu())
    return its, torch.stack(rows)


def iterations_to(its: list, errors: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per client (column of `errors`), the first snapshot iteration whose error is at most the
    client's `target`; NaN where it is never reached."""
    out = torch.full((errors.shape[1],), float("nan"), dtype=torch.float64)
    for k in range(errors.shape[1]):
        hit = (errors[:, k] <= target[k] + 1e-12).nonzero().flatten()
        if len(hit):
            out[k] = float(its[int(hit[0])])
    return out


def efficiency(preset, tr: Trajectory, slack: float | None = None) -> pd.DataFrame:
    """Top-K masking and warm start judged apart, on the same clients and the same target: the
    iterations each needs to reach the estimation error (cosine distance to the unstale update)
    that the unmasked, cold-started inversion has after `stop_iters` iterations (plus `slack`
    for the mask, the error rise the paper accepts: Table 4's 0.03 at 95 %), against the
    iterations the unmasked cold start needs to reach that same error. No stopping tolerance:
    every inversion runs the same iterations and learning-rate schedule, and the estimate is
    measured every `stop_iters / 20` iterations. The warm start begins from the clients'
    surrogate data of an inversion `num_clients / clients_per_round` rounds earlier (data
    unchanged)."""
    t = len(tr.models) - 1
    gap = max(1, preset["num_clients"] // preset["clients_per_round"])
    tau = min(int(preset["tau"]), t - gap)
    now, then = tr.models[t], tr.models[t - tau]
    clients = tr.stale[: preset["est_clients"]]
    nc, iters = len(clients), int(preset["stop_iters"])
    frac = min(f for f in preset["topk_fracs"] if f < 1) if min(preset["topk_fracs"]) < 1 else 1
    slack = (numbers.TABLE4[0.95][1] - numbers.TABLE4[0.0][1]) if slack is None else slack
    true, stale = tr.update(t, clients), tr.update(t - tau, clients)
    t1 = t - gap
    first = tr.invert(
        tr.models[t1 - tau], tr.update(t1 - tau, clients), preset["est_size"], iters, 1.0
    )
    x0, y0 = cold_start(tr, clients, preset["est_size"])
    res = tr.invert(
        then,
        _repeat(stale, 3),
        preset["est_size"],
        iters,
        [1.0] * nc + [frac] * nc + [1.0] * nc,
        init=(torch.cat([x0, x0, first.x]), torch.cat([y0, y0, first.y])),
        snapshot_every=max(1, iters // 20),
    )
    its, err = error_curve(tr, now, res, _repeat(true, 3))
    ref = err[-1, :nc]
    rows = []
    for name, lo, extra in (("top-K", nc, slack), ("warm start", 2 * nc, 0.0)):
        target = ref + extra
        base = iterations_to(its, err[:, :nc], target)
        dev = iterations_to(its, err[:, lo : lo + nc], target)
        b, d = float(base.mean()), float(dev.mean())
        rows.append(
            {
                "device": name if name != "top-K" else f"top-{100 * frac:g} %",
                "target_error": float(target.mean()),
                "reference_iterations": b,
                "device_iterations": d,
                "reached": int((~dev.isnan()).sum()),
                "clients": nc,
                "saved": 1 - d / b if b > 0 else float("nan"),
                "final_error": float(err[-1, lo : lo + nc].mean()),
            }
        )
    return pd.DataFrame(rows)


def demo(preset, tr: Trajectory, client_pos: int, tau: int):
    """The interactive demo: a short inversion of one stale client's update at the trajectory's
    last round; returns the Disparity curve, the three estimates' cosine distances to the
    unstale update, and a few surrogate samples."""
    t = len(tr.models) - 1
    tau = max(1, min(int(tau), t))
    c = tr.stale[client_pos % len(tr.stale)]
    now, then = tr.models[t], tr.models[t - tau]
    true, stale = tr.update(t, [c]), tr.update(t - tau, [c])
    res = tr.invert(then, stale, preset["demo_size"], preset["demo_iters"], preset["gi_topk"])
    fo = {n: first_order(stale[n], now[n], then[n]) for n in tr.names}
    errors = {
        name: _errors(tr, est, true)[0]
        for name, est in (("stale", stale), ("1st-Order", fo), ("GI", tr.estimate(now, res)))
    }
    return res.losses[:, 0].numpy(), errors, res.x[0].detach().cpu().numpy()


def uniqueness_detection(preset, tr: Trajectory, rounds=None, seed: int = 0) -> pd.DataFrame:
    """Table 8 / Fig. 9: accuracy of the uniqueness test when every client holds one class.
    At each round t of the trajectory, a round-robin block of clients is the unstale set S; every
    other client's update (from w^t) is called unique when its mean cosine distance to S exceeds
    Eq. 8's threshold; it truly is unique when no client of S holds its class."""
    y = tr.setup.data.y_train
    parts = partition(
        "classes_per_client", y, preset["num_clients"], derive_seed(seed, "one-class"), classes=1
    )
    parts = [p.to(y.device) for p in parts]
    cls = torch.stack([y[p].mode().values for p in parts]).cpu()
    n, m = len(parts), preset["clients_per_round"]
    everyone = list(range(n))
    rows = []
    for t in rounds or range(0, len(tr.models), max(1, (len(tr.models) - 1) // 4)):
        upd = tr.flat(tr.update(t, everyone, rnd=t, parts=parts))
        block = round_robin(n, m, t + 1)
        theta = uniqueness_threshold(upd[block])
        others = [i for i in everyone if i not in block]
        dist = cosine_distance(upd[others].unsqueeze(1), upd[block].unsqueeze(0)).mean(1)
        pred = (dist > theta).cpu()
        truth = torch.tensor([bool((cls[block] != cls[i]).all()) for i in others])
        rows.append(
            {
                "round": t,
                "accuracy": float((pred == truth).float().mean()),
                "threshold": theta,
                "truly_unique": float(truth.float().mean()),
            }
        )
    return pd.DataFrame(rows)


def loss_landscape(preset, tr: Trajectory, steps: int = 11, span: float = 1.0, seed: int = 0):
    """Fig. 3: the training loss around w^(t-tau) on the surrogate data of the last inversion of
    `estimation_error` and on the stale client's real data, over a 2-D slice spanned by two
    filter-normalised random directions; plus the cosine similarity of the two gradients at w."""
    from torch.func import functional_call

    res, then, client = tr.last_inversion, tr.last_then, tr.stale[0]
    model = tr.setup.model
    g = torch.Generator().manual_seed(seed)
    dirs = []
    for _ in range(2):
        d = {n: torch.randn(then[n].shape, generator=g).to(then[n]) for n in tr.names}
        dirs.append({n: d[n] * then[n].norm() / d[n].norm().clamp_min(1e-12) for n in tr.names})
    xr, yr = (
        tr.setup.data.x_train[tr.method.ctx.parts[client]],
        tr.setup.data.y_train[tr.method.ctx.parts[client]],
    )
    xs, ys = res.x[0], torch.softmax(res.y[0], -1)
    model.eval()
    coords = torch.linspace(-span, span, steps)
    grids = {"surrogate": torch.zeros(steps, steps), "real": torch.zeros(steps, steps)}
    with torch.no_grad():
        for i, a in enumerate(coords):
            for j, b in enumerate(coords):
                w = {**then, **{n: then[n] + a * dirs[0][n] + b * dirs[1][n] for n in tr.names}}
                for key, (xx, yy) in (("surrogate", (xs, ys)), ("real", (xr, yr))):
                    out = functional_call(model, w, (xx,))
                    grids[key][i, j] = torch.nn.functional.cross_entropy(out, yy)
    grads = []
    for xx, yy in ((xs, ys), (xr, yr)):
        w = {n: then[n].clone().requires_grad_(n in tr.names) for n in then}
        loss = torch.nn.functional.cross_entropy(functional_call(model, w, (xx,)), yy)
        gr = torch.autograd.grad(loss, [w[n] for n in tr.names])
        grads.append(torch.cat([x.flatten() for x in gr]))
    model.train()
    cos = float(torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0))
    return coords.numpy(), {k: v.numpy() for k, v in grids.items()}, cos
