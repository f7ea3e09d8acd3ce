"""What a pandas Styler shows, read from its rendered HTML (the captioned tables' tests)."""

from __future__ import annotations

import re


def cells(styler) -> list[str]:
    """The data cells of a rendered Styler, row by row."""
    return re.findall(r"<td [^>]*>([^<]*)</td>", styler.to_html())


def caption(styler) -> list[str]:
    """The caption(s) of a rendered Styler."""
    return re.findall(r"<caption>([^<]*)</caption>", styler.to_html())
