"""The batched engine against the plain torch.optim.SGD loop, in float64."""

import pytest
import torch
from torch import nn

from flkit.engine import LocalSpec, batch_plan, train_clients
from flkit.engine.reference import train_clients_reference
from flkit.state import broadcast_state, model_state, stack_states
from flkit.utils import FlkitError


class SmallCNN(nn.Module):
    def __init__(self, bn=False, gn=False):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4) if bn else (nn.GroupNorm(2, 4) if gn else nn.Identity())
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(6 * 2 * 2, 10), nn.ReLU(), nn.Linear(10, 3))

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.norm(self.conv1(x))), 2)
        return self.fc(nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2))


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 3)
        self.lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True)
        self.out = nn.Linear(5, 7)

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        return self.out(h[:, -1, :])


def _data(kind, n=60):
    g = torch.Generator().manual_seed(0)
    if kind == "lstm":
        x = torch.randint(0, 7, (n, 6), generator=g)
        y = torch.randint(0, 7, (n,), generator=g)
    else:
        x = torch.randn(n, 1, 12, 12, generator=g, dtype=torch.float64)
        y = torch.randint(0, 3, (n,), generator=g)
    return x, y


def _model(kind):
    torch.manual_seed(1)
    m = {
        "cnn": SmallCNN,
        "bn": lambda: SmallCNN(bn=True),
        "gn": lambda: SmallCNN(gn=True),
        "lstm": CharLSTM,
    }[kind]()
    return m.double()


def _starts(model, k):
    """Clients start from different versions (as in asynchronous FL)."""
    states = []
    for i in range(k):
        s = model_state(model)
        states.append({n: v + 0.01 * i if v.is_floating_point() else v for n, v in s.items()})
    return stack_states(states)


def _close(a, b, tol=1e-9):
    for n in a.state:
        assert torch.allclose(a.state[n].double(), b.state[n].double(), atol=tol, rtol=tol), n
    assert torch.allclose(a.train_loss, b.train_loss, atol=1e-6)
    assert torch.equal(a.samples, b.samples) and torch.equal(a.steps, b.steps)


@pytest.mark.parametrize("kind", ["cnn", "bn", "gn", "lstm"])
@pytest.mark.parametrize("sizes", [(20, 20, 20), (25, 7, 13)])
def test_wide_matches_loop(kind, sizes):
    model = _model(kind)
    x, y = _data(kind)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(3))
    idx, lo = [], 0
    for s in sizes:
        idx.append(perm[lo : lo + s])
        lo += s
    spec = LocalSpec(lr=0.05, batch_size=4, epochs=2, momentum=0.9, weight_decay=1e-3)
    start = _starts(model, len(sizes))
    seeds = [11, 12, 13]
    ref = train_clients_reference(model, start, x, y, idx, spec, seeds)
    wide = train_clients(model, start, x, y, idx, spec, seeds, backend="wide")
    _close(wide, ref)
    # the run really trained: parameters moved
    assert not torch.allclose(
        ref.state["fc.3.weight" if kind != "lstm" else "out.weight"],
        start["fc.3.weight" if kind != "lstm" else "out.weight"],
    )


@pytest.mark.parametrize("kind", ["cnn", "lstm"])
def test_vmap_matches_loop(kind):
    model = _model(kind)
    x, y = _data(kind)
    idx = [torch.arange(0, 18), torch.arange(18, 27)]
    spec = LocalSpec(lr=0.1, batch_size=5, steps=6, momentum=0.5)
    start = _starts(model, 2)
    ref = train_clients_reference(model, start, x, y, idx, spec, [1, 2])
    vm = train_clients(model, start, x, y, idx, spec, [1, 2], backend="vmap")
    _close(vm, ref)


def test_prox_term_and_transforms_match_loop():
    model = _model("cnn")
    x, y = _data("cnn")
    idx = [torch.arange(0, 20), torch.arange(20, 32)]
    spec = LocalSpec(lr=0.05, batch_size=6, epochs=1)
    start = _starts(model, 2)
    mu = 0.3

    def prox(params, hook_args):
        start = hook_args["start"]
        return sum(((p - start[n]) ** 2).flatten(1).sum(1) for n, p in params.items()) * mu / 2

    def half_grads(grads, params, hook_args):
        return {n: 0.5 * g for n, g in grads.items()}

    def mask(params, hook_args):
        return {n: p * (p.abs() > 0.05) if p.dim() > 2 else p for n, p in params.items()}

    kw = dict(extra_loss=prox, grad_transform=half_grads, param_transform=mask)
    ref = train_clients_reference(model, start, x, y, idx, spec, [5, 6], **kw)
    for backend in ("wide", "vmap"):
        _close(train_clients(model, start, x, y, idx, spec, [5, 6], backend=backend, **kw), ref)


def test_chunking_gives_same_result():
    model = _model("bn")
    x, y = _data("cnn")
    idx = [torch.arange(i * 10, i * 10 + 10) for i in range(5)]
    spec = LocalSpec(lr=0.05, batch_size=4, epochs=1)
    start = broadcast_state(model_state(model), 5)
    a = train_clients(model, start, x, y, idx, spec, list(range(5)), chunk_size=5)
    b = train_clients(model, start, x, y, idx, spec, list(range(5)), chunk_size=2)
    _close(a, b, tol=1e-12)


def test_single_sgd_step_by_hand():
    """One step on a linear model: w1 = w0 - lr * (grad + wd * w0), grad of mean cross-entropy."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(2, 2, bias=False)).double()
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    y = torch.tensor([0])
    spec = LocalSpec(lr=0.5, batch_size=1, steps=1, weight_decay=0.1)
    res = train_clients(
        model, broadcast_state(model_state(model), 1), x, y, [torch.tensor([0])], spec, [0]
    )
    # logits (1, 2); softmax = (e/(e+e^2), e^2/(e+e^2)); dL/dlogits = softmax - onehot(0)
    import math

    p0 = math.e / (math.e + math.e**2)
    d = torch.tensor([p0 - 1, 1 - p0], dtype=torch.float64)
    grad = d[:, None] * x  # outer product
    expected = torch.eye(2, dtype=torch.float64) - 0.5 * (
        grad + 0.1 * torch.eye(2, dtype=torch.float64)
    )
    assert torch.allclose(res.state["1.weight"][0], expected, atol=1e-12)


def test_batch_plan_counts():
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=2)
    plan = batch_plan(10, spec, seed=0)
    assert [len(b) for b in plan] == [4, 4, 2, 4, 4, 2]
    assert sorted(torch.cat(plan[:3]).tolist()) == list(
        range(10)
    )  # each epoch covers every sample once
    spec = LocalSpec(lr=0.1, batch_size=4, steps=5, drop_last=True)
    assert [len(b) for b in batch_plan(10, spec, seed=0)] == [4] * 5
    assert torch.equal(torch.cat(batch_plan(10, spec, 7)), torch.cat(batch_plan(10, spec, 7)))


def test_differentiable_mode_gives_gradients_to_start():
    model = _model("cnn")
    x, y = _data("cnn")
    start = {
        n: v.clone().requires_grad_(v.is_floating_point()) for n, v in _starts(model, 2).items()
    }
    res = train_clients(
        model,
        start,
        x,
        y,
        [torch.arange(8), torch.arange(8, 16)],
        LocalSpec(lr=0.1, batch_size=4, steps=2),
        [0, 1],
        differentiable=True,
    )
    res.state["fc.3.weight"].sum().backward()
    assert start["conv1.weight"].grad is not None and start["conv1.weight"].grad.abs().sum() > 0


def test_bad_input():
    with pytest.raises(FlkitError, match="lr"):
        LocalSpec(lr=0, batch_size=1, epochs=1)
    with pytest.raises(FlkitError, match="exactly one"):
        LocalSpec(lr=0.1, batch_size=1)
    model = _model("cnn")
    x, y = _data("cnn")
    with pytest.raises(FlkitError, match="backend"):
        train_clients(
            model,
            _starts(model, 1),
            x,
            y,
            [torch.arange(3)],
            LocalSpec(lr=0.1, batch_size=1, epochs=1),
            [0],
            backend="fast",
        )
    with pytest.raises(FlkitError, match="no data"):
        train_clients(
            model,
            _starts(model, 1),
            x,
            y,
            [torch.arange(0)],
            LocalSpec(lr=0.1, batch_size=1, epochs=1),
            [0],
        )


class ScaledLinear(nn.Module):
    """A parameter outside any supported leaf layer: the wide backend cannot run it."""

    def __init__(self, bn=False):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, dtype=torch.float64))
        self.fc = nn.Linear(4, 3).double()
        self.bn = nn.BatchNorm1d(3).double() if bn else nn.Identity()

    def forward(self, x):
        return self.bn(self.fc(x) * self.scale)


def test_backend_fallback_for_models_the_wide_path_cannot_run():
    from flkit.engine.train import default_backend

    assert default_backend(_model("cnn")) == "wide"
    assert default_backend(ScaledLinear()) == "vmap"
    assert default_backend(ScaledLinear(bn=True)) == "loop"
    with pytest.raises(FlkitError, match="scale"):
        default_backend(ScaledLinear(), "wide")
    # the fallback still trains correctly
    torch.manual_seed(0)
    m = ScaledLinear()
    x = torch.randn(12, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (12,))
    spec = LocalSpec(lr=0.1, batch_size=4, epochs=1)
    start = _starts(m, 2)
    idx = [torch.arange(6), torch.arange(6, 12)]
    _close(
        train_clients(m, start, x, y, idx, spec, [0, 1]),
        train_clients_reference(m, start, x, y, idx, spec, [0, 1]),
    )


def test_thread_setting(monkeypatch):
    from flkit.utils import configure_threads

    before = torch.get_num_threads()
    try:
        assert configure_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("FLKIT_THREADS", "zero")
        with pytest.raises(FlkitError, match="FLKIT_THREADS"):
            configure_threads()
    finally:
        torch.set_num_threads(before)
