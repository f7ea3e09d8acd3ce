"""Device hygiene: what a method, codec, mask, inversion or simulator creates lives on the run's
device. What a CPU can check: every torch tensor factory in those modules names its device, is
moved with ``.to(...)`` at once, or is host-side on purpose (listed below with the reason). That a
method's state stays on the device can only fail off the CPU: ``benchmarks/gpu_check.py`` reports
it per method on CUDA (its "off device" column)."""

import ast
from pathlib import Path

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
    ("spec.py", "_draw_plan", "randperm"): "seeded CPU draw: the same batches on every device",
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
