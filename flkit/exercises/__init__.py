"""Notebook-specific helpers (exercises), one module per notebook topic."""
