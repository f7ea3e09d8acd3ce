"""Committed notebooks carry no outputs and follow the parameters-cell convention
(notebooks/README.md); tools/strip_notebooks.py cleans them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flkit.reproduce import notebook_parameters

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "strip_notebooks.py"
NOTEBOOKS = sorted(
    p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
FIXTURE_NOTEBOOKS = sorted((ROOT / "tests" / "fixtures" / "notebooks").glob("*.ipynb"))
ALL = NOTEBOOKS + FIXTURE_NOTEBOOKS
REQUIRED = ("preset", "seed", "device")


def _load_tool():
    spec = importlib.util.spec_from_file_location("strip_notebooks", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


strip_notebooks = _load_tool()


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"cell {i} has outputs"
            assert cell.get("execution_count") is None, f"cell {i} has an execution count"
    assert strip_notebooks.is_clean(nb), (
        f"{_id(path)} has outputs or volatile metadata; "
        f"run: python tools/strip_notebooks.py {_id(path)}"
    )


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_first_code_cell_is_parameters(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "no code cells"
    assert "parameters" in code[0].get("metadata", {}).get("tags", []), (
        "the first code cell must be tagged 'parameters' (papermill)"
    )
    params = notebook_parameters(path)
    missing = [k for k in REQUIRED if k not in params]
    assert not missing, f"the parameters cell does not define {', '.join(missing)}"
    assert params["preset"] is None, (
        f"preset = {params['preset']!r} in the parameters cell; write preset = None so that "
        "FLKIT_PRESET (tests) and the preset file's default apply"
    )
    assert isinstance(params["seed"], int), "seed must be an integer literal"


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_papermill_sees_every_parameter(path):
    """papermill's own parser must find every name the parameters cell assigns (a comment holding
    '=' makes it skip the line, and `papermill --help-notebook` then hides that parameter)."""
    from papermill.translators import PythonTranslator

    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    seen = {p.name for p in PythonTranslator.inspect({"source": source})}
    missing = sorted(set(notebook_parameters(path)) - seen)
    assert not missing, (
        f"papermill cannot parse the parameter line(s) of {missing}; avoid '=' in their comments"
    )


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_kernel_is_python3(path):
    ks = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("kernelspec")
    assert ks is None or ks.get("name") == "python3", (
        f"kernelspec name {ks.get('name')!r}; use 'python3' so papermill/nbval find the kernel"
    )


def _dirty_notebook() -> dict:
    return {
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# title"]},
            {
                "cell_type": "code",
                "id": "c1",
                "execution_count": 3,
                "metadata": {
                    "tags": ["parameters"],
                    "execution": {"iopub.status.busy": "x"},
                    "papermill": {"duration": 1.0},
                    "scrolled": True,
                },
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}],
                "source": ["preset = None\n", "seed = 0\n", "device = 'auto'"],
            },
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "widgets": {"state": {}},
            "papermill": {"parameters": {}},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_strip_tool(tmp_path):
    path = tmp_path / "dirty.ipynb"
    path.write_text(json.dumps(_dirty_notebook()))
    cmd = [sys.executable, str(TOOL)]
    assert subprocess.run(cmd + ["--check", str(path)], capture_output=True).returncode == 1
    assert json.loads(path.read_text())["cells"][1]["outputs"]  # --check changes nothing
    assert subprocess.run(cmd + [str(path)], capture_output=True).returncode == 1  # fixed it
    nb = json.loads(path.read_text())
    cell = nb["cells"][1]
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert cell["metadata"] == {"tags": ["parameters"]}
    assert nb["metadata"] == strip_notebooks.KERNEL_METADATA  # what JupyterLab would write
    assert nb["cells"][0]["source"] == ["# title"]
    assert subprocess.run(cmd + ["--check", str(path)], capture_output=True).returncode == 0
    assert subprocess.run(cmd + [str(path)], capture_output=True).returncode == 0  # idempotent


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_metadata_is_what_jupyterlab_writes(path):
    """JupyterLab replaces kernelspec and language_info with the connected kernel's on open and
    marks the notebook modified when they differ (issue 17); the project's kernel is the one
    `make venv` installs: name python3, "Python 3 (flkit)"."""
    meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    assert meta["kernelspec"] == {
        "display_name": "Python 3 (flkit)",
        "language": "python",
        "name": "python3",
    }
    assert meta["language_info"]["name"] == "python"
    assert meta["language_info"]["version"] == strip_notebooks.PYTHON_VERSION


def test_strip_tool_bad_file(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text("{not json")
    r = subprocess.run([sys.executable, str(TOOL), str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and "cannot read" in r.stderr
