"""The "graph" backend (flkit.engine.graphed): its driver on a CPU, with a stand-in recorder that
calls the recorded steps again where a CUDA graph would replay them, against the eager wide step;
the calls it must not replay; its errors; and on a GPU, where there is one, the real graphs."""

import pytest
import torch
from graph_stand_in import StandIn  # the fixture stand_in comes through conftest
from torch import nn

from flkit.engine import LocalSpec, graphed, train_clients
from flkit.engine.wide import wide_model
from flkit.state import broadcast_state, model_state
from flkit.utils import FlkitError


class Net(nn.Module):
    def __init__(self, dropout=False, bn=False):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.5) if dropout else nn.Identity()
        self.bn = nn.BatchNorm1d(8) if bn else nn.Identity()
        self.fc = nn.Linear(2 * 2 * 2, 3)

    def forward(self, x):
        h = torch.flatten(self.pool(torch.relu(self.conv(x))), 1)
        return self.fc(self.bn(self.drop(h)))


def _problem(n=24, k=3, device="cpu", dtype=torch.float64, **net):
    torch.manual_seed(0)
    model = Net(**net).to(device, dtype)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(k * n, 1, 6, 6, generator=g, dtype=dtype).to(device)
    y = torch.randint(0, 3, (k * n,), generator=g).to(device)
    idx = [torch.arange(i * n, (i + 1) * n, device=device) for i in range(k)]
    return model, x, y, idx, broadcast_state(model_state(model), k)


def _same(a, b):
    assert a.state.keys() == b.state.keys()
    for n in a.state:
        assert torch.equal(a.state[n], b.state[n]), n
    assert torch.equal(a.train_loss, b.train_loss)
    assert torch.equal(a.samples, b.samples) and torch.equal(a.steps, b.steps)


# 24 samples per client. (batch, epochs): batch 8, 1 epoch = 3 steps, all warm-up, nothing
# recorded; batch 4, 1 epoch = 6 steps: 3 warm-up + one graph of the 3 left; 4 epochs = 24 steps:
# 3 + 2 replays of 10 + 1 eager tail; 6 epochs = 36 steps: 3 + 3 replays + 3 tail
@pytest.mark.parametrize(
    "batch,epochs,records,replays", [(8, 1, 0, 0), (4, 1, 1, 1), (4, 4, 1, 2), (4, 6, 1, 3)]
)
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_replayed_steps_give_the_eager_wide_steps_floats(
    stand_in, batch, epochs, records, replays, momentum
):
    model, x, y, idx, start = _problem()
    spec = LocalSpec(lr=0.1, batch_size=batch, epochs=epochs, momentum=momentum, weight_decay=1e-3)
    wide = train_clients(model, start, x, y, idx, spec, [7, 8, 9], backend="wide")
    got = train_clients(model, start, x, y, idx, spec, [7, 8, 9], backend="graph")
    assert (stand_in.records, stand_in.replays) == (records, replays)
    assert got.backend == ("graph" if records else "wide") and wide.backend == "wide"
    _same(got, wide)
    assert int(got.steps[0]) == 24 // batch * epochs


def _kept(model):
    """The single kept entry of the model's recordings."""
    (entry,) = wide_model(model).graph_static.values()
    return entry


def _pointers(entry):
    parts = [*entry["state"].values(), *entry["bufs"].values(), entry["loss_sum"], entry["seen"]]
    return [t.data_ptr() for t in parts]


def test_later_calls_replay_the_first_calls_recording_on_their_own_start(stand_in):
    # rounds: each call starts elsewhere and draws other batches; only the first one records
    model, x, y, idx, start = _problem()
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=4, momentum=0.9)
    for call in range(3):
        start = {n: v + 0.01 * call for n, v in start.items()}
        seeds = [call, call + 10, call + 20]
        wide = train_clients(model, start, x, y, idx, spec, seeds, backend="wide")
        got = train_clients(model, start, x, y, idx, spec, seeds, backend="graph")
        _same(got, wide)
        # a CUDA graph writes to the addresses it recorded: the step must update the kept
        # tensors in place, never rebind them (the stand-in would follow a rebinding)
        if call == 0:
            first = _pointers(_kept(model))
        assert _pointers(_kept(model)) == first
    # 24 steps: 3 warm-up + 2 replays + 1 tail, then twice 2 replays + 4 tail, no warm-up
    assert (stand_in.records, stand_in.replays) == (1, 6)
    kept = _kept(model)  # the result is a copy, not the kept tensors
    assert all(got.state[n].data_ptr() != kept["state"][n].data_ptr() for n in got.state)


def _changed(case, model, x, y, idx, start):
    """One thing a recording has baked in, changed: the call's arguments after it."""
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=4, momentum=0.9)
    kw = {}
    if case == "lr":
        spec = LocalSpec(lr=0.2, batch_size=4, epochs=4, momentum=0.9)
    elif case == "no momentum":
        spec = LocalSpec(lr=0.1, batch_size=4, epochs=4)
    elif case == "data copy":
        x = x.clone()
    elif case == "fewer clients":
        idx, start = idx[:2], {n: v[:2] for n, v in start.items()}
    elif case == "eval mode":
        kw = {"train_mode": False}
    elif case == "frozen parameter":
        model.fc.bias.requires_grad_(False)
    return model, x, y, idx, start, spec, kw


@pytest.mark.parametrize(
    "case",
    ["lr", "no momentum", "data copy", "fewer clients", "eval mode", "frozen parameter"],
)
def test_a_call_unlike_the_recorded_one_records_again(stand_in, case):
    model, x, y, idx, start = _problem()
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=4, momentum=0.9)
    train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="graph")
    assert stand_in.records == 1
    model, x, y, idx, start, spec, kw = _changed(case, model, x, y, idx, start)
    seeds = [4, 5, 6][: len(idx)]
    got = train_clients(model, start, x, y, idx, spec, seeds, backend="graph", **kw)
    wide = train_clients(model, start, x, y, idx, spec, seeds, backend="wide", **kw)
    assert stand_in.records == 2 and got.backend == "graph"
    _same(got, wide)
    assert len(wide_model(model).graph_static) == 2  # both kept (up to KEPT_RECORDINGS)


def test_a_replay_reads_the_plan_the_driver_copied_in():
    # the driver's bookkeeping alone: steps record the index they were given
    seen = []
    plan = torch.arange(25).view(25, 1)
    rec = StandIn()
    ok = graphed.replay_steps(
        lambda i: seen.append(int(i[0])),
        plan,
        record=rec,
        warmup=3,
        per_graph=10,
        side_stream=False,
    )
    assert ok and rec.replays == 2
    assert seen == list(range(25))  # warm-up 0-2, replays 3-12 and 13-22, tail 23-24


@pytest.mark.parametrize(
    "case,why",
    [
        ("hooks", "hooks"),
        ("dropout", "dropout"),
        ("uneven", "different numbers"),
        ("bn", "buffers"),
    ],
)
def test_calls_a_replay_would_change_run_the_eager_wide_step(stand_in, case, why):
    model, x, y, idx, start = _problem(dropout=case == "dropout", bn=case == "bn")
    if case == "uneven":
        idx = [idx[0], idx[1][:20], idx[2]]
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=4)
    kw = {"extra_loss": lambda p, a: sum(v.pow(2).flatten(1).sum(1) for v in p.values())}
    kw = kw if case == "hooks" else {}
    torch.manual_seed(5)
    got = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="graph", **kw)
    torch.manual_seed(5)
    wide = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="wide", **kw)
    assert stand_in.records == 0 and got.backend == "wide"
    _same(got, wide)
    hooks = case == "hooks"
    uniform = None if case == "uneven" else torch.zeros(1)
    assert why in graphed.graph_reason(model, uniform, hooks, False, True)


def test_a_recording_that_fails_warns_runs_eagerly_and_is_not_tried_again(monkeypatch):
    rec = StandIn(fail=True)
    monkeypatch.setitem(graphed.RECORDERS, "cpu", rec)
    model, x, y, idx, start = _problem()
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=4)
    with pytest.warns(RuntimeWarning, match="not permitted when stream is capturing"):
        got = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="graph")
    wide = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="wide")
    assert rec.records == 1 and got.backend == "wide"
    _same(got, wide)
    again = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="graph")
    assert rec.records == 1 and again.backend == "wide"  # the failure is remembered
    _same(again, wide)


def test_graph_on_a_device_without_cuda_graphs_is_refused_before_any_work():
    model, x, y, idx, start = _problem()
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=1)
    with pytest.raises(FlkitError, match="backend='graph'.*'cpu'.*accepted backends"):
        train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="graph")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_replay_the_eager_wide_step(monkeypatch):
    recorded = []

    def counted(fn):
        recorded.append(1)
        return graphed.cuda_recorder(fn)

    monkeypatch.setitem(graphed.RECORDERS, "cuda", counted)
    model, x, y, idx, start = _problem(n=240, k=10, device="cuda", dtype=torch.float32)
    spec = LocalSpec(lr=0.05, batch_size=10, epochs=2, momentum=0.5)
    for call in range(3):  # the first call records, the others replay its graph
        start = {n: v + 0.01 * call for n, v in start.items()}
        seeds = [call * 10 + i for i in range(10)]
        wide = train_clients(model, start, x, y, idx, spec, seeds, backend="wide")
        got = train_clients(model, start, x, y, idx, spec, seeds, backend="graph")
        assert got.backend == "graph"
        diff = max(float((got.state[n] - wide.state[n]).abs().max()) for n in got.state)
        print(
            f"call {call}, graph vs wide on {torch.cuda.get_device_name()}: max |diff| {diff:.3g}"
        )
        _same(got, wide)  # the same kernels in the same order: the same floats
    assert len(recorded) == 1
