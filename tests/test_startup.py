"""What a new process pays before its first round, judged by what it does, not by a clock: the
command line imports nothing a run does not use, a decoded dataset and its identity are read back
from the machine folder instead of being decoded and hashed again (and give the same tensors), and
the backend measurement is made once per machine and shape, whichever run cache a run uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from flkit import data, paths
from flkit.data import decoded, files, provenance
from flkit.engine import backend
from flkit.experiment import RunConfig, run

ROOT = Path(__file__).resolve().parents[1]
# heavy packages that `flkit run` on a small model never uses
NOT_FOR_A_RUN = ("matplotlib", "torchvision", "scipy", "IPython", "ipywidgets", "sympy")


def _modules_after(code: str, tmp_path: Path) -> set[str]:
    env = dict(
        os.environ,
        FLKIT_RUNS_DIR=str(tmp_path / "runs"),
        FLKIT_MACHINE_DIR=str(tmp_path / "machine"),
    )
    out = tmp_path / "modules.json"
    script = f"{code}\nimport json, sys\njson.dump(sorted(sys.modules), open({str(out)!r}, 'w'))\n"
    res = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return set(json.loads(out.read_text()))


def test_the_command_line_and_a_run_import_nothing_they_do_not_use(tmp_path):
    loaded = _modules_after("import flkit.cli", tmp_path)
    assert not {m.split(".")[0] for m in loaded} & set(NOT_FOR_A_RUN)
    run_cli = (
        "from flkit.cli import main\n"
        "main(['run', 'fedavg', '--dataset', 'synthetic', '--model', 'logreg', '--clients', '4',"
        " '--clients-per-round', '2', '--rounds', '1', '--backend', 'wide', '--no-progress'])"
    )
    loaded = _modules_after(run_cli, tmp_path)
    assert "flkit.experiment" in loaded  # the run did run
    assert not {m.split(".")[0] for m in loaded} & set(NOT_FOR_A_RUN)
    # the engine's own step needs no compiler stack (torch.optim would import it)
    assert "torch._dynamo" not in loaded


# modules of flkit.methods a FedAvg run needs: the shared machinery, the registry and its family
METHOD_MACHINERY = {"__init__", "base", "hyperparameters", "registry", "fedavg"}
OTHER_FAMILIES = {
    f"flkit.methods.{p.stem}"
    for p in (ROOT / "flkit" / "methods").glob("*.py")
    if p.stem not in METHOD_MACHINERY
}
# what `flkit run` never uses: the other sub-commands and heavy packages (pandas builds the
# history after the last round)
NOT_BEFORE_THE_FIRST_ROUND = {
    "flkit.reproduce",
    "flkit.course",
    "flkit.data.admin",
    "pandas",
    "matplotlib",
}


def _unused(loaded: set[str]) -> list[str]:
    return sorted(
        m
        for m in loaded
        if m in OTHER_FAMILIES
        or any(m == u or m.startswith(u + ".") for u in NOT_BEFORE_THE_FIRST_ROUND)
    )


def test_a_run_reaches_its_first_round_without_the_other_commands_or_families(tmp_path):
    out = tmp_path / "at-first-round.json"
    # the modules loaded when the run's first round starts, as `python -m flkit run` loads them
    code = (
        "import json, sys\n"
        "from flkit.methods.base import Method\n"
        "real = Method.round\n"
        "def first(self, *a, **k):\n"
        f"    json.dump(sorted(sys.modules), open({str(out)!r}, 'w'))\n"
        "    Method.round = real\n"
        "    return real(self, *a, **k)\n"
        "Method.round = first\n"
        "import runpy\n"
        "sys.argv = ['flkit', 'run', 'fedavg', '--dataset', 'synthetic', '--model', 'logreg',"
        " '--clients', '4', '--clients-per-round', '2', '--rounds', '1', '--backend', 'wide',"
        " '--no-progress']\n"
        "runpy.run_module('flkit', run_name='__main__')\n"
    )
    env = dict(os.environ, FLKIT_RUNS=str(tmp_path / "runs"))
    env["FLKIT_MACHINE_DIR"] = str(tmp_path / "machine")
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    loaded = set(json.loads(out.read_text()))
    assert "flkit.methods.fedavg" in loaded and "flkit.experiment" in loaded
    assert OTHER_FAMILIES  # the families are found
    assert _unused(loaded) == []


def test_the_method_list_needs_no_family(tmp_path):
    """`flkit run --list` (and a bad method name's message) names every method, no family loaded."""
    code = (
        "import sys\n"
        "from flkit.cli import main\n"
        "main(['run', '--list'])\n"
        "print('loaded:', *sorted(m for m in sys.modules if m.startswith('flkit.methods.')))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    listed = res.stdout.split("methods:", 1)[1].split("\n", 1)[0]
    for name in ("fedavg", "fedprox", "stc", "feddip", "hidenseek", "fedmask", "gi_staleness"):
        assert name in [n.strip() for n in listed.split(",")]
    loaded = set(res.stdout.split("loaded:", 1)[1].split())
    assert not loaded & OTHER_FAMILIES


def test_machine_folder_is_beside_the_run_cache_and_can_be_moved(tmp_path, monkeypatch):
    monkeypatch.delenv("FLKIT_MACHINE_DIR")
    monkeypatch.setenv("FLKIT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "elsewhere"))
    assert paths.machine_dir() == tmp_path / "runs" / "machine"
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path / "m"))
    assert paths.machine_dir() == tmp_path / "m"
    assert decoded.folder() == tmp_path / "m" / "data"


# ------------------------------------------------------------------ decoded copies on disk
def _write_idx(path: Path, magic: int, arr: np.ndarray) -> None:
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    path.write_bytes(header + arr.astype(np.uint8).tobytes())


def _fake_mnist(root: Path, n: int = 40, n_test: int = 20, seed: int = 0) -> Path:
    """MNIST's four IDX files, unpacked (so that other pixels keep the file size)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for stem, m in (("train", n), ("t10k", n_test)):
        _write_idx(raw / f"{stem}-images-idx3-ubyte", 2051, rng.integers(0, 256, (m, 28, 28)))
        _write_idx(raw / f"{stem}-labels-idx1-ubyte", 2049, np.arange(m) % 10)
    return raw


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fresh machine folder; every copy's arrays are kept, however small."""
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("FLKIT_MIRROR", "")
    monkeypatch.setattr(decoded, "MIN_ARRAY_BYTES", 0)
    data.clear_cache()
    yield tmp_path / "machine"
    data.clear_cache()


def _counting(monkeypatch):
    calls = {"read": 0, "hash": 0}
    real_read, real_hash = files.read, provenance.content_sha256

    def read(*a, **k):
        calls["read"] += 1
        return real_read(*a, **k)

    def content(*a, **k):
        calls["hash"] += 1
        return real_hash(*a, **k)

    monkeypatch.setattr(files, "read", read)
    monkeypatch.setattr(provenance, "content_sha256", content)
    return calls


def test_a_new_process_reads_the_decoded_copy_back(machine, tmp_path, monkeypatch):
    _fake_mnist(tmp_path / "root")
    calls = _counting(monkeypatch)
    first = data.load("mnist", root=tmp_path / "root", device="cpu", download=False)
    assert calls == {"read": 1, "hash": 1}
    (entry,) = (machine / "data").iterdir()
    assert sorted(p.name for p in entry.iterdir()) == [
        "entry.json",
        "x_test.npy",
        "x_train.npy",
        "y_test.npy",
        "y_train.npy",
    ]
    data.clear_cache()  # what a new process starts with
    again = data.load("mnist", root=tmp_path / "root", device="cpu", download=False)
    assert calls == {"read": 1, "hash": 1}  # neither decoded nor hashed again
    for k in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(first, k), getattr(again, k))
    assert again.meta["identity"] == first.meta["identity"]
    again.x_train[0] = 7.0  # tensors never share memory with the (read-only) file
    data.clear_cache()
    third = data.load("mnist", root=tmp_path / "root", device="cpu", download=False)
    assert torch.equal(third.x_train, first.x_train)


def test_a_changed_file_is_decoded_and_hashed_again(machine, tmp_path, monkeypatch):
    raw = _fake_mnist(tmp_path / "root")
    calls = _counting(monkeypatch)
    before = data.identity("mnist", root=tmp_path / "root", download=False)
    # the same size and the same modification time, other pixels: only the change time and the
    # inode tell (as after `cp -p` of a damaged copy over the good one)
    images = raw / "train-images-idx3-ubyte"
    st = images.stat()
    other = tmp_path / "other"
    _fake_mnist(other, seed=1)
    (other / "MNIST/raw/train-images-idx3-ubyte").replace(images)
    os.utime(images, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert images.stat().st_size == st.st_size and images.stat().st_mtime_ns == st.st_mtime_ns
    data.clear_cache()
    after = data.identity("mnist", root=tmp_path / "root", download=False)
    assert calls == {"read": 2, "hash": 2}
    assert after["labels_sha256"] == before["labels_sha256"]
    assert after["content_sha256"] != before["content_sha256"]
    assert len(list((machine / "data").iterdir())) == 1  # the stale entry is gone


def test_npz_copies_keep_their_identity_only(machine, tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    rng = np.random.default_rng(0)
    np.savez(
        root / "cifar10.npz",
        x_train=rng.integers(0, 256, (30, 32, 32, 3), dtype=np.uint8),
        y_train=np.arange(30) % 10,
        x_test=rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8),
        y_test=np.arange(10) % 10,
    )
    calls = _counting(monkeypatch)
    first = data.identity("cifar10", root=root, download=False)
    data.clear_cache()
    assert data.identity("cifar10", root=root, download=False) == first
    assert calls == {"read": 2, "hash": 1}  # the arrays are the file: read, not hashed, again
    (entry,) = (machine / "data").iterdir()
    assert [p.name for p in entry.iterdir()] == ["entry.json"]


def test_a_writer_that_loses_the_race_leaves_the_winner_in_place(machine, tmp_path, monkeypatch):
    sig = (("/nowhere/a", 1, 2, 3, 4),)
    arrays = {"x_train": np.arange(6, dtype=np.uint8)}
    facts = {"dataset": "mnist", "train": 6}
    real_rename = os.rename

    def rename_after_another_writer(src, dst):
        Path(dst).mkdir()
        (Path(dst) / "entry.json").write_text("{}")
        real_rename(src, dst)  # fails: the other writer's entry is there

    monkeypatch.setattr(os, "rename", rename_after_another_writer)
    assert decoded.put("mnist", "idx", sig, arrays, facts) is None
    assert [p.name for p in decoded.folder().iterdir()] == [decoded.entry_path("mnist", sig).name]
    assert (decoded.entry_path("mnist", sig) / "entry.json").read_text() == "{}"


def test_a_read_only_machine_folder_costs_only_the_saving(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(blocker))
    monkeypatch.setattr(decoded, "MIN_ARRAY_BYTES", 0)
    _fake_mnist(tmp_path / "root")
    data.clear_cache()
    ds = data.load("mnist", root=tmp_path / "root", mirror="", device="cpu", download=False)
    assert ds.x_train.shape == (40, 1, 28, 28)
    data.clear_cache()


# ------------------------------------------------------------------ the backend measurement
BASE = dict(
    dataset="synthetic",
    model="logreg",
    partition="natural",
    num_clients=6,
    clients_per_round=3,
    batch_size=10,
    rounds=1,
    seed=3,
    device="cpu",
    dataset_kwargs={"alpha": 0.5, "beta": 0.5, "num_clients": 6},
)


def test_the_backend_is_measured_once_per_machine_whatever_the_run_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLKIT_MACHINE_DIR", str(tmp_path / "machine"))
    probes = []

    def timed(*a, **k):
        probes.append(1)
        return {"wide": 2.0, "loop": 1.0}

    monkeypatch.setattr(backend, "time_backends", timed)
    cfg = RunConfig(**BASE)
    first = run(cfg, out_dir=tmp_path / "cache-a", progress=False)
    second = run(cfg, out_dir=tmp_path / "cache-b", progress=False)  # a fresh run cache
    assert len(probes) == 1
    assert first.config.backend == second.config.backend == "loop"
    assert first.history.equals(second.history)
    saved = json.loads((tmp_path / "machine" / backend.CACHE_FILE).read_text())
    assert [r["backend"] for r in saved.values()] == ["loop"]


def _benchmark(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bench_startup():
    return _benchmark("bench_startup")


def test_the_startup_bench_times_processes_with_their_bytecode_cached(tmp_path, monkeypatch):
    """A shell that turns the bytecode cache off would make every timed process compile the
    modules it imports from source, and a run imports more of the checkout than the naive loop:
    the bench's processes write and read .pyc files whatever the shell says."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = _bench_startup().child_env(tmp_path)
    assert env["FLKIT_MACHINE_DIR"] == str(tmp_path / "machine")
    env.pop("PYTHONPYCACHEPREFIX", None)  # the cache beside the source, where this test looks
    (tmp_path / "startup_probe_mod.py").write_text("VALUE = 1\n")
    res = subprocess.run(
        [sys.executable, "-c", "import startup_probe_mod"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert list((tmp_path / "__pycache__").glob("startup_probe_mod.*.pyc"))


def test_the_startup_bench_pairs_runs_of_the_same_turn():
    """flkit's start-up less the naive loop's, turn by turn (hand values): the median difference
    and in how many turns flkit's was at most the loop's; turns of unequal count are refused."""
    bench = _bench_startup()
    rows = {
        "flkit": [{"startup": 1.5}, {"startup": 1.9}, {"startup": 1.6}, {"startup": 1.7}],
        "naive": [{"startup": 1.6}, {"startup": 1.7}, {"startup": 1.6}, {"startup": 1.8}],
    }
    got = bench.pairs(rows)
    assert got["differences"] == pytest.approx([-0.1, 0.2, 0.0, -0.1])
    assert got["median_difference"] == pytest.approx(-0.05)
    assert (got["at_most"], got["pairs"]) == (3, 4)
    with pytest.raises(ValueError, match="no runs"):
        bench.pairs({"flkit": [], "naive": []})
    with pytest.raises(ValueError):
        bench.pairs({"flkit": rows["flkit"], "naive": rows["naive"][:3]})


def test_the_startup_floor_is_the_end_of_the_torch_import(monkeypatch):
    """The floor's start-up is its printed import time less its spawn time; its command imports
    torch and nothing of flkit."""
    bench = _bench_startup()
    monkeypatch.setattr(
        bench, "_timed", lambda cmd, cwd, env: (2.5, "imported_unix 101.75\n", 100.0)
    )
    assert bench.run_floor({}) == {"wall": 2.5, "rounds": 0.0, "startup": 1.75, "upper": 2.5}
    cmd = bench.floor_command()
    assert cmd[0] == sys.executable and "import torch" in cmd[-1] and "flkit" not in cmd[-1]


def _cell(source, tags=None):
    return {"cell_type": "code", "metadata": {"tags": tags or []}, "source": source}


def test_the_notebook_import_profile_takes_the_set_up_cells_imports_only():
    """The set-up cell is the code cell after the one tagged 'parameters'; its imports (a
    parenthesised one included) are kept, its work is not; a notebook without a parameters cell
    or with a set-up cell that imports nothing is refused."""
    prof = _benchmark("profile_notebook_imports")
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "import nothing_here"},
        _cell("import early\n"),
        _cell("seed = 0\n", tags=["parameters"]),
        _cell(
            ["import os\n", "\n", "from a.b import (\n    c,\n    d,\n)\n"]
            + ["P = load(seed)\n", "if P:\n    import inner\n"]
        ),
        _cell("import later\n"),
    ]
    assert prof.setup_imports(cells) == "import os\nfrom a.b import (\n    c,\n    d,\n)\n"
    with pytest.raises(ValueError, match="parameters"):
        prof.setup_imports([_cell("import os\n")])
    with pytest.raises(ValueError, match="imports nothing"):
        prof.setup_imports([_cell("x = 1", ["parameters"]), _cell("y = 2")])


def test_the_notebook_import_profile_splits_importtime_by_package():
    """Hand-written -X importtime lines: a package's cumulative time where it appears, flkit's
    own self time (not its imports of torch), and the self time of everything."""
    prof = _benchmark("profile_notebook_imports")
    text = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       100 |        100 |     numpy",
            "import time:      1200 |       1500 |   torch",
            "import time:        40 |       1540 | flkit",
            "import time:        60 |         60 |   flkit.papers.x",
            "import time:       300 |        900 | matplotlib.pyplot",
            "import time:       200 |        200 |   pandas",
            "some other stderr line",
        ]
    )
    got = prof.split(text)
    assert got["torch"] == 1.5 and got["matplotlib.pyplot"] == 0.9 and got["pandas"] == 0.2
    assert got["IPython"] == got["ipywidgets"] == 0
    assert got["flkit own"] == pytest.approx(0.1)
    assert got["all"] == pytest.approx(1.9)
