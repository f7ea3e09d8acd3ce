"""Each notebook trains exactly the runs its paper folder lists (``study.runs``), no more, no
fewer: the notebook is executed at `smoke` (papermill, one torch thread, an empty run cache), and
the finished runs it leaves in the cache are compared with the folders of ``study.runs(P, [0])``,
computed here from the configs (their cache keys at one thread). Then the run pool: a pooled
``flkit reproduce`` of notebook 02 trains its runs first, the notebook trains nothing more and
records the numbers of the notebook executed without the pool."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flkit import store
from flkit.workbook import presets

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.slow


def _execute(nb: str, cache: Path, report: Path) -> None:
    """Notebook ``nb`` at `smoke`, seed 0, one torch thread, its runs into ``cache``."""
    env = dict(os.environ)
    env.update(
        FLKIT_RUNS=str(cache),
        FLKIT_THREADS="1",
        FLKIT_PRESET="smoke",
        FLKIT_REPORT_DIR=str(report),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    cmd = [sys.executable, "-m", "papermill", "--no-progress-bar", "-k", "python3"]
    cmd += ["--cwd", str(ROOT / "notebooks"), str(ROOT / "notebooks" / f"{nb}.ipynb")]
    cmd += [str(report / f"{nb}.ipynb"), "-p", "preset", "smoke", "-p", "seed", "0"]
    report.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{nb} at smoke failed: {done.stderr[-3000:]}"


def _listed_folders(nb: str, cache: Path) -> set[str]:
    """The cache folders of ``study.runs`` at `smoke`, seed 0, one thread."""
    from flkit.asyncfl import FedASTRun, runner
    from flkit.experiment import run_folder

    study = importlib.import_module(f"flkit.papers.{nb.split('_', 1)[1]}.study")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = set()
        for item in study.runs(presets.load(nb, "smoke"), [0]):
            if isinstance(item, tuple):  # a FedAST simulation: (config, seed)
                cfg = FedASTRun.from_dict(item[0]).validate()
                out.add(runner.run_folder(cfg, item[1], torch.device("cpu"), cache).name)
            else:
                out.add(run_folder(item, cache).name)
        return out
    finally:
        torch.set_num_threads(before)


def _not_listed_by_design(folder: Path) -> bool:
    """Notebook 03's runs that ``study.runs`` leaves out, as its docstring says: the demo's
    settings (synthetic tasks of ``demo.DEMO_SAMPLES`` samples per client, stopped at
    ``demo.DEMO_MAX_TIME``) and Fig. 3's centralised reference."""
    from flkit.papers.fedast import demo

    if folder.name.startswith("centralised-"):
        return True
    key = store.load_json(folder / "config.json")
    cfg = key.get("config") if isinstance(key.get("config"), dict) else None
    if cfg is None or cfg.get("max_time") != demo.DEMO_MAX_TIME:
        return False
    return all(t.get("samples_per_client") == demo.DEMO_SAMPLES for t in cfg["tasks"])


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_the_notebook_trains_exactly_the_runs_its_study_lists(nb, tmp_path):
    cache = tmp_path / "cache"
    _execute(nb, cache, tmp_path / "report")
    made = {
        p.name
        for p in cache.iterdir()
        if store.RunFolder(p, ()).finished and not _not_listed_by_design(p)
    }
    listed = _listed_folders(nb, cache)
    assert made - listed == set(), "trained by the notebook but not listed"
    assert listed - made == set(), "listed but not trained by the notebook"


def _numbers(report: Path) -> dict:
    """The numbers a notebook recorded, by key (results.json)."""
    results = json.loads((report / "results.json").read_text(encoding="utf-8"))
    return {n["key"]: n["measured"] for n in results["numbers"]}


def test_a_pooled_reproduce_trains_first_and_the_notebook_reads_its_runs(tmp_path, monkeypatch):
    from flkit import reproduce
    from flkit.reproduce import execute

    nb = "02_feddip"
    # the runs and the notebook's results.json are what this test reads, not report.md
    monkeypatch.setattr(execute, "write_reports", lambda plan, infos, seconds: plan["out"])
    _execute(nb, tmp_path / "alone", tmp_path / "alone_report")  # no pool
    cache = tmp_path / "cache"
    monkeypatch.setenv("FLKIT_RUNS", str(cache))
    monkeypatch.setenv("FLKIT_THREADS", "1")  # the count the unpooled notebook computed with
    out = tmp_path / "out"
    _, infos = reproduce.reproduce_runs(preset="smoke", only=[nb], out=out, progress=False)
    assert infos[0]["status"] == "ok"
    pooled = {p.name for p in cache.iterdir() if store.RunFolder(p, ()).finished}
    assert pooled == _listed_folders(nb, cache)
    logs = sorted((out / "pool").glob("*.log"))
    assert len(logs) == len(pooled)  # the pool trained every one of them: the notebook none
    for name in pooled:  # and each history is the one the notebook writes without the pool
        assert (cache / name / "history.csv").read_bytes() == (
            tmp_path / "alone" / name / "history.csv"
        ).read_bytes()
    assert _numbers(out / nb / "seed0") == _numbers(tmp_path / "alone_report")
