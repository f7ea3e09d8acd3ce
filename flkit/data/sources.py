"""Where a dataset comes from: the data root, the offline mirror, a torchvision download, and the
error naming every place looked when none has it (behind :func:`flkit.data.load`)."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from ..paths import anchored, data_dir
from ..utils import FlkitError, check_choice
from . import files as _files

DATASETS = (
    "mnist",
    "fmnist",
    "cifar10",
    "cifar100",
    "svhn",
    "femnist",
    "har",
    "shakespeare",
    "synthetic",
)
DOWNLOADABLE = ("mnist", "fmnist", "cifar10", "cifar100", "svhn")  # through torchvision


class DataNotFoundError(FlkitError):
    """No copy of a dataset was found in the data root, the mirror, or by download."""


def data_root(root=None) -> Path:
    """The data root: `root`, else $FLKIT_DATA, else ``data`` at the project root.

    The project root is the source checkout holding flkit (the working directory for an installed
    wheel), so `flkit run` from the repository root, papermill and a notebook running in
    notebooks/ all read the same folder, the one `make` links the mirror into."""
    if root is not None:
        return Path(root).expanduser()
    if os.environ.get("FLKIT_DATA"):
        return anchored(os.environ["FLKIT_DATA"])
    return data_dir()


def mirror_dir(mirror=None) -> Path | None:
    m = mirror if mirror is not None else os.environ.get("FLKIT_MIRROR")
    return Path(m).expanduser() if m else None


def locate(name: str, root=None, mirror=None):
    """Where `name` would be read from: (place, kind, files), or None.

    place is 'root' or 'mirror'."""
    check_choice("dataset", name, DATASETS)
    for place, d in (("root", data_root(root)), ("mirror", mirror_dir(mirror))):
        hit = _files.find(name, d)
        if hit:
            return (place,) + hit
    return None


_ONLINE: dict = {}


def is_online(timeout: float = 1.5) -> bool:
    """A quick check (<= `timeout` s, DNS included, cached per process).

    $FLKIT_OFFLINE=1 forces False."""
    if os.environ.get("FLKIT_OFFLINE", "").strip() not in ("", "0"):
        return False
    if "v" not in _ONLINE:
        res = []

        def probe():
            try:
                socket.create_connection(
                    ("ossci-datasets.s3.amazonaws.com", 443), timeout=timeout
                ).close()
                res.append(True)
            except OSError:
                pass

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        t.join(timeout + 0.3)
        _ONLINE["v"] = bool(res)
    return _ONLINE["v"]


def download(name: str, root=None) -> Path:
    """Download `name` with torchvision into the data root; returns the root."""
    check_choice("dataset to download", name, DOWNLOADABLE)
    import torchvision.datasets as tvd

    r = data_root(root)
    r.mkdir(parents=True, exist_ok=True)
    cls = {
        "mnist": tvd.MNIST,
        "fmnist": tvd.FashionMNIST,
        "cifar10": tvd.CIFAR10,
        "cifar100": tvd.CIFAR100,
        "svhn": tvd.SVHN,
    }[name]
    try:
        if name == "svhn":
            for split in ("train", "test"):
                cls(str(r), split=split, download=True)
        else:
            for train in (True, False):
                cls(str(r), train=train, download=True)
    except Exception as e:
        raise DataNotFoundError(
            f"downloading {name!r} into {r} failed ({type(e).__name__}: {e}). "
            "The machine may be offline; "
            f"use an offline mirror instead: `flkit data link --mirror /path/to/mirror --root {r}` "
            f"or `export FLKIT_MIRROR=/path/to/mirror`."
        ) from None
    return r


def not_found_error(name, root, mirror, why_no_download) -> DataNotFoundError:
    """The error for `name` found nowhere: every place looked, and the commands that fix it."""
    r, m = data_root(root), mirror_dir(mirror)
    rsrc = (
        "root argument"
        if root is not None
        else ("$FLKIT_DATA" if os.environ.get("FLKIT_DATA") else "default: data/ of the project")
    )
    lines = [
        f"dataset {name!r} was not found. Places looked:",
        f"  1. data root {r} ({rsrc}): {_files.describe(name, r)}",
    ]
    if m is None:
        lines.append("  2. mirror: not set (no mirror argument, $FLKIT_MIRROR empty)")
    else:
        msrc = "mirror argument" if mirror is not None else "$FLKIT_MIRROR"
        lines.append(f"  2. mirror {m} ({msrc}): {_files.describe(name, m)}")
    lines.append(f"  3. download: {why_no_download}")
    lines.append("Fix it with one of:")
    lines.append(
        f"  flkit data link --mirror /path/to/mirror --root {r}     "
        "(symlink an offline mirror into the root)"
    )
    lines.append(
        "  export FLKIT_MIRROR=/path/to/mirror                      (read the mirror in place)"
    )
    if name in DOWNLOADABLE:
        lines.append(f"  flkit data download {name} --root {r}                  (needs internet)")
    else:
        lines.append(
            f"  flkit data prepare {name} --root {r}   (from its public source; data/README.md)"
        )
    return DataNotFoundError("\n".join(lines))
