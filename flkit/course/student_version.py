"""The graded cells of a notebook as the student release writes them, without the rest of the
release.

The book (:mod:`flkit.reproduce.book`) publishes executed notebooks: it must show each exercise as
a student gets it while keeping every other cell's outputs, which nbgrader's release step
(``generate_assignment``, :mod:`.course_dir`) would clear as well. :func:`student_sources` runs
that step's own ``ClearSolutions`` and ``ClearHiddenTests``, configured as the release configures
them (:func:`.course_dir.release_config`), over a copy of the notebook, and returns the new source
of each graded cell; the caller decides what else to do with those cells.
"""

from __future__ import annotations

import json

from ..utils import FlkitError
from .course_dir import release_config

__all__ = ["INSTRUCTOR_MARKERS", "is_graded", "student_sources"]

#: nbgrader's delimiters of what only the instructor version holds: the release removes each region
#: they open, so no student version (and no page built from one) may show them
INSTRUCTOR_MARKERS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")


def is_graded(cell: dict) -> bool:
    """Whether ``cell`` (JSON) is part of a graded exercise: an answer cell (nbgrader
    ``solution``) or a check cell (nbgrader ``grade``)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("solution") or meta.get("grade"))


def student_sources(nb: dict, name: str) -> dict[int, str]:
    """``{cell index: source}`` of every graded cell of ``nb`` (a notebook as JSON) as the student
    release writes it: solutions replaced by nbgrader's stub, hidden tests removed. ``nb`` is left
    as it was. FlkitError naming ``name`` when nbgrader refuses the notebook (a solution or
    hidden-test region outside a graded cell, an unclosed region, a kernel language it has no
    stub for) or is not installed."""
    c = release_config()
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    # nbformat's reader joins list-of-lines sources into the strings nbgrader edits
    node = nbformat.reads(json.dumps(nb), as_version=4)
    resources: dict = {}
    try:
        # in the release's order (generate_assignment: ClearSolutions, then ClearHiddenTests)
        for step in (ClearSolutions, ClearHiddenTests):
            node, resources = step(config=c).preprocess(node, resources)
    except (RuntimeError, ValueError) as e:
        raise FlkitError(
            f"{name}: nbgrader cannot make the student version: {e}; accepted: solution regions "
            "only in answer cells and hidden tests only in check cells (nbgrader metadata), "
            "each region closed"
        ) from e
    return {
        index: cell.source for index, cell in enumerate(node.cells) if is_graded(nb["cells"][index])
    }
