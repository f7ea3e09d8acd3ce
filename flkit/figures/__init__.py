"""Notebook-specific helpers (figures), one module per notebook topic."""
