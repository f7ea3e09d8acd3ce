"""Presets: the settings each notebook runs at, as plain data.

This module is longer than the house's 500 lines: reading a preset file, checking its tables and
checking each value against ``RunConfig``'s field rules are one vocabulary, read together.

One TOML file per notebook, ``flkit/papers/<slug>/preset.toml`` for ``notebooks/NN_<slug>.ipynb``;
its ``[meta]`` table names the notebook, which is how ``load("NN_<slug>")`` finds it::

    [meta]
    title = "FedDIP: dynamic pruning with error feedback"
    notebook = "02_feddip.ipynb"   # required in a paper folder
    default = "cpu"                # preset used when none is chosen; default "cpu"
    description = "..."            # free text
    paper = "arXiv:2309.06805"     # free text

    [smoke]    # every cell runs in seconds on a CPU (tests); tiny real or synthetic data
    dataset = "synthetic"
    rounds = 2
    lr = 0.05
    [cpu]      # real data, faithful but scaled down (minutes per figure on a laptop CPU)
    ...
    [paper]    # the paper's exact settings (a GPU)
    ...

Rules, checked every time a file is loaded (and by ``tests/test_presets.py`` for every file):
``smoke``, ``cpu`` and ``paper`` exist (more presets may be added); every preset has exactly the
same keys; a key has one type in all presets, the type it has in ``[smoke]`` (an int where
``[smoke]`` has a float is accepted and stored as a float). Nested tables (``[cpu.model]``) follow
the same rules recursively.

Which preset runs (``load(notebook, preset=None)``):

1. an explicit name (``preset="paper"``, or papermill ``-p preset paper``) always wins;
2. ``None`` (or ``"env"``) means: the environment variable ``FLKIT_PRESET`` if set, so
   ``FLKIT_PRESET=smoke pytest --nbval-lax notebooks/`` runs every notebook at ``smoke``;
3. otherwise the file's ``meta.default``, else ``"cpu"``.

Notebook parameters cells therefore hold ``preset = None``.

Overrides: ``load(nb, preset, rounds=5)`` replaces a preset value after checking the key exists and
the type matches; an override of ``None`` means "not overridden" (TOML has no null, so ``None`` is
never a real preset value), which lets a parameters cell pass ``rounds=rounds`` unconditionally.

Values, not only types: a key named as a number of :class:`flkit.experiment.RunConfig`
(``rounds``, ``lr``, ``batch_size``, ``num_clients``, ...) or as its ``backend``, alone or after a
dataset's name (``mnist_rounds``, ``har_rounds``, ``cifar10_lr``: the settings of that dataset's
runs), must pass RunConfig's own rule for that field, in the file and as an override: a negative
round count is refused when the preset is loaded (and by ``flkit reproduce`` before any notebook
starts), not in cell 5. Other names are the paper's own and are checked where they are used.

Extra preset folders (tests, private experiments) holding ``<notebook>.toml`` files are searched
first when listed in the environment variable ``FLKIT_PRESET_PATH`` (``os.pathsep``-separated).
Folders whose name starts with ``_`` (``flkit/papers/_template/``) are not papers.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
from pathlib import Path

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..utils import FlkitError

PAPERS_DIR = Path(__file__).resolve().parent.parent / "papers"
REQUIRED = ("smoke", "cpu", "paper")
#: [meta] venue, link, headline (the main claim's text start): the paper's row on the results page
META_KEYS = ("title", "notebook", "default", "description", "paper", "venue", "link", "headline")
ENV_PRESET = "FLKIT_PRESET"
ENV_PATH = "FLKIT_PRESET_PATH"
DEFAULT_PRESET = "cpu"
_ENV_ALIASES = (None, "env")

__all__ = [
    "Preset",
    "load",
    "available",
    "notebooks",
    "meta",
    "resolve",
    "preset_file",
    "validate_file",
    "search_path",
    "notebook_file",
    "unknown_choice",
    "paper_presets",
    "check_values",
    "REQUIRED",
]


class Preset(dict):
    """A plain dict of settings that also knows where it came from.

    ``notebook`` and ``name`` are the notebook and the preset chosen; ``overrides`` holds the keys
    replaced by ``load(..., **overrides)``. ``to_dict()`` gives all three plus the values as plain
    data (what ``flkit.workbook.report.Report`` records)."""

    def __init__(self, values: dict, notebook: str, name: str, overrides: dict | None = None):
        super().__init__(values)
        self.notebook = notebook
        self.name = name
        self.overrides = dict(overrides or {})
        self.allow_reduced_data = False  # True: a paper run may use a reduced dataset copy

    def __repr__(self) -> str:
        return f"Preset({self.notebook!r}, {self.name!r}, {dict.__repr__(self)})"

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "preset": self.name,
            "overrides": dict(self.overrides),
            "values": dict(self),
        }


# ---------------------------------------------------------------------------------------- files


def search_path() -> list[Path]:
    """Folders searched: ``$FLKIT_PRESET_PATH`` entries (``<notebook>.toml`` files), then
    ``flkit/papers`` (``<slug>/preset.toml`` files)."""
    return _extra_folders() + [PAPERS_DIR]


def _extra_folders() -> list[Path]:
    return [Path(p) for p in os.environ.get(ENV_PATH, "").split(os.pathsep) if p.strip()]


def _files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in _extra_folders():
        if folder.is_dir():
            for f in sorted(folder.glob("*.toml")):
                found.setdefault(f.stem, f)  # earlier folders win
    for f in paper_presets():
        found.setdefault(_paper_notebook(f), f)
    return found


def paper_presets() -> list[Path]:
    """``flkit/papers/<slug>/preset.toml`` of every paper folder (``_template`` and other
    folders starting with ``_`` are skipped)."""
    return [
        f for f in sorted(PAPERS_DIR.glob("*/preset.toml")) if not f.parent.name.startswith("_")
    ]


def _paper_notebook(path: Path) -> str:
    """A paper folder's preset file is named by the notebook its [meta] table names."""
    with open(path, "rb") as fh:
        nb = tomllib.load(fh).get("meta", {}).get("notebook")
    if not nb:
        raise FlkitError(f'preset file {path} needs [meta] notebook = "NN_<slug>.ipynb"')
    return _stem(nb)


def notebooks() -> list[str]:
    """Names of every notebook with a preset file (sorted)."""
    return sorted(_files())


def preset_file(notebook: str) -> Path:
    """The preset file of ``notebook``; FlkitError listing the known notebooks if none."""
    files = _files()
    name = _stem(notebook)
    if name not in files:
        raise FlkitError(
            unknown_choice(
                "notebook",
                notebook,
                sorted(files),
                extra=f" (preset files are searched in: "
                f"{', '.join(str(p) for p in search_path())})",
            )
        )
    return files[name]


def _stem(notebook: str) -> str:
    name = Path(str(notebook)).name
    return name[: -len(".ipynb")] if name.endswith(".ipynb") else name


_CACHE: dict[Path, tuple[float, dict]] = {}


def _read(notebook: str) -> tuple[Path, dict]:
    path = preset_file(notebook)
    mtime = path.stat().st_mtime_ns
    hit = _CACHE.get(path)
    if hit is None or hit[0] != mtime:
        data = validate_file(path)
        _CACHE[path] = (mtime, data)
        hit = _CACHE[path]
    return path, hit[1]


def validate_file(path: str | Path) -> dict:
    """Parse and check one preset file; returns ``{"meta": {...}, "presets": {name: {...}}}``.

    Raises FlkitError naming the file, the preset and the key for every rule broken."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise FlkitError(f"preset file {path} is not valid TOML: {e}") from None
    meta = raw.pop("meta", {})
    if not isinstance(meta, dict):
        raise FlkitError(f"preset file {path}: 'meta' must be a table [meta]")
    for k in meta:
        if k not in META_KEYS:
            raise FlkitError(
                f"preset file {path}: unknown [meta] key {k!r}; accepted: {', '.join(META_KEYS)}"
            )
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise FlkitError(
                f"preset file {path}: top-level key {name!r} is not a table; "
                f"write presets as [{name}] tables"
            )
    missing = [p for p in REQUIRED if p not in raw]
    if missing:
        raise FlkitError(
            f"preset file {path} lacks the preset(s) {', '.join(missing)}; "
            f"every preset file needs: {', '.join(REQUIRED)}"
        )
    ref = raw["smoke"]
    if not ref:
        raise FlkitError(f"preset file {path}: [smoke] is empty")
    presets = {}
    for name, table in raw.items():
        presets[name] = _conform(table, ref, f"{path}: [{name}]", name)
        check_values(presets[name], f"{path}: [{name}]")
    default = meta.get("default", DEFAULT_PRESET)
    if default not in presets:
        raise FlkitError(
            f"preset file {path}: meta.default={default!r} is not a preset here; "
            f"accepted: {', '.join(presets)}"
        )
    return {"meta": dict(meta), "presets": presets}


def _type_name(v) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "table"}.get(
        type(v), type(v).__name__
    )


def _conform(table: dict, ref: dict, where: str, preset: str) -> dict:
    """Check that ``table`` has ``ref``'s keys and types; return a copy with ints widened."""
    extra = [k for k in table if k not in ref]
    lacking = [k for k in ref if k not in table]
    if extra or lacking:
        parts = []
        if extra:
            parts.append(f"keys not in [smoke]: {', '.join(extra)}")
        if lacking:
            parts.append(f"keys missing (present in [smoke]): {', '.join(lacking)}")
        raise FlkitError(
            f"{where} does not have the same keys as [smoke]; "
            + "; ".join(parts)
            + ". Every preset must define every key."
        )
    return {k: _coerce(table[k], ref[k], f"{where} key {k!r}") for k in ref}


def _coerce(value, ref, where: str):
    """``value`` converted to the type of ``ref``; FlkitError if it cannot be without guessing."""
    if isinstance(ref, bool):
        ok = isinstance(value, bool)
    elif isinstance(ref, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(ref, float):
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        ok = isinstance(value, float)
        if ok and not math.isfinite(value):
            raise FlkitError(
                f"{where} = {value!r} is not a finite number; accepted: a finite float"
            )
    elif isinstance(ref, str):
        ok = isinstance(value, str)
    elif isinstance(ref, list):
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            ok = False
        else:
            if ref:  # check elements against the first element of the reference list
                return [_coerce(v, ref[0], f"{where}[{i}]") for i, v in enumerate(value)]
            return list(value)
    elif isinstance(ref, dict):
        if not isinstance(value, dict):
            ok = False
        else:
            return _conform(value, ref, where, "")
    else:  # dates/times from TOML: same type only
        ok = type(value) is type(ref)
    if not ok:
        raise FlkitError(
            f"{where} = {value!r} is a {_type_name(value)}, but [smoke] has a "
            f"{_type_name(ref)} ({ref!r}); accepted: a {_type_name(ref)}"
        )
    return value


# ------------------------------------------------------------------------------------ values


def _run_fields() -> dict[str, str]:
    """{key a preset may use: the RunConfig field whose rule it follows}."""
    import dataclasses

    from ..data import DATASETS
    from ..experiment import RunConfig

    numbers = [
        f.name
        for f in dataclasses.fields(RunConfig)
        if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)
    ]
    fields = {name: name for name in [*numbers, "backend"]}
    for dataset in DATASETS:
        fields.update({f"{dataset}_{name}": name for name in numbers})
    return fields


def _probe(field: str, value) -> dict:
    """RunConfig arguments that check ``value`` as ``field`` alone: the fields it is checked
    against are set so that they cannot be what refuses it."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if field == "num_clients":
        return {field: value, "clients_per_round": 1}
    if field == "clients_per_round":
        return {field: value, "num_clients": max(value, 1) if whole else 100}
    if field == "local_steps":
        return {field: value, "local_epochs": None}
    return {field: value}


def check_values(values: dict, where: str) -> None:
    """FlkitError when a value of ``values`` breaks the rule of the RunConfig field its key is
    named after (see the module's docstring); the error names ``where``, the key, the value and
    what RunConfig accepts."""
    fields = None
    for key, value in values.items():
        if isinstance(value, (dict, list)):
            continue
        if fields is None:
            fields = _run_fields()
        field = fields.get(key)
        if field is None:
            continue
        from ..experiment import RunConfig

        try:
            RunConfig(**_probe(field, value))
        except FlkitError as e:
            rule = "" if key == field else f" (the rule of RunConfig.{field})"
            raise FlkitError(f"{where} key {key!r} = {value!r}{rule}: {e}") from None


# ------------------------------------------------------------------------------------ queries


def available(notebook: str) -> list[str]:
    """Preset names of ``notebook``: smoke, cpu, paper first, then any extra ones."""
    _, data = _read(notebook)
    names = list(data["presets"])
    return [p for p in REQUIRED if p in names] + [p for p in names if p not in REQUIRED]


def meta(notebook: str) -> dict:
    """The ``[meta]`` table, with ``title``, ``notebook`` (file name) and ``default`` filled in."""
    path, data = _read(notebook)
    m = {
        "title": path.stem,
        "notebook": f"{path.stem}.ipynb",
        "default": DEFAULT_PRESET,
        "description": "",
        "paper": "",
    }
    m.update(data["meta"])
    m["preset_file"] = str(path)
    return m


def notebook_file(notebook: str, notebooks_dir: str | Path) -> Path:
    """Where ``notebook``'s .ipynb lives inside ``notebooks_dir`` (``meta.notebook``)."""
    return Path(notebooks_dir) / meta(notebook)["notebook"]


def resolve(notebook: str, preset: str | None = None) -> str:
    """The preset name that ``load`` would use (explicit > $FLKIT_PRESET > meta.default > cpu)."""
    names = available(notebook)
    source = "preset"
    if preset in _ENV_ALIASES:
        env = os.environ.get(ENV_PRESET, "").strip()
        if env:
            preset, source = env, f"${ENV_PRESET}"
        else:
            preset = meta(notebook)["default"]
    if not isinstance(preset, str) or preset not in names:
        src = f" (from ${ENV_PRESET})" if source != "preset" else ""
        raise FlkitError(
            unknown_choice("preset", preset, names, where=f"{src} for notebook {_stem(notebook)!r}")
        )
    return preset


def load(
    notebook: str, preset: str | None = None, *, allow_reduced_data: bool | None = None, **overrides
) -> Preset:
    """The settings of ``notebook`` at ``preset``, with ``overrides`` applied and checked.

    ``preset``: a name from ``available(notebook)``; ``None``/``"env"`` = ``$FLKIT_PRESET``, else
    the file's default (``cpu``). ``overrides``: keys of the preset; ``None`` values are ignored.
    Unknown notebook, preset or key, or a value of the wrong type: FlkitError listing what is valid.

    ``allow_reduced_data=True``: a ``paper`` run may use a reduced dataset copy (kept on the Preset
    for its ``Report``; :mod:`flkit.data.provenance`)."""
    if allow_reduced_data not in (None, True, False):
        raise FlkitError(f"allow_reduced_data={allow_reduced_data!r}; accepted: True/False/None")
    _check_injected_parameters(notebook)
    name = resolve(notebook, preset)
    _, data = _read(notebook)
    values = {k: _copy(v) for k, v in data["presets"][name].items()}
    ref = data["presets"]["smoke"]
    applied = {}
    for key, value in overrides.items():
        if key not in ref:
            raise FlkitError(
                unknown_choice(
                    "override", key, list(ref), where=f" for notebook {_stem(notebook)!r}"
                )
            )
        if value is None:
            continue
        value = _coerce(value, ref[key], f"override {key}")
        check_values({key: value}, f"notebook {_stem(notebook)!r} at preset {name!r}: override")
        values[key] = value
        applied[key] = value
    if allow_reduced_data is not None and "allow_reduced_data" in ref:
        values["allow_reduced_data"] = applied["allow_reduced_data"] = bool(allow_reduced_data)
    out = Preset(values, _stem(notebook), name, applied)
    out.allow_reduced_data = bool(allow_reduced_data or values.get("allow_reduced_data") is True)
    return out


def _assigned(source) -> set[str]:
    """The names a cell's top-level assignments bind (none when it does not parse)."""
    try:
        tree = ast.parse(source if isinstance(source, str) else "")
    except SyntaxError:
        return set()
    targets = [
        t
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _check_injected_parameters(notebook: str) -> None:
    """Refuse a name ``papermill -p NAME VALUE`` set that the notebook's parameters cell does not
    define: papermill only warns, and the value would be ignored. papermill runs its injected cell
    (``# Parameters`` first) right after the parameters cell; the kernel's input history ``In``
    holds both."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    history = list(shell.user_ns.get("In", [])) if shell is not None else []
    for i, source in enumerate(history[1:], start=1):
        if isinstance(source, str) and source.startswith("# Parameters\n"):
            known = _assigned(history[i - 1])
            unknown = sorted(_assigned(source) - known)
            if known and unknown:
                raise FlkitError(
                    f"unknown notebook parameter(s) {', '.join(unknown)} for {_stem(notebook)!r} "
                    f"(papermill -p); accepted: {', '.join(sorted(known))}"
                )


def _copy(v):
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    return v


def unknown_choice(field: str, value, choices: list, where: str = "", extra: str = "") -> str:
    """The message for a value not among ``choices``: names it, suggests the closest choice and
    lists the accepted ones."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"unknown {field} {value!r}{where}{hint}; accepted: "
        f"{', '.join(map(str, choices)) or '(none)'}{extra}"
    )
