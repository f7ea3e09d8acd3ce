"""flkit: a teaching and reproduction workbook for federated learning.

The shape of every experiment is one function call per arrow:
data -> partition -> model -> method (client update, aggregate) -> history -> table/figure.
"""

__version__ = "0.2.0"

from .utils import FlkitError as _FlkitError
from .utils import configure_threads as _configure_threads

try:
    _configure_threads()
except _FlkitError as _bad:
    # a bad $FLKIT_THREADS is found at import, before any command can report it: one line and
    # the bad-input exit status (2) instead of a traceback through the import machinery
    import sys as _sys

    print(f"flkit: error: {_bad}", file=_sys.stderr)
    raise SystemExit(2) from None
