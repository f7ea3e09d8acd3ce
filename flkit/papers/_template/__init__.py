"""<Paper title>: the files that exist only for ``notebooks/NN_<slug>.ipynb``.

Copy this folder to ``flkit/papers/<slug>/`` (see docs/ADDING_A_PAPER.md) and replace every
``<...>`` placeholder. Folders whose name starts with ``_`` are not papers.
"""
