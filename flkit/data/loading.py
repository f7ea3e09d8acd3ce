"""Datasets as device-resident tensors: ``flkit.data.load(name)``.

Where data comes from, in order:
  1. the data root: the ``root`` argument, else ``$FLKIT_DATA``, else ``data/`` at the project root;
  2. the offline mirror: the ``mirror`` argument, else ``$FLKIT_MIRROR`` (read in place, never
     written; ``mirror=""`` ignores $FLKIT_MIRROR);
  3. a torchvision download into the data root (mnist, fmnist, cifar10, cifar100, svhn) when
     ``download=True``, or when ``download=None`` and the machine is online (checked in <= 2 s).
Both the data root and the mirror may use the mirror's layout (``MNIST/raw/*.gz``, ``cifar10.npz``,
...) or torchvision's (``cifar-10-batches-py/``, ...). ``synthetic`` is generated, never read from
disk.

Decoded arrays are cached in memory per process, so loading the same dataset again is instant, and
on disk (:mod:`flkit.data.decoded`, named by the files' size, times and inode), so that a new
process reads them back instead of decoding and hashing again.

Every copy read is named by its content (``identity(name)``: train/test sizes and checksums of the
labels and of all its arrays, :mod:`flkit.data.provenance`), recorded in
``Dataset.meta["identity"]`` and checked against the full-data rule of the active preset (a
``paper`` preset refuses a reduced copy unless allowed; :class:`ReducedDataError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..utils import FlkitError, check_choice, resolve_device
from . import decoded as _decoded
from . import files as _files
from . import provenance as _identity
from . import shaping as _shaping
from . import synthetic as _synthetic
from .sources import (
    DATASETS,
    DOWNLOADABLE,
    download,
    is_online,
    locate,
    not_found_error,
)

GROUPED = ("femnist", "har", "shakespeare", "synthetic")  # datasets with natural client ids

# (mean, std) per channel of the [0, 1]-scaled inputs; "standard" = the dataset's usual statistics.
NORMALIZATION = {
    "mnist": ((0.1307,), (0.3081,)),
    "fmnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)),
    "svhn": ((0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)),
    "femnist": ((0.0388,), (0.1656,)),  # computed on the LEAF training part of the mirror
}
NAMED_NORMALIZATIONS = {"none": None, "half": ((0.5,), (0.5,)), "mnist": NORMALIZATION["mnist"]}


@dataclass
class Dataset:
    name: str
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    num_classes: int
    input_shape: tuple
    train_groups: Tensor | None = None
    test_groups: Tensor | None = None
    meta: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        groups = (
            ""
            if self.train_groups is None
            else f", {int(self.train_groups.unique().numel())} natural clients"
        )
        return (
            f"Dataset({self.name!r}: {len(self.y_train)} train / {len(self.y_test)} test, "
            f"input {self.input_shape}, {self.num_classes} classes{groups}, "
            f"on {self.x_train.device})"
        )


# --------------------------------------------------------------------------- cache + raw arrays
_CACHE: dict = {}


def clear_cache() -> None:
    """Forget the decoded arrays held in memory."""
    _CACHE.clear()


def _raw(name, root, mirror, download_flag, syn_kwargs):
    if name == "synthetic":
        key = ("synthetic", tuple(sorted(syn_kwargs.items())))
        if key not in _CACHE:
            _CACHE[key] = _synthetic.generate(**syn_kwargs)
        return _CACHE[key], {"source": "generated (FedProx Synthetic)"}
    hit = locate(name, root, mirror)
    if hit is None:
        if download_flag is False:
            why = "disabled (download=False)"
        elif name not in DOWNLOADABLE:
            why = f"torchvision has no downloader for {name!r}"
        elif download_flag is None and not is_online():
            why = "skipped: the machine looks offline (download=None); pass download=True to force"
        else:
            download(name, root)
            hit = locate(name, root, mirror)
            why = "tried, but the downloaded files were not found afterwards"
        if hit is None:
            raise not_found_error(name, root, mirror, why)
    place, kind, paths = hit
    key = (name, kind, _files.signature(paths))
    if key not in _CACHE:
        _CACHE[key] = _decode(name, kind, paths, key[2])
    src = str(paths[0].parent if kind == "idx" else paths[0])
    meta = {"source": src, "source_place": place, "source_layout": kind}
    return _CACHE[key], {**meta, "_files": [str(p) for p in paths]}


def _decode(name, kind, paths, signature) -> dict:
    """The decoded copy in these files, with its content facts in ``"_facts"``: from the disk
    cache when it holds them, else decoded and hashed here and written there."""
    saved = _decoded.get(name, signature)
    arrays, facts = saved if saved is not None else (None, None)
    raw = arrays if arrays is not None else _files.read(name, kind, paths)
    if facts is None:
        facts = _identity.content_facts(name, raw)
        _decoded.put(name, kind, signature, raw, facts)
    raw["_facts"] = facts
    return raw


def identity(name: str, root=None, mirror=None, download=None, **kwargs) -> dict:
    """The copy ``load(name, ...)`` reads, named by content (whole copy, before any subset; see
    :mod:`flkit.data.provenance`): checked against the active preset's full-data rule
    (:class:`ReducedDataError`) and recorded as used."""
    check_choice("dataset", name, DATASETS)
    raw, meta = _raw(name, root, mirror, download, _synthetic_kwargs(kwargs))
    return _identity.checked(name, raw, meta["source"])


# --------------------------------------------------------------------------- helpers
def _resolve_norm(name, normalize, channels):
    if isinstance(normalize, str):
        choices = ["standard", *NAMED_NORMALIZATIONS] + (["leaf"] if name == "femnist" else [])
        check_choice("normalize", normalize, choices)
        if normalize == "standard":
            return "standard", NORMALIZATION[name]
        if normalize == "leaf":
            return "leaf", None
        return normalize, NAMED_NORMALIZATIONS[normalize]
    try:
        mean, std = normalize
        mean = tuple(float(v) for v in np.atleast_1d(mean))
        std = tuple(float(v) for v in np.atleast_1d(std))
    except (TypeError, ValueError):
        raise FlkitError(
            f"normalize={normalize!r} is not accepted; use 'standard', 'none', 'half', "
            "'mnist' or a (mean, std) pair of floats / per-channel tuples"
        ) from None
    if len(mean) not in (1, channels) or len(std) not in (1, channels) or min(std) <= 0:
        raise FlkitError(f"normalize={normalize!r}: need 1 or {channels} means and positive stds")
    return "custom", (mean, std)


def _images(x: np.ndarray, dev, scheme, stats, channels_last: bool) -> Tensor:
    t = _tensor(x, dev)
    t = t.permute(0, 3, 1, 2) if channels_last else t.unsqueeze(1)
    t = t.to(torch.float32).contiguous().div_(255.0)
    if scheme == "leaf":
        return t.neg_().add_(1.0)
    if stats is not None:
        c = t.shape[1]
        mean = torch.tensor(stats[0], dtype=torch.float32, device=dev).expand(c).view(1, c, 1, 1)
        std = torch.tensor(stats[1], dtype=torch.float32, device=dev).expand(c).view(1, c, 1, 1)
        t.sub_(mean).div_(std)
    return t


def _tensor(a, dev, dtype=None) -> Tensor:
    """A fresh tensor (never sharing memory with the cached arrays)."""
    a = np.asarray(a)
    if not a.flags.writeable:
        a = a.copy()
    return torch.from_numpy(a).to(dev, dtype, copy=True)


_COMMON = ("train_subset", "test_subset", "seed")
KWARGS = {
    "mnist": _COMMON + ("normalize",),
    "fmnist": _COMMON + ("normalize",),
    "cifar10": _COMMON + ("normalize",),
    "svhn": _COMMON + ("normalize",),
    "cifar100": _COMMON + ("normalize", "coarse"),
    "femnist": _COMMON + ("normalize",),
    "har": _COMMON + ("normalize", "flatten", "split"),
    "shakespeare": _COMMON,
    "synthetic": _COMMON + ("alpha", "beta", "num_clients", "dim", "classes", "iid", "train_frac"),
}


def _synthetic_kwargs(kwargs) -> dict:
    """The options that shape the generated data (the subsets are drawn afterwards)."""
    return {
        k: kwargs[k]
        for k in KWARGS["synthetic"]
        if k in kwargs and k not in ("train_subset", "test_subset")
    }


# --------------------------------------------------------------------------- value checks
#: where each array of a copy comes from, per layout: an IDX file each, an npz array by name
_IDX_FILE = {"x_train": 0, "y_train": 1, "x_test": 2, "y_test": 3}
_NPZ_ARRAY = {"femnist": {"x_train": "x", "x_test": "x", "y_train": "y", "y_test": "y"}}


def _origin(name: str, meta: dict, key: str) -> str:
    """The file (and npz array) the array ``key`` of a copy was read from, for messages."""
    files, layout = meta.get("_files") or [], meta.get("source_layout")
    if layout == "idx" and key in _IDX_FILE and len(files) == 4:
        return files[_IDX_FILE[key]]
    if layout == "npz" and files:
        return f"{files[0]} (array {_NPZ_ARRAY.get(name, {}).get(key, key)!r})"
    return f"{meta.get('source', name)} ({key})"


def _check_values(name: str, arr: dict, num_classes: int, meta: dict) -> None:
    """Refuse a copy whose labels are not whole numbers in 0..num_classes-1 or whose float
    inputs are not all finite, naming the file, before any work: such a copy would otherwise
    fail deep inside training, or a label 2.7 would be truncated to 2 without a word."""
    for key in ("y_train", "y_test"):
        y = np.asarray(arr[key])
        if y.size == 0:
            continue
        where = _origin(name, meta, key)
        if y.dtype.kind not in "iuf":
            raise FlkitError(
                f"{name} labels in {where} are of type {y.dtype}; accepted: whole numbers in "
                f"0..{num_classes - 1}. The file is damaged or not a {name} copy: replace it "
                f"(flkit data verify {name})"
            )
        if y.dtype.kind == "f":
            bad = ~np.isfinite(y) | (y != np.floor(y))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise FlkitError(
                    f"{name} labels in {where} are not whole numbers ({int(bad.sum())} of "
                    f"{y.size}, the first {y.flat[i]!r} at position {i}); accepted: whole "
                    f"numbers in 0..{num_classes - 1}. The file is damaged or not a {name} copy: "
                    f"replace it (flkit data verify {name})"
                )
        low, high = y.min(), y.max()
        if low < 0 or high > num_classes - 1:
            raise FlkitError(
                f"{name} labels in {where} run from {low:g} to {high:g}; accepted: whole numbers "
                f"in 0..{num_classes - 1} ({num_classes} classes). The file is damaged or not a "
                f"{name} copy: replace it (flkit data verify {name})"
            )
    for key in ("x_train", "x_test"):
        x = np.asarray(arr[key])
        if x.dtype.kind in "fc" and x.size and not np.isfinite(x).all():
            bad = int(np.count_nonzero(~np.isfinite(x)))
            raise FlkitError(
                f"{name} inputs in {_origin(name, meta, key)} hold {bad} values that are NaN or "
                f"infinite; accepted: finite numbers. The file is damaged: replace it "
                f"(flkit data verify {name})"
            )


# --------------------------------------------------------------------------- the entry point
def load(name: str, root=None, device="auto", download=None, mirror=None, **kwargs) -> Dataset:
    """Load dataset `name` (one of DATASETS) as normalised tensors on `device`.

    Optional keyword arguments (which ones apply is listed in ``flkit.data.KWARGS``):
      train_subset / test_subset: int, a seeded class-stratified subsample (for fast presets);
      seed: seeds the subsample (and the synthetic generator), default 0;
      normalize: 'standard' (default: the dataset's usual mean/std, see NORMALIZATION), 'none'
        (pixels in [0, 1]), 'half' (mean 0.5, std 0.5), 'mnist' (0.1307/0.3081, e.g. FMNIST in
        FedAST), 'leaf' (FEMNIST only: (255 - x) / 255) or a (mean, std) pair; HAR: 'standard' =
        per-channel standardisation with training statistics, 'none' = raw signals;
      coarse (cifar100): use the 20 superclasses as labels;  flatten (har): x as (N, 1152);
      split (har): 'official' (default; the official split is by subject), 'per_subject' (pool
        train+test, split each subject 75/25 stratified by label: HideNseek's local test sets) or
        'pooled' (all 10,299 windows are training data and the test set is empty: for methods that
        draw each client's local test split themselves, flkit.methods.personal);
      synthetic: alpha=1, beta=1, num_clients=30, dim=60, classes=10, iid=False, train_frac=0.9.
    """
    check_choice("dataset", name, DATASETS)
    bad = sorted(set(kwargs) - set(KWARGS[name]))
    if bad:
        raise FlkitError(
            f"unknown option(s) {bad} for dataset {name!r}; accepted: {', '.join(KWARGS[name])}"
        )
    if download not in (None, True, False):
        raise FlkitError(
            f"download={download!r} is not accepted; use True, False or None (= if online)"
        )
    dev = resolve_device(device)
    seed = int(kwargs.get("seed", 0))
    syn = _synthetic_kwargs(kwargs)
    raw, meta = _raw(name, root, mirror, download, syn)
    meta = dict(meta)
    source = {"_files": meta.pop("_files", None), **meta}  # the files read, for messages only
    ident = _identity.checked(name, raw, meta["source"])  # refused before any work
    normalize = kwargs.get("normalize", "standard")
    tr_groups = te_groups = None

    if name in ("mnist", "fmnist", "femnist", "cifar10", "cifar100", "svhn"):
        if name == "femnist":
            is_test = raw["is_test"].astype(bool)
            arr = dict(
                x_train=raw["x"][~is_test],
                y_train=raw["y"][~is_test],
                g_train=raw["writer"][~is_test],
                x_test=raw["x"][is_test],
                y_test=raw["y"][is_test],
                g_test=raw["writer"][is_test],
            )
            meta["writer_ids"] = [str(w) for w in raw.get("writer_ids", [])]
        else:
            arr = {k: raw[k] for k in ("x_train", "y_train", "x_test", "y_test")}
        channels = 3 if name in ("cifar10", "cifar100", "svhn") else 1
        num_classes = {
            "mnist": 10,
            "fmnist": 10,
            "femnist": 62,
            "cifar10": 10,
            "cifar100": 100,
            "svhn": 10,
        }[name]
        if name == "cifar100" and kwargs.get("coarse", False):
            if "y_train_coarse" not in raw:
                raise FlkitError(
                    "coarse=True needs the superclass labels, which this CIFAR-100 copy lacks"
                )
            arr["y_train"], arr["y_test"], num_classes = (
                raw["y_train_coarse"],
                raw["y_test_coarse"],
                20,
            )
            if "coarse_classes" in raw:
                meta["classes"] = [str(c) for c in raw["coarse_classes"]]
        _check_values(name, arr, num_classes, source)
        scheme, stats = _resolve_norm(name, normalize, channels)
        meta["normalization"] = {
            "scheme": scheme,
            "mean": stats and list(stats[0]),
            "std": stats and list(stats[1]),
            "note": "x = (pixel/255 - mean) / std"
            if stats
            else ("x = 1 - pixel/255 (LEAF)" if scheme == "leaf" else "x = pixel/255"),
        }
        if "classes" in raw and "classes" not in meta:
            meta["classes"] = [str(c) for c in raw["classes"]]
        arr = _shaping.subsets(name, arr, kwargs, seed, meta)
        x_train = _images(arr["x_train"], dev, scheme, stats, channels == 3)
        x_test = _images(arr["x_test"], dev, scheme, stats, channels == 3)
        input_shape = (channels,) + tuple(arr["x_train"].shape[1:3])
        if name == "femnist":
            tr_groups, te_groups = arr["g_train"], arr["g_test"]
    elif name == "har":
        arr = dict(
            x_train=raw["x_train"],
            y_train=raw["y_train"],
            g_train=raw["subject_train"],
            x_test=raw["x_test"],
            y_test=raw["y_test"],
            g_test=raw["subject_test"],
        )
        split = kwargs.get("split", "official")
        check_choice("split (har)", split, ("official", "per_subject", "pooled"))
        _check_values(name, arr, 6, source)
        if split == "per_subject":
            arr = _shaping.har_per_subject(arr, seed)
            meta["split"] = (
                "official train+test pooled, each subject split 75/25 stratified by label "
                f"(seed {seed})"
            )
        elif split == "pooled":
            arr = _shaping.har_per_subject(arr, seed, test_frac=0.0)
            meta["split"] = "official train+test pooled as training data; empty test set"
        stats_src = arr["x_train"]
        arr = _shaping.subsets(name, arr, kwargs, seed, meta)
        x_train, x_test = (
            _tensor(arr["x_train"], dev, torch.float32),
            _tensor(arr["x_test"], dev, torch.float32),
        )
        check_choice("normalize (har)", normalize, ("standard", "none"))
        if normalize == "standard":
            full = torch.from_numpy(np.asarray(stats_src, dtype=np.float32)).to(dev)
            mean, std = full.mean(dim=(0, 2), keepdim=True), full.std(dim=(0, 2), keepdim=True)
            x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
            meta["normalization"] = {
                "scheme": "standard",
                "note": "per-channel standardisation with training statistics",
                "mean": mean.flatten().tolist(),
                "std": std.flatten().tolist(),
            }
        else:
            meta["normalization"] = {"scheme": "none", "note": "raw inertial signals"}
        if kwargs.get("flatten", False):
            x_train, x_test = x_train.flatten(1), x_test.flatten(1)
        input_shape, num_classes = tuple(x_train.shape[1:]), 6
        tr_groups, te_groups = arr["g_train"], arr["g_test"]
        meta["channels"] = [str(c) for c in raw.get("channels", [])]
        meta["classes"] = [str(c) for c in raw.get("activity_names", [])]
        meta["groups"] = "subject id 1..30"
    elif name == "shakespeare":
        if "_windows" not in raw:  # raw is the cached dict: build the windows once per process
            raw["_windows"] = _shaping.shakespeare_arrays(raw)
        arr = raw["_windows"]
        _check_values(name, arr, 80, source)
        arr = _shaping.subsets(name, arr, kwargs, seed, meta)
        x_train, x_test = (_tensor(arr[k], dev, torch.int64) for k in ("x_train", "x_test"))
        input_shape, num_classes = (80,), 80
        tr_groups, te_groups = arr["g_train"], arr["g_test"]
        meta.update(
            vocab=str(raw["vocab"]),
            groups="role index (see meta['roles'])",
            roles=[str(r) for r in raw.get("roles", [])],
            normalization={
                "scheme": "tokens",
                "note": "x = 80 vocabulary indices, y = next character",
            },
        )
    else:  # synthetic
        arr = {
            "x_train": raw["x_train"],
            "y_train": raw["y_train"],
            "g_train": raw["g_train"],
            "x_test": raw["x_test"],
            "y_test": raw["y_test"],
            "g_test": raw["g_test"],
        }
        _check_values(name, arr, int(kwargs.get("classes", 10)), source)
        arr = _shaping.subsets(name, arr, kwargs, seed, meta)
        x_train, x_test = (_tensor(arr[k], dev, torch.float32) for k in ("x_train", "x_test"))
        input_shape, num_classes = (int(raw["x_train"].shape[1]),), int(kwargs.get("classes", 10))
        tr_groups, te_groups = arr["g_train"], arr["g_test"]
        meta.update(
            groups="device id",
            synthetic={k: kwargs.get(k) for k in syn},
            samples_per_client=raw["samples_per_client"].tolist(),
            normalization={"scheme": "none", "note": "generated features, not normalised"},
        )

    meta["identity"] = {**ident, "train_used": len(arr["y_train"]), "test_used": len(arr["y_test"])}

    def lt(a):
        return None if a is None else _tensor(a, dev, torch.int64)

    return Dataset(
        name=name,
        x_train=x_train,
        y_train=lt(arr["y_train"]),
        x_test=x_test,
        y_test=lt(arr["y_test"]),
        num_classes=num_classes,
        input_shape=tuple(int(s) for s in input_shape),
        train_groups=lt(tr_groups),
        test_groups=lt(te_groups),
        meta=meta,
    )
