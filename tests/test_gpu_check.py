"""benchmarks/gpu_check.py: at tiny sizes on the CPU every step runs end to end and writes a
report whose numbers are there and positive; bad input is refused before any work."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flkit.utils import FlkitError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
MIRROR = os.environ.get("FLKIT_MIRROR")
HAS_MNIST = (bool(MIRROR) and Path(MIRROR, "MNIST").is_dir()) or (ROOT / "data" / "MNIST").exists()


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_unknown_step_is_refused_with_the_known_ones(tmp_path):
    gc = _module()
    out = tmp_path / "out"
    with pytest.raises(FlkitError) as e:
        gc.main(["--device", "cpu", "--steps", "r1,warp", "--out", str(out)])
    msg = str(e.value)
    assert "warp" in msg
    for step in ("notebooks", "r1", "methods", "inversion"):
        assert step in msg
    assert not out.exists()  # refused before any work


def test_unknown_notebook_is_refused(tmp_path):
    gc = _module()
    with pytest.raises(FlkitError, match="99_nothing"):
        gc.main(["--device", "cpu", "--notebooks", "99_nothing", "--out", str(tmp_path / "o")])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cuda", "--tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "'cuda'" in proc.stderr and "CUDA is not available" in proc.stderr
    assert "[gpu_check]" not in proc.stdout  # no step started
    assert not out.exists()


def test_a_step_past_its_share_is_stopped_and_the_next_still_runs(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--out", str(out)]
        + ["--steps", "inversion,r1", "--budget-s", "4", "--grace-s", "0.4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1  # not every step ok
    rep = json.loads((out / "gpu-cpu-tiny.json").read_text())
    inv = rep["steps"]["inversion"]
    # 4 s x 0.12 / 0.34 for inversion: its process cannot even import torch and build the model
    assert inv["status"] == "timeout" and "share" in inv["error"]
    assert inv["wall_s"] < inv["share_s"] + 0.4 + 5  # stopped near its share, not left running
    assert rep["steps"]["r1"]["status"] in ("ok", "timeout")  # it ran after all
    assert "| inversion | timeout |" in (out / "gpu-cpu-tiny.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MNIST, reason="no MNIST copy (FLKIT_MIRROR unset, data/ not linked)")
def test_tiny_cpu_check_runs_every_step(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, FLKIT_RUNS_DIR=str(tmp_path / "runs"), PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        # a generous budget: a busy shared CPU must not cut a step short here
        [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--out", str(out)]
        + ["--budget-s", "1500"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
        cwd=tmp_path,  # the script finds the notebooks and flkit from its own place
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rep = json.loads((out / "gpu-cpu-tiny.json").read_text())
    assert rep["tiny"] is True and rep["device"] == "cpu"
    assert list(rep["steps"]) == ["notebooks", "r1", "methods", "inversion"]
    for step, rec in rep["steps"].items():
        assert rec["status"] == "ok", (step, rec.get("error"))
        assert rec["wall_s"] > 0
    assert rep["wall_s"] >= sum(r["wall_s"] for r in rep["steps"].values()) * 0.99

    nb = rep["steps"]["notebooks"]["result"]
    assert nb["failed"] == [] and nb["passed"] == len(nb["notebooks"]) >= 1
    assert all(r["seconds"] > 0 for r in nb["notebooks"].values())

    r1 = rep["steps"]["r1"]["result"]["batches"]
    assert set(r1) == {"10", "50"}
    for v in r1.values():
        assert v["engine_rounds_per_s"] > 0 and v["naive_rounds_per_s"] > 0
        assert v["ratio"] == pytest.approx(v["engine_rounds_per_s"] / v["naive_rounds_per_s"])
        assert 0 <= v["engine_accuracy"] <= 1 and 0 <= v["naive_accuracy"] <= 1

    me = rep["steps"]["methods"]["result"]
    notebooks = [p.stem for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    assert sorted(me["notebooks"]) == notebooks  # every notebook has an estimate
    for name, info in me["notebooks"].items():
        assert info["errors"] == [], (name, info["errors"])
        assert info["runs"] >= 1 and info["probed"] >= 1
        assert info["gpu_hours"] > 0
    for p in me["probes"]:
        key = "seconds_per_round" if "seconds_per_round" in p else "seconds_per_time_unit"
        assert p[key] > 0

    inv = rep["steps"]["inversion"]["result"]
    assert inv["clients"] == 10
    assert min(inv["batched_s"]) > 0 and min(inv["sequential_s"]) > 0
    assert inv["speedup_min"] > 0

    md = (out / "gpu-cpu-tiny.md").read_text()
    for step in rep["steps"]:
        assert f"| {step} | ok |" in md
    assert md.strip() in proc.stdout  # the table is printed too
