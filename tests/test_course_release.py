"""`flkit course release` never destroys an instructor notebook: a release folder that is, lies
inside or holds the notebooks' own folder is refused, and so is one that holds a notebook with
solutions under a released name; nothing is written then. Tested on a copy of the repository's
layout (a project folder with notebooks/ holding the instructor notebook 00)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from flkit.utils import FlkitError

ROOT = Path(__file__).resolve().parent.parent
PRIMER = ROOT / "notebooks" / "00_fl_primer.ipynb"


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the repository's layout: <project>/notebooks/00_fl_primer.ipynb."""
    (tmp_path / "project" / "notebooks").mkdir(parents=True)
    shutil.copy(PRIMER, tmp_path / "project" / "notebooks" / PRIMER.name)
    return tmp_path / "project"


def _solutions(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("### BEGIN SOLUTION")


@pytest.mark.parametrize(
    ("where", "how"),
    [("notebooks", "is"), ("notebooks/release", "lies inside"), (".", "holds")],
    ids=["the source", "inside the source", "holding the source"],
)
def test_a_release_folder_at_the_source_is_refused(project, monkeypatch, capsys, where, how):
    """The issue's case: `flkit course release notebooks --only 00` run from the project root
    (its own source folder) and its two neighbours, through the command line."""
    from flkit.cli import main

    source = project / "notebooks"
    before = (source / PRIMER.name).read_bytes()
    listing = sorted(p.relative_to(project) for p in project.rglob("*"))
    monkeypatch.chdir(project)
    argv = ["course", "release", where, "--notebooks", "notebooks", "--only", "00"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{how} the instructor notebooks' folder {source.resolve()}" in err, err
    assert f"release folder {where} " in err, err
    assert (source / PRIMER.name).read_bytes() == before
    assert _solutions(source / PRIMER.name) >= 3  # what a release there would have removed
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == listing  # no new folder


def test_the_default_source_is_protected(project, monkeypatch):
    """Without --notebooks the source is $FLKIT_NOTEBOOKS (else the checkout's notebooks/): a
    release into it by a relative or a symlinked path is refused all the same."""
    from flkit.course.nbgrader_run import release

    monkeypatch.setenv("FLKIT_NOTEBOOKS", str(project / "notebooks"))
    monkeypatch.chdir(project)
    os.symlink(project / "notebooks", project / "link")
    for dest in ("notebooks", "./notebooks/", "link"):
        with pytest.raises(FlkitError, match="is the instructor notebooks' folder"):
            release(dest, only=["00"])
    assert _solutions(project / "notebooks" / PRIMER.name) == _solutions(PRIMER)


def test_a_notebook_with_solutions_in_the_release_folder_is_never_overwritten(project, tmp_path):
    """An instructor copy kept in the release folder (or hidden tests alone) is refused by its
    path, with nothing written: not even a second notebook's release."""
    from flkit.course.nbgrader_run import release

    dest = tmp_path / "course" / "release"
    dest.mkdir(parents=True)
    kept = dest / PRIMER.name
    shutil.copy(PRIMER, kept)
    before = kept.read_bytes()
    said = rf"{re.escape(str(kept))} holds '### BEGIN SOLUTION'.*instructor notebook"
    with pytest.raises(FlkitError, match=said):
        release(dest, project / "notebooks", only=["00"])
    assert kept.read_bytes() == before
    assert sorted(dest.iterdir()) == [kept]
    # hidden tests alone mark an instructor notebook too
    nb = json.loads(before)
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        c["source"] = src.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")
    kept.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(FlkitError, match="'### BEGIN HIDDEN TESTS'"):
        release(dest, project / "notebooks", only=["00"])


@pytest.mark.slow
def test_an_earlier_release_is_replaced(project, tmp_path):
    """What stays allowed: releasing again over a student version (no solutions in it)."""
    pytest.importorskip("nbgrader")
    from flkit.course.nbgrader_run import release

    dest = tmp_path / "course" / "release"
    (path,) = release(dest, project / "notebooks", only=["00"])
    first = path.read_bytes()
    path.write_text(first.decode("utf-8").replace("raise NotImplementedError", "pass"))
    (again,) = release(dest, project / "notebooks", only=["00"])
    assert again == path and path.read_bytes() == first
    assert _solutions(path) == 0 and _solutions(project / "notebooks" / PRIMER.name) > 0
