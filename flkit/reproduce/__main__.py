"""``python -m flkit.reproduce``."""

import sys

from .command import main

sys.exit(main())
