"""Executors without a Ray cluster: flkit sweep on the local executor (a 2-point grid x 2 seeds over
the fixture notebook, resumed), progress within a running notebook, what a Ray task does on its
worker (run here in-process), and the executors' bad input."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

# The same fixture notebooks and presets as the local executor's tests (the autouse fixture
# comes along with the import).
from test_reproduce import FIXTURES, NOTEBOOKS, fixture_presets  # noqa: F401

from flkit import reproduce as rp
from flkit.reproduce import executors
from flkit.utils import FlkitError
from flkit.workbook.results import format_value


def _expected_mean(n: int, seeds) -> str:
    """The fixture's number, mean ± sample std over seeds, computed here from its formula."""
    means = [np.random.default_rng(s).random(n).mean() for s in seeds]
    m = sum(means) / len(means)
    sd = math.sqrt(sum((x - m) ** 2 for x in means) / (len(means) - 1))
    return f"{format_value(m)} ± {sd:.2g} (n={len(means)})"


def _sweep(out, **kw):
    kw.setdefault("preset", "smoke")
    kw.setdefault("seeds", [0, 1])
    kw.setdefault("jobs", 2)
    return rp.sweep(
        "fixture_ok", {"n": [50, 400]}, out=out, notebooks_dir=NOTEBOOKS, progress=True, **kw
    )


def _mtimes(out: Path) -> dict:
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("run.json")}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("FLKIT_PRESET_PATH", str(FIXTURES / "presets"))
    out = tmp_path_factory.mktemp("sweep") / "out"
    try:
        path, infos = _sweep(out)
    finally:
        mp.undo()
    return out, path, infos


def test_sweep_runs_every_point_and_seed(swept):
    out, path, infos = swept
    assert path == out.resolve() / "sweep.md"
    assert [(r["parameters"]["n"], r["seed"], r["status"]) for r in infos] == [
        (50, 0, "ok"),
        (50, 1, "ok"),
        (400, 0, "ok"),
        (400, 1, "ok"),
    ]
    for label in ("n=50", "n=400"):
        assert (out / label / "report.md").is_file()  # each point's own full report
        for seed in (0, 1):
            assert (out / label / "fixture_ok" / f"seed{seed}" / "results.json").is_file()


def test_sweep_report_mean_std_and_claims_per_point(swept):
    out, path, _ = swept
    md = path.read_text()
    assert "| | paper | [n=50](n=50/report.md) | [n=400](n=400/report.md) |" in md
    row = next(line for line in md.splitlines() if line.startswith("| mean of uniform samples"))
    assert row == (
        f"| mean of uniform samples | 0.5 | {_expected_mean(50, [0, 1])} | "
        f"{_expected_mean(400, [0, 1])} |"
    )
    claim = "the sample mean is within 0.2 of the paper's value"
    both = "holds (2 holds of 2 seeds)"  # the verdict over seeds, with each seed's
    assert f"| {claim} | Eq. 1 | {both} | {both} |" in md
    assert f"- **n=50**: {claim}" in md and f"- **n=400**: {claim}" in md
    data = json.loads((out / "sweep.json").read_text())
    assert [p["point"] for p in data["points"]] == [{"n": 50}, {"n": 400}]
    assert "<table>" in (out / "sweep.html").read_text()


def test_sweep_resume_reruns_nothing_that_finished(swept, capfd, monkeypatch):
    out, _, _ = swept
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURES / "presets"))
    before = _mtimes(out)
    assert len(before) == 4
    _, infos = _sweep(out)
    assert _mtimes(out) == before  # not one run.json rewritten
    assert all(r["status"] == "ok" for r in infos)
    assert "4 already done, 0 to run" in capfd.readouterr().err
    # an interrupted sweep: one run never finished -> only that one runs again
    (out / "n=400" / "fixture_ok" / "seed1" / "run.json").unlink()
    _sweep(out)
    after = _mtimes(out)
    changed = [k for k in after if after[k] != before.get(k)]
    assert changed == [str(Path("n=400/fixture_ok/seed1/run.json"))]
    assert "3 already done, 1 to run" in capfd.readouterr().err


def test_progress_within_a_notebook_and_no_kernel_warning(tmp_path, capfd, monkeypatch):
    """Each code cell start is shown as 'cell n/m' with the elapsed time (here every one, with
    the line interval at 0), and the kernel's TCP warning is not printed."""
    monkeypatch.setattr(executors, "CELL_LINE_EVERY_S", 0.0)
    monkeypatch.setattr(executors, "HEARTBEAT_S", 1e6)  # only the cell starts (next test: beats)
    rp.reproduce(preset="smoke", only=["fixture_ok"], notebooks_dir=NOTEBOOKS, out=tmp_path)
    err = capfd.readouterr().err
    nb = json.loads((NOTEBOOKS / "fixture_ok.ipynb").read_text())
    m = sum(1 for c in nb["cells"] if c["cell_type"] == "code") + 1  # + papermill's cell
    lines = [ln.strip() for ln in err.splitlines() if "fixture_ok seed 0: cell" in ln]
    assert [ln.split(": cell ")[1].split(",")[0] for ln in lines] == [
        f"{n}/{m}" for n in range(1, m + 1)
    ]
    assert all(ln.endswith("s") for ln in lines)
    assert "[1/1] fixture_ok seed 0: ok in" in err
    assert "without encryption" not in err and "TCP" not in err


def test_a_long_cell_is_not_silent(monkeypatch):
    """While one cell runs for minutes the driver keeps saying which cell and for how long: a
    heartbeat repeats the line with the elapsed time brought up to now, at most one line per
    CELL_LINE_EVERY_S per run, and nothing once the run has finished."""
    import io

    clock = [1000.0]
    monkeypatch.setattr(executors.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(executors, "HEARTBEAT_S", 1e6)  # beats driven by hand below
    out = io.StringIO()
    p = executors.Progress(["nb seed 0"], stream=out)
    try:
        p.cell(0, 3, 23, 12.0)  # shown: first line of the run
        p.cell(0, 4, 23, 13.0)  # 0 s later: within the interval, not shown
        clock[0] += 10.0
        p.heartbeat()  # 10 s since the last line: still quiet
        clock[0] += 25.0
        p.heartbeat()  # 35 s: cell 4 started at 13 s, so 13 + 35 = 48 s
        clock[0] += 600.0
        p.heartbeat()  # ten minutes into the same cell
        p.finished(0, {"status": "ok", "wall_time_s": 660.0})
        clock[0] += 600.0
        p.heartbeat()  # finished: no more cell lines
    finally:
        p.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "  nb seed 0: cell 3/23, 12s",
        "  nb seed 0: cell 4/23, 48s",
        "  nb seed 0: cell 4/23, 10m48s",
        "[1/1] nb seed 0: ok in 660.0 s",
    ]


@pytest.mark.parametrize(
    "grid,kw,pattern",
    [
        ({"nn": [1, 2]}, {}, r"unknown grid key 'nn' for notebook 'fixture_ok'.*accepted:.*n"),
        ({}, {}, r"the grid is empty"),
        ({"seed": [1, 2]}, {}, r"--grid key 'seed' is set by sweep itself; use --seeds"),
        ({"n": [1, 2]}, {"overrides": {"n": 3}}, r"also given with --set"),
        ({"n": ["many", 2]}, {}, r"override n = 'many' is a str"),
        ({"n": [1]}, {"executor": "slurm"}, r"unknown executor 'slurm'; accepted: local, ray"),
        ({"n": [1]}, {"address": "h:1"}, r"--address only applies to --executor ray"),
    ],
)
def test_sweep_bad_input(tmp_path, grid, kw, pattern):
    with pytest.raises(FlkitError, match=pattern):
        rp.sweep("fixture_ok", grid, out=tmp_path / "o", notebooks_dir=NOTEBOOKS, **kw)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("run.json"))


@pytest.mark.parametrize(
    "items,pattern",
    [
        (["n="], r"--grid 'n=' gives no values for 'n'"),
        (["n"], r"not KEY=V1,V2"),
        (["n=1,2", "n=3"], r"given twice"),
        (["n=1,1"], r"repeats a value"),
    ],
)
def test_parse_grid_bad_input(items, pattern):
    with pytest.raises(FlkitError, match=pattern):
        rp.parse_grid(items)


def test_parse_grid_and_points():
    grid = rp.parse_grid(["tau=10,40", "lr=0.1,0.2", "name=a"])
    assert grid == {"tau": [10, 40], "lr": [0.1, 0.2], "name": ["a"]}
    from flkit.reproduce.sweep import grid_points, point_label

    pts = grid_points(grid)
    assert len(pts) == 4 and pts[1] == {"tau": 10, "lr": 0.2, "name": "a"}
    assert point_label(pts[1]) == "tau=10,lr=0.2,name=a"


def test_ray_missing_says_how_to_install(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(FlkitError, match=r"needs Ray, which is not installed.*flkit\[ray\]"):
        rp.reproduce(preset="smoke", notebooks_dir=NOTEBOOKS, out=tmp_path, executor="ray")


def test_resources_come_from_the_preset():
    assert executors.task_resources("paper") == {"cpus": 1, "gpus": 1}
    assert executors.task_resources("cpu") == {"cpus": 1, "gpus": 0}
    assert executors.task_resources("paper", gpus=0, cpus=4) == {"cpus": 4, "gpus": 0}
    with pytest.raises(FlkitError, match=r"gpus per task = -1"):
        executors.task_resources("cpu", gpus=-1)


def test_cli_registers_sweep_and_executor_options(capsys):
    from flkit.cli import build_parser

    parser = build_parser()
    for cmd in (["sweep", "--help"], ["reproduce", "--help"]):
        with pytest.raises(SystemExit):
            parser.parse_args(cmd)
        text = capsys.readouterr().out
        for opt in ("--executor", "--address", "--cpus-per-task", "--gpus-per-task"):
            assert opt in text
    args = parser.parse_args(["sweep", "fixture_ok", "--grid", "n=1,2", "--seeds", "0", "1"])
    assert args.grid == ["n=1,2"] and args.seeds == [0, 1] and args.executor == "local"


def test_ray_task_needs_no_shared_file_system(tmp_path, monkeypatch):
    """What a Ray task does on a worker, run here without Ray: the notebook's path does not exist
    there, so the shipped copy runs; every file of the run comes back as bytes, and written on
    the driver they match a local run's files (same names, same results)."""
    import queue

    from flkit.reproduce.execute import execute
    from flkit.reproduce.ray_executor import run_task, write_run_files

    p = rp.plan(preset="smoke", only=["fixture_ok"], notebooks_dir=NOTEBOOKS, out=tmp_path / "a")
    run = p["runs"][0]
    source = Path(run["input"]).read_bytes()
    events = queue.Queue()
    info, files, trained = run_task(
        {**run, "input": "/nowhere/fixture_ok.ipynb", "notebook_source": source}, events
    )
    assert trained == {}  # no run folder was asked back
    assert info["status"] == "ok", info["error"]
    assert sorted(files) == ["fixture_ok.ipynb", "histogram.png", "results.json", "run.json"]
    assert not Path(run["run_dir"]).exists()  # nothing written through a shared path
    write_run_files(run, files)
    local = rp.plan(
        preset="smoke", only=["fixture_ok"], notebooks_dir=NOTEBOOKS, out=tmp_path / "b"
    )
    local_info = execute(local["runs"], progress=False)[0]
    assert local_info["status"] == "ok"
    a, b = Path(run["run_dir"]), Path(local["runs"][0]["run_dir"])
    assert sorted(f.name for f in a.iterdir()) == sorted(f.name for f in b.iterdir())
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    assert ra["numbers"] == rb["numbers"] and ra["claims"] == rb["claims"]
    cells = [events.get_nowait() for _ in range(events.qsize())]
    assert [c[2] for c in cells] == list(range(1, len(cells) + 1)) and cells[-1][2] == cells[-1][3]


@pytest.mark.parametrize(
    "nodes,cpus,gpus,ok",
    [
        ([{"CPU": 16.0}], 1, 1, False),  # a GPU asked, no node has one
        ([{"CPU": 16.0}, {"CPU": 8.0, "GPU": 1.0}], 1, 1, True),
        ([{"CPU": 2.0}, {"CPU": 2.0}], 4, 0, False),  # 4 CPUs in all, but not on one node
        ([{"CPU": 4.0, "GPU": 2.0}], 4, 2, True),
    ],
)
def test_ray_resource_check_before_queueing(monkeypatch, nodes, cpus, gpus, ok):
    """The cluster check on the nodes Ray lists (given here): one task must fit on one node."""
    from flkit.reproduce.ray_executor import RayExecutor

    class Cluster:
        def nodes(self):
            return [{"Alive": True, "Resources": r} for r in nodes] + [
                {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}}  # a dead node counts not
            ]

    ex = RayExecutor(cpus=cpus, gpus=gpus)
    monkeypatch.setattr(ex, "_init", lambda: Cluster())
    if ok:
        ex.prepare([{"preset": "paper"}])
    else:
        with pytest.raises(FlkitError, match=rf"asks for {cpus} CPU\(s\) and {gpus} GPU\(s\)"):
            ex.prepare([{"preset": "paper"}])
