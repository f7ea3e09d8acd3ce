"""The plain per-client reference loop: one model and one torch.optim.SGD per client, on the same
batch plan (flkit.engine.spec) as the engine (flkit.engine.train), so the engine's backends can be
checked against it to float64 precision. It is also the engine's "loop" backend."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import torch
from torch import nn
from torch.nn import functional

from ..state import param_names
from .spec import LocalResult, LocalSpec, batch_plan

__all__ = ["train_clients_reference"]


def train_clients_reference(
    model: nn.Module,
    start: Mapping[str, torch.Tensor],
    x,
    y,
    client_indices: Sequence[torch.Tensor],
    spec: LocalSpec,
    client_seeds: Sequence[int],
    extra_loss=None,
    param_transform=None,
    grad_transform=None,
    hook_args: Mapping | None = None,
    train_mode: bool = True,
) -> LocalResult:
    """The plain loop: one model and one torch.optim.SGD per client, the same batch plan."""
    from torch.func import functional_call

    k = len(client_indices)
    net = copy.deepcopy(model)
    names = param_names(net)
    out_states, losses, seen_all, steps_all = [], [], [], []
    for i in range(k):
        net.load_state_dict({n: v[i] for n, v in start.items()})
        net.train(train_mode)
        opt = torch.optim.SGD(
            [p for p in net.parameters() if p.requires_grad],
            lr=spec.lr,
            momentum=spec.momentum,
            weight_decay=spec.weight_decay,
        )
        plan = batch_plan(len(client_indices[i]), spec, client_seeds[i], x.device)
        args = {
            "start": {n: v[i : i + 1] for n, v in start.items()},
            "clients": [i],
            **(hook_args or {}),
        }
        loss_sum, seen = 0.0, 0
        for pos in plan:
            idx = client_indices[i][pos]
            params = {n: p.unsqueeze(0) for n, p in net.named_parameters() if n in names}
            if param_transform is not None:
                used = {n: v[0] for n, v in param_transform(params, args).items()}
                out = functional_call(net, used, (x[idx],))
            else:
                out = net(x[idx])
            per = functional.cross_entropy(out, y[idx], reduction="none")
            loss = per.mean()
            if extra_loss is not None:
                loss = loss + extra_loss(params, args).sum()
            opt.zero_grad()
            loss.backward()
            if grad_transform is not None:
                g = grad_transform(
                    {n: p.grad.unsqueeze(0) for n, p in net.named_parameters() if n in names},
                    params,
                    args,
                )
                for n, p in net.named_parameters():
                    if n in g:
                        p.grad = g[n][0].detach()
            opt.step()
            loss_sum += float(per.detach().sum())
            seen += len(idx)
        out_states.append({n: v.detach().clone() for n, v in net.state_dict().items()})
        losses.append(loss_sum / seen)
        seen_all.append(seen)
        steps_all.append(len(plan))
    stacked = {n: torch.stack([s[n] for s in out_states]) for n in out_states[0]}
    dev = x.device
    return LocalResult(
        stacked,
        torch.tensor(losses, device=dev, dtype=torch.float32),
        torch.tensor(seen_all, device=dev),
        torch.tensor(steps_all, device=dev),
        "loop",
    )
