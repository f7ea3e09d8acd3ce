"""What issue 16 changed around the engine: the compiled wide step, the measured choice of
backend and its record, the cached wide model, evaluation without a copy, time-based checkpoints."""

import copy
import json
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional

from flkit import store
from flkit.engine import LocalSpec, backend, evaluate, train_clients
from flkit.engine.backend import eligible_backends
from flkit.engine.inference import inference_model
from flkit.engine.reference import train_clients_reference
from flkit.engine.wide import wide_model as cached_wide
from flkit.experiment import RunConfig, load, run, run_folder
from flkit.state import broadcast_state, model_state


class Tiny(nn.Module):
    """Small enough that tracing it for torch.compile takes a few seconds."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(2 * 2 * 2, 3)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


def _problem(k=3, n=8, batch=4):
    torch.manual_seed(0)
    model = Tiny().double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(k * n, 1, 6, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (k * n,), generator=g)
    idx = [torch.arange(i * n, (i + 1) * n) for i in range(k)]
    start = broadcast_state(model_state(model), k)
    return model, x, y, idx, start, LocalSpec(lr=0.1, batch_size=batch, epochs=2, momentum=0.5)


def _max_diff(a, b):
    return max(float((a.state[n] - b.state[n]).abs().max()) for n in a.state)


def test_compiled_backend_traces_the_wide_step_and_equals_the_loop(monkeypatch):
    # aot_eager: dynamo + AOTAutograd trace the step (the path a GPU compiles), without code
    # generation, so it costs seconds; the loop in float64 is the independent reference
    monkeypatch.setenv("FLKIT_COMPILE_BACKEND", "aot_eager")
    model, x, y, idx, start, spec = _problem()
    ref = train_clients_reference(model, start, x, y, idx, spec, [4, 5, 6])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback would warn
        got = train_clients(model, start, x, y, idx, spec, [4, 5, 6], backend="compiled")
    assert got.backend == "compiled"
    assert _max_diff(got, ref) < 1e-9
    assert torch.allclose(got.train_loss, ref.train_loss, atol=1e-9)


def test_compiled_backend_falls_back_to_wide_when_compiling_fails(monkeypatch):
    def broken(fn, **kw):
        def call(*a, **k):
            raise RuntimeError("no compiler here")

        return call

    monkeypatch.setattr(torch, "compile", broken)
    model, x, y, idx, start, spec = _problem()
    model = copy.deepcopy(model)  # a fresh model object: no compiled step cached for it
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        got = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="compiled")
    wide = train_clients(model, start, x, y, idx, spec, [1, 2, 3], backend="wide")
    assert got.backend == "wide"
    assert _max_diff(got, wide) == 0.0


class Scaled(nn.Module):
    """A parameter outside any supported leaf layer: the wide step cannot run it."""

    def __init__(self, bn=False):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.ones(3))
        self.bn = nn.BatchNorm1d(3) if bn else nn.Identity()

    def forward(self, x):
        return self.bn(self.fc(x) * self.scale)


def test_eligible_backends():
    cpu = torch.device("cpu")
    assert eligible_backends(Tiny(), cpu) == ["wide", "loop"]
    assert eligible_backends(Scaled(), cpu) == ["vmap", "loop"]
    assert eligible_backends(Scaled(bn=True), cpu) == ["loop"]
    # a GPU also times the compiled and the graph-replayed wide step (nothing is allocated here)
    gpu = torch.device("cuda")
    assert eligible_backends(Tiny(), gpu) == ["graph", "compiled", "wide", "loop"]
    # BatchNorm statistics cannot be replayed exactly: no graph backend for such a model
    bn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(32, 3))
    assert eligible_backends(bn, gpu) == ["compiled", "wide", "loop"]


def test_wide_model_is_built_once_per_model_and_rebuilt_when_its_layers_change():
    model = Tiny()
    first = cached_wide(model)
    assert cached_wide(model) is first
    model.pool = nn.AvgPool2d(2)
    assert cached_wide(model) is not first


def test_choice_is_the_fastest_measured_and_cached_per_machine_and_shape(tmp_path):
    calls = []

    def probe():
        calls.append(1)
        return {"wide": 0.3, "vmap": 0.2, "loop": 0.5}

    shape = {"model": "m", "batch_size": 50}
    assert backend.measure_backend(shape, probe, tmp_path)[0] == "vmap"
    assert backend.measure_backend(shape, probe, tmp_path)[0] == "vmap"
    assert len(calls) == 1  # the second run read the cache
    saved = json.loads((tmp_path / backend.CACHE_FILE).read_text())
    (key,) = saved
    assert json.loads(key)["machine"] == backend.machine()
    backend.measure_backend({**shape, "batch_size": 10}, probe, tmp_path)
    assert len(calls) == 2  # another shape is measured again


def test_measure_times_every_eligible_backend():
    model, x, y, idx, start, spec = _problem()
    seconds = backend.time_backends(model, x, y, 3, spec, steps=1, repeats=2)
    assert set(seconds) == {"wide", "loop"}
    assert all(0 < s < float("inf") for s in seconds.values())


BASE = dict(
    dataset="synthetic",
    model="logreg",
    partition="natural",
    num_clients=6,
    clients_per_round=3,
    batch_size=10,
    rounds=2,
    seed=1,
    device="cpu",
    dataset_kwargs={"alpha": 0.5, "beta": 0.5, "num_clients": 6},
)


def test_run_records_the_measured_backend_and_keys_its_cache_on_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path / "machine"))  # no remembered choice
    monkeypatch.setattr(backend, "time_backends", lambda *a, **k: {"wide": 2.0, "vmap": 1.0})
    cfg = RunConfig(**BASE)
    res = run(cfg, out_dir=tmp_path, progress=False)
    assert res.config.backend == "vmap" and res.history.attrs["backend"] == "vmap"
    assert res.run_dir == run_folder(cfg.replace(backend="vmap"), tmp_path)
    assert res.run_dir == store.run_dir(tmp_path, cfg.replace(backend="vmap").cache_key(), "fedavg")
    assert store.load_json(res.run_dir / "config.json")["backend"] == "vmap"
    assert store.load_json(res.run_dir / "meta.json")["backend_choice"]["backend"] == "vmap"
    assert load(res.run_dir).config.backend == "vmap"
    # the same numbers as the backend pinned by hand: same folder, loaded, not retrained
    pinned = run(cfg.replace(backend="vmap"), out_dir=tmp_path, progress=False)
    assert pinned.run_dir == res.run_dir
    # another backend is another run
    other = run(cfg.replace(backend="wide"), out_dir=tmp_path, progress=False)
    assert other.run_dir != res.run_dir


def test_time_based_checkpoints(tmp_path, monkeypatch):
    written = []
    orig = store.save_torch
    monkeypatch.setattr(
        store, "save_torch", lambda path, obj: (written.append(path.name), orig(path, obj))
    )
    cfg = RunConfig(**{**BASE, "rounds": 3, "backend": "wide"})
    run(cfg, out_dir=tmp_path / "a", progress=False, checkpoint_seconds=0.0)
    assert written.count("checkpoint.pt") == 2  # after rounds 1 and 2, not after the last
    written.clear()
    run(cfg, out_dir=tmp_path / "b", progress=False, checkpoint_seconds=3600.0)
    assert written.count("checkpoint.pt") == 0


@pytest.mark.parametrize("k", [2, 3])
def test_window_max_equals_max_pool(k):
    from flkit.engine.inference import _WindowMax

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 8, generator=g)
    x[0, 0, 0, 0] = float("nan")
    got, want = _WindowMax(k)(x), functional.max_pool2d(x, k)
    assert got.shape == want.shape
    assert torch.equal(torch.nan_to_num(got, 9.0), torch.nan_to_num(want, 9.0))


def test_evaluate_equals_a_plain_eval_of_a_loaded_copy():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 3, 3),
        nn.BatchNorm2d(3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(3 * 3 * 3, 4),
    )
    state = {n: v + 0.1 if v.is_floating_point() else v for n, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1500, 1, 8, 8, generator=g)
    y = torch.randint(0, 4, (1500,), generator=g)
    plain = copy.deepcopy(model)
    plain.load_state_dict(state)
    plain.eval()
    with torch.no_grad():
        out = torch.cat([plain(x[i : i + 1000]) for i in range(0, 1500, 1000)])
        loss = sum(
            float(functional.cross_entropy(out[i : i + 1000], y[i : i + 1000], reduction="sum"))
            for i in range(0, 1500, 1000)
        )
    model.train()
    before = {n: v.clone() for n, v in model.state_dict().items()}
    acc, mean_loss, per_class = evaluate(model, state, x, y, batch_size=1000, per_class=4)
    assert acc == int((out.argmax(1) == y).sum()) / 1500
    assert mean_loss == loss / 1500  # bit for bit: the same forward and the same loss sums
    for c in range(4):
        mask = y == c
        assert per_class[c] == pytest.approx(float((out.argmax(1)[mask] == c).float().mean()))
    assert model.training  # the caller's model keeps its mode and its weights
    assert all(torch.equal(before[n], v) for n, v in model.state_dict().items())
    assert inference_model(model) is inference_model(model)  # built once
