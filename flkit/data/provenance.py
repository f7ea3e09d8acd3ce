"""Which data a run used, and the rule that a ``paper`` preset needs the whole dataset.

A *data identity* names a copy of a dataset by its content: the number of train and test samples
it holds, a SHA-256 of its labels (train then test, as int64) and a SHA-256 of every decoded array
(inputs included: two copies that differ in one pixel differ here), beside where it was read from
and the official sizes. Two copies with the same identity give the same results for the same config,
so the identity (without the path) is part of every run-cache key (``flkit.experiment.run``,
``flkit.asyncfl.run``): a run on the mirror's 12,000-image CIFAR-10 is never served for a request
on the full 50,000 images. ``flkit.workbook.report.Report`` records the identities of the data
loaded while it was open, and ``flkit reproduce``'s report shows them per notebook.

The full-data rule: while a preset in ``FULL_DATA_PRESETS`` is the active one (the
``flkit.workbook.report.Report`` a notebook opens makes its preset the active one; merely loading a
preset to read its values does not), looking up a *reduced* copy (fewer samples than the official
dataset) raises :class:`ReducedDataError`, unless reduced copies are allowed by one of

* ``presets.load(notebook, "paper", allow_reduced_data=True)`` (Python, a notebook),
* the environment variable ``FLKIT_ALLOW_REDUCED_DATA=1`` (papermill, JupyterLab),
* ``flkit reproduce --allow-reduced-data`` (sets that variable for every notebook it runs).

A run allowed onto a reduced copy records ``"reduced": true`` in its identity.

The checksums are the expensive part: :func:`content_facts` computes them once per copy, and
:mod:`flkit.data.decoded` keeps them on disk beside the decoded arrays, named by the files' size,
times and inode, so a later process does not hash again until a file changes.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..utils import FlkitError
from . import shaping

ENV_ALLOW = "FLKIT_ALLOW_REDUCED_DATA"
FULL_DATA_PRESETS = ("paper",)
#: the fields of an identity that name the content (the cache key); the rest describe it
KEY_FIELDS = ("dataset", "train", "test", "labels_sha256", "content_sha256")

#: official sizes (train, test); None where the split is not fixed. LEAF's FEMNIST and
#: Shakespeare are compared by their total sample count (LEAF paper, Table 1).
FULL_SIZES = {
    "mnist": (60_000, 10_000),
    "fmnist": (60_000, 10_000),
    "cifar10": (50_000, 10_000),
    "cifar100": (50_000, 10_000),
    "svhn": (73_257, 26_032),
    "har": (7_352, 2_947),
}
FULL_TOTALS = {"femnist": 805_263, "shakespeare": 4_226_158}

__all__ = [
    "ReducedDataError",
    "identity",
    "checked",
    "cache_key",
    "describe",
    "shown_source",
    "set_policy",
    "policy",
    "reduced_allowed",
    "check",
    "mark",
    "record",
    "used_since",
    "labels_sha256",
    "content_sha256",
    "content_facts",
    "FULL_SIZES",
    "FULL_TOTALS",
    "FULL_DATA_PRESETS",
    "ENV_ALLOW",
    "KEY_FIELDS",
]


class ReducedDataError(FlkitError):
    """A preset that needs the whole dataset found only a reduced copy."""


def labels_sha256(y_train, y_test) -> str:
    h = hashlib.sha256()
    for y in (y_train, y_test):
        h.update(np.ascontiguousarray(np.asarray(y, dtype=np.int64)).tobytes())
    return h.hexdigest()


def content_sha256(arrays: dict) -> str:
    """SHA-256 over every array of a decoded copy (names starting with '_' are derived, not read):
    per array, in name order, its name, dtype and shape, then its bytes, streamed from memory."""
    h = hashlib.sha256()
    for key in sorted(k for k in arrays if not k.startswith("_")):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}|{a.dtype.str}|{a.shape}\n".encode())
        h.update(a.tobytes() if a.dtype.kind in "OUSV" or a.ndim == 0 else memoryview(a).cast("B"))
    return h.hexdigest()


def content_facts(name: str, raw: dict) -> dict:
    """What names the decoded copy ``raw`` of dataset ``name``, wherever it lies: its train and
    test sizes and the checksums of its labels and of all its arrays."""
    if name == "femnist":
        is_test = raw["is_test"].astype(bool)
        y_tr, y_te = raw["y"][~is_test], raw["y"][is_test]
    elif name == "shakespeare":
        if "_windows" not in raw:
            raw["_windows"] = shaping.shakespeare_arrays(raw)
        y_tr, y_te = raw["_windows"]["y_train"], raw["_windows"]["y_test"]
    else:
        y_tr, y_te = raw["y_train"], raw["y_test"]
    return {
        "dataset": name,
        "train": int(len(y_tr)),
        "test": int(len(y_te)),
        "labels_sha256": labels_sha256(y_tr, y_te),
        "content_sha256": content_sha256(raw),
    }


def identity(facts: dict, source: str) -> dict:
    """The identity of a copy with these :func:`content_facts`, read from ``source``."""
    name, n_tr, n_te = facts["dataset"], facts["train"], facts["test"]
    full_tr, full_te = FULL_SIZES.get(name, (None, None))
    full_total = FULL_TOTALS.get(name, None if full_tr is None else full_tr + full_te)
    if name == "synthetic":
        reduced = False  # generated: there is no larger copy
    elif full_tr is not None:
        reduced = n_tr < full_tr or n_te < full_te
    else:
        reduced = n_tr + n_te < full_total
    return {
        "dataset": name,
        "source": str(source),
        "train": n_tr,
        "test": n_te,
        "labels_sha256": facts["labels_sha256"],
        "content_sha256": facts["content_sha256"],
        "full_train": full_tr,
        "full_test": full_te,
        "full_total": full_total,
        "reduced": bool(reduced),
    }


def checked(name: str, raw: dict, source: str) -> dict:
    """The identity of the decoded copy ``raw`` read from ``source`` (its content facts computed
    once per copy, kept in ``raw["_facts"]``), checked against the full-data rule and recorded
    as used."""
    if "_facts" not in raw:
        raw["_facts"] = content_facts(name, raw)
    ident = identity(raw["_facts"], source)
    check(ident)
    record(ident)
    return ident


def cache_key(ident: dict) -> dict:
    """The content part of an identity (no path): what a run-cache key holds."""
    return {k: ident[k] for k in KEY_FIELDS}


def shown_source(source) -> str:
    """A dataset copy's place as a reader is shown it: its last two path parts, the folder under
    the data root ('/home/a/data/FashionMNIST/raw' -> 'FashionMNIST/raw'); the machine's own
    directories say nothing about the data and differ from one machine to the next."""
    return "/".join(str(source).replace(os.sep, "/").split("/")[-2:])


def describe(ident: dict) -> str:
    """One line for people: 'cifar10: 12,000 train / 3,000 test, REDUCED copy (full 50,000 /
    10,000), sha256 1a2b3c4d5e6f, from cifar10.npz' (the checksum of all its arrays)."""
    if ident.get("full_train") is not None:
        full = f"{ident['full_train']:,} / {ident['full_test']:,}"
    elif ident.get("full_total"):
        full = f"{ident['full_total']:,} samples"
    else:
        full = None
    size = f"{ident['train']:,} train / {ident['test']:,} test"
    if ident.get("reduced"):
        size += f", REDUCED copy (full {full})"
    elif full:
        size += " (full dataset)"
    src = shown_source(ident.get("source", ""))
    digest = ident.get("content_sha256")  # absent from identities recorded by older versions
    check = f"sha256 {digest[:12]}" if digest else f"labels sha256 {ident['labels_sha256'][:12]}"
    return f"{ident['dataset']}: {size}, {check}, from {src}"


# ------------------------------------------------------------------------------ the full-data rule
_POLICY: dict = {"preset": None, "allow": False}


def set_policy(preset: str | None, allow_reduced: bool = False) -> None:
    """Make ``preset`` the active preset (``None``: none). A preset in FULL_DATA_PRESETS refuses
    reduced copies unless ``allow_reduced`` (or $FLKIT_ALLOW_REDUCED_DATA) allows them."""
    _POLICY.update(preset=preset, allow=bool(allow_reduced))


def policy() -> dict:
    """The active preset and whether reduced copies are allowed (env variable included)."""
    return {"preset": _POLICY["preset"], "allow_reduced": reduced_allowed()}


def reduced_allowed() -> bool:
    env = os.environ.get(ENV_ALLOW, "").strip().lower()
    if env not in ("", "0", "1", "true", "false", "yes", "no"):
        raise FlkitError(f"{ENV_ALLOW}={env!r}; accepted: 1 / true / yes, or 0 / false / no")
    return _POLICY["allow"] or env in ("1", "true", "yes")


def check(ident: dict) -> None:
    """ReducedDataError when the active preset needs the full dataset and ``ident`` is reduced."""
    preset = _POLICY["preset"]
    if preset is None or preset.split(":")[-1] not in FULL_DATA_PRESETS:
        return
    if not ident["reduced"] or reduced_allowed():
        return
    if ident.get("full_train") is not None:
        want = f"{ident['full_train']:,} train / {ident['full_test']:,} test"
    else:
        want = f"{ident['full_total']:,} samples"
    raise ReducedDataError(
        f"preset {preset!r} needs the whole {ident['dataset']} dataset ({want}), but the copy "
        f"found holds {ident['train']:,} train / {ident['test']:,} test ({ident['source']}). "
        "Install the full dataset (flkit data download "
        f"{ident['dataset']}), or run on the reduced copy anyway with allow_reduced_data=True "
        f"(presets.load), {ENV_ALLOW}=1 or flkit reproduce --allow-reduced-data; the results "
        "then record the copy as reduced"
    )


# ------------------------------------------------------------------------------ what was used
_USED: dict = {}  # (dataset, checksum, source) -> [first use, last use, identity]
_CLOCK = [0]


def record(ident: dict) -> None:
    """Note that ``ident`` was used in this process (read by :func:`used_since`)."""
    _CLOCK[0] += 1
    key = (ident["dataset"], ident["content_sha256"], ident["source"])
    entry = _USED.setdefault(key, [_CLOCK[0], 0, dict(ident)])
    entry[1] = _CLOCK[0]


def mark() -> int:
    """A position in the record of used data (take it when a run begins)."""
    return _CLOCK[0]


def used_since(position: int = 0) -> list[dict]:
    """The distinct identities used after ``position`` (:func:`mark`), in first-use order."""
    hits = sorted((e for e in _USED.values() if e[1] > position), key=lambda e: e[0])
    return [dict(e[2]) for e in hits]
