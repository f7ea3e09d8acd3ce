"""The gradient inversion with backend="graph" (flkit.inversion.GraphedGradient): on the CPU a
stand-in recorder replays by calling the recorded iteration again, reading whatever the driver put
in its static inputs, as a CUDA graph reads its captured addresses; the inversion must then give
backend "wide"'s floats exactly, with stopping clients, and after a failed recording. On a GPU,
where there is one, the real CUDA graph against the eager wide iteration. And the reused batch
plans (flkit.engine.spec.reused_plans) that let an iteration record no copy from host memory."""

import pytest
import torch
from graph_stand_in import StandIn  # the fixture stand_in comes through conftest
from torch import nn

from flkit import models
from flkit.engine import LocalSpec, batch_plan, graphed
from flkit.engine.spec import reused_plans
from flkit.inversion import GraphedGradient, InversionSpec, init_data, invert
from flkit.state import broadcast_state, model_state
from flkit.utils import FlkitError


def _lenet_problem(k=3, r=4, device="cpu", dtype=torch.float32, iters=9, **kw):
    torch.manual_seed(0)
    model = models.build("cnn_mnist", num_classes=10, in_channels=1).to(device, dtype)
    local = LocalSpec(lr=0.05, batch_size=r, steps=3)
    start = broadcast_state(model_state(model), k)
    g = torch.Generator().manual_seed(5)
    target = {n: 1e-3 * torch.randn(v.shape, generator=g, dtype=v.dtype) for n, v in start.items()}
    target = {n: v.to(device) for n, v in target.items()}
    spec = InversionSpec(size=r, iters=iters, lr=0.1, topk=0.3, **kw)
    x0, y0 = init_data(k, spec, (1, 28, 28), 10, 0, list(range(k)), device, dtype)
    return model, start, target, local, spec, x0, y0


def _same(a, b):
    for name in ("x", "y", "losses", "iters", "init_loss", "final_loss"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_replayed_iterations_give_the_wide_floats(stand_in):
    model, start, target, local, spec, x0, y0 = _lenet_problem(iters=9)
    box = (torch.tensor([-0.5]), torch.tensor([2.0]))
    wide = invert(model, start, target, local, spec, x0, y0, box=box, backend="wide")
    got = invert(model, start, target, local, spec, x0, y0, box=box, backend="graph")
    _same(got, wide)
    # the first GRAPH_WARMUP iterations eager, then one recording replayed at every iteration
    assert stand_in.records == 1
    assert stand_in.replays == spec.iters - graphed.GRAPH_WARMUP


def test_clients_that_stop_leave_the_replays_and_the_rest_go_on_eagerly(stand_in):
    model = nn.Sequential(nn.Linear(6, 3)).double()
    k, r = 3, 5
    local = LocalSpec(lr=0.3, batch_size=r, steps=2)
    start = broadcast_state(model_state(model), k)
    g = torch.Generator().manual_seed(4)
    target = {n: 0.05 * torch.randn(v.shape, generator=g, dtype=v.dtype) for n, v in start.items()}
    spec = InversionSpec(size=r, iters=120, lr=0.05, tol=0.02, window=5)
    x0, y0 = init_data(k, spec, (6,), 3, 0, [0, 1, 2], "cpu", torch.float64)
    fracs = [1.0, 0.5, 0.2]
    wide = invert(model, start, target, local, spec, x0, y0, topk=fracs, backend="wide")
    got = invert(model, start, target, local, spec, x0, y0, topk=fracs, backend="graph")
    _same(got, wide)
    first = int(wide.iters.min())
    assert len(set(wide.iters.tolist())) > 1 and first < 120  # they stop, at different times
    # replayed from the recording up to the iteration the first client stopped at, no further
    assert stand_in.replays == first + 1 - graphed.GRAPH_WARMUP


def test_a_failed_recording_warns_once_and_runs_eagerly(monkeypatch):
    rec = StandIn(fail=True)
    monkeypatch.setitem(graphed.RECORDERS, "cpu", rec)
    model, start, target, local, spec, x0, y0 = _lenet_problem(iters=7)
    wide = invert(model, start, target, local, spec, x0, y0, backend="wide")
    with pytest.warns(RuntimeWarning, match="could not record the inversion's iteration"):
        got = invert(model, start, target, local, spec, x0, y0, backend="graph")
    _same(got, wide)
    assert rec.records == 1 and rec.replays == 0


def test_graph_on_a_device_without_cuda_graphs_is_refused_before_any_work():
    model, start, target, local, spec, x0, y0 = _lenet_problem(iters=2)
    with pytest.raises(FlkitError, match="backend='graph' records CUDA graphs.*'cpu'.*accepted"):
        invert(model, start, target, local, spec, x0, y0, backend="graph")


def test_the_driver_reads_the_recordings_outputs_after_each_replay():
    # a stand-in "graph" that, like a CUDA graph, writes into the tensors it made when recorded
    calls = []

    def fn(x, y):
        calls.append((x.detach().clone(), y.detach().clone()))
        return (x * 2).sum(1).detach(), x * 3, y * 4

    class Writes:
        def __call__(self, body):
            body()  # the recording's outputs, kept by the driver
            kept = grads.out

            def replay():
                new = fn(grads.sx, grads.sy)
                for t, v in zip(kept, new):
                    t.copy_(v)

            return replay

    grads = GraphedGradient(fn, Writes(), warmup=1)
    x, y = torch.ones(2, 3), torch.zeros(2, 3)
    grads(x, y)  # warm-up, eager
    for step in (2.0, 5.0):
        loss, gx, gy = grads(x * step, y + step)
        assert torch.equal(loss, (x * step * 2).sum(1))  # this call's values, not the last one's
        assert torch.equal(gx, x * step * 3) and torch.equal(gy, (y + step) * 4)


def test_reused_plans_are_the_plans_drawn_once():
    spec = LocalSpec(lr=0.1, batch_size=4, steps=3)
    fresh = batch_plan(10, spec, 7)
    with reused_plans():
        a = batch_plan(10, spec, 7)
        b = batch_plan(10, spec, 7)
        other = batch_plan(10, spec, 8)
        with reused_plans():  # nested: the outer plans
            c = batch_plan(10, spec, 7)
    assert all(torch.equal(p, q) for p, q in zip(a, fresh))
    assert all(p is q for p, q in zip(a, b)) and all(p is q for p, q in zip(a, c))
    assert not all(torch.equal(p, q) for p, q in zip(a, other))  # another seed, another plan
    after = batch_plan(10, spec, 7)  # outside: drawn again
    assert all(torch.equal(p, q) for p, q in zip(after, fresh)) and after[0] is not a[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_replay_the_eager_inversion(monkeypatch):
    recorded = []

    def counted(fn):
        recorded.append(1)
        return graphed.cuda_recorder(fn)

    monkeypatch.setitem(graphed.RECORDERS, "cuda", counted)
    model, start, target, local, spec, x0, y0 = _lenet_problem(k=4, r=16, device="cuda", iters=12)
    start = {n: v.cuda() for n, v in start.items()}
    wide = invert(model, start, target, local, spec, x0, y0, backend="wide")
    got = invert(model, start, target, local, spec, x0, y0, backend="graph")
    diff = float((got.x - wide.x).abs().max())
    print(f"inversion, graph vs wide on {torch.cuda.get_device_name()}: max |diff x| {diff:.3g}")
    assert len(recorded) == 1
    _same(got, wide)  # the same kernels in the same order: the same floats
