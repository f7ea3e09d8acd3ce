"""The book: the executed notebooks of a ``flkit reproduce`` run folder, the results page and the
paper READMEs as one static site, rendered by Sphinx with MyST-NB (docs/book/README.md).

``python -m flkit.reproduce.book --runs DIR [DIR ...] --out DIR`` (``make book``):

1. takes from the run folder, per notebook, the executed notebook of its lowest seed
   (``<runs>/<notebook>/seed<k>/<notebook>.ipynb``, as ``flkit reproduce --out`` writes it); a
   run recorded as failed stops the build;
2. publishes a copy of each: the graded exercises as the student release shows them (answer
   cells with nbgrader's stub, check cells without their hidden tests, neither with outputs: an
   executed answer and its check's "right" would give the answer away), widget state and widget
   views dropped (a static page cannot run them; a demo's PNG copy stays), every figure a PNG,
   the file under 1.5 MB, else the build stops naming the notebook;
3. lays out a source folder that mirrors the repository (``notebooks/``, ``docs/RESULTS.md``,
   ``flkit/papers/<slug>/README.md``, with the local files they show), so the links between them
   work in the book as in the checkout;
4. runs Sphinx with execution off, then checks the site (:mod:`.book_site`): every page, every
   image and every local link and anchor exists, no formula or table is left as source, and
   no page shows a solution or hidden-test region.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from string import Template

from ..course.student_version import student_sources
from ..utils import FlkitError
from .book_site import check_site
from .plan import RUN_FILE, SOURCE_ROOT

__all__ = [
    "NOTEBOOK_LIMIT_BYTES",
    "executed_notebooks",
    "publishable",
    "assemble",
    "build",
    "main",
]

#: the largest executed notebook the book publishes (bytes, after stripping)
NOTEBOOK_LIMIT_BYTES = 1_500_000

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# image types a figure may also carry; the book keeps only the PNG, which every figure must have
OTHER_IMAGES = ("image/svg+xml", "application/pdf", "image/jpeg", "image/gif")
# what the published page says where the exercises begin: their check cells show no output
EXERCISES_NOTE = (
    "```{note}\nThe exercises are shown as a student receives them: each answer cell holds a "
    "stub to replace, and a check cell shows its verdict only once the notebook runs.\n```"
)
EXERCISES_NOTE_ID = "book-exercises-note"
_SEED_DIR = re.compile(r"seed(\d+)")
# relative targets of Markdown images and links, and of HTML src/href attributes
_MD_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_TARGET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def executed_notebooks(runs) -> dict[str, dict]:
    """``{notebook: {"path", "seed", "run"}}`` for every notebook that ``runs`` holds, its lowest
    seed; ``run`` is its run.json (``{}`` when there is none). ``runs``: one folder or several
    (the published runs of different presets, each from its own ``--out``): a notebook comes from
    the first folder that holds it; in notebook order either way. FlkitError when none is found
    or a chosen run is recorded as failed."""
    if isinstance(runs, (list, tuple)):
        if not runs:
            raise FlkitError("runs=[]; accepted: one or more `flkit reproduce --out` folders")
        found = {}
        for folder in runs:
            for name, nb in executed_notebooks(folder).items():
                found.setdefault(name, nb)
        return dict(sorted(found.items()))  # notebook order, not the order the folders came in
    runs = Path(runs)
    if not runs.is_dir():
        raise FlkitError(
            f"run folder {str(runs)!r} does not exist; accepted: a folder written by "
            "`flkit reproduce --out DIR`"
        )
    found = {}
    for folder in sorted(p for p in runs.iterdir() if p.is_dir()):
        seeds = sorted(
            int(m.group(1))
            for d in folder.iterdir()
            if (m := _SEED_DIR.fullmatch(d.name)) and (d / f"{folder.name}.ipynb").is_file()
        )
        if not seeds:
            continue
        run_dir = folder / f"seed{seeds[0]}"
        run_file = run_dir / RUN_FILE
        run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else {}
        if run.get("status", "ok") != "ok":
            raise FlkitError(
                f"{run_dir} is recorded as {run['status']} ({run_file}): the book publishes "
                f"finished runs only; run it again with `flkit reproduce --only {folder.name}`"
            )
        notebook = run_dir / f"{folder.name}.ipynb"
        found[folder.name] = {"path": notebook, "seed": seeds[0], "run": run}
    if not found:
        raise FlkitError(
            f"no executed notebook in {runs}; expected <notebook>/seed<k>/<notebook>.ipynb as "
            f"`flkit reproduce --out {runs}` writes"
        )
    return found


def _as_student_sees(nb: dict, name: str) -> int | None:
    """Give every graded cell of ``nb`` (in place) the source of the student release
    (:mod:`flkit.course.student_version`) and no outputs; returns the index of the first
    (None: the notebook has no exercise)."""
    sources = student_sources(nb, name)
    for index, source in sources.items():
        cell = nb["cells"][index]
        cell["source"] = source
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return min(sources, default=None)


def _exercises_note(nb: dict) -> dict:
    note = {"cell_type": "markdown", "metadata": {}, "source": EXERCISES_NOTE}
    if nb.get("nbformat", 4) > 4 or nb.get("nbformat_minor", 0) >= 5:
        note["id"] = EXERCISES_NOTE_ID  # cell ids exist from nbformat 4.5 on, and only there
    return note


def publishable(nb: dict, name: str) -> dict:
    """``nb`` (a notebook as JSON) as the book shows it: every graded exercise as the student
    release shows it, without outputs, below a note that says so; without widget state or widget
    views; every figure a PNG alone. FlkitError naming the cell when a figure has no PNG, and
    naming the notebook when nbgrader cannot make its student version."""
    nb = json.loads(json.dumps(nb))
    first_graded = _as_student_sees(nb, name)
    nb.get("metadata", {}).pop("widgets", None)
    for index, cell in enumerate(nb.get("cells", [])):
        if "outputs" not in cell:
            continue
        kept = []
        for out in cell["outputs"]:
            data = out.get("data")
            if data is None:
                kept.append(out)
                continue
            if data.pop(WIDGET_VIEW, None) is not None and set(data) <= {"text/plain"}:
                continue  # the text of a widget view is the widget's repr, not content
            others = [k for k in OTHER_IMAGES if k in data]
            if others and "image/png" not in data:
                raise FlkitError(
                    f"{name}: cell {index} shows a figure as {', '.join(others)} without a PNG; "
                    "the book publishes figures as PNG (matplotlib's inline default)"
                )
            for k in others:
                del data[k]
                out.get("metadata", {}).pop(k, None)
            kept.append(out)
        cell["outputs"] = kept
    if first_graded is not None:  # inserted last, so the cell numbers above are the notebook's
        nb["cells"].insert(first_graded, _exercises_note(nb))
    return nb


def _write_notebook(src: Path, dst: Path, name: str) -> dict:
    """Write the publishable copy of the executed notebook ``src`` to ``dst``; returns it."""
    nb = publishable(json.loads(src.read_text(encoding="utf-8")), name)
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    size = len(text.encode("utf-8"))
    if size > NOTEBOOK_LIMIT_BYTES:
        raise FlkitError(
            f"{src} is {size / 1e6:.2f} MB without its widget state; the book publishes "
            f"notebooks up to {NOTEBOOK_LIMIT_BYTES / 1e6:.1f} MB: save smaller figures "
            "(fewer, or a lower dpi) in that notebook"
        )
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8")
    return nb


def _copy_shown_files(text: str, where: Path, root: Path, src: Path, pages: set[Path]) -> None:
    """Copy into ``src`` every local file that ``text``, a page in the folder ``where`` under
    ``root``, shows or links to and that is not itself a page of the book, at the same path
    relative to ``root``."""
    for target in _MD_TARGET.findall(text) + _HTML_TARGET.findall(text):
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path) or path.startswith("/"):
            continue  # an anchor on the page itself, a URL, or an absolute path
        file = (where / path).resolve()
        if file in pages or not file.is_file() or not file.is_relative_to(root):
            continue
        dst = src / file.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dst)


def _markdown(nb: dict) -> str:
    return "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb.get("cells", [])
        if c.get("cell_type") == "markdown"
    )


def _png_outputs(nb: dict) -> int:
    return sum(
        "image/png" in out.get("data", {})
        for cell in nb.get("cells", [])
        for out in cell.get("outputs", [])
    )


def _paper_readmes(root: Path, notebooks: list[str]) -> list[Path]:
    """Each paper folder's README, in the order of its notebook (``NN_<slug>``), others last."""
    order = {re.sub(r"^\d+_", "", n): i for i, n in enumerate(notebooks)}
    readmes = [
        p
        for p in (root / "flkit" / "papers").glob("*/README.md")
        if not p.parent.name.startswith("_")
    ]
    return sorted(readmes, key=lambda p: (order.get(p.parent.name, len(order)), p.parent.name))


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise FlkitError(
            "jupyter-server-mathjax is not installed; the book needs the `book` extra: "
            "pip install -e '.[book]'"
        )
    return Path(spec.submodule_search_locations[0]) / "static"


def _provenance(runs, chosen: dict[str, dict]) -> str:
    # several folders (one per published preset) have no one summary: the table says each preset
    folders = list(runs) if isinstance(runs, (list, tuple)) else [runs]
    summary_file = Path(folders[0]) / "summary.json"
    summary = (
        json.loads(summary_file.read_text(encoding="utf-8"))
        if len(folders) == 1 and summary_file.is_file()
        else {}
    )
    lines = []
    if summary:
        commit = str(summary.get("commit") or "")[:10] or "unknown"
        lines.append(
            f"The notebooks below were executed by `flkit reproduce` at preset "
            f"`{summary.get('preset')}`, finished {summary.get('finished')}, commit `{commit}`"
            + (" (with uncommitted changes)" if summary.get("dirty") else "")
            + "."
        )
    lines += ["", "| notebook | preset | seed | executed in |", "|---|---|---|---|"]
    presets = set()
    for name, item in chosen.items():
        run = item["run"]
        preset = run.get("preset") or run.get("parameters", {}).get("preset") or "?"
        presets.add(preset)
        wall = run.get("wall_time_s")
        lines.append(
            f"| [{name}](notebooks/{name}.ipynb) | `{preset}` | {item['seed']} | "
            + (f"{wall:.0f} s" if isinstance(wall, (int, float)) else "—")
            + " |"
        )
    # a run reads back every training its run cache holds: its wall time can be a few seconds
    lines += [
        "",
        "*Executed in* is the notebook's wall time in that run. A training found in the run cache "
        "(the same configuration, trained by an earlier run) is read back, not repeated, so a few "
        "seconds mean reused trainings, not a cheap preset; each notebook's introduction says "
        "what its preset costs from scratch.",
    ]
    if "smoke" in presets:
        lines += [
            "",
            "```{note}",
            "Preset `smoke` runs a few rounds on small data to check that every cell runs: its "
            "numbers and figures are not results. The results page holds the verdicts of the "
            "published `cpu` and `long` runs.",
            "```",
        ]
    return "\n".join(lines)


def assemble(runs, src: Path, root: Path = SOURCE_ROOT) -> tuple[dict, dict[str, int]]:
    """Lay out the book's Sphinx source folder ``src`` (emptied first) from the run folder(s)
    ``runs`` and the pages under ``root`` (the repository). Returns its pages by kind as document
    names (paths without suffix), and each notebook page's number of figures."""
    src, root = Path(src), Path(root).resolve()
    chosen = executed_notebooks(runs)
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    config = root / "docs" / "book"
    shutil.copy2(config / "conf.py", src / "conf.py")
    shutil.copytree(_mathjax_dir(), src / "_static" / "mathjax")
    shutil.copy2(config / "book.css", src / "_static" / "book.css")

    results = root / "docs" / "RESULTS.md"
    results = [results] if results.is_file() else []
    readmes = _paper_readmes(root, list(chosen))
    pages = {root / "notebooks" / f"{n}.ipynb" for n in chosen} | set(results) | set(readmes)
    figures = {}
    for name, item in chosen.items():
        nb = _write_notebook(item["path"], src / "notebooks" / f"{name}.ipynb", name)
        figures[f"notebooks/{name}"] = _png_outputs(nb)
        _copy_shown_files(_markdown(nb), root / "notebooks", root, src, pages)
    for page in results + readmes:
        dst = src / page.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(page, dst)
        _copy_shown_files(page.read_text(encoding="utf-8"), page.parent, root, src, pages)

    def names(paths):
        return [str(p.relative_to(root).with_suffix("")) for p in paths]

    docs = {
        "results": names(results),
        "notebooks": list(figures),
        "papers": names(readmes),
    }
    index = Template((config / "index.md").read_text(encoding="utf-8")).substitute(
        results="\n".join(docs["results"]),
        notebooks="\n".join(docs["notebooks"]),
        papers="\n".join(docs["papers"]),
        provenance=_provenance(runs, chosen),
    )
    (src / "index.md").write_text(index, encoding="utf-8")
    return docs, figures


def build(runs, out: Path, root: Path = SOURCE_ROOT, quiet: bool = False) -> Path:
    """Build the book from ``runs`` (one run folder or several: :func:`executed_notebooks`) into
    ``out`` (``out/src`` the Sphinx source, ``out/_build/html`` the site) and check the site;
    returns the site's folder. FlkitError when a page, an image or a local link is missing."""
    if importlib.util.find_spec("myst_nb") is None:
        raise FlkitError(
            "the book needs Sphinx and MyST-NB, the `book` extra (Python 3.11 or later): "
            "pip install -e '.[book]'"
        )
    out = Path(out)
    t0 = time.perf_counter()
    docs, figures = assemble(runs, out / "src", root)
    html = out / "_build" / "html"
    if html.parent.exists():
        shutil.rmtree(html.parent)  # a page dropped since the last build must not linger
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1"]
    cmd += ["-d", str(out / "_build" / "doctrees"), str(out / "src"), str(html)]
    done = subprocess.run(cmd)
    if done.returncode != 0:
        raise FlkitError(f"sphinx-build failed (exit {done.returncode}): {' '.join(cmd)}")
    pages = ["index", *(d for kind in docs.values() for d in kind)]
    problems = check_site(html, pages, figures)
    if problems:
        raise FlkitError(
            f"the book in {html} is incomplete:\n  "
            + "\n  ".join(problems[:40])
            + (f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else "")
        )
    if not quiet:
        print(
            f"book: {len(docs['notebooks'])} notebook(s), {len(docs['papers'])} paper README(s)"
            f"{', the results page' if docs['results'] else ''} in {html / 'index.html'} "
            f"({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
        )
    return html


def main(argv=None) -> int:
    """``python -m flkit.reproduce.book --runs DIR [DIR ...] [--out DIR]``."""
    p = argparse.ArgumentParser(
        prog="python -m flkit.reproduce.book",
        description="Render the executed notebooks of a `flkit reproduce --out DIR` folder, the "
        "results page and the paper READMEs as one static site; nothing is executed.",
    )
    p.add_argument(
        "--runs",
        required=True,
        nargs="+",
        metavar="DIR",
        help="`flkit reproduce` out folders; a notebook comes from the first that holds it",
    )
    p.add_argument(
        "--out",
        default="runs/book",
        metavar="DIR",
        help="where the source and the site go (site: DIR/_build/html; default: runs/book)",
    )
    args = p.parse_args(argv)
    try:
        build([Path(r) for r in args.runs], Path(args.out))
    except FlkitError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
