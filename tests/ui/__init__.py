"""Browser smoke test of the notebooks in JupyterLab (make test-ui)."""
