"""Stacked state dicts: the K clients' parameters and buffers as {name: Tensor[K, ...]}."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import nn

State = dict[str, torch.Tensor]


def model_state(model: nn.Module) -> State:
    """Parameters and buffers of a model, detached copies (the server's view of a model)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def param_names(model: nn.Module) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


def stack_states(states: Sequence[Mapping[str, torch.Tensor]]) -> State:
    if not states:
        raise ValueError("stack_states needs at least one state")
    return {k: torch.stack([s[k] for s in states]) for k in states[0]}


def broadcast_state(state: Mapping[str, torch.Tensor], k: int) -> State:
    """K independent copies of one state (clients that all start from the same global model)."""
    return {n: v.unsqueeze(0).expand(k, *v.shape).clone() for n, v in state.items()}


def unstack_state(stacked: Mapping[str, torch.Tensor], i: int) -> State:
    return {n: v[i] for n, v in stacked.items()}


def index_state(stacked: Mapping[str, torch.Tensor], idx) -> State:
    return {n: v[idx] for n, v in stacked.items()}


def flatten(
    stacked: Mapping[str, torch.Tensor], names: Iterable[str] | None = None
) -> torch.Tensor:
    """[K, d] matrix of the named entries (all floating entries by default), in a fixed order."""
    names = (
        list(names)
        if names is not None
        else [n for n, v in stacked.items() if v.is_floating_point()]
    )
    return torch.cat([stacked[n].reshape(stacked[n].shape[0], -1) for n in names], dim=1)


def unflatten(flat: torch.Tensor, like: Mapping[str, torch.Tensor], names: Iterable[str]) -> State:
    """Inverse of `flatten`. `like` is one model's state (shapes without K); flat is [d] or
    [K, d]."""
    out, pos = {}, 0
    lead = flat.shape[:-1]
    for n in names:
        shape = like[n].shape
        size = like[n].numel()
        out[n] = flat[..., pos : pos + size].reshape(*lead, *shape)
        pos += size
    if pos != flat.shape[-1]:
        raise ValueError(
            f"flat vector has {flat.shape[-1]} entries but the named tensors hold {pos}"
        )
    return out


def state_bytes(state: Mapping[str, torch.Tensor]) -> int:
    return sum(v.numel() * v.element_size() for v in state.values())
