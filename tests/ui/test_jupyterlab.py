"""Browser smoke test (``make test-ui``): every notebook opened in JupyterLab in headless Chromium
at preset ``smoke``, as a student meets it. Opening does not mark it modified; Run All finishes
with no error output; every widget renders as a control (no "Error displaying widget"); moving
each demo's first slider replaces its picture within ``FLKIT_UI_REDRAW_S`` seconds (default 1).

Runs only with FLKIT_UI=1 (the Makefile target sets it) and Chromium + chromedriver present;
FLKIT_UI_SHOTS=<folder> also saves screenshots of each demo before and after the move."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .lab import CHROMEDRIVER, CHROMIUM, ROOT, Lab, Notebook, browser, wait_for

if os.environ.get("FLKIT_UI") != "1":
    pytest.skip("the browser smoke test runs with `make test-ui`", allow_module_level=True)
if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
    pytest.skip(f"needs {CHROMIUM} and {CHROMEDRIVER}", allow_module_level=True)
pytest.importorskip("selenium")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REDRAW_S = float(os.environ.get("FLKIT_UI_REDRAW_S", "1.0"))
RUN_S = float(os.environ.get("FLKIT_UI_RUN_S", "900"))
SHOTS = Path(os.environ["FLKIT_UI_SHOTS"]) if os.environ.get("FLKIT_UI_SHOTS") else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("lab")
    env = {
        "FLKIT_PRESET": "smoke",
        "FLKIT_RUNS_DIR": os.environ.get("FLKIT_RUNS_DIR", str(scratch / "runs")),
    }
    server = Lab(scratch, NOTEBOOKS, env)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def driver(lab):
    d = browser()
    try:
        yield d
    finally:
        d.quit()


def shot(nb: Notebook, cell: int, tag: str):
    if SHOTS is None:
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    nb.cell(cell).screenshot(str(SHOTS / f"{Path(nb.name).stem}_{tag}.png"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_in_jupyterlab(path, lab, driver):
    nb = Notebook(driver, lab, path.name)
    try:
        # opening must not mark the notebook modified (JupyterLab rewrites what it disagrees
        # with, e.g. its metadata, right after the kernel connects)
        if nb.dirty():
            on_disk = json.loads(path.read_text(encoding="utf-8"))["metadata"]
            now = nb.notebook_json()["metadata"]
            pytest.fail(
                f"{path.name} is marked modified right after opening; metadata on disk "
                f"{on_disk}, in JupyterLab {now} (tools/strip_notebooks.py sets it)"
            )

        nb.run_all(RUN_S)
        executed = nb.notebook_json()
        errors = [
            f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
            for i, c in enumerate(executed["cells"])
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        assert not errors, errors
        text = nb.page_text()
        assert "Error displaying widget" not in text and "Error creating widget" not in text
        not_controls = [w["text"] for w in nb.widget_outputs() if not w["control"]]
        assert not not_controls, f"widget outputs that did not render as controls: {not_controls}"

        demos = nb.demo_cells()
        for i in demos:
            before = nb.image_src(i)
            assert before, f"cell {i}: the demo shows no picture"
            shot(nb, i, f"cell{i}_before")
            t0 = nb.move_first_slider(i)
            wait_for(  # generous, so a slow answer is reported with its time
                f"cell {i}'s picture to change after a slider move",
                lambda i=i, before=before: nb.image_src(i) != before,
                timeout=max(30.0, 10 * REDRAW_S),
                every=0.02,
            )
            took = time.monotonic() - t0
            nb.wait_idle(60)
            shot(nb, i, f"cell{i}_after")
            print(f"{path.stem} cell {i}: picture replaced {took:.2f} s after the slider move")
            pics = nb.js(
                "return p.content.widgets[arguments[0]].node"
                ".querySelectorAll('.jp-OutputArea img').length;",
                i,
            )
            assert pics == 1, f"cell {i} shows {pics} pictures after the move; expected 1"
            assert took <= REDRAW_S, (
                f"cell {i}: the picture changed {took:.2f} s after the slider move; "
                f"expected within {REDRAW_S:g} s"
            )
    finally:
        nb.shutdown()
