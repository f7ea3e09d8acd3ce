"""What sits behind :func:`flkit.data.load` (use that as the entry point): ``sources`` (the data
root, the offline mirror, downloads, the not-found error), ``files`` (file readers), ``shaping``
(subsets and splits) and ``synthetic`` (a generated dataset)."""
