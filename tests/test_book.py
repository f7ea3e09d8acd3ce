"""The book (flkit.reproduce.book): built from a stand-in run folder (two executed notebooks with a
PNG output each, one of them at two seeds) and a stand-in repository (a results page with a
figure, a paper README), every page exists, every image a page shows is on disk, each notebook
page shows its own PNG byte for byte, and nothing is executed; what is published is stripped of
widgets and kept small, and shows the graded exercises as the student release does (no solution,
no hidden test, no output of a graded cell); the site check finds a missing image, file and
anchor, and an exercise's solution left on a page."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from flkit.course.student_version import is_graded
from flkit.reproduce import book
from flkit.reproduce.book_site import check_site
from flkit.utils import FlkitError

ROOT = Path(__file__).resolve().parent.parent
WIDGET = "application/vnd.jupyter.widget-view+json"


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG image of one colour, written by hand (so the test does not trust matplotlib)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    row = b"\x00" + bytes(rgb) * width
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


RED = png(4, 3, (200, 30, 30))
BLUE = png(3, 5, (30, 30, 200))
PAPER_FIGURE = png(2, 2, (30, 160, 30))


def notebook(title: str, text: str, figure: bytes) -> dict:
    """An executed notebook: a title and formula, a parameters cell, a progress-bar widget
    view, a figure, a printed line, a Markdown output with a table."""
    widget = {"version_major": 2, "version_minor": 0, "model_id": "abc"}
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "widgets": {
                "application/vnd.jupyter.widget-state+json": {
                    "state": {"abc": {"model_name": "FloatProgressModel", "state": {}}},
                    "version_major": 2,
                    "version_minor": 0,
                }
            },
        },
        "cells": [
            {
                "cell_type": "markdown",
                "id": "m1",
                "metadata": {},
                # display math inside a paragraph, as notebooks 04 and 05 write their equations
                "source": f"# {title}\n\n{text}: the weight $w_k^t$ of client $k$ in\n"
                "$$w^{t+1}=\\sum_k w_k^t$$\nfor every round.",
            },
            {
                "cell_type": "code",
                "id": "c1",
                "metadata": {},
                "execution_count": 1,
                "source": "run_everything()",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {WIDGET: widget, "text/plain": "rounds:   0%|   | 0/4"},
                    },
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {
                            "image/png": base64.b64encode(figure).decode(),
                            "text/plain": "<Figure size 640x480 with 1 Axes>",
                        },
                    },
                    {"output_type": "stream", "name": "stdout", "text": f"{text} printed\n"},
                ],
            },
            {
                "cell_type": "code",
                "id": "c2",
                "metadata": {},
                "execution_count": 2,
                "source": "display(Markdown(describe()))",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        # a settings table, as 01's describe() prints it: JupyterLab renders it
                        "data": {
                            "text/markdown": "**Preset `smoke`**\n\n| setting | here |\n"
                            "|---|---|\n| rounds | 4 |\n",
                            "text/plain": "<IPython.core.display.Markdown object>",
                        },
                    }
                ],
            },
        ],
    }


SOLUTION_LINE = "return 4 * (784 * 200 + 200)"
HIDDEN_LINE = "require(check_bytes, upload_bytes)"
VERDICT = "right: upload bytes = 628000"


def with_exercise(nb: dict) -> dict:
    """``nb`` with a graded exercise after its first code cell, executed with its answer: the
    task (markdown), the answer cell (a solution region, its output), the check cell (a visible
    check that printed "right", a hidden test), then a plain cell after them."""

    def code(cid: str, source, nbgrader: dict | None, outputs: list) -> dict:
        meta = {"nbgrader": {"grade_id": cid, "schema_version": 3, **nbgrader}} if nbgrader else {}
        return {
            "cell_type": "code",
            "id": cid,
            "metadata": meta,
            "execution_count": 7,
            "source": source,
            "outputs": outputs,
        }

    def printed(text: str) -> list:
        return [{"output_type": "stream", "name": "stdout", "text": text + "\n"}]

    task = {
        "cell_type": "markdown",
        "id": "task",
        "metadata": {},
        "source": "### (a) Upload bytes\n\nReplace `raise NotImplementedError`.",
    }
    answer = code(
        "ex_answer",
        # as the notebooks store a source: a list of lines
        [
            "def upload_bytes():\n",
            '    """Bytes of one upload."""\n',
            "    ### BEGIN SOLUTION\n",
            f"    {SOLUTION_LINE}\n",
            "    ### END SOLUTION",
        ],
        {"solution": True, "grade": False, "locked": False, "task": False},
        [
            {
                "output_type": "execute_result",
                "execution_count": 7,
                "metadata": {},
                "data": {"text/plain": "628000"},
            }
        ],
    )
    check = code(
        "ex_check",
        "verdict = check_bytes(upload_bytes)\n### BEGIN HIDDEN TESTS\n"
        f"{HIDDEN_LINE}\n### END HIDDEN TESTS",
        {"solution": False, "grade": True, "points": 1, "task": False, "locked": True},
        printed(VERDICT),
    )
    after = code("after", "print('after the exercises')", None, printed("after the exercises"))
    nb = json.loads(json.dumps(nb))
    nb["cells"][2:2] = [task, answer, check, after]
    return nb


def write_run(runs: Path, name: str, seed: int, nb: dict, status: str = "ok") -> None:
    folder = runs / name / f"seed{seed}"
    folder.mkdir(parents=True)
    (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    run = {"notebook": name, "seed": seed, "preset": "smoke", "status": status}
    (folder / "run.json").write_text(json.dumps({**run, "wall_time_s": 3.2}))


def stand_in_repo(root: Path) -> None:
    """The book's configuration (the real one) and pages like the repository's."""
    shutil.copytree(ROOT / "docs" / "book", root / "docs" / "book")
    (root / "docs" / "figures").mkdir(parents=True)
    (root / "docs" / "figures" / "demo.png").write_bytes(PAPER_FIGURE)
    (root / "docs" / "RESULTS.md").write_text(
        "# What reproduces\n\n"
        "| notebook | claims |\n|---|---|\n| [00_demo](#demo-cpu) | 1 of 1 hold |\n\n"
        '<a id="demo-cpu"></a>\n\n## 00_demo at `cpu`\n\n'
        "![ours beside the paper's](figures/demo.png)\n\n"
        "The notebook: [00_demo](../notebooks/00_demo.ipynb).\n"
    )
    readme = root / "flkit" / "papers" / "demo" / "README.md"
    readme.parent.mkdir(parents=True)
    readme.write_text("# The demo paper (notebook `00_demo`)\n\nOur decisions.")
    template = root / "flkit" / "papers" / "_template" / "README.md"
    template.parent.mkdir(parents=True)
    template.write_text("# <Paper title>\n")


@pytest.fixture()
def stand_in(tmp_path):
    root, runs = tmp_path / "repo", tmp_path / "runs"
    stand_in_repo(root)
    write_run(runs, "00_demo", 0, with_exercise(notebook("Demo primer", "red figure", RED)))
    write_run(runs, "01_other", 1, notebook("Other, seed one", "seed one", RED))
    write_run(runs, "01_other", 0, notebook("Other paper", "seed zero", BLUE))
    return root, runs


class Images:
    """<img src> and <a href> of an HTML page, read with a regex of its own (not the module's)."""

    def __init__(self, path: Path):
        self.text = path.read_text(encoding="utf-8")
        self.images = re.findall(r"<img\b[^>]*?\bsrc=\"([^\"]+)\"", self.text)
        self.links = re.findall(r"<a\b[^>]*?\bhref=\"([^\"]+)\"", self.text)


PAGES = [
    "index",
    "notebooks/00_demo",
    "notebooks/01_other",
    "docs/RESULTS",
    "flkit/papers/demo/README",
]


@pytest.mark.slow
def test_book_builds_every_page_and_figure_from_stored_outputs(stand_in, tmp_path):
    pytest.importorskip("myst_nb", reason="the book extra (flkit[book], Python 3.11+)")
    root, runs = stand_in
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    html = book.build(runs, tmp_path / "book", root=root, quiet=True)

    assert html == tmp_path / "book" / "_build" / "html"
    for page in PAGES:
        assert (html / f"{page}.html").is_file(), page
    assert not (html / "flkit" / "papers" / "_template" / "README.html").exists()

    # every image of every page is on disk
    pages = [p for p in html.rglob("*.html") if not p.relative_to(html).parts[0].startswith("_")]
    assert len(pages) >= len(PAGES)
    for page in pages:
        for src in Images(page).images:
            if not src.startswith(("http:", "https:", "data:")):
                assert (page.parent / src.split("?")[0]).is_file(), (page, src)

    def shown(page: str) -> list[bytes]:
        path = html / f"{page}.html"
        return [(path.parent / s).read_bytes() for s in Images(path).images if "_images" in s]

    # each notebook page shows its own figure; 01_other is its lowest seed's (blue, seed zero)
    assert shown("notebooks/00_demo") == [RED]
    assert shown("notebooks/01_other") == [BLUE]
    other = (html / "notebooks" / "01_other.html").read_text(encoding="utf-8")
    assert "seed zero printed" in other and "seed one" not in other
    # the results page shows its figure from docs/; its anchor and notebook link resolve
    assert shown("docs/RESULTS") == [PAPER_FIGURE]
    results = Images(html / "docs" / "RESULTS.html")
    assert 'id="demo-cpu"' in results.text and "#demo-cpu" in results.links
    assert "../notebooks/00_demo.html" in results.links
    # the front page leads to every page, and says at which preset the notebooks ran
    index = Images(html / "index.html")
    for page in PAGES[1:]:
        assert f"{page}.html" in index.links, page
    assert "smoke" in index.text

    # nothing ran: the outputs are the stored ones, the run folder is as it was
    demo = (html / "notebooks" / "00_demo.html").read_text(encoding="utf-8")
    assert "red figure printed" in demo
    assert "0%|" not in demo  # the widget view's repr is not shown
    assert before == {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    published = json.loads((tmp_path / "book" / "src" / "notebooks" / "00_demo.ipynb").read_text())
    assert "widgets" not in published["metadata"]
    # formulas render from the site's own MathJax
    assert (html / "_static" / "mathjax" / "MathJax.js").is_file()
    assert "_static/mathjax/MathJax.js" in demo
    # a cell's Markdown output shows its table as a table, not as lines of pipes
    cells = re.findall(r"<table\b.*?</table>", demo, flags=re.DOTALL)
    assert any(re.search(r"<td[^>]*>\s*(?:<p>)?rounds", t) for t in cells), cells
    assert "| rounds |" not in demo
    # the book's own styles are on every page
    assert (html / "_static" / "book.css").is_file()
    assert "_static/book.css" in demo
    # a styled table's cells are padded (the theme pads only its own tables: "59.114.3")
    css = (html / "_static" / "book.css").read_text(encoding="utf-8")
    padded = r"\.output table th \{\s*padding: [0-9.]+rem [0-9.]*[1-9]"
    assert re.search(padded, css)
    # the exercise as a student gets it: the stub, the visible check, no answer, no verdict
    assert "NotImplementedError" in demo and "check_bytes" in demo
    for answer in (SOLUTION_LINE, HIDDEN_LINE, "BEGIN SOLUTION", "628000", VERDICT):
        assert answer not in demo, answer
    assert "after the exercises" in demo  # a cell after them keeps its output
    note = re.search(r'<div class="admonition note">(.*?)</div>', demo, flags=re.DOTALL)
    assert note and "as a student receives them" in note.group(1)


def test_publishable_drops_widgets_and_keeps_figures_as_png():
    svg = "<svg xmlns='http://www.w3.org/2000/svg'/>"
    nb = notebook("T", "t", RED)
    outputs = nb["cells"][1]["outputs"]
    outputs[1]["data"]["image/svg+xml"] = svg
    outputs.append(
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                WIDGET: {"model_id": "demo"},
                "image/png": base64.b64encode(BLUE).decode(),
                "text/plain": "interactive demo; static copy: PNG",
            },
        }
    )
    out = book.publishable(nb, "t")

    kept = out["cells"][1]["outputs"]
    assert [o["output_type"] for o in kept] == ["display_data", "stream", "display_data"]
    assert set(kept[0]["data"]) == {"image/png", "text/plain"}
    assert base64.b64decode(kept[2]["data"]["image/png"]) == BLUE  # the demo's static copy
    assert WIDGET not in kept[2]["data"]
    assert "widgets" not in out["metadata"]
    assert "widgets" in nb["metadata"]  # the input is left as it was

    only_svg = notebook("T", "t", RED)
    data = only_svg["cells"][1]["outputs"][1]["data"]
    del data["image/png"]
    data["image/svg+xml"] = svg
    with pytest.raises(FlkitError, match=r"figs: cell 1 .*image/svg\+xml without a PNG"):
        book.publishable(only_svg, "figs")


def test_publishable_shows_the_exercises_as_the_student_release_does():
    executed = with_exercise(notebook("T", "t", RED))
    out = book.publishable(executed, "t")

    text = json.dumps(out)
    for answer in (SOLUTION_LINE, HIDDEN_LINE, "SOLUTION", "HIDDEN TESTS", "628000", VERDICT):
        assert answer not in text, answer
    # the note sits where the exercise's cells begin, before the answer cell
    ids = [c.get("id") for c in out["cells"]]
    assert ids == [
        "m1",
        "c1",
        "task",
        book.EXERCISES_NOTE_ID,
        "ex_answer",
        "ex_check",
        "after",
        "c2",
    ]
    answer, check = out["cells"][4], out["cells"][5]
    # nbgrader's stub in place of the solution region, indented as it was; the check keeps its
    # visible line; neither keeps an output or an execution count
    assert answer["source"] == (
        'def upload_bytes():\n    """Bytes of one upload."""\n'
        "    # YOUR CODE HERE\n    raise NotImplementedError()"
    )
    assert check["source"] == "verdict = check_bytes(upload_bytes)"
    for cell in (answer, check):
        assert cell["outputs"] == [] and cell["execution_count"] is None
        assert (
            cell["metadata"] == executed["cells"][executed_index(executed, cell["id"])]["metadata"]
        )
    # every other cell is the same as without the exercise
    plain = book.publishable(notebook("T", "t", RED), "t")
    others = [
        c
        for c in out["cells"]
        if c.get("id") not in (book.EXERCISES_NOTE_ID, "ex_answer", "ex_check")
    ]
    executed_rest = [c for c in executed["cells"] if c["id"] in ("task", "after")]
    assert others == plain["cells"][:2] + executed_rest + plain["cells"][2:]
    assert "BEGIN SOLUTION" in json.dumps(executed)  # the input is left as it was


def executed_index(nb: dict, cell_id: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c.get("id") == cell_id)


def test_a_solution_outside_a_graded_cell_stops_the_book_with_the_notebook_named():
    nb = notebook("T", "t", RED)
    nb["cells"][2]["source"] = "x = 1\n### BEGIN SOLUTION\nx = 2\n### END SOLUTION"
    with pytest.raises(FlkitError, match=r"leaky: nbgrader cannot make the student version"):
        book.publishable(nb, "leaky")


def test_the_book_gives_each_exercise_the_student_releases_source(student_release):
    """The book strips the notebooks' exercises exactly as `flkit course student` does: for every
    graded cell of every workbook notebook, the same source."""
    from notebook_cells import NOTEBOOKS

    for name, path in NOTEBOOKS.items():
        published = book.publishable(json.loads(path.read_text(encoding="utf-8")), name)
        released = json.loads((student_release / f"{name}.ipynb").read_text(encoding="utf-8"))
        want = {c["id"]: "".join(c["source"]) for c in released["cells"] if is_graded(c)}
        got = {c["id"]: "".join(c["source"]) for c in published["cells"] if is_graded(c)}
        assert len(want) >= 6 and got == want, name


def test_a_notebook_over_the_limit_stops_the_build_with_its_name(stand_in, tmp_path):
    pytest.importorskip("jupyter_server_mathjax", reason="the book extra (flkit[book])")
    root, runs = stand_in
    # random bytes do not compress: the PNG's base64 text alone passes 1.5 MB
    big = png(1, 1, (0, 0, 0)) + os.urandom(1_200_000)
    write_run(runs, "02_big", 0, notebook("Big", "big", big))
    with pytest.raises(FlkitError, match=r"02_big/seed0/02_big\.ipynb is 1\.\d\d MB .* 1\.5 MB"):
        book.assemble(runs, tmp_path / "src", root=root)


def test_a_failed_run_or_an_empty_folder_stops_the_build(tmp_path):
    write_run(tmp_path / "runs", "03_broken", 0, notebook("B", "b", RED), status="failed")
    with pytest.raises(FlkitError, match=r"03_broken/seed0 is recorded as failed"):
        book.executed_notebooks(tmp_path / "runs")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FlkitError, match="no executed notebook in"):
        book.executed_notebooks(tmp_path / "empty")


def test_site_check_names_missing_pages_images_files_and_anchors(tmp_path):
    html = tmp_path / "html"
    (html / "_images").mkdir(parents=True)
    (html / "_images" / "ok.png").write_bytes(RED)
    (html / "a.html").write_text(
        '<h1 id="top">A</h1><img src="_images/ok.png"><img src="_images/gone.png">'
        '<a href="#top">up</a><a href="#nowhere">x</a><a href="b.html#there">b</a>'
        '<a href="c.html">c</a><a href="https://example.org/#x">web</a>'
        '<p>cost: <code>$HOME</code> <span class="math">\\(w\\)</span> and <div class="math">'
        "<p>\\[w\\]</p></div></p><p>left as source: $w_k$</p>"
        "<p>| a | b | |\u2014|\u2014|</p><pre>| code | keeps |\n|---|---|</pre>"
        '<pre><span class="c1">### BEGIN SOLUTION</span>\nx = 2</pre>'
    )
    (html / "b.html").write_text('<p id="elsewhere">B</p>')

    problems = check_site(html, ["a", "b", "d"], figures={"a": 3})

    assert sorted(problems) == sorted(
        [
            "page d.html is missing",
            "a.html: image _images/gone.png is missing",
            "a.html: link #nowhere points to a missing anchor",
            "a.html: link b.html#there points to a missing anchor",
            "a.html: link c.html points to a missing file",
            "a.html shows 2 figure(s); its notebook has 3 PNG output(s)",
            "a.html: a formula is not rendered: ...left as source: $w_k$...",
            "a.html: a Markdown table is not rendered: ...| a | b | |\u2014|\u2014|...",
            "a.html: shows an exercise's 'BEGIN SOLUTION' region",
        ]
    )
    (html / "_images" / "gone.png").write_bytes(RED)
    (html / "c.html").write_text('<p id="there">C</p>')
    (html / "b.html").write_text('<p id="there">B</p>')
    (html / "a.html").write_text(
        (html / "a.html")
        .read_text()
        .replace('href="#nowhere"', 'href="#top"')
        .replace("$w_k$", "")
        .replace("|\u2014|\u2014|", "")
        .replace("### BEGIN SOLUTION", "# YOUR CODE HERE")
    )
    assert check_site(html, ["a", "b"], figures={"a": 2}) == []


def test_several_run_folders_give_each_notebook_from_the_first_that_holds_it(tmp_path):
    """The published runs live in one `--out` folder per preset: a notebook comes from the
    first folder listed that holds it, the others fill in the rest."""
    long, cpu = tmp_path / "long", tmp_path / "cpu"
    write_run(long, "01_other", 0, notebook("Other at long", "long", RED))
    write_run(cpu, "01_other", 0, notebook("Other at cpu", "cpu", BLUE))
    write_run(cpu, "00_demo", 2, notebook("Demo at cpu", "cpu", RED))
    found = book.executed_notebooks([long, cpu])
    assert {k: (v["path"].parent.parent.parent.name, v["seed"]) for k, v in found.items()} == {
        "01_other": ("long", 0),
        "00_demo": ("cpu", 2),
    }
    # the book lists them in notebook order, whichever folder each came from
    assert list(found) == ["00_demo", "01_other"]
    with pytest.raises(FlkitError, match=r"runs=\[\]"):
        book.executed_notebooks([])
