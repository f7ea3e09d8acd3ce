"""Local training of many clients at once (the engine). The plain per-client reference loop it is
checked against is flkit.train_reference.

Both consume the same *batch plan* (which samples each client sees at each
step, drawn from a per-client seed), so they can be compared to float64 precision.

Backends of `train_clients`:
- "wide": all K clients as one network (flkit.wide), differentiated once with autograd.
- "vmap": torch.func.vmap over functional_call + grad, for models the wide backend cannot run.
- "loop": the reference loop (torch.optim.SGD per client), for comparison.
- "compiled": "wide" with the forward pass and loss under torch.compile (CUDA graphs on a GPU);
  where compiling fails it falls back to "wide" with a warning (`LocalResult.backend` tells).
"auto" here is a fixed rule: "wide" when the model qualifies, else "vmap" (models without
buffers), else "loop". A run (flkit.experiment) resolves its own "auto" by measurement instead
(flkit.backend_choice) and records the backend it chose.

The wide and vmap backends stay in this module together: they share the batch plan, the
functional SGD step, the set-up and the chunking, and keeping their SGD loops side by side lets a
reader check that they compute the same update. What they do not share lives apart (all importable
from here): the reference loop in flkit.train_reference; LocalSpec, LocalResult and the batch plan
in flkit.local_spec; the wide step's loss, its compiled form and the cached wide model in
flkit.wide_step; the backend choice and the chunk size in flkit.backend_plan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .backend_plan import (  # noqa: F401  (BACKENDS, eligible_backends, CHUNK_MEMORY_BYTES: engine interface)
    BACKENDS,
    CHUNK_MEMORY_BYTES,
    auto_chunk,
    choose_backend,
    eligible_backends,
)
from .inference import evaluate  # noqa: F401  (part of the engine's interface)
from .local_spec import LocalResult, LocalSpec, batch_plan
from .state import param_names
from .utils import FlkitError
from .wide_step import (  # noqa: F401  (compile_settings, wide_model: part of the engine's interface)
    compile_settings,
    compiled_loss,
    wide_loss,
    wide_model,
)


def _sgd_step(p, g, buf, spec: LocalSpec, differentiable: bool):
    """One torch.optim.SGD step on stacked tensors; returns (new p, new momentum buffer)."""
    if spec.weight_decay:
        g = g + spec.weight_decay * p
    if spec.momentum:
        buf = spec.momentum * buf + g
        g = buf
    if differentiable:
        return p - spec.lr * g, buf
    p.sub_(spec.lr * g)
    return p, buf


@torch.no_grad()
def _sgd_step_fused(params, grads, bufs, spec: LocalSpec):
    """`_sgd_step` for all tensors at once (torch._foreach_*: one kernel launch per op, not per
    tensor)."""
    if spec.weight_decay:
        grads = torch._foreach_add(grads, params, alpha=spec.weight_decay)
    if spec.momentum:
        torch._foreach_mul_(bufs, spec.momentum)
        torch._foreach_add_(bufs, grads)
        grads = bufs
    torch._foreach_add_(params, grads, alpha=-spec.lr)


def train_clients(
    model: nn.Module,
    start: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    client_indices: Sequence[torch.Tensor],
    spec: LocalSpec,
    client_seeds: Sequence[int],
    extra_loss: Callable | None = None,
    param_transform: Callable | None = None,
    grad_transform: Callable | None = None,
    backend: str = "auto",
    differentiable: bool = False,
    chunk_size: int | None = None,
    context: Mapping | None = None,
    train_mode: bool = True,
) -> LocalResult:
    """Train K clients from their own starting states on their own data.

    start: {name: Tensor[K, ...]} (parameters and buffers, see flkit.state.broadcast_state).
    x, y: the whole dataset on the training device; client_indices[k] indexes client k's samples.
    client_seeds[k] fixes client k's batch order (derive with flkit.utils.derive_seed).
    extra_loss(params, ctx) -> Tensor[K]; param_transform(params, ctx) -> params used in the forward
    pass; grad_transform(grads, params, ctx) -> grads. params/grads are {name: Tensor[K, ...]} of
    the trainable parameters; ctx = {"start": the starting state, "clients": positions, **context}.
    differentiable=True keeps the autograd graph through every local step, to `start`, to `x` and
    to a floating `y` (gradient inversion, flkit.inversion). y may be class indices [N] or soft
    labels [N, C] (probabilities). train_mode=False runs the forward pass in eval mode (dropout
    off, BatchNorm on running statistics), as the inversion's model of a client does.
    chunk_size=None trains `auto_chunk(...)` clients per wide step, a number fixed by the model and
    batch shape (not by free memory, so that a config gives the same floats on every machine)."""
    k = len(client_indices)
    if k == 0:
        raise FlkitError("train_clients needs at least one client")
    if len(client_seeds) != k:
        raise FlkitError(
            f"{len(client_seeds)} client_seeds for {k} clients; give one seed per client"
        )
    for name, v in start.items():
        if v.shape[0] != k:
            raise FlkitError(f"start[{name!r}] has {v.shape[0]} rows for {k} clients")
    backend = choose_backend(model, backend)
    if backend == "loop":
        from .train_reference import train_clients_reference

        return train_clients_reference(
            model,
            start,
            x,
            y,
            client_indices,
            spec,
            client_seeds,
            extra_loss,
            param_transform,
            grad_transform,
            context=context,
            train_mode=train_mode,
        )
    if chunk_size is None:
        chunk_size = auto_chunk(model, k, spec.batch_size, x.shape[1:])
    results = []
    was = model.training  # the vmap backend's functional_call follows the module's own mode
    model.train(train_mode)
    for lo in range(0, k, chunk_size):
        sel = list(range(lo, min(k, lo + chunk_size)))
        sub = {n: v[lo : lo + len(sel)] for n, v in start.items()}
        ctx = {"start": sub, "clients": sel, **(context or {})}
        run = _train_vmap if backend == "vmap" else _train_wide
        extra = {"compiled": True} if backend == "compiled" else {}
        results.append(
            run(
                model,
                sub,
                x,
                y,
                [client_indices[i] for i in sel],
                spec,
                [client_seeds[i] for i in sel],
                extra_loss,
                param_transform,
                grad_transform,
                differentiable,
                ctx,
                train_mode,
                **extra,
            )
        )
    model.train(was)
    if len(results) == 1:
        return results[0]
    return LocalResult(
        {n: torch.cat([r.state[n] for r in results]) for n in results[0].state},
        torch.cat([r.train_loss for r in results]),
        torch.cat([r.samples for r in results]),
        torch.cat([r.steps for r in results]),
        results[-1].backend,
    )


def _plans(client_indices, spec, client_seeds, device):
    plans = [batch_plan(len(ix), spec, s, device) for ix, s in zip(client_indices, client_seeds)]
    return plans, max(len(p) for p in plans)


def _setup(model, start, x, client_indices, spec, client_seeds, differentiable):
    """What both batched backends start from: trainable names, a private copy of the states,
    momentum buffers, the batch plans and the per-client counters."""
    k = len(client_indices)
    names = [n for n in param_names(model) if n in start]
    state = {n: (v.clone() if differentiable else v.detach().clone()) for n, v in start.items()}
    if differentiable:  # a start outside any graph (the inversion's w) still needs one per step
        state.update(
            {n: state[n].requires_grad_(True) for n in names if not state[n].requires_grad}
        )
    bufs = {n: torch.zeros_like(state[n]) for n in names} if spec.momentum else {}
    plans, n_steps = _plans(client_indices, spec, client_seeds, x.device)
    loss_sum = torch.zeros(k, dtype=torch.float64, device=x.device)
    seen = torch.zeros(k, dtype=torch.long, device=x.device)
    steps = torch.tensor([len(p) for p in plans], device=x.device)
    return names, state, bufs, plans, n_steps, loss_sum, seen, steps


def _step_groups(plans, step):
    """Clients that take a step now, grouped by batch size (short last batches form their own
    group)."""
    groups: dict[int, list[int]] = {}
    for i, plan in enumerate(plans):
        if step < len(plan):
            groups.setdefault(len(plan[step]), []).append(i)
    return list(groups.values())


def _uniform_plan(client_indices, plans, k):
    """[steps, B, K] sample indices when every client takes the same number of equal-sized
    batches (the common case), gathered once per call instead of once per step; else None."""
    sizes = {len(b) for plan in plans for b in plan}
    if len(sizes) != 1 or len({len(p) for p in plans}) != 1:
        return None
    cols = [client_indices[i][torch.stack(plans[i])] for i in range(k)]  # [steps, B] each
    return torch.stack(cols, dim=2)


def _train_wide(
    model,
    start,
    x,
    y,
    client_indices,
    spec,
    client_seeds,
    extra_loss,
    param_transform,
    grad_transform,
    differentiable,
    ctx,
    train_mode=True,
    compiled=False,
):
    k = len(client_indices)
    wide = wide_model(model)
    compiled = compiled and not differentiable  # a compiled backward has no double backward
    loss_fn = compiled_loss(wide, x.device) if compiled else functools.partial(wide_loss, wide)
    names, state, bufs, plans, n_steps, loss_sum, seen, steps = _setup(
        model, start, x, client_indices, spec, client_seeds, differentiable
    )
    uniform = _uniform_plan(client_indices, plans, k)
    everyone = torch.arange(k, device=x.device)
    for step in range(n_steps):
        groups = [list(range(k))] if uniform is not None else _step_groups(plans, step)
        for group in groups:
            full = len(group) == k
            gi = everyone if full else torch.tensor(group, device=x.device)
            cur = state if full else {n: v[gi] for n, v in state.items()}
            if uniform is not None:
                idx_t = uniform[step]
            else:
                idx_t = torch.stack([client_indices[i][plans[i][step]] for i in group]).t()
            params = {
                n: cur[n] if differentiable else cur[n].detach().requires_grad_(True) for n in names
            }
            tensors = dict(cur)
            gctx = (
                ctx
                if full
                else {
                    **ctx,
                    "start": {n: v[gi] for n, v in ctx["start"].items()},
                    "clients": [ctx["clients"][i] for i in group],
                }
            )
            tensors.update(param_transform(params, gctx) if param_transform else params)
            mean_loss, batch_sum = loss_fn(tensors, x[idx_t], y[idx_t], len(group), train_mode)
            total = mean_loss.sum()
            if extra_loss is not None:
                total = total + extra_loss(params, gctx).sum()
            grads = torch.autograd.grad(
                total, [params[n] for n in names], create_graph=differentiable
            )
            grads = dict(zip(names, grads))
            if grad_transform is not None:
                grads = grad_transform(grads, params, gctx)
            if full and not differentiable:
                _sgd_step_fused(
                    [state[n] for n in names],
                    [grads[n] for n in names],
                    [bufs[n] for n in names] if bufs else None,
                    spec,
                )
            else:
                _sgd_update_group(
                    state, bufs, params, cur, grads, names, gi, full, spec, differentiable
                )
            if full:
                loss_sum += batch_sum.double()
                seen += idx_t.shape[0]
            else:
                loss_sum.index_add_(0, gi, batch_sum.double())
                seen.index_add_(0, gi, torch.full_like(gi, idx_t.shape[0]))
    used = "compiled" if compiled and loss_fn.failed is None else "wide"
    return LocalResult(state, (loss_sum / seen).float(), seen, steps, used)


def _sgd_update_group(state, bufs, params, cur, grads, names, gi, full, spec, differentiable):
    """SGD for a subset of clients (gi) or with the graph kept; writes into state/bufs."""
    with torch.set_grad_enabled(differentiable):
        for n in names:
            b = None if not bufs else (bufs[n] if full else bufs[n][gi])
            new_p, new_b = _sgd_step(
                params[n] if differentiable else cur[n], grads[n], b, spec, differentiable
            )
            if full:
                state[n] = new_p
            elif differentiable:
                state[n] = state[n].index_copy(0, gi, new_p)
            else:
                state[n].index_copy_(0, gi, new_p)
            if bufs:
                bufs[n] = new_b if full else bufs[n].index_copy(0, gi, new_b)
        if not full:  # buffers (BatchNorm statistics) were updated on the gathered copy
            for n in state:
                if n not in names:
                    state[n] = state[n].index_copy(0, gi, cur[n])


def _train_vmap(
    model,
    start,
    x,
    y,
    client_indices,
    spec,
    client_seeds,
    extra_loss,
    param_transform,
    grad_transform,
    differentiable,
    ctx,
    train_mode=True,
):
    from torch.func import functional_call, grad, vmap

    if list(model.buffers()):
        raise FlkitError(
            "backend='vmap' supports models without buffers (BatchNorm needs 'wide' or 'loop')"
        )
    names, state, bufs, plans, n_steps, loss_sum, seen, steps = _setup(
        model, start, x, client_indices, spec, client_seeds, differentiable
    )

    def one_loss(p, xb, yb):
        out = functional_call(model, p, (xb,))
        per = F.cross_entropy(out, yb, reduction="none")
        return per.mean(), per.detach().sum()

    per_client_grad = vmap(grad(one_loss, has_aux=True))
    for step in range(n_steps):
        for group in _step_groups(plans, step):
            gi = torch.tensor(group, device=x.device)
            params = {n: state[n][gi] for n in names}
            gctx = {
                **ctx,
                "start": {n: v[gi] for n, v in ctx["start"].items()},
                "clients": [ctx["clients"][i] for i in group],
            }
            idx = torch.stack([client_indices[i][plans[i][step]] for i in group])
            if param_transform or extra_loss or differentiable:
                # the transform/extra term is outside vmap: differentiate the whole stacked loss
                src = {
                    n: p if differentiable else p.detach().requires_grad_(True)
                    for n, p in params.items()
                }
                used = param_transform(src, gctx) if param_transform else src
                per = vmap(lambda p, xb, yb: one_loss(p, xb, yb))(used, x[idx], y[idx])
                total = per[0].sum() + (extra_loss(src, gctx).sum() if extra_loss else 0)
                g = torch.autograd.grad(total, [src[n] for n in names], create_graph=differentiable)
                grads, batch_sum, params = dict(zip(names, g)), per[1], src
            else:
                grads, batch_sum = per_client_grad(params, x[idx], y[idx])
            if grad_transform is not None:
                grads = grad_transform(grads, params, gctx)
            with torch.set_grad_enabled(differentiable):
                for n in names:
                    b = bufs[n][gi] if bufs else None
                    new_p, new_b = _sgd_step(
                        params[n] if differentiable else params[n].detach().clone(),
                        grads[n],
                        b,
                        spec,
                        differentiable,
                    )
                    state[n] = state[n].index_copy(0, gi, new_p)
                    if bufs:
                        bufs[n] = bufs[n].index_copy(0, gi, new_b)
            loss_sum.index_add_(0, gi, batch_sum.double())
            seen.index_add_(0, gi, torch.full_like(gi, idx.shape[1]))
    return LocalResult(state, (loss_sum / seen).float(), seen, steps, "vmap")
