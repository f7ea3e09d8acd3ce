"""What a notebook's first cell costs before it does any work: the imports of its set-up cell.

A student who opens a notebook and runs its first cells waits for the set-up cell (the first code
cell after the parameters cell) to import what the notebook uses. For each notebook this takes
that cell's import statements (its other lines load data or build reports, which are the
notebook's work), runs them in a fresh process under ``python -X importtime``, after one untimed
warm-up that writes the bytecode caches, and splits the import time by package: torch,
matplotlib.pyplot, pandas, IPython, ipywidgets and flkit's own modules (their self time, the
packages above not counted).

    python benchmarks/profile_notebook_imports.py [--only 00_fl_primer ...]

Writes benchmarks/results/notebook-imports.json and prints a table (milliseconds; one process per
notebook: a profile, not a timing comparison).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script: flkit from this checkout
    sys.path.insert(0, str(ROOT))

from flkit.reproduce.plan import (  # noqa: E402 (found through the path set just above)
    cell_source,
    is_parameters,
    notebook_cells,
)

PACKAGES = ("torch", "matplotlib.pyplot", "pandas", "IPython", "ipywidgets")


def setup_imports(cells: list[dict]) -> str:
    """The top-level import statements of the first code cell after the parameters cell."""
    code = [c for c in cells if c.get("cell_type") == "code"]
    tagged = [i for i, c in enumerate(code) if is_parameters(c)]
    if not tagged or tagged[0] + 1 >= len(code):
        raise ValueError("the notebook has no code cell after a cell tagged 'parameters'")
    source = cell_source(code[tagged[0] + 1])
    tree = ast.parse(source)
    parts = [
        ast.get_source_segment(source, node)
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    if not parts:
        raise ValueError("the set-up cell imports nothing")
    return "\n".join(parts) + "\n"


def split(importtime: str) -> dict[str, float]:
    """Milliseconds by package from ``-X importtime`` output: a package's cumulative time where it
    was first imported, flkit's own modules' self time, and the self time of everything."""
    rows = []
    for line in importtime.splitlines():
        if not line.startswith("import time:"):
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|")
        if self_us.strip().isdigit():
            rows.append((int(self_us), int(cum_us), name.strip()))
    out = {p: max((c for s, c, n in rows if n == p), default=0) / 1e3 for p in PACKAGES}
    out["flkit own"] = sum(s for s, c, n in rows if n == "flkit" or n.startswith("flkit.")) / 1e3
    out["all"] = sum(s for s, c, n in rows) / 1e3
    return out


def profile(name: str, env: dict) -> dict:
    cells = notebook_cells(ROOT / "notebooks" / f"{name}.ipynb")
    cmd = [sys.executable, "-X", "importtime", "-c", setup_imports(cells)]
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)  # warm-up: .pyc files
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{name}: its imports failed:\n{done.stderr[-3000:]}")
    return {"process wall": wall * 1e3, **split(done.stderr)}


def main(argv=None) -> dict:
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", default=names, metavar="NOTEBOOK")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "notebook-imports.json")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        raise SystemExit(f"unknown notebook(s) {unknown}; accepted: {names}")
    env = dict(os.environ, MPLBACKEND="agg")  # the kernel's inline backend is Agg-based too
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's installation keeps its .pyc files
    rows = {name: profile(name, env) for name in args.only}
    cols = ["process wall", "all", *PACKAGES, "flkit own"]
    print(f"{'notebook':<18}" + "".join(f"{c:>18}" for c in cols) + "   (ms)")
    for name, r in rows.items():
        print(f"{name:<18}" + "".join(f"{r[c]:>18.0f}" for c in cols))
    result = {"python": sys.version.split()[0], "load_average": os.getloadavg()[0], "ms": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
