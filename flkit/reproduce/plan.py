"""Step 1 of ``flkit reproduce``: find the notebooks, read their parameters cells and validate
every argument (preset, ``--only`` names, ``--set`` overrides, seeds, jobs, timeout, kernel,
output folder) before any work starts; :func:`plan` returns the list of runs."""

from __future__ import annotations

import ast
import json
import os
import sys
import tempfile
from pathlib import Path

from ..utils import FlkitError, configure_threads
from ..workbook import presets
from ..workbook.presets import unknown_choice
from ..workbook.report import source_commit

#: the folder holding the flkit package (a source checkout's root): on the kernels' PYTHONPATH
SOURCE_ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = "run.json"
ENV_NOTEBOOKS = "FLKIT_NOTEBOOKS"
RESERVED_PARAMETERS = ("preset", "seed")

__all__ = [
    "default_notebooks_dir",
    "discover",
    "notebook_cells",
    "cell_source",
    "parameters_cell",
    "notebook_parameters",
    "match_notebook",
    "plan",
    "check_machine",
    "run_threads",
    "with_threads",
    "RUN_FILE",
    "ENV_NOTEBOOKS",
    "RESERVED_PARAMETERS",
    "SOURCE_ROOT",
]


def default_notebooks_dir() -> Path:
    """``$FLKIT_NOTEBOOKS``, else the ``notebooks/`` folder beside the flkit package (a source
    checkout), else ``./notebooks``."""
    env = os.environ.get(ENV_NOTEBOOKS)
    if env:
        return Path(env)
    beside = SOURCE_ROOT / "notebooks"
    return beside if beside.is_dir() else Path("notebooks")


def discover(notebooks_dir: str | Path | None = None) -> dict[str, Path]:
    """``{name: notebook path}`` for every notebook with a preset file that exists in the folder."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else default_notebooks_dir()
    found = {}
    for name in presets.notebooks():
        path = presets.notebook_file(name, folder)
        if path.is_file():
            found[name] = path
    return found


def notebook_cells(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh).get("cells", [])


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_parameters(cell: dict) -> bool:
    """A code cell tagged ``parameters`` (papermill's)."""
    return cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get(
        "tags", []
    )


def parameters_cell(path: str | Path) -> dict | None:
    """The first code cell tagged ``parameters`` (None if there is none)."""
    return next((c for c in notebook_cells(Path(path)) if is_parameters(c)), None)


def notebook_parameters(path: str | Path) -> dict:
    """``{name: default}`` assigned in the notebook's ``parameters`` cell (defaults that are not
    literals are given as their source text). FlkitError if there is no such cell or it does not
    parse."""
    path = Path(path)
    cell = parameters_cell(path)
    if cell is None:
        raise FlkitError(
            f"notebook {path} has no code cell tagged 'parameters'; the first code "
            "cell must be tagged 'parameters' (see notebooks/README.md)"
        )
    text = cell_source(cell)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise FlkitError(f"the parameters cell of {path} does not parse: {e}") from None
    params = {}
    for node in tree.body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                try:
                    params[t.id] = ast.literal_eval(value)
                except ValueError:
                    params[t.id] = ast.get_source_segment(text, value)
    return params


def match_notebook(name: str, names: list[str]) -> str:
    """An ``--only`` name -> the notebook: exact, with ``.ipynb``/folders, or a unique number or
    word part (``02`` or ``feddip`` for ``02_feddip``)."""
    stem = Path(name).name
    stem = stem[:-6] if stem.endswith(".ipynb") else stem
    if stem in names:
        return stem
    parts = [n for n in names if stem in (n.split("_", 1)[0], n.split("_", 1)[-1])]
    if len(parts) == 1:
        return parts[0]
    if len(parts) > 1:
        raise FlkitError(
            f"--only {name!r} is ambiguous: it matches {', '.join(parts)}; give the full name"
        )
    raise FlkitError(unknown_choice("notebook", name, names, where=" for --only"))


# ------------------------------------------------------------------------------ threads
def run_threads() -> int:
    """The torch thread count every run of this driver computes with: ``$FLKIT_THREADS`` when
    set (FlkitError when it is not a whole number >= 1), else the driver's own count, torch's
    default on this machine unless something here changed it."""
    import torch

    if os.environ.get("FLKIT_THREADS", "") != "":
        before = torch.get_num_threads()
        try:
            return configure_threads()  # the variable, checked
        finally:
            torch.set_num_threads(before)
    return torch.get_num_threads()


def with_threads(runs: list[dict]) -> list[dict]:
    """The runs as an executor hands them out: each with its position (``index``) and the one
    thread count all of them compute with (``threads``, :func:`run_threads`)."""
    threads = run_threads()
    return [{**r, "threads": threads, "index": i} for i, r in enumerate(runs)]


# ------------------------------------------------------------------------------ validation


def _writable(folder: Path, what: str, fix: str) -> None:
    """FlkitError naming ``folder`` and ``fix`` unless it is (or can be made) a folder this
    process writes to."""
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise FlkitError(
            f"{what} {str(folder)!r} is not writable: {str(blocker)!r} is a file, not a "
            f"folder; accepted: a folder path ({fix})"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".flkit-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise FlkitError(
            f"{what} {str(folder)!r} is not writable ({e.strerror or e}); accepted: a folder "
            f"you can create and write to ({fix})"
        ) from None


def _check_out(out: Path) -> Path:
    _writable(out, "output folder", "--out: another path, or move the file away")
    return out.resolve()


def _check_device(device) -> None:
    """RunConfig's rule for ``device`` (flkit.experiment); a CUDA device this machine lacks is
    left to the executor, since a Ray cluster's nodes may have it (:func:`check_machine`)."""
    import torch

    from ..experiment import RunConfig

    try:
        RunConfig(device=device)
    except FlkitError:
        try:
            cuda_elsewhere = torch.device(device).type == "cuda" and not torch.cuda.is_available()
        except (RuntimeError, TypeError, ValueError):
            cuda_elsewhere = False
        if not cuda_elsewhere:
            raise


def check_machine(runs: list[dict]) -> None:
    """What runs on this machine needs of it, checked before any notebook starts (the local
    executor and a Ray instance started here): the device each run asks for exists, and the run
    cache, which the notebooks' runs write, can be written."""
    from ..paths import cache_dir
    from ..utils import resolve_device

    for device in sorted({str(r.get("parameters", {}).get("device", "auto")) for r in runs}):
        resolve_device(device)
    _writable(
        cache_dir(),
        "the run cache",
        "every notebook writes its runs there: make it writable, or set $FLKIT_RUNS (the run "
        "cache) or $FLKIT_RUNS_DIR to a folder you can write to",
    )


def _check_kernel(kernel_name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    ksm = KernelSpecManager()
    try:
        ksm.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        names = sorted(ksm.find_kernel_specs())
        raise FlkitError(
            unknown_choice(
                "Jupyter kernel",
                kernel_name,
                names,
                extra=f". Install one for this Python with: {sys.executable} "
                "-m ipykernel install --sys-prefix",
            )
        ) from None


def _check_seeds(seeds) -> list[int]:
    if isinstance(seeds, (int, str)):
        seeds = [seeds]
    out = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int):
            raise FlkitError(f"seed {s!r} is not an integer; accepted: integers >= 0")
        if s < 0:
            raise FlkitError(f"seed={s} is outside the accepted range [0, inf)")
        if s in out:
            raise FlkitError(f"seed {s} is given twice; accepted: distinct seeds")
        out.append(int(s))
    if not out:
        raise FlkitError("seeds is empty; accepted: one or more integers >= 0")
    return out


def plan(
    preset: str = "cpu",
    only=None,
    seeds=(0,),
    jobs: int = 1,
    out="runs/",
    notebooks_dir=None,
    timeout=None,
    overrides: dict | None = None,
    device: str | None = None,
    kernel_name: str = "python3",
    allow_reduced_data: bool = False,
) -> dict:
    """Validate every argument and return the list of runs; nothing is executed.

    Errors (FlkitError) name the bad value and what is accepted."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else default_notebooks_dir()
    if not folder.is_dir():
        raise FlkitError(
            f"notebooks folder {str(folder)!r} does not exist; accepted: a folder "
            "holding the notebooks (--notebooks)"
        )
    found = discover(folder)
    if not found:
        raise FlkitError(
            f"no notebooks to reproduce in {folder}: none of its notebooks has a preset "
            f"file (searched: {', '.join(map(str, presets.search_path()))})"
        )
    names = sorted(found)
    if only:
        if isinstance(only, str):
            only = [only]
        selected = list(dict.fromkeys(match_notebook(n, names) for n in only))
    else:
        selected = names
    if not isinstance(preset, str):
        raise FlkitError(f"preset={preset!r}; accepted: a preset name such as smoke, cpu, paper")
    bad = {n: presets.available(n) for n in selected if preset not in presets.available(n)}
    if bad:
        lists = {tuple(av) for av in bad.values()}
        if len(lists) == 1:  # the usual case: every notebook has the same presets
            raise FlkitError(
                unknown_choice(
                    "preset", preset, list(lists.pop()), where=f" for notebook(s) {', '.join(bad)}"
                )
            )
        lines = "; ".join(f"{n}: {', '.join(av)}" for n, av in bad.items())
        raise FlkitError(
            f"unknown preset {preset!r} for notebook(s) {', '.join(bad)}; accepted: {lines}"
        )
    seeds = _check_seeds(seeds)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FlkitError(f"jobs={jobs!r} is outside the accepted range [1, inf) (an integer)")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise FlkitError(f"timeout={timeout!r}; accepted: None or seconds per cell > 0")
    overrides = dict(overrides or {})
    if device is not None:
        if not isinstance(device, str) or not device:
            raise FlkitError(f"device={device!r}; accepted: 'auto', 'cpu', 'cuda', 'cuda:N'")
        overrides.setdefault("device", device)
    if "device" in overrides:
        _check_device(overrides["device"])
    for key in overrides:
        if key in RESERVED_PARAMETERS:
            raise FlkitError(
                f"override {key!r} is set by reproduce itself; use --{key}"
                f"{'s' if key == 'seed' else ''} instead"
            )
    for n in selected:
        params = notebook_parameters(found[n])
        for req in RESERVED_PARAMETERS:
            if req not in params:
                raise FlkitError(
                    f"the parameters cell of {found[n]} does not define {req!r}; "
                    f"it defines: {', '.join(params) or '(nothing)'}"
                )
        for key, value in overrides.items():
            if key not in params:
                raise FlkitError(
                    unknown_choice(
                        "parameter override", key, list(params), where=f" for notebook {n!r}"
                    )
                )
            keys = presets.load(n, preset)  # type-check overrides that are preset keys
            if key in keys:
                presets.load(n, preset, **{key: value})
    if not isinstance(kernel_name, str) or not kernel_name:
        raise FlkitError(f"kernel_name={kernel_name!r}; accepted: a Jupyter kernel name")
    _check_kernel(kernel_name)
    if allow_reduced_data not in (True, False):
        raise FlkitError(f"allow_reduced_data={allow_reduced_data!r}; accepted: True or False")
    run_threads()  # a $FLKIT_THREADS set bad after flkit was imported: refused here, not in a run
    out = _check_out(Path(out))
    runs = [
        {
            "notebook": n,
            "input": str(found[n].resolve()),
            "seed": s,
            "preset": preset,
            "parameters": {"preset": preset, "seed": s, **overrides},
            "run_dir": str(out / n / f"seed{s}"),
            "kernel_name": kernel_name,
            "timeout": timeout,
            "allow_reduced_data": bool(allow_reduced_data),
        }
        for n in selected
        for s in seeds
    ]
    return {
        "out": out,
        "runs": runs,
        "notebooks": selected,
        "seeds": seeds,
        "preset": preset,
        "jobs": jobs,
        "overrides": overrides,
        "notebooks_dir": str(folder.resolve()),
        # read before any notebook starts: the commit the runs record, even if HEAD moves
        # while they run
        "source": source_commit(),
    }
