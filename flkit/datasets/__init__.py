"""File readers and generators behind :func:`flkit.data.load` (use that as the entry point)."""
