"""One run cache, one results folder and one data root whatever the working directory: `make
reproduce` runs notebooks in notebooks/, papermill and `flkit run` usually run from the root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flkit import paths, store
from flkit.data import data_root

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_env(monkeypatch):
    for var in ("FLKIT_RUNS", "FLKIT_RUNS_DIR", "FLKIT_DATA"):
        monkeypatch.delenv(var, raising=False)


def test_project_root_is_the_checkout():
    assert paths.project_root() == ROOT
    assert (ROOT / "pyproject.toml").is_file() and (ROOT / "flkit" / "paths.py").is_file()


@pytest.mark.parametrize("cwd", ["", "notebooks", "docs"])
def test_defaults_do_not_follow_the_working_directory(no_env, monkeypatch, cwd, tmp_path):
    monkeypatch.chdir(ROOT / cwd)
    assert store.default_root() == ROOT / "runs" / "cache"
    assert paths.runs_dir() == ROOT / "runs"
    assert data_root() == ROOT / "data"
    cfg = {"method": "fedavg", "seed": 0}
    assert store.run_dir(None, cfg) == ROOT / "runs" / "cache" / store.config_hash(cfg)


def test_relative_variables_are_anchored_at_the_project(no_env, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLKIT_RUNS_DIR", "runs/test")
    assert store.default_root() == ROOT / "runs" / "test" / "cache"
    monkeypatch.setenv("FLKIT_RUNS", "elsewhere/cache")
    assert store.default_root() == ROOT / "elsewhere" / "cache"
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "abs"))
    assert store.default_root() == tmp_path / "abs"
    monkeypatch.setenv("FLKIT_DATA", "mydata")
    assert data_root() == ROOT / "mydata"


def test_a_kernel_in_notebooks_and_a_shell_at_the_root_share_the_cache(no_env, tmp_path):
    """Two fresh interpreters, as papermill's kernel (cwd notebooks/) and a shell at the root."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLKIT_RUNS", "FLKIT_RUNS_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    code = "from flkit import store; print(store.default_root())"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True
        ).stdout.strip()
        for cwd in (ROOT, ROOT / "notebooks", tmp_path)
    }
    assert seen == {str(ROOT / "runs" / "cache")}
