"""flkit: a teaching and reproduction workbook for federated learning.

The shape of every experiment is one function call per arrow:
data -> partition -> model -> method (client update, aggregate) -> history -> table/figure.
"""

__version__ = "0.2.0"

from .utils import configure_threads as _configure_threads

_configure_threads()
