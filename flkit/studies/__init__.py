"""Notebook-specific helpers (studies), one module per notebook topic."""
