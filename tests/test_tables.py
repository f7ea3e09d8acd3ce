"""flkit.workbook.tables: what a captioned table shows, read from its rendered HTML, and each
kind of cell by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from styled_table import caption, cells

from flkit.workbook.tables import MISSING, captioned, cell_text


def test_a_captioned_table_is_rounded_titled_above_and_dashes_missing_values():
    table = pd.DataFrame({"acc": [91.2345, math.nan]}, index=["fedavg", "hidenseek"])
    shown = captioned(table, "Table 1: final accuracy (%)", 1)
    assert caption(shown) == ["Table 1: final accuracy (%)"]
    assert "caption-side: top" in shown.to_html() and "font-weight: bold" in shown.to_html()
    assert cells(shown) == ["91.2", MISSING]  # 1 decimal; NaN as a dash
    assert table.loc["fedavg", "acc"] == 91.2345  # the caller's table is untouched


def test_an_object_table_shows_no_none():
    # target_evidence-like: a paper value missing, a target not reached in one seed, words
    table = pd.DataFrame(
        [
            {"indicator": "STC: rounds", "paper": 157, "ours": None, "per seed": [None, 53.0]},
            {"indicator": "share", "paper": None, "ours": 0.881, "per seed": [0.925, 0.838]},
        ],
        dtype=object,
    )
    shown = cells(captioned(table, "evidence"))
    assert "None" not in " ".join(shown)
    assert shown == ["STC: rounds", "157", MISSING, f"{MISSING}, 53.0", "share", MISSING, "0.881",
                     "0.925, 0.838"]  # fmt: skip


@pytest.mark.parametrize(
    "value, digits, shown",
    [
        (None, 2, MISSING),
        (math.nan, None, MISSING),
        (np.float64("nan"), 3, MISSING),
        (np.int64(197), 2, "197"),
        (True, 2, "True"),
        (0.1 + 0.2, None, "0.30000000000000004"),  # digits None: the value as it is
        (2.0 / 3.0, 3, "0.667"),
        ("met", 1, "met"),
        ((1, None, 2.5), 1, f"1, {MISSING}, 2.5"),
    ],
)
def test_cell_text_by_hand(value, digits, shown):
    assert cell_text(value, digits) == shown
