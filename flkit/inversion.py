"""Gradient inversion of a multi-step local update: find surrogate data whose local training
reproduces a received update (Wang and Gao, AAAI 2025), for many clients at once.

The surrogate dataset of client k is (X_k, Y~_k): R inputs and R rows of label logits. Its
"unroll" U(w; X, softmax(Y~)) is the client's local program (full-batch SGD steps from w) run by
the engine (`flkit.engine.train_clients` with `differentiable=True`), so the model of the client
is the very code that trains real clients. The inversion minimises, per client,

    Disparity_k = sum | M_k * (U(w_k; X_k, softmax(Y~_k)) - Delta_k) |   (L1, trainable tensors)

with Adam on sign(dDisparity/dX) and on dDisparity/dY~, the learning rate divided by 10 at 3/8,
5/8 and 7/8 of the iterations, and X clamped to the inputs' valid box after every step. The K
clients are independent terms of one summed loss, so the batched inversion gives each client
exactly the gradient a separate inversion would (Adam and the sign act element-wise).

Each client's Disparity follows the divergence rule of :mod:`flkit.divergence`, iteration by
iteration: a non-finite one stops the inversion (FlkitError naming the iteration and the client),
one above the rule's limit of its first value marks that client's inversion diverged
(``InversionResult.diverged``).

With ``backend="graph"`` (a GPU run that pins CUDA graphs) an iteration's Disparity and its
gradients, the unroll's forward and both backward passes, are recorded once as a CUDA graph and
replayed at every later iteration, one launch instead of hundreds; the optimiser step, the
stopping rule and the divergence checks stay eager. A replay runs the eager iteration's kernels
on the same values, so the inversion gives the floats of ``backend="wide"``. A recorded iteration
needs every client in the batch: once one stops (``tol``), the others go on eagerly.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from .divergence import Divergence, LossWatch, check_finite
from .engine import LocalSpec, train_clients
from .engine.graphed import GRAPH_WARMUP, RECORDERS
from .engine.spec import reused_plans
from .state import param_names
from .utils import FlkitError, check_choice, check_range, generator

LABEL_LOSSES = ("soft_ce",)
MODEL_MODES = ("eval", "train")


@dataclass(frozen=True)
class InversionSpec:
    """Settings of one inversion. `topk` is the kept fraction of the update (1 = no mask); `tol`
    stops a client once its Disparity fell by less than tol (relatively) over `window` iterations
    (0 = run all `iters`); `model_mode="eval"` runs the unroll without dropout and with BatchNorm
    on running statistics (the default and the documented behaviour)."""

    size: int = 64
    iters: int = 300
    lr: float = 0.1
    topk: float = 1.0
    tol: float = 0.0
    window: int = 50
    label_loss: str = "soft_ce"
    model_mode: str = "eval"

    def __post_init__(self):
        check_range("gi size R", self.size, 1)
        check_range("gi iters T_GI", self.iters, 1)
        check_range("gi lr", self.lr, 0, None, low_open=True)
        check_range("gi topk fraction", self.topk, 0, 1, low_open=True)
        check_range("gi tol", self.tol, 0)
        check_range("gi window", self.window, 1)
        check_choice("label_loss", self.label_loss, LABEL_LOSSES)
        check_choice("model_mode", self.model_mode, MODEL_MODES)


@dataclass
class InversionResult:
    x: torch.Tensor  # [K, R, ...] surrogate inputs
    y: torch.Tensor  # [K, R, C] label logits
    losses: torch.Tensor  # [iterations run, K] Disparity before each step
    iters: torch.Tensor  # [K] iterations until the client stopped (the whole run if never)
    init_loss: torch.Tensor  # [K]
    final_loss: torch.Tensor  # [K] Disparity of the returned (x, y)
    snapshots: list | None = None  # [(iteration, x, y)] every `snapshot_every` iterations
    #: per client, where its Disparity passed the divergence limit (None: it did not)
    diverged: list[Divergence | None] = field(default_factory=list)


def check_model_mode(model: nn.Module, mode: str) -> None:
    """The unroll in training mode would use BatchNorm batch statistics of the surrogate data (not
    modelled); dropout in training mode is allowed only when asked for with mode='train'."""
    check_choice("model_mode", mode, MODEL_MODES)
    if mode == "train":
        bn = [n for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if bn:
            raise FlkitError(
                f"model_mode='train' with BatchNorm layers {bn[:3]} is not supported "
                "during inversion; accepted: model_mode='eval' (running statistics)"
            )


def box_from_normalization(mean, std, channels: int, device="cpu"):
    """Per-channel bounds of valid inputs: pixel range [0, 1] mapped through (x - mean) / std."""
    m = torch.tensor(mean, dtype=torch.float32).expand(channels)
    s = torch.tensor(std, dtype=torch.float32).expand(channels)
    return ((0 - m) / s).to(device), ((1 - m) / s).to(device)


def box_from_data(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel min and max of a dataset (= the normalised pixel range when the data hold both
    black and white pixels, as MNIST does)."""
    dims = [0] + list(range(2, x.dim()))
    return x.amin(dim=dims), x.amax(dim=dims)


def topk_mask(flat: torch.Tensor, frac: float) -> torch.Tensor:
    """[K, d] -> bool mask keeping exactly max(1, round(frac * d)) largest-magnitude entries
    per row."""
    check_range("topk fraction", frac, 0, 1, low_open=True)
    d = flat.shape[-1]
    k = max(1, int(round(frac * d)))
    if k >= d:
        return torch.ones_like(flat, dtype=torch.bool)
    idx = flat.abs().topk(k, dim=-1).indices
    return torch.zeros_like(flat, dtype=torch.bool).scatter_(-1, idx, True)


def lr_milestones(iters: int) -> list[int]:
    """Iterations at which the learning rate drops tenfold (about 3/8, 5/8 and 7/8 of the run)."""
    return [int(iters / 2.667), int(iters / 1.6), int(iters / 1.142)]


def unroll(
    model: nn.Module,
    start: dict,
    x: torch.Tensor,
    y: torch.Tensor,
    local: LocalSpec,
    differentiable: bool = False,
    train_mode: bool = False,
    backend: str = "auto",
) -> dict:
    """U(w; X, Y): the local program of K clients on their surrogate data, full batch per step.

    start: {name: [K, ...]}; x: [K, R, ...]; y: [K, R, C] probabilities (or [K, R] class indices).
    Returns the update {name: [K, ...]} of the trainable tensors."""
    k, r = x.shape[0], x.shape[1]
    steps = local.steps if local.steps is not None else local.epochs
    spec = LocalSpec(
        lr=local.lr,
        batch_size=r,
        steps=steps,
        momentum=local.momentum,
        weight_decay=local.weight_decay,
    )
    idx = [torch.arange(i * r, (i + 1) * r, device=x.device) for i in range(k)]
    res = train_clients(
        model,
        start,
        x.reshape(k * r, *x.shape[2:]),
        y.reshape(k * r, *y.shape[2:]),
        idx,
        spec,
        [0] * k,
        backend=backend,
        differentiable=differentiable,
        chunk_size=k,
        train_mode=train_mode,
    )
    return {n: res.state[n] - start[n] for n in param_names(model) if n in start}


def flat_update(update: dict, names) -> torch.Tensor:
    return torch.cat([update[n].reshape(update[n].shape[0], -1) for n in names], dim=1)


def init_data(
    k: int,
    spec: InversionSpec,
    input_shape,
    num_classes: int,
    seed: int,
    keys,
    device,
    dtype=torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random surrogate data: N(0, 1) inputs and label logits, one seeded stream per client."""
    xs, ys = [], []
    for key in keys:
        g = generator(seed, "gi-init", key)
        xs.append(torch.randn(spec.size, *input_shape, generator=g))
        ys.append(torch.randn(spec.size, num_classes, generator=g))
    if len(xs) != k:
        raise FlkitError(f"{len(xs)} init keys for {k} clients")
    return torch.stack(xs).to(device, dtype), torch.stack(ys).to(device, dtype)


class GraphedGradient:
    """``grads(x, y)`` = (Disparity [K], its gradient to x, to y) computed by ``fn`` on static
    copies of x and y, recorded once by ``record`` (a CUDA graph; tests pass a stand-in) and
    replayed at every call; the outputs are the recording's own tensors, overwritten by the next
    call. The first :data:`GRAPH_WARMUP` calls run ``fn`` eagerly (on a side stream on a GPU, as
    torch.cuda.graph asks), so that libraries set up their handles before a recording. A
    recording that fails is reported once with a warning, and every call runs ``fn`` eagerly."""

    def __init__(self, fn, record, warmup: int = GRAPH_WARMUP):
        self.fn, self.record, self.warmup = fn, record, warmup
        self.calls = 0
        self.replay = None
        self.failed: str | None = None
        self.out = None

    def _eager(self, x, y):
        xx = x.detach().requires_grad_(True)
        yy = y.detach().requires_grad_(True)
        return self.fn(xx, yy)

    def __call__(self, x, y):
        self.calls += 1
        if self.failed is not None or self.calls <= self.warmup:
            if x.device.type != "cuda" or self.failed is not None:
                return self._eager(x, y)
            side = torch.cuda.Stream(device=x.device)
            side.wait_stream(torch.cuda.current_stream(x.device))
            with torch.cuda.stream(side):
                out = self._eager(x, y)
            main = torch.cuda.current_stream(x.device)
            main.wait_stream(side)
            for t in out:  # made on the side stream, read on this one: not to be reused before
                t.record_stream(main)
            return out
        if self.replay is None:
            self.sx = x.detach().clone().requires_grad_(True)
            self.sy = y.detach().clone().requires_grad_(True)

            def body():
                self.out = self.fn(self.sx, self.sy)

            try:
                self.replay = self.record(body)
            except Exception as e:  # noqa: BLE001 - any recording failure means: run eagerly
                self.failed = f"{type(e).__name__}: {e}"
                warnings.warn(
                    f"backend='graph' could not record the inversion's iteration ({self.failed}); "
                    "running it eagerly (backend 'wide')",
                    RuntimeWarning,
                    stacklevel=3,
                )
                return self._eager(x, y)
        with torch.no_grad():
            self.sx.copy_(x)
            self.sy.copy_(y)
        self.replay()
        return self.out


@reused_plans()  # every iteration unrolls with the same batch plans: drawn once
def invert(
    model: nn.Module,
    start: dict,
    target: dict,
    local: LocalSpec,
    spec: InversionSpec,
    x0: torch.Tensor,
    y0: torch.Tensor,
    box=None,
    backend: str = "auto",
    topk=None,
    snapshot_every: int = 0,
) -> InversionResult:
    """Optimise surrogate data (x0, y0: [K, R, ...], [K, R, C]) so that the unroll from `start`
    ({name: [K, ...]}) reproduces `target` ({name: [K, ...]} updates of the trainable tensors).

    topk: one kept fraction per client (a sequence of K), overriding `spec.topk`, so that
    inversions with different masks share one batched computation. A client that met the
    stopping tolerance leaves the batch: the later iterations compute only the others.
    snapshot_every > 0 keeps a copy of (x, y) before iteration 0, snapshot_every, ... and after
    the last one (``InversionResult.snapshots``), to measure how the estimate improves."""
    check_model_mode(model, spec.model_mode)
    check_range("snapshot_every", snapshot_every, 0)
    if backend == "graph" and x0.device.type not in RECORDERS:
        raise FlkitError(
            f"backend='graph' records CUDA graphs; the surrogate data is on "
            f"{x0.device.type!r}, not on one of {sorted(RECORDERS)}; accepted backends there: "
            "'auto', 'wide', 'vmap', 'loop', 'compiled'"
        )
    names = [n for n in param_names(model) if n in target]
    if not names:
        raise FlkitError("target holds none of the model's trainable tensors")
    start = {n: v.detach() for n, v in start.items()}
    goal = flat_update({n: target[n].detach() for n in names}, names)
    fracs = [spec.topk] * goal.shape[0] if topk is None else list(topk)
    if len(fracs) != goal.shape[0]:
        raise FlkitError(f"{len(fracs)} topk fractions for {goal.shape[0]} clients")
    mask = None
    if min(fracs) < 1:
        mask = torch.stack([topk_mask(goal[i : i + 1], f)[0] for i, f in enumerate(fracs)])
        mask = mask.to(goal.dtype)
    x = x0.detach().clone().requires_grad_(True)
    y = y0.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([x, y], lr=spec.lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, lr_milestones(spec.iters), gamma=0.1)
    lo = hi = None
    if box is not None:
        shape = (1, 1, -1) + (1,) * (x.dim() - 3)
        lo, hi = box[0].to(x).view(shape), box[1].to(x).view(shape)
    k = x.shape[0]
    train = spec.model_mode == "train"
    best_x, best_y = x.detach().clone(), y.detach().clone()
    stopped = torch.full((k,), -1, dtype=torch.long)
    losses = []
    snaps = [] if snapshot_every > 0 else None
    advice = "a smaller gi lr usually keeps it finite"
    watches = [LossWatch("Disparity", "iteration", advice) for _ in range(k)]

    def disparity(xx, yy, grad, rows=None):
        st, gl, mk = start, goal, mask
        if rows is not None:
            st = {n: v[rows] for n, v in start.items()}
            gl, mk = goal[rows], None if mask is None else mask[rows]
        upd = unroll(
            model,
            st,
            xx,
            torch.softmax(yy, -1),
            local,
            differentiable=grad,
            train_mode=train,
            backend=unroll_backend,
        )
        diff = (flat_update(upd, names) - gl).abs()
        return (diff * mk if mk is not None else diff).sum(1)

    def gradients(xx, yy):
        loss = disparity(xx, yy, True)
        gx, gy = torch.autograd.grad(loss.sum(), [xx, yy])
        return loss.detach(), gx, gy

    graphed = None
    unroll_backend = backend
    if backend == "graph":  # the graph is the whole iteration's; its unroll is the wide step
        graphed = GraphedGradient(gradients, RECORDERS[x.device.type])
        unroll_backend = "wide"

    for it in range(spec.iters):
        if snaps is not None and it % snapshot_every == 0:
            snaps.append((it, x.detach().clone(), y.detach().clone()))
        live = stopped < 0
        every = bool(live.all())
        if every and graphed is not None:
            loss, gx, gy = graphed(x, y)
            full = loss.cpu()
        elif every:
            loss = disparity(x, y, True)
            full = loss.detach().cpu()
        else:  # stopped clients' Disparity stays at its last value; they get no gradient
            rows = live.nonzero().flatten().to(x.device)
            loss = disparity(x[rows], y[rows], True, rows)
            full = losses[-1].clone()
            full[live] = loss.detach().cpu()
        losses.append(full)
        for j in live.nonzero().flatten().tolist():  # a stopped client's value does not change
            watches[j].see(it, full[j], f"iteration {it} for client {j} of the batch")
        on = live.to(x.device)
        best_x[on], best_y[on] = x.detach()[on], y.detach()[on]
        if spec.tol > 0 and it >= spec.window:
            past = losses[it - spec.window]
            stopped[live & ((past - losses[it]) <= spec.tol * past.abs())] = it
            if not (stopped < 0).any():
                break
        opt.zero_grad(set_to_none=True)
        if not (every and graphed is not None):
            gx, gy = torch.autograd.grad(loss.sum(), [x, y])
        x.grad, y.grad = gx.sign(), gy
        opt.step()
        sched.step()
        if lo is not None:
            with torch.no_grad():
                x.copy_(torch.maximum(torch.minimum(x, hi), lo))
    on = (stopped < 0).to(x.device)  # clients that used every iteration keep the last step
    best_x[on], best_y[on] = x.detach()[on], y.detach()[on]
    iters = torch.where(stopped >= 0, stopped, torch.full_like(stopped, len(losses)))
    final = disparity(best_x, best_y, False).detach().cpu()
    for j, v in enumerate(final.tolist()):
        check_finite(v, "Disparity", f"the end (iteration {len(losses)}) for client {j}", advice)
    if snaps is not None:
        snaps.append((len(losses), best_x.clone(), best_y.clone()))
    return InversionResult(
        best_x,
        best_y,
        torch.stack(losses),
        iters,
        losses[0],
        final,
        snaps,
        [w.diverged for w in watches],
    )
