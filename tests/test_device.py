"""Device hygiene: what a method, codec, mask, inversion or simulator creates lives on the run's
device. Two checks a CPU can make: (1) every torch tensor factory in those modules names its
device, is moved with ``.to(...)`` at once, or is host-side on purpose (listed below with the
reason); (2) every method of every notebook's `smoke` runs accepts ``device`` and keeps its whole
state on it. (A GPU run of ``benchmarks/gpu_check.py`` checks the same state on CUDA.)"""

import ast
import dataclasses
import importlib.util
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "flkit"
AUDITED = ["methods", "compress", "prune", "asyncfl", "engine", "inversion.py", "projection.py"]
FACTORIES = {
    "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "tensor", "as_tensor",
    "rand", "randn", "randint", "randperm", "Generator",
}  # fmt: skip

# (file name, function, factory): why the tensor stays on the host
HOST_SIDE = {
    ("personal.py", "uniform_latents", "rand"): "seeded CPU draw moved to the device after",
    ("pruning.py", "client_grads", "randperm"): "seeded CPU draw; its slice is moved",
    ("pruning_static.py", "init_state", "randperm"): "seeded CPU draw; its slice is moved",
    ("staleness_gi.py", "_unique", "ones"): "host mask that picks clients (Python control flow)",
    ("staleness_gi.py", "adjust", "ones"): "host mask that picks clients (Python control flow)",
    ("stc.py", "client_losses", "tensor"): "host loss vector for the projection's sort",
    ("hidenseek.py", "arctanh_aggregate", "as_tensor"): "0-dim scalar (mixes with any device)",
    ("golomb.py", "exact_position_bits", "tensor"): "bit counting runs on the host",
    ("golomb.py", "positions_of", "as_tensor"): "bit counting runs on the host",
    ("masks.py", "erk_mask", "zeros"): "seeded CPU draw moved to the device after",
    ("masks.py", "erk_mask", "randperm"): "seeded CPU draw moved to the device after",
    ("synflow.py", "structural_masks", "ones"): "host rows/cols moved to the device after",
    ("inversion.py", "box_from_normalization", "tensor"): "constants moved to the device after",
    ("inversion.py", "init_data", "randn"): "seeded CPU draw moved to the device after",
    ("inversion.py", "invert", "full"): "host stop flags (Python control flow)",
    ("trainer.py", "_build_task", "full"): "concatenated, then moved to the device",
    ("backend.py", "time_backends", "randint"): "seeded CPU draw; its rows are moved",
    ("spec.py", "batch_plan", "randperm"): "seeded CPU draw: the same batches on every device",
    ("projection.py", "project_internal", "as_tensor"): "host loss vector for the sort",
}


def _factory_calls():
    files = []
    for name in AUDITED:
        p = PKG / name
        files += [p] if p.is_file() else sorted(p.rglob("*.py"))
    for f in files:
        tree = ast.parse(f.read_text())
        parent = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            fn = node.func if isinstance(node, ast.Call) else None
            if not (
                isinstance(fn, ast.Attribute)
                and isinstance(fn.value, ast.Name)
                and fn.value.id == "torch"
                and fn.attr in FACTORIES
            ):
                continue
            if any(k.arg == "device" for k in node.keywords):
                continue
            if fn.attr == "Generator" and node.args:
                continue
            up = parent.get(node)
            if isinstance(up, ast.Attribute) and up.attr == "to":
                continue
            scope = node
            while scope in parent and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                scope = parent[scope]
            yield f.name, getattr(scope, "name", "<module>"), fn.attr, f"{f}:{node.lineno}"


def test_every_tensor_factory_names_its_device_or_is_host_side_on_purpose():
    found = list(_factory_calls())
    unlisted = [where for *key, where in found if tuple(key) not in HOST_SIDE]
    assert unlisted == [], (
        "torch factories without device= (give device=, or list them in HOST_SIDE with the "
        f"reason): {unlisted}"
    )
    stale = set(HOST_SIDE) - {tuple(key) for *key, _ in found}
    assert not stale, f"HOST_SIDE entries that match no call any more: {sorted(stale)}"


def _state_tensors(x, path="state"):
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, Mapping):
        for k, v in x.items():
            yield from _state_tensors(v, f"{path}[{k!r}]")
    elif isinstance(x, list | tuple):
        for i, v in enumerate(x):
            yield from _state_tensors(v, f"{path}[{i}]")
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _state_tensors(getattr(x, f.name), f"{path}.{f.name}")


def _smoke_configs():
    """The first run of each method in every notebook's `smoke` preset (FedAST aside)."""
    spec = importlib.util.spec_from_file_location("paper_cost", ROOT / "benchmarks/paper_cost.py")
    pc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pc)
    presets = pc._presets()
    seen = {}
    for nb in pc.PAPER_NOTEBOOKS:
        if nb != "03_fedast":
            for cfg in pc.notebook_runs(nb, presets.load(nb, "smoke")):
                seen.setdefault(cfg.method, cfg)
    return seen


@pytest.mark.slow
def test_every_smoke_method_keeps_its_state_on_the_requested_device():
    from flkit import methods
    from flkit.experiment import Setup
    from flkit.state import model_state

    try:
        configs = _smoke_configs()
    except Exception as e:  # the smoke data (MNIST, HAR, FEMNIST) is not here
        pytest.skip(f"smoke presets need data not found here: {e}")
    assert len(configs) >= 20  # the five notebooks' methods
    dev = torch.device("cpu")
    for name, cfg in sorted(configs.items()):
        cfg = cfg.replace(device="cpu")
        s = Setup.build(cfg)
        ctx = methods.RunContext(
            s.model, s.data.x_train, s.data.y_train, s.parts, cfg.local_spec(), cfg.seed,
            s.data.num_classes, cfg.backend, cfg.clients_per_round,
        )  # fmt: skip
        m = methods.get(name)(ctx, **cfg.method_params)
        state = m.init_state(model_state(s.model))
        for rnd in (1, 2):
            state, _ = m.round(state, m.select_clients(state, rnd), rnd)
        off = [p for p, t in _state_tensors(state) if t.device != dev]
        assert off == [], (name, off)
