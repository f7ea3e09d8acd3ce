"""Tables as a notebook shows them: titled, rounded, with a dash where a value is missing.

pandas' ``Styler`` does the work; what is written once here is the house look, so that two tables
shown one under the other read as two captioned tables and not as one long one, and a missing value
(a target never reached, a number the paper does not give) reads as a dash, not as ``None``."""

from __future__ import annotations

import math
import numbers

import pandas as pd

__all__ = ["MISSING", "captioned", "cell_text"]

#: what a missing value (None, NaN) shows as
MISSING = "–"
#: the caption above the table, in bold (a Styler puts it below in some front ends)
_CAPTION_STYLE = [{"selector": "caption", "props": "caption-side: top; font-weight: bold;"}]


def cell_text(value, digits: int | None = None) -> str:
    """One cell as shown: None and NaN as :data:`MISSING`, a real with ``digits`` decimals (None:
    as it is, e.g. already rounded to 3 significant digits), a list or tuple as its items joined
    by commas, anything else as ``str``."""
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v, digits) for v in value)
    if value is None or value is pd.NA or (isinstance(value, numbers.Real) and math.isnan(value)):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    return f"{value:.{digits}f}" if digits is not None else repr(float(value))


def captioned(table: pd.DataFrame, caption: str, digits: int | None = None):
    """``table`` as a Styler with ``caption`` above it, in bold, each cell as :func:`cell_text`
    shows it (reals with ``digits`` decimals)."""
    return (
        table.style.set_caption(caption)
        .set_table_styles(_CAPTION_STYLE)
        .format(lambda v: cell_text(v, digits))
    )
