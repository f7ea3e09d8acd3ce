"""Local training of many clients at once (the engine): `train_clients`.

Every backend and the plain per-client reference loop (flkit.engine.reference) consume the same
*batch plan* (which samples each client sees at each step, drawn from a per-client seed,
flkit.engine.spec), so they can be compared to float64 precision.

Backends of `train_clients`:
- "wide": all K clients as one network (flkit.engine.wide), differentiated once with autograd.
- "vmap": torch.func.vmap over functional_call + grad, for models the wide backend cannot run.
- "loop": the reference loop (torch.optim.SGD per client), for comparison.
- "compiled": "wide" with the forward pass and loss under torch.compile (CUDA graphs on a GPU);
  where compiling fails it falls back to "wide" with a warning (`LocalResult.backend` tells).
- "graph" (CUDA only): "wide" with its whole local step recorded as a CUDA graph and replayed
  (flkit.engine.graphed), the wide step's floats with a fraction of its launches; calls it cannot
  replay exactly run the eager wide step (`LocalResult.backend` tells).
"auto" here is a fixed rule (`default_backend`): "wide" when the model qualifies, else "vmap"
(models without buffers), else "loop". A run (flkit.experiment) resolves its own "auto" by
measurement instead (`flkit.engine.backend.measure_backend`) and records the backend it chose.

The wide and vmap backends stay in this module together: they share the batch plan, the
functional SGD step, the set-up and the chunking (`auto_chunk`), and keeping their SGD loops side
by side lets a reader check that they compute the same update.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn
from torch.nn import functional

from ..state import param_names
from ..utils import FlkitError, check_choice
from . import graphed as _graphed
from .graphed import RECORDERS, graph_reason, replay_steps, static_tensors
from .spec import LocalResult, LocalSpec, batch_plan
from .wide import compiled_loss, unsupported_reason, wide_loss, wide_model

BACKENDS = ("auto", "wide", "vmap", "loop", "compiled", "graph")

# The memory the wide step plans for per call. The chunk size is a function of the model, the
# batch and this constant only, never of the machine's free memory: a grouped convolution over a
# different number of clients rounds differently, so a chunk that followed free RAM/GPU memory
# would change float results between machines (or between two runs on one busy machine) without
# changing the run-cache key. 4 GiB trains every client of a round at once for the notebooks'
# models (LeNet-5: ~190 clients, VGG11* at batch 50: ~40).
CHUNK_MEMORY_BYTES = 4 << 30


def default_backend(model: nn.Module, backend: str = "auto") -> str:
    """The backend `train_clients` runs for `backend`: a pinned one (checked against the model),
    or for "auto" the fixed rule "wide" when the model qualifies, else "vmap" (no buffers), else
    "loop"."""
    check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        if backend in ("wide", "compiled", "graph") and unsupported_reason(model):
            raise FlkitError(
                f"backend={backend!r} cannot run this model: {unsupported_reason(model)}; "
                "accepted backends for it: 'vmap', 'loop'"
            )
        return backend
    if unsupported_reason(model) is None:
        return "wide"
    return "vmap" if not list(model.buffers()) else "loop"


def auto_chunk(model: nn.Module, k: int, batch_size: int, sample_shape) -> int:
    """How many of `k` clients the wide step trains at once: as many as fit CHUNK_MEMORY_BYTES by
    a coarse estimate, a fixed number for a given model, batch size and input shape."""
    n_param = sum(p.numel() for p in model.parameters())
    # parameters, gradient, momentum, plus activations (a coarse 64 floats per input value per
    # layer)
    per_client = 4 * (4 * n_param + 64 * batch_size * int(torch.Size(sample_shape).numel()))
    return max(1, min(k, CHUNK_MEMORY_BYTES // max(per_client, 1)))


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
    hook_args: Mapping | None = None,
    train_mode: bool = True,
) -> LocalResult:
    """Train K clients from their own starting states on their own data.

    start: {name: Tensor[K, ...]} (parameters and buffers, see flkit.state.broadcast_state).
    x, y: the whole dataset on the training device; client_indices[k] indexes client k's samples.
    client_seeds[k] fixes client k's batch order (derive with flkit.utils.derive_seed).
    The hooks: extra_loss(params, hook_args) -> Tensor[K]; param_transform(params, hook_args) ->
    params used in the forward pass; grad_transform(grads, params, hook_args) -> grads.
    params/grads are {name: Tensor[K, ...]} of the trainable parameters of the clients in the step;
    the hooks' dict is {"start": their starting state, "clients": their positions, **hook_args}.
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
    backend = default_backend(model, backend)
    if backend == "graph" and x.device.type not in RECORDERS:
        raise FlkitError(
            f"backend='graph' records CUDA graphs; the data is on {x.device.type!r}, not on one "
            f"of {sorted(RECORDERS)}; accepted backends there: 'wide', 'vmap', 'loop', 'compiled'"
        )
    if backend == "loop":
        from .reference import train_clients_reference

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
            hook_args=hook_args,
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
        args = {"start": sub, "clients": sel, **(hook_args or {})}
        run = _train_vmap if backend == "vmap" else _train_wide
        extra = {"compiled": True} if backend == "compiled" else {}
        if backend == "graph":
            extra = {"graphed": True}
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
                args,
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
    counts = {len(p) for p in plans}
    if len(counts) == 1:  # a fill, not a copy from host memory: a CUDA graph can record it
        steps = torch.full((k,), counts.pop(), dtype=torch.long, device=x.device)
    else:
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
    hook_args,
    train_mode=True,
    compiled=False,
    graphed=False,
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

    def take_step(group, idx_t):
        """One local step of the clients `group` (positions) on the sample indices idx_t [B, G]:
        SGD on state and bufs, the loss sums on loss_sum and seen, all in place when the group is
        everyone (which the graph backend records)."""
        full = len(group) == k
        gi = everyone if full else torch.tensor(group, device=x.device)
        cur = state if full else {n: v[gi] for n, v in state.items()}
        params = {
            n: cur[n] if differentiable else cur[n].detach().requires_grad_(True) for n in names
        }
        tensors = dict(cur)
        args = hook_args if full else _group_args(hook_args, gi, group)
        tensors.update(param_transform(params, args) if param_transform else params)
        mean_loss, batch_sum = loss_fn(tensors, x[idx_t], y[idx_t], len(group), train_mode)
        total = mean_loss.sum()
        if extra_loss is not None:
            total = total + extra_loss(params, args).sum()
        grads = torch.autograd.grad(total, [params[n] for n in names], create_graph=differentiable)
        grads = dict(zip(names, grads))
        if grad_transform is not None:
            grads = grad_transform(grads, params, args)
        if full and not differentiable:
            _sgd_step_fused(
                [state[n] for n in names],
                [grads[n] for n in names],
                [bufs[n] for n in names] if bufs else None,
                spec,
            )
        else:
            current = params if differentiable else cur
            _sgd_update(
                state, bufs, current, grads, names, None if full else gi, spec, differentiable
            )
            if not full:  # buffers (BatchNorm statistics) were updated on the gathered copy
                for n in state:
                    if n not in names:
                        state[n] = state[n].index_copy(0, gi, cur[n])
        if full:
            loss_sum.add_(batch_sum.double())
            seen.add_(idx_t.shape[0])
        else:
            loss_sum.index_add_(0, gi, batch_sum.double())
            seen.index_add_(0, gi, torch.full_like(gi, idx_t.shape[0]))

    hooks = any(h is not None for h in (extra_loss, param_transform, grad_transform))
    replayed = graphed and (graph_reason(model, uniform, hooks, differentiable, train_mode) is None)
    if replayed:
        # the graph writes the same tensors on every replay: they are kept on the wide model
        # between calls (rounds), so that a run records once; the result gets copies of them
        fresh = {"state": state, "bufs": bufs, "loss_sum": loss_sum, "seen": seen}
        key = _graph_key(x, y, uniform, spec, train_mode, names, fresh)
        kept = static_tensors(wide, key, fresh)
        state, bufs, loss_sum, seen = (kept[p] for p in fresh)
        every = list(range(k))
        replayed = replay_steps(
            lambda idx_t: take_step(every, idx_t),
            uniform,
            record=RECORDERS[x.device.type],
            side_stream=x.device.type == "cuda",
            reuse=kept["graph"],
        )
        out = {n: v.clone() for n, v in state.items()}
        used = "graph" if replayed else "wide"
        return LocalResult(out, (loss_sum / seen).float(), seen.clone(), steps, used)
    for step in range(n_steps):
        if uniform is not None:
            take_step(list(range(k)), uniform[step])
            continue
        for group in _step_groups(plans, step):
            idx_t = torch.stack([client_indices[i][plans[i][step]] for i in group]).t()
            take_step(group, idx_t)
    used = "compiled" if compiled and loss_fn.failed is None else "wide"
    return LocalResult(state, (loss_sum / seen).float(), seen, steps, used)


def _graph_key(x, y, plan, spec, train_mode, names, tensors):
    """What a recorded local step has baked in: the data's addresses, shapes, dtypes and device,
    the batch shape, the SGD settings (an lr that changes from round to round records again), the
    mode, the parameters it trains and the shapes of the tensors it updates (a recording is
    reused only where all of them are the same)."""
    shapes = {
        part: tuple((n, tuple(v.shape), v.dtype) for n, v in tensors[part].items())
        for part in ("state", "bufs")
    }
    return (
        str(x.device),
        x.data_ptr(),
        tuple(x.shape),
        x.dtype,
        y.data_ptr(),
        tuple(y.shape),
        y.dtype,
        tuple(plan.shape[1:]),
        (spec.lr, spec.momentum, spec.weight_decay),
        train_mode,
        tuple(names),
        shapes["state"],
        shapes["bufs"],
        _graphed.STEPS_PER_GRAPH,
    )


def _sgd_update(state, bufs, current, grads, names, gi, spec, differentiable):
    """SGD from `current` ({name: parameters of the clients in the step}; stepped in place unless
    differentiable) for the clients `gi` (None: all of them), written back into state and bufs."""
    with torch.set_grad_enabled(differentiable):
        for n in names:
            b = None if not bufs else (bufs[n] if gi is None else bufs[n][gi])
            new_p, new_b = _sgd_step(current[n], grads[n], b, spec, differentiable)
            if gi is None:
                state[n] = new_p
            elif differentiable:
                state[n] = state[n].index_copy(0, gi, new_p)
            else:
                state[n].index_copy_(0, gi, new_p)
            if bufs:
                bufs[n] = new_b if gi is None else bufs[n].index_copy(0, gi, new_b)


def _group_args(hook_args, gi, group):
    """The hooks' dict of the clients `group` (positions `gi`) of a call's `hook_args`."""
    return {
        **hook_args,
        "start": {n: v[gi] for n, v in hook_args["start"].items()},
        "clients": [hook_args["clients"][i] for i in group],
    }


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
    hook_args,
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
        per = functional.cross_entropy(out, yb, reduction="none")
        return per.mean(), per.detach().sum()

    per_client_grad = vmap(grad(one_loss, has_aux=True))
    for step in range(n_steps):
        for group in _step_groups(plans, step):
            gi = torch.tensor(group, device=x.device)
            params = {n: state[n][gi] for n in names}
            args = _group_args(hook_args, gi, group)
            idx = torch.stack([client_indices[i][plans[i][step]] for i in group])
            if param_transform or extra_loss or differentiable:
                # the transform/extra term is outside vmap: differentiate the whole stacked loss
                src = {
                    n: p if differentiable else p.detach().requires_grad_(True)
                    for n, p in params.items()
                }
                used = param_transform(src, args) if param_transform else src
                per = vmap(lambda p, xb, yb: one_loss(p, xb, yb))(used, x[idx], y[idx])
                total = per[0].sum() + (extra_loss(src, args).sum() if extra_loss else 0)
                g = torch.autograd.grad(total, [src[n] for n in names], create_graph=differentiable)
                grads, batch_sum, params = dict(zip(names, g)), per[1], src
            else:
                grads, batch_sum = per_client_grad(params, x[idx], y[idx])
            if grad_transform is not None:
                grads = grad_transform(grads, params, args)
            current = {n: p if differentiable else p.detach().clone() for n, p in params.items()}
            _sgd_update(state, bufs, current, grads, names, gi, spec, differentiable)
            loss_sum.index_add_(0, gi, batch_sum.double())
            seen.index_add_(0, gi, torch.full_like(gi, idx.shape[1]))
    return LocalResult(state, (loss_sum / seen).float(), seen, steps, "vmap")
