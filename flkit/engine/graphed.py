"""The "graph" backend: the wide step's whole local step recorded once as a CUDA graph and
replayed for every further step.

On a GPU a round of small models is bound by kernel launches, not arithmetic: LeNet-5 on ten
clients' batches of 10 does microseconds of work per kernel, and the eager wide step spends its time
in Python and the launch of each of its kernels. The "compiled" backend graphs only the forward pass
and the loss; here everything a local step does (the batch gather, forward, backward, the SGD update
and the loss sums) is recorded, `STEPS_PER_GRAPH` steps at a time, and each replay launches them all
at once. The tensors the graph works on are kept on the wide model between calls (`static_tensors`),
so that a run records once and every later round only replays (a call unlike the recorded ones, e.g.
with another learning rate, records again). A replay runs the very kernels the eager wide step runs,
in the same order, on the same tensors, so it gives the wide step's floats.

A call records only where replaying is exactly what the eager step would do (`graph_reason`):
every client takes the same number of equal batches, no hooks (a hook is Python that a replay
would not call again), no dropout (a replay draws other random numbers than the eager step), no
buffers (e.g. BatchNorm statistics), not differentiable. Elsewhere, and where recording fails,
the call runs the eager wide step (with a warning when recording failed, which is not tried again
for that key); `LocalResult.backend` says which ran.

The driver (`replay_steps`) takes its recorder as an argument, so that its bookkeeping (the eager
warm-up, the static plan that each replay reads, the eager tail) is tested on a CPU with a recorder
that calls the step again instead of replaying it (tests/test_graph_backend.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

# Eager steps, on a side stream, before recording: cuBLAS and cuDNN create their handles and
# workspaces, and autograd its device thread, on first use, which a recording may not do.
GRAPH_WARMUP = 3
# Local steps recorded in one graph. A replay costs one launch from Python however many steps it
# holds, and recording costs about as much as running the steps eagerly, once per run; a call's
# steps that do not fill a whole graph run eagerly at the end.
STEPS_PER_GRAPH = 10


def graph_reason(model: nn.Module, uniform, hooks: bool, differentiable: bool, train_mode: bool):
    """Why a wide call cannot be replayed from a graph with the eager step's floats (None: it
    can)."""
    if uniform is None:
        return "clients take different numbers or sizes of batches"
    if hooks:
        return "the call has hooks (Python a replay would not call again)"
    if differentiable:
        return "differentiable=True"
    return model_reason(model, train_mode)


def model_reason(model: nn.Module, train_mode: bool = True) -> str | None:
    """Why no call on `model` can be replayed with the eager step's floats (None: calls can)."""
    if list(model.buffers()):
        return "the model has buffers (e.g. BatchNorm statistics)"
    if train_mode and any(isinstance(m, nn.modules.dropout._DropoutNd) for m in model.modules()):
        return "the model has dropout (a replay draws other random numbers than the eager step)"
    return None


def cuda_recorder(fn: Callable[[], None]) -> Callable[[], None]:
    """Record `fn` (which does not run) as a CUDA graph; return its replay."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


# The devices whose graphs this backend can record, and how (tests add a CPU stand-in).
RECORDERS: dict[str, Callable] = {"cuda": cuda_recorder}


# Recordings a wide model keeps at once: a round whose clients are trained in chunks of two
# sizes alternates between two keys, and each key's tensors and graph cost memory.
KEPT_RECORDINGS = 4


def static_tensors(owner, key, fresh: dict) -> dict:
    """The tensors a recorded graph reads and writes, kept on `owner` (the wide model) from one
    call to the next under `key` (everything the graph has baked in: data addresses, shapes, the
    trained parameters, the SGD settings): for a known key, `fresh`'s values are copied into the
    kept tensors and those are returned; for a new key `fresh` itself is kept (the least recently
    used of KEPT_RECORDINGS keys is dropped).
    fresh: {"state": {name: Tensor}, "bufs": {name: Tensor}, "loss_sum": Tensor, "seen": Tensor};
    the result adds "graph", the slot where `replay_steps` keeps its recording."""
    kept_all = owner.__dict__.setdefault("graph_static", {})
    kept = kept_all.pop(key, None)
    if kept is not None:
        for part in ("state", "bufs"):
            for n, v in fresh[part].items():
                kept[part][n].copy_(v)
        kept["loss_sum"].copy_(fresh["loss_sum"])
        kept["seen"].copy_(fresh["seen"])
    else:
        kept = {**fresh, "graph": {}}
        while len(kept_all) >= KEPT_RECORDINGS:
            kept_all.pop(next(iter(kept_all)))
    kept_all[key] = kept  # most recently used last
    return kept


def replay_steps(
    step: Callable[[torch.Tensor], None],
    plan: torch.Tensor,
    record: Callable = cuda_recorder,
    warmup: int | None = None,
    per_graph: int | None = None,
    side_stream: bool = True,
    reuse: dict | None = None,
) -> bool:
    """Run `step(plan[s])` for every step s of `plan` ([steps, ...] sample indices): the first
    `warmup` eagerly, then `per_graph` steps at a time from one recorded graph that reads its
    indices from a static copy of the plan, the remainder eagerly. `step` changes its tensors in
    place only. Returns whether any step was replayed: not where the warm-up took every step, nor
    where recording failed (the steps after the warm-up then ran eagerly, with a warning).
    warmup, per_graph: default GRAPH_WARMUP and STEPS_PER_GRAPH. reuse: a dict that keeps the
    recording for the next call whose `step` works on the same tensors (`static_tensors`); a
    call that finds one there neither warms up nor records, and one that finds a failed
    recording there runs every step eagerly without trying again."""
    warmup = GRAPH_WARMUP if warmup is None else warmup
    per_graph = STEPS_PER_GRAPH if per_graph is None else per_graph
    n = plan.shape[0]
    if reuse is not None and "failed" in reuse:
        for t in range(n):
            step(plan[t])
        return False
    kept = reuse is not None and "replay" in reuse
    eager = 0 if kept else min(n, warmup)
    stream = torch.cuda.Stream(device=plan.device) if side_stream and eager else None
    if stream is not None:  # warm-up on a side stream, as torch.cuda.graph asks
        stream.wait_stream(torch.cuda.current_stream(plan.device))
        with torch.cuda.stream(stream):
            for s in range(eager):
                step(plan[s])
        torch.cuda.current_stream(plan.device).wait_stream(stream)
    else:
        for s in range(eager):
            step(plan[s])
    s, replay = eager, None
    if kept:
        per, static, replay = reuse["per"], reuse["static"], reuse["replay"]
    elif n - eager > 0:
        per = min(per_graph, n - eager)
        static = plan[eager : eager + per].clone()

        def steps():
            for j in range(per):
                step(static[j])

        try:
            replay = record(steps)
        except Exception as e:  # noqa: BLE001 - any recording failure means: run eagerly
            if reuse is not None:
                reuse["failed"] = f"{type(e).__name__}: {e}"
            warnings.warn(
                f"backend='graph' could not record the local step ({type(e).__name__}: {e}); "
                "running it eagerly (backend 'wide')",
                RuntimeWarning,
                stacklevel=4,
            )
        else:
            if reuse is not None:
                reuse.update(per=per, static=static, replay=replay)
    replayed = False
    if replay is not None:
        while n - s >= per:
            static.copy_(plan[s : s + per])
            replay()
            s += per
            replayed = True
    for t in range(s, n):
        step(plan[t])
    return replayed
