"""Data: datasets as device-resident tensors, the copies read, and their split over clients.

    ds = data.load("mnist")                          # Dataset: x_train, y_train, x_test, ...
    parts = data.partition.partition("dirichlet", ds.y_train, 100, seed=0, alpha=0.5)

Inside: `loading` (load, Dataset, normalisation), `sources` (the data root, the offline mirror,
downloads), `files` (file readers), `shaping` (subsets and splits), `synthetic` (a generated
dataset), `provenance` (which copy was read, the full-data rule), `partition` (the client split
schemes), `admin` (the `flkit data` command), `public_sources`, `source_readers` and `prepare`
(`flkit data prepare`: each dataset built from its public source) and `published_copies` (the
copies the published verdicts used, beside those a run reads).
"""

from . import partition
from .files import CorruptDataError
from .loading import GROUPED, KWARGS, NORMALIZATION, Dataset, clear_cache, identity, load
from .provenance import ReducedDataError
from .sources import (
    DATASETS,
    DOWNLOADABLE,
    DataNotFoundError,
    data_root,
    download,
    is_online,
    locate,
    mirror_dir,
)

__all__ = [
    "DATASETS",
    "DOWNLOADABLE",
    "GROUPED",
    "KWARGS",
    "NORMALIZATION",
    "CorruptDataError",
    "DataNotFoundError",
    "Dataset",
    "ReducedDataError",
    "clear_cache",
    "data_root",
    "download",
    "identity",
    "is_online",
    "load",
    "locate",
    "mirror_dir",
    "partition",
]
