"""A first run as the README tells it: after the make step that links the dataset mirror into
data/, a plain `flkit run` and papermill started from the repository root find the data with no
FLKIT_DATA / FLKIT_MIRROR in their environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
MIRROR = os.environ.get("FLKIT_MIRROR") or (
    str((ROOT.parent / "shared" / "data").resolve())
    if (ROOT.parent / "shared" / "data").is_dir()
    else ""
)
pytestmark = [
    pytest.mark.skipif(not MIRROR or not Path(MIRROR).is_dir(), reason="no dataset mirror"),
    pytest.mark.skipif(shutil.which("make") is None, reason="make not installed"),
]


def _plain_env(tmp_path) -> dict:
    """The user's shell: no data variables, this checkout importable, a private run cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLKIT_DATA", "FLKIT_MIRROR")}
    env["PYTHONPATH"] = str(ROOT)
    env["FLKIT_RUNS"] = str(tmp_path / "cache")
    return env


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """`make data`, the step `make test` / `make reproduce` / `make lab` run first (with this
    interpreter standing in for .venv)."""
    venv = tmp_path_factory.mktemp("venv")
    (venv / ".installed").touch()  # newer than pyproject.toml: make does not rebuild the venv
    env = {k: v for k, v in os.environ.items() if k != "FLKIT_DATA"}
    env["FLKIT_MIRROR"] = MIRROR
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        ["make", "-s", "data", f"VENV={venv}", f"PY={sys.executable}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "links the dataset mirror" in out.stdout
    return ROOT / "data"


def test_make_links_the_mirror_into_the_project_data_root(linked):
    link = linked / "MNIST" / "raw"
    assert link.is_dir() and any(p.is_symlink() for p in link.iterdir())
    assert (linked / "README.md").is_file() and not (linked / "README.md").is_symlink()


def test_flkit_run_from_the_root_finds_the_data(linked, tmp_path):
    cmd = [sys.executable, "-m", "flkit", "run", "fedavg", "--dataset", "mnist"]
    cmd += ["--clients", "4", "--clients-per-round", "2", "--rounds", "1"]
    cmd += ["--train-subset", "200", "--device", "cpu", "--no-progress"]
    out = subprocess.run(
        cmd, cwd=ROOT, env=_plain_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "was not found" not in out.stderr and "test accuracy" in out.stdout


@pytest.mark.parametrize("cwd", ["", "notebooks"])
def test_papermill_finds_the_data(linked, tmp_path, cwd):
    """A kernel started by papermill from the root, or with notebooks/ as its folder."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from flkit import data\n"
            "where = data.locate('mnist')\n"
            "assert where and where[0] == 'root', where\n"
            "print(len(data.load('mnist', device='cpu', download=False).y_test))"
        )
    ]
    src = tmp_path / "probe.ipynb"
    nbformat.write(nb, src)
    cmd = [sys.executable, "-m", "papermill", str(src), str(tmp_path / "out.ipynb")]
    cmd += ["-k", "python3", "--cwd", str(ROOT / cwd)]
    out = subprocess.run(
        cmd, cwd=ROOT, env=_plain_env(tmp_path), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert done.cells[0].outputs[-1]["text"].strip() == "10000"
