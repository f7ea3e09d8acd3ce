"""Structured results of a notebook: the paper's numbers beside ours, and the claim verdicts.

Inside a notebook::

    from flkit.workbook.report import Report
    report = Report("02_feddip", cfg, seed, device=device)   # cfg = presets.load(...) or a name
    report.number("Top-1 accuracy, LeNet-5, 90% sparse", acc, paper=97.1, unit="%")
    report.claim("FedDIP at 90% sparsity loses < 1 point vs. dense FedAvg", holds=gap < 1,
                 evidence=f"gap {gap:.2f} points", paper="Table 3",
                 regime=regime.REGIME.readings(ours, "close_to_dense"),
                 test="gap < 1 point in every seed", seeds=[0, 1])
    report.figure(fig, "accuracy_vs_rounds",                 # PNG beside results.json,
                  claims=["FedDIP at 90% sparsity loses < 1 point vs. dense FedAvg"])
    report.figure(fig, "main_result", claims=report.headline) # behind the paper's main claim
    report.table()                                           # DataFrame for display

Every call re-writes ``results.json`` atomically in the run folder (``report.save()`` does it
explicitly), so a notebook that fails half way still leaves what it measured. Calling ``number`` or
``claim`` again with the same key/text replaces the entry, so re-running a cell does not duplicate.

Every claim ends with one verdict of :mod:`flkit.workbook.verdict`: holds, does not hold, outside
regime, inconclusive. ``claim`` takes the face-value outcome and the readings of the regime
indicators the claim depends on (from the paper's ``regime.py``) and derives the verdict there:
"outside regime" when a reading breaks the paper's rule, inconclusive (with the reason) at the
``smoke`` preset (a few rounds on tiny data, for tests) or when the run cannot decide. A claim
that does not depend on how long or how big the run is (a byte count computed from the model's
shapes) passes ``judge_at_smoke=True``.

Run folder (``out_dir``): the argument, else ``$FLKIT_REPORT_DIR`` (set by ``flkit reproduce``),
else ``$FLKIT_RUNS_DIR/<notebook>/<preset>-seed<seed>`` (``FLKIT_RUNS_DIR`` defaults to ``runs`` at
the project root, whatever the working directory: :func:`flkit.paths.runs_dir`).

``results.json`` (schema 2)::

    {"schema": 2, "notebook": str, "preset": str, "config": {...} | null, "overrides": {...},
     "seed": int, "device": str, "versions": {"python": ..., "flkit": ..., "torch": ..., ...},
     "commit": str, "dirty": bool,                          # the source tree's git commit
     "started": ISO-8601 UTC, "saved": ISO-8601 UTC, "wall_time_s": float,
     "rules": int (verdict.RULES_VERSION),
     "numbers": [{"key", "measured", "paper", "unit", "note"}],
     "claims":  [{"text", "verdict": one of VERDICTS, "holds": true|false|null (true: holds,
                  false: does not hold, null: otherwise), "face": true|false|null (the outcome
                  before the regime and smoke rules), "reason", "evidence", "paper",
                  "test" (the claim's own test in words), "seeds" ([training seed] | null),
                  "judge_at_smoke": bool, "face_reason" (why an undecided face is undecided),
                  "key" (the claim's rule in the paper's REGIME, when it has one),
                  "measured" ({indicator key: value | {method: value}}, with "key"),
                  "regime": [{"key", "indicator", "ours", "per_seed", "paper", "rule", "unit",
                              "source", "diagnostic", "inside"}]}],
     "figures": [{"name", "file", "claims": [claim text or its start, ...] (only when given)}],
     "data": [{"dataset", "source", "train", "test", "labels_sha256", "content_sha256",
               "full_train", "full_test", "full_total", "reduced"}],  # copies read (data.identity)
     "data_rule": {"preset": str | null, "allow_reduced": bool},
     "data_vs_published": {"preset", "commit", "date", "same": true | false | null,
                           "datasets": [{"dataset", "published", "used", "same"}]} | null}
                           # the copies read beside those the published verdicts of this
                           # notebook and preset used (flkit.data.published_copies)

Non-finite measurements are stored as the strings "NaN", "Infinity", "-Infinity" (strict JSON).
Reading them back and summarising seeds: :mod:`flkit.workbook.results`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers as _numbers
import os
import platform
import re
import subprocess
import time
from pathlib import Path

from ..data import provenance as _data_ids
from ..data import published_copies as _published
from ..paths import runs_dir
from ..store import save_text
from ..utils import FlkitError
from . import verdict as _verdict
from .regime import Readings as _Readings
from .regime import plain_measurements
from .results import RESULTS_FILE, readable_text, results_frame, summarize

ENV_REPORT_DIR = "FLKIT_REPORT_DIR"
SCHEMA = 2
SMOKE_PRESET = _verdict.SMOKE_PRESET
SMOKE_REASON = _verdict.SMOKE_REASON
_VERSION_PACKAGES = ("torch", "numpy", "pandas", "matplotlib", "papermill", "nbclient")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

__all__ = [
    "Report",
    "versions",
    "source_commit",
]


def versions() -> dict:
    """Versions of Python, flkit and the packages results depend on (no imports needed)."""
    from importlib import metadata

    from .. import __version__

    out = {
        "python": platform.python_version(),
        "flkit": __version__,
        "platform": platform.platform(terse=True),
    }
    for pkg in _VERSION_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def source_commit(root: Path | None = None) -> dict:
    """``{"commit": full hash or "unknown", "dirty": bool}`` of the source tree flkit runs from
    (dirty: tracked files differ from the commit)."""
    from ..paths import project_root

    root = root or project_root() or Path.cwd()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=20
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": False}
    return {"commit": commit or "unknown", "dirty": bool(status)}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _scalar(value, field: str, allow_none: bool = True, allow_str: bool = False):
    """A JSON-ready scalar from Python/numpy/torch numbers; FlkitError for anything else."""
    if value is None:
        if allow_none:
            return None
        raise FlkitError(f"{field} is None; accepted: a number")
    if allow_str and isinstance(value, str):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars, 1-element tensors
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            raise FlkitError(
                f"{field} must be a single number, got an array of shape "
                f"{tuple(getattr(value, 'shape', ()))}"
            ) from None
    if isinstance(value, bool):
        return value
    if isinstance(value, _numbers.Integral):
        return int(value)
    if isinstance(value, _numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    accepted = "a number" + (", a string" if allow_str else "") + (" or None" if allow_none else "")
    raise FlkitError(f"{field}={value!r} is a {type(value).__name__}; accepted: {accepted}")


class Report:
    """Collects a notebook's key numbers, claim verdicts and figures into one run folder.

    ``preset`` is a preset name, ``None`` (resolved like ``presets.load``) or the ``Preset``
    returned by ``presets.load`` (then its values and overrides are recorded too). ``device`` is
    recorded as resolved (``"auto"`` -> ``"cuda"``/``"cpu"``)."""

    def __init__(
        self,
        notebook: str,
        preset=None,
        seed: int = 0,
        out_dir: str | Path | None = None,
        device: str | None = "auto",
        autosave: bool = True,
    ):
        if not isinstance(notebook, str) or not notebook:
            raise FlkitError(
                f"notebook={notebook!r}; accepted: the notebook's name, e.g. '02_feddip'"
            )
        self.notebook = notebook[:-6] if notebook.endswith(".ipynb") else notebook
        self.config = None
        self.overrides: dict = {}
        preset_obj = preset
        if isinstance(preset, dict) and hasattr(preset, "name"):
            self.config = dict(preset)
            self.overrides = dict(getattr(preset, "overrides", {}) or {})
            preset = preset.name
        elif preset is None or preset == "env":
            from . import presets as _presets

            try:
                preset = _presets.resolve(self.notebook, preset)
            except FlkitError:
                preset = os.environ.get("FLKIT_PRESET") or "unknown"
        if not isinstance(preset, str):
            raise FlkitError(f"preset={preset!r}; accepted: a preset name or presets.load(...)")
        if isinstance(seed, bool) or not isinstance(seed, _numbers.Integral):
            raise FlkitError(f"seed={seed!r}; accepted: an integer")
        self.preset = preset
        self.seed = int(seed)
        self.device = self._device(device)
        if out_dir is None:
            out_dir = os.environ.get(ENV_REPORT_DIR) or (
                runs_dir() / self.notebook / f"{self.preset}-seed{self.seed}"
            )
        self.out_dir = Path(out_dir)
        self.autosave = autosave
        self.numbers: dict[str, dict] = {}
        self.claims: dict[str, dict] = {}
        self.figures: dict[str, dict] = {}
        self.started = _now()
        self.source = source_commit()
        self._t0 = time.perf_counter()
        # this notebook's preset decides whether a reduced data copy is refused from here on
        _data_ids.set_policy(self.preset, bool(getattr(preset_obj, "allow_reduced_data", False)))
        self._data_mark = _data_ids.mark()  # the data this notebook reads from here on
        # the copies the published verdicts of this notebook and preset used; the first output
        # says so when this run is about to read others
        self._published = _published.check_at_start(self.notebook, self.preset)

    @staticmethod
    def _device(device) -> str:
        if device is None or str(device) == "auto":
            try:
                from ..utils import resolve_device

                return str(resolve_device("auto"))
            except Exception:  # recording must never fail a notebook
                return "auto"
        return str(device)

    @property
    def path(self) -> Path:
        """Where ``results.json`` is written."""
        return self.out_dir / RESULTS_FILE

    @property
    def headline(self) -> str:
        """The start of this notebook's main claim (its paper's ``[meta] headline``; "" when it
        names none): ``report.figure(fig, name, claims=report.headline)`` marks the figure that
        the results page shows beside the main claim's verdict."""
        from . import presets

        try:
            return presets.meta(self.notebook).get("headline", "")
        except FlkitError:
            return ""

    # ------------------------------------------------------------------------------ recording
    def number(self, key: str, measured, paper=None, unit: str = "", note: str = ""):
        """Record one measured number (a table cell) beside what the paper reports.

        ``paper`` may be a number or a string such as ``"97.1 ± 0.2"``. Returns ``measured``."""
        if not isinstance(key, str) or not key.strip():
            raise FlkitError(f"number key={key!r}; accepted: a non-empty string")
        self.numbers[key] = {
            "key": key,
            "measured": _scalar(measured, f"number {key!r} measured"),
            "paper": _scalar(paper, f"number {key!r} paper", allow_str=True),
            "unit": str(unit),
            "note": str(note),
        }
        self._autosave()
        return measured

    def claim(
        self,
        text: str,
        holds,
        evidence: str = "",
        paper: str = "",
        judge_at_smoke: bool = False,
        regime=(),
        reason: str = "",
        test: str = "",
        seeds=None,
    ) -> str:
        """Record a claim of the paper and its verdict; returns the verdict (one of
        :data:`flkit.workbook.verdict.VERDICTS`).

        ``holds``: the face-value outcome, True / False / None (the run cannot decide: say why in
        ``reason``), or "holds" / "does not hold" / "inconclusive". ``regime``: the readings of
        the regime indicators the claim depends on (``REGIME.readings(ours, claim)`` of the paper's
        ``regime.py``); a reading outside the paper's rule records "outside regime", an
        unmeasured one inconclusive, with the indicator, ours and the paper's value as the reason.
        At the smoke preset every verdict is inconclusive unless ``judge_at_smoke`` (use it only
        for a claim whose outcome does not depend on the run's length or size). Long decimals in
        ``evidence`` are rounded to 3 significant digits
        (:func:`flkit.workbook.results.readable_text`).

        ``test``: the claim's own test in words, with its threshold ("gain >= 2 points in every
        seed"); a *does not hold* names it as what the run missed. ``seeds``: the training seeds
        the evidence uses (shown on the results page). When ``regime`` comes from
        ``REGIME.readings(ours, claim)`` (a :class:`flkit.workbook.regime.Readings`), the claim's
        key and every measured indicator value are recorded too, so a changed rule re-judges the
        claim without training."""
        if not isinstance(text, str) or not text.strip():
            raise FlkitError(f"claim text={text!r}; accepted: a non-empty string")
        if not isinstance(test, str):
            raise FlkitError(f"claim {text!r}: test={test!r}; accepted: the test in words")
        if seeds is not None:
            try:
                seeds = sorted({int(s) for s in seeds})
            except (TypeError, ValueError):
                raise FlkitError(
                    f"claim {text!r}: seeds={seeds!r}; accepted: the training seeds (integers)"
                ) from None
        if isinstance(regime, (str, dict, _verdict.Reading)) or regime is None:
            raise FlkitError(
                f"claim {text!r}: regime={regime!r}; accepted: a list of readings "
                "(REGIME.readings(ours, claim) of the paper's regime.py), or () for none"
            )
        regime = regime if isinstance(regime, _Readings) else list(regime)
        try:
            verdict, why = _verdict.decide(holds, self.preset, regime, judge_at_smoke, reason, test)
        except FlkitError as err:
            raise FlkitError(f"claim {text!r}: {err}") from None
        face = holds.item() if hasattr(holds, "item") and callable(holds.item) else holds
        if isinstance(face, str):
            face = {_verdict.HOLDS: True, _verdict.DOES_NOT_HOLD: False}.get(face)
        self.claims[text] = {
            "text": text,
            "verdict": verdict,
            "holds": {_verdict.HOLDS: True, _verdict.DOES_NOT_HOLD: False}.get(verdict),
            "face": face,
            "reason": readable_text(why),
            "evidence": readable_text(str(evidence)),  # one number format for every paper
            "paper": str(paper),
            "regime": [r.to_dict() for r in regime],
            "test": test,
            "seeds": seeds,
            "judge_at_smoke": bool(judge_at_smoke),
            "face_reason": readable_text(str(reason)),
        }
        if isinstance(regime, _Readings):
            self.claims[text]["key"] = regime.claim
            self.claims[text]["measured"] = plain_measurements(regime.measured)
        self._autosave()
        return verdict

    def figure(self, fig=None, name: str = "figure", dpi: int = 120, claims=()) -> Path:
        """Save a matplotlib figure (or Axes; ``None`` = current figure) as ``<name>.png``.

        ``claims``: each claim the figure supports, by its text (as passed to :meth:`claim`, before
        or after this call) or the start of it (a claim whose text carries its numbers is named by
        its stable start, as :attr:`headline` does; :func:`supports` matches); the report then
        shows the figure under those claims instead of among the other figures."""
        if isinstance(claims, str):
            claims = (claims,)
        claims = list(claims or ())
        bad = [c for c in claims if not isinstance(c, str) or not c.strip()]
        if bad:
            raise FlkitError(
                f"figure {name!r}: claims={bad[0]!r}; accepted: the text of a claim (a non-empty "
                "string) or a list of them"
            )
        if isinstance(name, str) and name.endswith(".png"):
            name = name[:-4]
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise FlkitError(
                f"figure name={name!r}; accepted: letters, digits, '_', '-', '.' "
                "(no folders), e.g. 'accuracy_vs_rounds'"
            )
        if fig is None:
            import matplotlib.pyplot as plt

            fig = plt.gcf()
        if not hasattr(fig, "savefig"):  # an Axes: save the figure holding it
            fig = getattr(fig, "figure", fig)
        if not hasattr(fig, "savefig"):
            raise FlkitError(
                f"figure {name!r}: {type(fig).__name__} is not a matplotlib Figure/Axes"
            )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{name}.png"
        tmp = self.out_dir / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
        os.replace(tmp, path)
        self.figures[name] = {"name": name, "file": path.name}
        if claims:
            self.figures[name]["claims"] = list(dict.fromkeys(claims))
        self._autosave()
        return path

    # ------------------------------------------------------------------------------ output
    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "notebook": self.notebook,
            "preset": self.preset,
            "config": self.config,
            "overrides": self.overrides,
            "seed": self.seed,
            "device": self.device,
            "versions": versions(),
            **self.source,
            "started": self.started,
            "saved": _now(),
            "wall_time_s": round(time.perf_counter() - self._t0, 3),
            "rules": _verdict.RULES_VERSION,
            "numbers": list(self.numbers.values()),
            "claims": list(self.claims.values()),
            "figures": list(self.figures.values()),
            "data": self.data(),
            "data_rule": _data_ids.policy(),
            _published.RESULTS_KEY: _published.compare(self._published, self.data()),
        }

    def data(self) -> list[dict]:
        """The dataset copies read since this report was created (each once): source, number of
        train/test samples, label checksum, and whether the copy is reduced."""
        return _data_ids.used_since(self._data_mark)

    def save(self) -> Path:
        """Write ``results.json`` atomically (temp file + rename); returns its path."""
        save_text(
            self.path,
            json.dumps(
                self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False, default=_json_default
            )
            + "\n",
        )
        return self.path

    def _autosave(self):
        if self.autosave:
            self.save()

    def table(self):
        """A DataFrame "paper reports / we measured / verdict": one row per claim, then one per
        number (the claims are what a reader looks for first)."""
        rows = summarize([self.to_dict()])
        return results_frame(
            [r for r in rows if r["kind"] == "claim"] + [r for r in rows if r["kind"] != "claim"]
        )

    def _repr_html_(self):
        return self.table().to_html()

    def __repr__(self):
        return (
            f"Report({self.notebook!r}, preset={self.preset!r}, seed={self.seed}, "
            f"{len(self.numbers)} numbers, {len(self.claims)} claims, "
            f"{len(self.figures)} figures -> {self.path})"
        )


def supports(figure: dict, claim_text: str) -> bool:
    """Whether ``figure`` (an entry of ``results.json``'s ``figures``) was saved for the claim
    ``claim_text``: one of its ``claims`` is that text or its start."""
    return any(claim_text.startswith(c) for c in figure.get("claims") or ())


def _json_default(o):
    if hasattr(o, "item") and callable(o.item):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)
