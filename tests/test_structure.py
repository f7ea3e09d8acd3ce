"""The library's shape: every module imports on its own, the import graph has no cycle, the lower
layers (data, models, engine) import no higher one, no private name crosses a module boundary,
files stay short, and the method registry is explicit."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flkit import methods
from flkit.methods.base import Method
from flkit.utils import FlkitError

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "flkit"
# A module holds one idea; past this many lines it is split along a seam a reader would name, or
# its docstring says why it stays whole ("longer than ...").
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a `from X import ...` names."""
    if node.level == 0:
        return node.module or ""
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mod: str, path: Path):
    """(imported flkit module, names taken from it, line) for every import in the file, including
    imports inside functions (a lazy import still makes a cycle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("flkit"):
                    yield a.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, path, node)
            if not target.startswith("flkit"):
                continue
            names = []
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:  # `from . import stc` imports the module flkit.methods.stc
                    yield sub, [], node.lineno
                else:
                    names.append(a.name)
            if names:
                yield target, names, node.lineno


def _graph() -> dict[str, set[str]]:
    graph = {}
    for mod, path in MODULES.items():
        if mod.endswith("__main__"):
            continue  # run as scripts, never imported
        graph[mod] = {t for t, _, _ in _imports(mod, path) if t in MODULES and t != mod}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_cycle_finder_finds_a_hand_made_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles():
    assert _cycle(_graph()) is None


# The layers from the bottom: what the engine and data need is below what runs experiments, and
# the notebook-facing helpers sit on top. A lower layer never imports a higher one, not even lazily.
LOWER_LAYERS = ("flkit.data", "flkit.models", "flkit.engine")
HIGHER_LAYERS = (
    "flkit.methods",
    "flkit.experiment",
    "flkit.reproduce",
    "flkit.papers",
    "flkit.workbook",
    "flkit.cli",
    "flkit.course",
    "flkit.asyncfl",
)


def _within(mod: str, packages) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in packages)


def _layer_violations(modules) -> list[str]:
    """'module:line imports target' for every import of a higher layer by a lower one."""
    return [
        f"{mod}:{line} imports {target}"
        for mod, path in modules.items()
        if _within(mod, LOWER_LAYERS)
        for target, _, line in _imports(mod, path)
        if _within(target, HIGHER_LAYERS)
    ]


def test_lower_layers_import_no_higher_layer():
    assert not _layer_violations(MODULES)


# The notebook-facing layer sits on top: nothing below it (runs, simulated time, methods, the
# engine) imports it, not even lazily; what a run draws (its progress bar) lives below the runs.
NOTEBOOK_LAYER = ("flkit.workbook", "flkit.reproduce", "flkit.course", "flkit.papers", "flkit.cli")


def _notebook_layer_violations(modules) -> list[str]:
    """'module:line imports target' for every import of the notebook layer from below it."""
    return [
        f"{mod}:{line} imports {target}"
        for mod, path in modules.items()
        if mod != "flkit" and not mod.endswith("__main__") and not _within(mod, NOTEBOOK_LAYER)
        for target, _, line in _imports(mod, path)
        if _within(target, NOTEBOOK_LAYER)
    ]


def test_nothing_below_the_notebook_layer_imports_it():
    assert not _notebook_layer_violations(MODULES)


def test_notebook_layer_check_finds_a_lazy_import(tmp_path):
    fake = tmp_path / "flkit" / "experiment_fake.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from .workbook.progress import bar\n    return bar\n")
    found = _notebook_layer_violations({"flkit.experiment_fake": fake})
    assert found == ["flkit.experiment_fake:2 imports flkit.workbook.progress"]


def test_layer_check_finds_a_higher_import(tmp_path):
    """The check sees a lazy relative import of a higher layer inside a function of the engine."""
    fake = tmp_path / "flkit" / "engine" / "fake.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def f():\n    from ..experiment import run\n    return run\n")
    found = _layer_violations({"flkit.engine.fake": fake})
    assert found == ["flkit.engine.fake:2 imports flkit.experiment"]


def test_no_private_names_cross_modules():
    bad = []
    for mod, path in MODULES.items():
        for target, names, line in _imports(mod, path):
            bad += [
                f"{mod}:{line} imports {target}.{n}"
                for n in names
                if n.startswith("_") and not n.startswith("__")
            ]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            for a in n.names
            if _resolve(mod, path, n).startswith("flkit")
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                bad.append(f"{mod}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_every_module_imports_in_a_fresh_interpreter():
    names = [m for m in MODULES if not m.endswith("__main__")]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    res = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]


def test_files_are_short():
    long = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            if "longer than" not in doc:  # the one allowed exception says why in its docstring
                long.append(f"{rel}: {n} lines")
    assert not long, long


# ------------------------------------------------------------------------------ method registry
def test_registry_holds_every_family_and_refuses_clashes():
    assert {"fedavg", "fedprox", "stc", "fedfv", "stc_pa"} <= set(methods.names())
    assert methods.get("stc").__module__ == "flkit.methods.stc"
    with pytest.raises(FlkitError, match="fedavg"):  # the message lists the names
        methods.get("fedavgg")
    clash = type("Clash", (Method,), {"name": "fedavg"})
    with pytest.raises(FlkitError, match="taken"):
        methods.register(clash)
    with pytest.raises(FlkitError, match="Method subclass"):
        methods.register(object)
    assert methods.get("fedavg") is methods.FedAvg


def test_the_family_table_is_what_the_families_register():
    """registry.FAMILIES lists the names without importing a family: it must say exactly which
    module registers each built-in method, no more and no fewer."""
    import importlib

    from flkit.methods import registry

    for path in sorted((PKG / "methods").glob("*.py")):
        importlib.import_module(_module_name(path))  # every family registers its methods
    built_in = {
        name: cls.__module__
        for name, cls in methods.REGISTRY.items()
        if cls.__module__.startswith("flkit.methods.")
    }
    assert built_in == {name: registry.family_module(name) for name in registry.FAMILIES}
    assert methods.names() == sorted(built_in)


def test_get_imports_only_the_family_asked_for_and_a_clash_is_seen_before_it_loads():
    code = (
        "import sys\n"
        "from flkit import methods\n"
        "from flkit.utils import FlkitError\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith('flkit.methods.'))\n"
        "before = loaded()\n"
        "assert methods.get('stc_pa').__module__ == 'flkit.methods.stc'\n"
        "print(sorted(set(loaded()) - set(before)))\n"
        "try:\n"
        "    methods.register(type('Mine', (methods.Method,), {'name': 'snip'}))\n"
        "except FlkitError as e:\n"
        "    print(e)\n"
        "print(methods.pruning_dst.PruneFL.name)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    new, clash, attr = res.stdout.splitlines()
    # stc and what it imports (flkit.projection is no method module)
    assert new == "['flkit.methods.stc']"
    assert "'snip' is taken by flkit.methods.pruning_static.SNIP" in clash
    assert attr == "prunefl"  # a family is an attribute of the package, loaded on first use


def test_a_new_family_registers_by_decorating():
    cls = methods.register(type("Tmp", (methods.FedAvg,), {"name": "tmp_structure_test"}))
    try:
        assert methods.get("tmp_structure_test") is cls
    finally:
        methods.REGISTRY.pop("tmp_structure_test")


# ------------------------------------------------------------------------------ byte counting
def test_dense_bits_in_closed_form_match_encoding():
    from flkit.compress import DenseCodec

    msg = {
        "w": torch.randn(3, 4),
        "b": torch.randn(4, dtype=torch.float64),
        "n": torch.zeros(5, dtype=torch.int64),
    }
    # 12 + 4 floats at 32 bits (dense counts 32 per float whatever the dtype), 5 int64 at 64
    assert DenseCodec().message_bits(msg) == 16 * 32 + 5 * 64 == DenseCodec().encode(msg)[1]
    stacked = {k: torch.stack([v, v]) for k, v in msg.items()}
    assert DenseCodec().message_bits(stacked, stacked=True) == [832, 832]
    assert DenseCodec().encode(stacked, stacked=True)[1] == [832, 832]


@pytest.mark.parametrize("counter", ["reference-simulator", "paper", "exact"])
def test_sparse_bits_count_the_decoded_message(counter):
    from flkit.compress import STCCodec, TopKCodec

    g = torch.Generator().manual_seed(0)
    msg = {"w": torch.randn(4, 50, generator=g), "b": torch.randn(4, 7, generator=g)}
    for codec in (STCCodec(0.1, counter), TopKCodec(0.2, counter)):
        dec, bits = codec.encode(msg, stacked=True)
        assert codec.bits(dec, stacked=True) == bits == codec.message_bits(msg, stacked=True)
        assert bits == [
            sum(codec.sizes({k: v[i] for k, v in dec.items()})[k].bits for k in dec)
            for i in range(4)
        ]
