"""The kit that takes the GPU check to a lent GPU machine, built here before a GPU is at hand.

That machine reaches no package registry and receives only the working tree and the ignored paths
a call carries, 64 MiB in all; its image has Python with torch, torchvision, numpy, pandas,
matplotlib, scipy, scikit-learn, tqdm and pytest, but not the notebook tools, and the dataset
mirror (about 145 MB) does not fit. So this writes, into ``--out`` (default ``.gpu-kit``, ignored
by git):

- ``wheels/``: the ``notebooks`` extra of pyproject.toml less JupyterLab (papermill, ipykernel,
  ipywidgets, nbformat, nbclient) with everything they need, for ``--python-version`` (the image's:
  3.12) on x86-64 Linux; ``requirements.txt`` names them. There ``pip install --no-index`` installs
  from the folder and keeps what the image already has.
- ``data/``: a reduced copy of the dataset mirror in its own layout, ``SHRINK[name]`` = (training,
  test) rows kept, evenly spaced through each file (every client id of HAR and every class stays;
  FEMNIST and Shakespeare whole). The `smoke` presets read far less than this; the check's
  ``methods`` step tiles its data up to the official sizes, and R1 draws its 6,000 MNIST images
  from the 12,000 kept.
- ``kit.json``: what was kept, from which files, for which Python.

Then it checks that the kit and the working tree fit in ``BUDGET_MIB``, and stops with an error
naming the sizes when they do not. On the lent machine, ``bash benchmarks/gpu_lease.sh`` installs
the wheels and runs the check from the kit (``make gpu-kit`` builds it here).

    python benchmarks/gpu_kit.py [--out .gpu-kit] [--mirror ../shared/data] [--python-version 3.12]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script: flkit from this checkout
    sys.path.insert(0, str(ROOT))

from flkit.data import files  # noqa: E402 (found through the path set just above)
from flkit.workbook.presets import tomllib  # noqa: E402 (tomli on Python 3.10)

# (training rows, test rows) kept; None keeps the file whole
SHRINK = {
    "mnist": (12_000, 10_000),
    "fmnist": (12_000, 5_000),
    "cifar10": (2_000, 1_000),
    "cifar100": (2_000, 500),
    "har": (1_226, 492),  # every 6th window of each split
    "femnist": None,
    "shakespeare": None,
}
BUDGET_MIB = 60  # the device tool carries 64 MiB; the rest is margin for files added later
NOT_CARRIED = ("jupyterlab",)  # the check runs notebooks through papermill, not in a browser
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The ``notebooks`` extra less what the check does not run (``NOT_CARRIED``)."""
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["notebooks"]
    return [r for r in extra if not r.lower().startswith(NOT_CARRIED)]


def evenly(n: int, keep: int) -> np.ndarray:
    """``keep`` row indices spread evenly over ``n`` rows (all of them when ``keep >= n``)."""
    if keep <= 0:
        raise ValueError(f"rows to keep must be positive, got {keep}")
    if keep >= n:
        return np.arange(n)
    return np.floor(np.arange(keep) * (n / keep)).astype(np.int64)


def shrink(arrays: dict, train: int, test: int) -> dict:
    """Rows of every array named for a split ('train' or 'test' in its name), the same rows for
    all arrays of a split; arrays named for neither (class names, channels) are kept whole."""
    n = {"train": len(arrays["y_train"]), "test": len(arrays["y_test"])}
    rows = {"train": evenly(n["train"], train), "test": evenly(n["test"], test)}
    out = {}
    for key, a in arrays.items():
        split = [s for s in ("train", "test") if s in key]
        if len(split) > 1:
            raise ValueError(f"array {key!r} is named for both splits")
        if not split:
            out[key] = a
            continue
        if len(a) != n[split[0]]:
            raise ValueError(f"array {key!r} has {len(a)} rows, its split {n[split[0]]}")
        out[key] = a[rows[split[0]]]
    return out


def write_data(mirror: Path, dest: Path) -> dict:
    """The reduced copy of ``mirror`` in ``dest``, in the mirror's layout; what was kept."""
    kept = {}
    for name, sizes in SHRINK.items():
        found = files.find(name, mirror)
        if found is None:
            raise SystemExit(f"{name}: not in the mirror {mirror} ({files.describe(name, mirror)})")
        kind, paths = found
        if sizes is None:
            shutil.copyfile(paths[0], dest / paths[0].name)
            kept[name] = {"whole": paths[0].name}
            continue
        arrays = files.read(name, kind, paths)
        small = shrink(arrays, *sizes)
        if kind == "idx":
            raw = dest / files.IDX_FOLDER[name] / "raw"
            raw.mkdir(parents=True, exist_ok=True)
            for split, (images, labels) in files.IDX_NAMES.items():
                files.write_idx(raw / f"{images}.gz", small[f"x_{split}"])
                files.write_idx(raw / f"{labels}.gz", small[f"y_{split}"].astype(np.uint8))
        elif kind == "npz":
            np.savez_compressed(dest / f"{name}.npz", **small)
        else:
            raise SystemExit(f"{name}: the mirror holds it as {kind!r}; the kit copies idx or npz")
        kept[name] = {
            "train": [len(small["y_train"]), len(arrays["y_train"])],
            "test": [len(small["y_test"]), len(arrays["y_test"])],
        }
    return kept


def _target(python_version: str) -> list[str]:
    """pip's options for binary wheels of ``python_version`` on x86-64 Linux."""
    abi = "cp" + python_version.replace(".", "")
    out = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    return out + ["--abi", abi] + [arg for p in PLATFORMS for arg in ("--platform", p)]


def _pip(args: list[str], what: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def download_wheels(reqs: list[str], dest: Path, python_version: str) -> list[str]:
    _pip(["download", "--quiet", *_target(python_version), "-d", str(dest), *reqs], "pip download")
    check_wheels(reqs, dest, python_version)
    return sorted(p.name for p in dest.glob("*.whl"))


def check_wheels(reqs: list[str], folder: Path, python_version: str) -> None:
    """The wheels in ``folder`` alone satisfy ``reqs``, as on a machine that has none of them: a
    dry run into an empty target resolves from the folder only (SystemExit naming what failed)."""
    with tempfile.TemporaryDirectory() as empty:
        check = ["install", "--dry-run", "--quiet", "--no-index", "--find-links", str(folder)]
        check += [*_target(python_version), "--target", empty, *reqs]
        _pip(check, "resolving the requirements from the kit's wheels alone")


def size(paths) -> int:
    total = 0
    for p in paths:
        p = Path(p)
        total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0
        total += p.stat().st_size if p.is_file() else 0
    return total


def travelling_tree() -> list[Path]:
    """The working tree's files that a device call sends: tracked, and untracked but not ignored."""
    cmd = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in listed.decode().split("\0") if p and (ROOT / p).is_file()]


def check_budget(kit_bytes: int, tree_bytes: int, budget_mib: float = BUDGET_MIB) -> None:
    total = (kit_bytes + tree_bytes) / 2**20
    if total > budget_mib:
        raise SystemExit(
            f"the kit ({kit_bytes / 2**20:.1f} MiB) and the working tree "
            f"({tree_bytes / 2**20:.1f} MiB) come to {total:.1f} MiB, over the {budget_mib} MiB "
            "budget: shrink SHRINK or leave files out of the tree"
        )


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu-kit")
    default_mirror = ROOT.parent / "shared" / "data"
    ap.add_argument("--mirror", type=Path, default=default_mirror, help="the dataset mirror")
    ap.add_argument("--python-version", default="3.12", help="the GPU image's Python (3.12)")
    args = ap.parse_args(argv)
    if not args.mirror.is_dir():
        raise SystemExit(f"--mirror {args.mirror}: no such folder (the dataset mirror)")
    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "data").mkdir(parents=True)
    (args.out / "wheels").mkdir()
    reqs = requirements()
    (args.out / "requirements.txt").write_text("\n".join(reqs) + "\n")
    kept = write_data(args.mirror, args.out / "data")
    wheels = download_wheels(reqs, args.out / "wheels", args.python_version)
    kit_bytes, tree_bytes = size([args.out]), size(travelling_tree())
    info = {
        "python_version": args.python_version,
        "requirements": reqs,
        "wheels": wheels,
        "data": kept,
        "mirror": str(args.mirror.resolve()),
        "kit_mib": round(kit_bytes / 2**20, 2),
        "tree_mib": round(tree_bytes / 2**20, 2),
    }
    (args.out / "kit.json").write_text(json.dumps(info, indent=1))
    check_budget(kit_bytes, tree_bytes)
    print(
        f"kit in {args.out}: {len(wheels)} wheels, data of {len(kept)} datasets; "
        f"{info['kit_mib']} MiB with a {info['tree_mib']} MiB working tree "
        f"(budget {BUDGET_MIB} MiB)"
    )
    return info


if __name__ == "__main__":
    main()
