"""What <paper> reports, for the notebook's "paper reports / we measured" tables.

<Authors>, "<title>", <venue year>. Every entry says where in the paper it comes from (table,
figure, section); ``None`` means the paper does not give it; a value we compute from printed ones
says "derived" and how.
"""

from __future__ import annotations

TITLE = "<paper title>"
CITATION = "<authors, venue year>"

NUMBERS: dict = {
    # "final_accuracy": {"mnist": 0.97},   # Table 2, row "<method>"
}
