#!/usr/bin/env python3
"""Strip outputs, execution counts and volatile metadata from Jupyter notebooks, in place.

Notebooks are committed without outputs so diffs show only what a person wrote.

    python tools/strip_notebooks.py                 # every notebooks/**/*.ipynb and tests/fixtures
    python tools/strip_notebooks.py a.ipynb b.ipynb # these files
    python tools/strip_notebooks.py --check [...]   # change nothing; exit 1 listing dirty files

Exit status: 0 when every file was already clean; 1 when a file was changed (or, with --check,
would be), which is what pre-commit expects from a fixing hook; 2 for an unreadable file.
Only the standard library is used, so it runs as a pre-commit hook without dependencies::

    - repo: local
      hooks:
        - id: strip-notebooks
          name: strip notebook outputs
          entry: python tools/strip_notebooks.py
          language: system        # or: python
          files: \\.ipynb$

Kept: cell sources, cell ids, cell tags and other cell metadata a person sets. Removed: outputs,
execution counts, cell metadata ``execution``, ``papermill``, ``ExecuteTime``, ``collapsed``,
``scrolled``, and notebook metadata ``widgets`` (ipywidgets state) and ``papermill``. Set: the
notebook's ``kernelspec`` and ``language_info`` to exactly what JupyterLab writes there when the
project's kernel (``make venv``: "Python 3 (flkit)", Python ``PYTHON_VERSION``) connects, so that
opening a notebook does not mark it modified; with another Python version only
``language_info.version`` differs. Files are written the way Jupyter writes them (1-space indent,
sorted keys, trailing newline).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CELL_META_DROP = ("execution", "papermill", "ExecuteTime", "collapsed", "scrolled")
NB_META_DROP = ("widgets", "papermill")
DEFAULT_GLOBS = ("notebooks/**/*.ipynb", "tests/fixtures/**/*.ipynb")
# The Python of the project's reference environment (CI, `make venv`); JupyterLab copies the
# kernel's exact version into language_info on open and marks the notebook modified if it differs.
PYTHON_VERSION = "3.11.7"
KERNEL_METADATA = {
    "kernelspec": {"display_name": "Python 3 (flkit)", "language": "python", "name": "python3"},
    "language_info": {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": PYTHON_VERSION,
    },
}


def strip(nb: dict) -> dict:
    """The notebook without outputs, execution counts and volatile metadata (a new dict)."""
    nb = json.loads(json.dumps(nb))
    for key in NB_META_DROP:
        nb.get("metadata", {}).pop(key, None)
    nb.setdefault("metadata", {}).update(json.loads(json.dumps(KERNEL_METADATA)))
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        for key in CELL_META_DROP:
            meta.pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    return nb


def dumps(nb: dict) -> str:
    """Serialise like nbformat.write: indent 1, sorted keys, non-ASCII kept, newline at the end."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def is_clean(nb: dict) -> bool:
    return strip(nb) == nb


def process(path: Path, check: bool) -> bool:
    """True when ``path`` needed (and, unless ``check``, got) stripping."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    new = dumps(strip(nb))
    if new == text:
        return False
    if not check:
        tmp = path.with_name(f".{path.name}.strip.tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(path)
    return True


def _default_files(root: Path) -> list[Path]:
    files = []
    for pattern in DEFAULT_GLOBS:
        files += [p for p in sorted(root.glob(pattern)) if ".ipynb_checkpoints" not in p.parts]
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="notebooks to strip (default: notebooks/**/*.ipynb, tests/fixtures/**/*.ipynb)",
    )
    ap.add_argument("--check", action="store_true", help="only report; exit 1 if any is dirty")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    files = args.files or _default_files(root)
    dirty, status = [], 0
    for path in files:
        if path.suffix != ".ipynb":
            continue
        try:
            if process(path, args.check):
                dirty.append(path)
        except (OSError, ValueError) as e:
            print(f"{path}: cannot read as a notebook: {e}", file=sys.stderr)
            status = 2
    for path in dirty:
        print(f"{path}: {'has outputs/metadata to strip' if args.check else 'stripped'}")
    return status or (1 if dirty else 0)


if __name__ == "__main__":
    sys.exit(main())
