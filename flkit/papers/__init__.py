"""One sub-package per paper notebook: ``flkit/papers/<slug>/`` for ``notebooks/NN_<slug>.ipynb``.

Each folder holds the same files: ``preset.toml`` (the notebook's smoke/cpu/paper settings),
``numbers.py`` (what the paper reports, with where it comes from), ``study.py`` (experiment
drivers), ``claims.py`` (claim verdicts with named thresholds), ``figures.py``, ``exercise.py``
and ``README.md`` (the paper in this project's words). ``_template/`` is the folder to copy for a
new paper (``docs/ADDING_A_PAPER.md``); it is not a paper.
"""
