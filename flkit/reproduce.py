"""Batch reproduction: run notebooks with papermill and write one report of what they measured.

``flkit reproduce --preset cpu --seeds 0 1 2 --jobs 2 --out runs/`` (or ``reproduce(...)``):

1. validates everything before any work starts: the preset against each notebook's preset file,
   ``--only`` names against the notebooks that exist, ``--set`` overrides against each notebook's
   parameters cell (and the preset's types), seeds, jobs, timeout, the kernel and that the output
   folder is writable;
2. executes each (notebook, seed) with papermill (parameters ``preset``, ``seed`` [, ``device``, overrides])
   in a separate process (``--jobs N`` at a time), with ``FLKIT_REPORT_DIR=<out>/<name>/seed<k>`` so
   the notebook's ``flkit.report.Report`` writes ``results.json`` and its figures there, beside the
   executed notebook ``<out>/<name>/seed<k>/<name>.ipynb`` and ``run.json`` (status, time, error);
3. continues past a failing notebook (recording the error and the failing cell) and finally writes
   ``<out>/report.md``, ``<out>/report.html`` (figures embedded) and ``<out>/summary.json``.

Notebooks run with their own folder as working directory (as in JupyterLab and nbval), and with
flkit's source folder prepended to ``PYTHONPATH`` so the kernel imports this same flkit.
"""
from __future__ import annotations

import argparse
import ast
import base64
import datetime as _dt
import html
import json
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from . import presets as _presets
from .report import RESULTS_FILE, _atomic_write_text, load_results, summarize, versions
from .utils import FlkitError

RUN_FILE = "run.json"
ENV_NOTEBOOKS = "FLKIT_NOTEBOOKS"
RESERVED_PARAMETERS = ("preset", "seed")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

__all__ = ["reproduce", "register_cli", "main", "discover", "notebook_parameters",
           "default_notebooks_dir", "write_reports"]


# ------------------------------------------------------------------------------ notebooks

def default_notebooks_dir() -> Path:
    """``$FLKIT_NOTEBOOKS``, else the ``notebooks/`` folder beside the flkit package (a source
    checkout), else ``./notebooks``."""
    env = os.environ.get(ENV_NOTEBOOKS)
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parent.parent / "notebooks"
    return beside if beside.is_dir() else Path("notebooks")


def discover(notebooks_dir: str | Path | None = None) -> dict[str, Path]:
    """``{name: notebook path}`` for every notebook that has a preset file and exists in the folder."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else default_notebooks_dir()
    found = {}
    for name in _presets.notebooks():
        path = _presets.notebook_file(name, folder)
        if path.is_file():
            found[name] = path
    return found


def _cells(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh).get("cells", [])


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def parameters_cell(path: str | Path) -> dict | None:
    """The first code cell tagged ``parameters`` (None if there is none)."""
    for cell in _cells(Path(path)):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell
    return None


def notebook_parameters(path: str | Path) -> dict:
    """``{name: default}`` assigned in the notebook's ``parameters`` cell (defaults that are not
    literals are given as their source text). FlkitError if there is no such cell or it does not
    parse."""
    path = Path(path)
    cell = parameters_cell(path)
    if cell is None:
        raise FlkitError(f"notebook {path} has no code cell tagged 'parameters'; the first code "
                         "cell must be tagged 'parameters' (see notebooks/README.md)")
    text = _source(cell)
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


def _match(name: str, names: list[str]) -> str:
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
        raise FlkitError(f"--only {name!r} is ambiguous: it matches {', '.join(parts)}; "
                         "give the full name")
    raise FlkitError(_presets._unknown("notebook", name, names, where=" for --only"))


# ------------------------------------------------------------------------------ validation

def _check_out(out: Path) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".flkit-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise FlkitError(f"output folder {str(out)!r} is not writable ({e.strerror or e}); "
                         "accepted: a folder you can create and write to (--out)") from None
    return out.resolve()


def _check_kernel(kernel_name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    ksm = KernelSpecManager()
    try:
        ksm.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        names = sorted(ksm.find_kernel_specs())
        raise FlkitError(_presets._unknown("Jupyter kernel", kernel_name, names,
                                           extra=f". Install one for this Python with: {sys.executable} "
                                                 "-m ipykernel install --sys-prefix")) from None


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


def plan(preset: str = "cpu", only=None, seeds=(0,), jobs: int = 1, out="runs/",
         notebooks_dir=None, timeout=None, overrides: dict | None = None, device: str | None = None,
         kernel_name: str = "python3") -> dict:
    """Validate every argument and return the list of runs; nothing is executed.

    Errors (FlkitError) name the bad value and what is accepted."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else default_notebooks_dir()
    if not folder.is_dir():
        raise FlkitError(f"notebooks folder {str(folder)!r} does not exist; accepted: a folder "
                         "holding the notebooks (--notebooks)")
    found = discover(folder)
    if not found:
        raise FlkitError(f"no notebooks to reproduce in {folder}: none of its notebooks has a preset "
                         f"file (searched: {', '.join(map(str, _presets.search_path()))})")
    names = sorted(found)
    if only:
        if isinstance(only, str):
            only = [only]
        selected = list(dict.fromkeys(_match(n, names) for n in only))
    else:
        selected = names
    if not isinstance(preset, str):
        raise FlkitError(f"preset={preset!r}; accepted: a preset name such as smoke, cpu, paper")
    bad = {n: _presets.available(n) for n in selected if preset not in _presets.available(n)}
    if bad:
        lists = {tuple(av) for av in bad.values()}
        if len(lists) == 1:  # the usual case: every notebook has the same presets
            raise FlkitError(_presets._unknown("preset", preset, list(lists.pop()),
                                               where=f" for notebook(s) {', '.join(bad)}"))
        lines = "; ".join(f"{n}: {', '.join(av)}" for n, av in bad.items())
        raise FlkitError(f"unknown preset {preset!r} for notebook(s) {', '.join(bad)}; "
                         f"accepted: {lines}")
    seeds = _check_seeds(seeds)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FlkitError(f"jobs={jobs!r} is outside the accepted range [1, inf) (an integer)")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise FlkitError(f"timeout={timeout!r}; accepted: None or seconds per cell > 0")
    overrides = dict(overrides or {})
    if device is not None:
        if not isinstance(device, str) or not device:
            raise FlkitError(f"device={device!r}; accepted: 'auto', 'cpu', 'cuda', 'cuda:N'")
        overrides.setdefault("device", device)
    for key in overrides:
        if key in RESERVED_PARAMETERS:
            raise FlkitError(f"override {key!r} is set by reproduce itself; use --{key}"
                             f"{'s' if key == 'seed' else ''} instead")
    for n in selected:
        params = notebook_parameters(found[n])
        for req in RESERVED_PARAMETERS:
            if req not in params:
                raise FlkitError(f"the parameters cell of {found[n]} does not define {req!r}; "
                                 f"it defines: {', '.join(params) or '(nothing)'}")
        for key, value in overrides.items():
            if key not in params:
                raise FlkitError(_presets._unknown("parameter override", key, list(params),
                                                   where=f" for notebook {n!r}"))
            keys = _presets.load(n, preset)  # type-check overrides that are preset keys
            if key in keys:
                _presets.load(n, preset, **{key: value})
    if not isinstance(kernel_name, str) or not kernel_name:
        raise FlkitError(f"kernel_name={kernel_name!r}; accepted: a Jupyter kernel name")
    _check_kernel(kernel_name)
    out = _check_out(Path(out))
    runs = [{"notebook": n, "input": str(found[n].resolve()), "seed": s, "preset": preset,
             "parameters": {"preset": preset, "seed": s, **overrides},
             "run_dir": str(out / n / f"seed{s}"), "kernel_name": kernel_name,
             "timeout": timeout} for n in selected for s in seeds]
    return {"out": out, "runs": runs, "notebooks": selected, "seeds": seeds, "preset": preset,
            "jobs": jobs, "overrides": overrides, "notebooks_dir": str(folder.resolve())}


# ------------------------------------------------------------------------------ execution

def _clean_run_dir(run_dir: Path, notebook: str) -> None:
    """Remove what a previous run left in this run's folder (so stale results never show)."""
    if not run_dir.is_dir():
        return
    for f in run_dir.iterdir():
        if f.is_file() and (f.name in (RESULTS_FILE, RUN_FILE, f"{notebook}.ipynb")
                            or f.suffix == ".png"):
            f.unlink()


def _run_one(run: dict) -> dict:
    """Execute one (notebook, seed) with papermill; never raises. Runs in a worker process."""
    import logging

    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    logging.getLogger("papermill").setLevel(logging.WARNING)
    run_dir = Path(run["run_dir"])
    _clean_run_dir(run_dir, run["notebook"])
    run_dir.mkdir(parents=True, exist_ok=True)
    output = run_dir / f"{run['notebook']}.ipynb"
    pkg_root = str(Path(__file__).resolve().parent.parent)
    os.environ["FLKIT_REPORT_DIR"] = str(run_dir)
    if run.get("threads") and not os.environ.get("FLKIT_THREADS"):
        os.environ["FLKIT_THREADS"] = str(run["threads"])  # the kernel inherits it
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([pkg_root] + paths)
    info = {"notebook": run["notebook"], "seed": run["seed"], "preset": run["preset"],
            "parameters": run["parameters"], "status": "ok", "error": None,
            "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "output_notebook": output.name}
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(run["input"], str(output), parameters=run["parameters"],
                            kernel_name=run["kernel_name"], progress_bar=False,
                            cwd=str(Path(run["input"]).parent),
                            execution_timeout=run["timeout"])
    except PapermillExecutionError as e:
        info["status"] = "failed"
        info["error"] = _error_info(e.ename, e.evalue, e.traceback, e.cell_index, output)
    except BaseException as e:  # kernel died, timeout, bad notebook: record, keep going
        info["status"] = "failed"
        info["error"] = _error_info(type(e).__name__, str(e), None, None, output)
        if isinstance(e, KeyboardInterrupt):
            raise
    info["wall_time_s"] = round(time.perf_counter() - t0, 3)
    info["results"] = RESULTS_FILE if (run_dir / RESULTS_FILE).is_file() else None
    try:
        _atomic_write_text(run_dir / RUN_FILE, json.dumps(info, indent=2, default=str) + "\n")
    except OSError:
        pass
    return info


def _error_info(ename, evalue, traceback, cell_index, output: Path) -> dict:
    tb = _ANSI.sub("", "\n".join(traceback or []))
    tb_lines = tb.splitlines()
    err = {"ename": str(ename), "evalue": _ANSI.sub("", str(evalue)).strip()[:2000],
           "traceback": "\n".join(tb_lines[-40:]), "cell_index": cell_index, "cell_source": None,
           "execution_count": None}
    if output.is_file():  # the failing cell is the one holding an error output
        try:
            cells = [c for c in _cells(output) if c.get("cell_type") == "code"]
            for cell in cells:
                if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                    err["cell_source"] = _source(cell)[:4000]
                    err["execution_count"] = cell.get("execution_count")
                    break
        except (OSError, ValueError):
            pass
    return err


def _execute(runs: list[dict], jobs: int, progress: bool) -> list[dict]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    def log(msg):
        if progress:
            print(msg, file=sys.stderr, flush=True)

    results: dict[int, dict] = {}
    total = len(runs)
    # parallel notebooks share the cores instead of each taking all of them (see utils.configure_threads)
    threads = max(1, (os.cpu_count() or 1) // min(jobs, total)) if jobs > 1 else None
    runs = [{**r, "threads": threads} for r in runs]
    with ProcessPoolExecutor(max_workers=min(jobs, total), mp_context=mp.get_context("spawn")) as pool:
        futures = {}
        for i, run in enumerate(runs):
            futures[pool.submit(_run_one, run)] = i
        for fut in as_completed(futures):
            i = futures[fut]
            run = runs[i]
            try:
                info = fut.result()
            except (BrokenProcessPool, Exception) as e:  # the worker itself died
                info = {"notebook": run["notebook"], "seed": run["seed"], "preset": run["preset"],
                        "parameters": run["parameters"], "status": "failed", "wall_time_s": None,
                        "results": None, "output_notebook": None,
                        "error": {"ename": type(e).__name__, "evalue": str(e), "traceback": "",
                                  "cell_index": None, "cell_source": None, "execution_count": None}}
            results[i] = info
            if info["status"] == "ok":
                log(f"[{len(results)}/{total}] {run['notebook']} seed {run['seed']}: ok "
                    f"in {info['wall_time_s']:.1f} s")
            else:
                e = info["error"]
                where = "," + _where(e) if _where(e) else ""
                log(f"[{len(results)}/{total}] {run['notebook']} seed {run['seed']}: FAILED "
                    f"({e['ename']}: {e['evalue'][:200]}{where})")
    return [results[i] for i in range(total)]


# ------------------------------------------------------------------------------ reports

def _where(err: dict) -> str:
    """' in cell In [3]' for a failure (execution count as shown in Jupyter), '' if unknown."""
    if err.get("execution_count"):
        return f" in cell In [{err['execution_count']}]"
    if err.get("cell_index") is not None:
        return f" in cell #{err['cell_index']}"
    return ""


def _fmt_time(s) -> str:
    if s is None:
        return "?"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _collect(plan_: dict, infos: list[dict]) -> list[dict]:
    """Per-notebook sections (plain data) for the reports."""
    out: Path = plan_["out"]
    sections = []
    for name in plan_["notebooks"]:
        runs = [r for r in infos if r["notebook"] == name]
        for r in runs:
            r["_results"] = None
            if r.get("results"):
                try:
                    r["_results"] = load_results(out / name / f"seed{r['seed']}")
                except (OSError, ValueError):
                    pass
        ok = [r for r in runs if r["status"] == "ok"]
        failed = [r for r in runs if r["status"] != "ok"]
        used = [r for r in ok if r["_results"]]
        partial = False
        if not used:  # nothing succeeded: show what the failed runs recorded before failing
            used = [r for r in failed if r["_results"]]
            partial = bool(used)
        rows = summarize([r["_results"] for r in used]) if used else []
        figures = []
        if used:
            first = used[0]
            for f in first["_results"].get("figures", []):
                rel = f"{name}/seed{first['seed']}/{f['file']}"
                if (out / rel).is_file():
                    figures.append((f["name"], rel, first["seed"]))
        meta = _presets.meta(name)
        times = [r.get("wall_time_s") for r in runs]
        devices = sorted({r["_results"].get("device", "?") for r in used})
        claims = [row for row in rows if row["kind"] == "claim"]
        claims_ok = sum(1 for row in claims if all(v is True for v in row["verdicts"]) and row["verdicts"])
        status = "ok" if not failed else ("FAILED" if not ok else "partly failed")
        sections.append({
            "name": name, "title": meta.get("title", name), "file": meta["notebook"],
            "status": status, "seeds": [r["seed"] for r in runs],
            "seeds_ok": [r["seed"] for r in ok], "times": times,
            "notebooks": [(r["seed"], f"{name}/seed{r['seed']}/{r['output_notebook']}")
                          for r in runs if r.get("output_notebook")
                          and (out / name / f"seed{r['seed']}" / r["output_notebook"]).is_file()],
            "rows": rows, "partial": partial, "figures": figures, "devices": devices,
            "claims": (claims_ok, len(claims)), "parameters": runs[0]["parameters"] if runs else {},
            "failures": [{"seed": r["seed"], **(r.get("error") or {})} for r in failed],
        })
    return sections


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", name.lower().replace(" ", "-"))


def _render_md(head: dict, sections: list[dict]) -> str:
    L = ["# flkit reproduction report", ""]
    L.append(f"Preset **{head['preset']}** · seeds {', '.join(map(str, head['seeds']))} · "
             f"{head['finished']} · wall time {_fmt_time(head['wall_time_s'])} "
             f"(jobs {head['jobs']})")
    if head["overrides"]:
        L.append("")
        L.append("Overrides: " + ", ".join(f"`{k}={v!r}`" for k, v in head["overrides"].items()))
    L += ["", "| notebook | status | seeds ok | run time | claims holding (all seeds) |",
          "|---|---|---|---|---|"]
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        claims = f"{s['claims'][0]}/{s['claims'][1]}" if s["claims"][1] else ""
        status = s["status"] if s["status"] == "ok" else f"**{s['status']}**"
        L.append(f"| [{_md_cell(s['name'])}](#{_anchor(s['name'])}) | {status} | "
                 f"{len(s['seeds_ok'])}/{len(s['seeds'])} | {_fmt_time(t)} | {claims} |")
    L += ["", "Package versions: " + ", ".join(f"{k} {v}" for k, v in head["versions"].items()), ""]
    for s in sections:
        L += [f'<a id="{_anchor(s["name"])}"></a>', "", f"## {s['name']}: {s['title']}", ""]
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        L.append(f"Status **{s['status']}** · notebook `{s['file']}` · preset {head['preset']} · "
                 f"seeds {', '.join(map(str, s['seeds']))} · device {', '.join(s['devices']) or '?'}"
                 f" · run time {per_seed}")
        if s["notebooks"]:
            L += ["", "Executed notebooks: " + ", ".join(f"[seed {sd}]({p})" for sd, p in s["notebooks"])]
        L.append("")
        if s["rows"]:
            if s["partial"]:
                L += ["*Partial results, recorded before the notebook failed:*", ""]
            elif len(s["seeds_ok"]) > 1:
                L += [f"Numbers are mean ± std over {len(s['seeds_ok'])} seeds.", ""]
            L += ["| | paper reports | we measured | claim holds? |", "|---|---|---|---|"]
            for r in s["rows"]:
                L.append(f"| {_md_cell(r['item'])} | {_md_cell(r['paper'])} | "
                         f"{_md_cell(r['measured'])} | {_md_cell(r['holds'])} |")
            L.append("")
        elif not s["failures"]:
            L += ["*The notebook recorded no results (no `flkit.report.Report` saved).*", ""]
        for fname, rel, seed in s["figures"]:
            L += [f"![{fname} (seed {seed})]({rel})", ""]
        for f in s["failures"]:
            where = _where(f)
            L += [f"**FAILED** seed {f['seed']}{where}: `{_md_cell(f.get('ename', '?'))}: "
                  f"{_md_cell(f.get('evalue', ''))[:500]}`", ""]
            if f.get("cell_source"):
                L += ["Failing cell:", "", "```python", f["cell_source"].rstrip(), "```", ""]
            if f.get("traceback"):
                L += ["<details><summary>traceback</summary>", "", "```",
                      "\n".join(f["traceback"].splitlines()[-25:]), "```", "", "</details>", ""]
    return "\n".join(L) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}table{border-collapse:collapse;margin:.8em 0}th,td{border:1px solid #ccc;
padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}.ok{color:#1a7f37}
.failed{color:#c62828;font-weight:bold}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.meta{color:#555}"""


def _render_html(head: dict, sections: list[dict], out: Path) -> str:
    e = html.escape
    H = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>flkit reproduction report</title>",
         f"<style>{_CSS}</style></head><body><h1>flkit reproduction report</h1>",
         f"<p class='meta'>Preset <b>{e(head['preset'])}</b> · seeds "
         f"{e(', '.join(map(str, head['seeds'])))} · {e(head['finished'])} · wall time "
         f"{e(_fmt_time(head['wall_time_s']))} (jobs {head['jobs']})</p>"]
    if head["overrides"]:
        H.append("<p>Overrides: " + e(", ".join(f"{k}={v!r}" for k, v in head["overrides"].items()))
                 + "</p>")
    H.append("<table><tr><th>notebook</th><th>status</th><th>seeds ok</th><th>run time</th>"
             "<th>claims holding (all seeds)</th></tr>")
    for s in sections:
        t = sum(x for x in s["times"] if x) if s["times"] else None
        cls = "ok" if s["status"] == "ok" else "failed"
        claims = f"{s['claims'][0]}/{s['claims'][1]}" if s["claims"][1] else ""
        H.append(f"<tr><td><a href='#{_anchor(s['name'])}'>{e(s['name'])}</a></td>"
                 f"<td class='{cls}'>{e(s['status'])}</td><td>{len(s['seeds_ok'])}/{len(s['seeds'])}"
                 f"</td><td>{e(_fmt_time(t))}</td><td>{claims}</td></tr>")
    H.append("</table><p class='meta'>Package versions: "
             + e(", ".join(f"{k} {v}" for k, v in head["versions"].items())) + "</p>")
    for s in sections:
        cls = "ok" if s["status"] == "ok" else "failed"
        per_seed = ", ".join(f"seed {sd}: {_fmt_time(t)}" for sd, t in zip(s["seeds"], s["times"]))
        H.append(f"<h2 id='{_anchor(s['name'])}'>{e(s['name'])}: {e(s['title'])}</h2>")
        H.append(f"<p class='meta'>Status <span class='{cls}'>{e(s['status'])}</span> · notebook "
                 f"<code>{e(s['file'])}</code> · preset {e(head['preset'])} · seeds "
                 f"{e(', '.join(map(str, s['seeds'])))} · device "
                 f"{e(', '.join(s['devices']) or '?')} · run time {e(per_seed)}</p>")
        if s["notebooks"]:
            H.append("<p>Executed notebooks: " + ", ".join(
                f"<a href='{e(p)}'>seed {sd}</a>" for sd, p in s["notebooks"]) + "</p>")
        if s["rows"]:
            if s["partial"]:
                H.append("<p><i>Partial results, recorded before the notebook failed:</i></p>")
            elif len(s["seeds_ok"]) > 1:
                H.append(f"<p>Numbers are mean ± std over {len(s['seeds_ok'])} seeds.</p>")
            H.append("<table><tr><th></th><th>paper reports</th><th>we measured</th>"
                     "<th>claim holds?</th></tr>")
            for r in s["rows"]:
                H.append(f"<tr><td>{e(r['item'])}</td><td>{e(str(r['paper']))}</td>"
                         f"<td>{e(str(r['measured']))}</td><td>{e(str(r['holds']))}</td></tr>")
            H.append("</table>")
        elif not s["failures"]:
            H.append("<p><i>The notebook recorded no results (no flkit.report.Report saved).</i></p>")
        for fname, rel, seed in s["figures"]:
            try:
                data = base64.b64encode((out / rel).read_bytes()).decode()
                H.append(f"<figure><img alt='{e(fname)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{e(fname)} (seed {seed})</figcaption></figure>")
            except OSError:
                H.append(f"<p><a href='{e(rel)}'>{e(fname)}</a></p>")
        for f in s["failures"]:
            where = _where(f)
            H.append(f"<p class='failed'>FAILED seed {f['seed']}{e(where)}: "
                     f"{e(str(f.get('ename', '?')))}: {e(str(f.get('evalue', ''))[:500])}</p>")
            if f.get("cell_source"):
                H.append(f"<p>Failing cell:</p><pre>{e(f['cell_source'])}</pre>")
            if f.get("traceback"):
                H.append("<details><summary>traceback</summary><pre>"
                         + e("\n".join(f["traceback"].splitlines()[-25:])) + "</pre></details>")
    H.append("</body></html>")
    return "\n".join(H) + "\n"


def write_reports(plan_: dict, infos: list[dict], wall_time_s: float | None = None) -> Path:
    """Write report.md, report.html and summary.json into the plan's output folder."""
    out: Path = plan_["out"]
    sections = _collect(plan_, infos)
    head = {"preset": plan_["preset"], "seeds": plan_["seeds"], "jobs": plan_["jobs"],
            "overrides": plan_["overrides"], "wall_time_s": wall_time_s, "versions": versions(),
            "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    _atomic_write_text(out / "report.md", _render_md(head, sections))
    _atomic_write_text(out / "report.html", _render_html(head, sections, out))
    summary = {**head, "notebooks_dir": plan_["notebooks_dir"],
               "runs": [{k: v for k, v in r.items() if not k.startswith("_")} | {
                   "results": r.get("_results")} for r in infos],
               "notebooks": [{k: v for k, v in s.items() if k != "rows"} | {
                   "rows": [{k: v for k, v in row.items()} for row in s["rows"]]}
                   for s in sections]}
    _atomic_write_text(out / "summary.json", json.dumps(_json_safe(summary), indent=2,
                                                        allow_nan=False, default=str) + "\n")
    return out / "report.md"


def _json_safe(o):
    """Strict-JSON copy: non-finite floats become "NaN"/"Infinity" strings, tuples lists."""
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if math.isnan(o) else ("Infinity" if o > 0 else "-Infinity")
    if isinstance(o, dict):
        return {str(k): _json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_json_safe(v) for v in o]
    if isinstance(o, Path):
        return str(o)
    return o


# ------------------------------------------------------------------------------ entry points

def _reproduce(preset="cpu", only=None, seeds=(0,), jobs=1, out="runs/", notebooks_dir=None,
               timeout=None, overrides=None, device=None, kernel_name="python3", progress=True):
    p = plan(preset=preset, only=only, seeds=seeds, jobs=jobs, out=out, notebooks_dir=notebooks_dir,
             timeout=timeout, overrides=overrides, device=device, kernel_name=kernel_name)
    if progress:
        print(f"flkit reproduce: {len(p['notebooks'])} notebook(s) x {len(p['seeds'])} seed(s) at "
              f"preset {preset!r}, {jobs} job(s), into {p['out']}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    infos = _execute(p["runs"], jobs, progress)
    path = write_reports(p, infos, time.perf_counter() - t0)
    if progress:
        failed = [f"{r['notebook']} seed {r['seed']}" for r in infos if r["status"] != "ok"]
        print(f"flkit reproduce: {len(infos) - len(failed)}/{len(infos)} runs ok"
              + (f"; FAILED: {', '.join(failed)}" if failed else "")
              + f". Report: {path} and {path.with_suffix('.html')}", file=sys.stderr, flush=True)
    return path, infos


def reproduce(preset: str = "cpu", only=None, seeds=(0,), jobs: int = 1, out="runs/",
              notebooks_dir=None, timeout: float | None = None, overrides: dict | None = None,
              device: str | None = None, kernel_name: str = "python3",
              progress: bool = True) -> Path:
    """Run notebooks at ``preset`` for every seed and write ``<out>/report.md`` (returned) and
    ``<out>/report.html``; a failing notebook is recorded and the others still run.

    only: notebook names (default: every notebook with a preset file in ``notebooks_dir``);
    seeds: integers, each passed as the notebook's ``seed`` parameter; jobs: notebooks run in
    parallel processes; timeout: seconds per cell (None: no limit); overrides: extra papermill
    parameters, each of which must be assigned in every selected notebook's parameters cell;
    device: passed as the ``device`` parameter; notebooks_dir: default ``default_notebooks_dir()``.
    All arguments are validated (FlkitError) before any notebook starts."""
    return _reproduce(preset=preset, only=only, seeds=seeds, jobs=jobs, out=out,
                      notebooks_dir=notebooks_dir, timeout=timeout, overrides=overrides,
                      device=device, kernel_name=kernel_name, progress=progress)[0]


def _parse_set(items) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise FlkitError(f"--set {item!r} is not KEY=VALUE; accepted e.g. --set rounds=5")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise FlkitError(f"--set {item!r}: {key!r} is not a parameter name")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


_DESCRIPTION = """\
Execute the notebooks with papermill at one preset, for one or more seeds, and write
<out>/report.md and <out>/report.html: per notebook, a table "paper reports / we measured /
claim holds?" (mean ± std over seeds for numbers, "k/n seeds" for claims), its figures, run
time, preset, seeds and package versions. A failing notebook is reported as FAILED with the
error and the failing cell; the other notebooks still run.

Each run writes <out>/<notebook>/seed<k>/: the executed notebook, results.json (what the
notebook recorded through flkit.report), its figures and run.json (status, time, error).
All arguments are checked before any notebook starts."""

_EPILOG = """\
examples:
  flkit reproduce                                  every notebook at cpu, seed 0, into runs/
  flkit reproduce --preset smoke --only 02_feddip  one notebook in seconds
  flkit reproduce --preset paper --seeds 0 1 2 --jobs 3 --out runs/paper
  flkit reproduce --list                           notebooks and their presets

exit status: 0 when every run succeeded, 1 when a notebook failed, 2 for bad arguments."""


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``reproduce`` sub-command; its handler is ``args.func(args) -> exit status``."""
    p = subparsers.add_parser("reproduce", help="run the notebooks (papermill) and write a "
                              "'paper vs. measured' report", description=_DESCRIPTION,
                              epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="cpu",
                   help="preset every notebook runs at: smoke (seconds, CPU), cpu (real data, "
                        "scaled down; default) or paper (the paper's settings, GPU)")
    p.add_argument("--only", nargs="+", action="extend", metavar="NAME",
                   help="run only these notebooks (name as in notebooks/, e.g. 02_feddip; the "
                        "number or the word alone works when unique); default: all")
    p.add_argument("--seeds", nargs="+", type=int, default=None, metavar="SEED",
                   help="seeds to run each notebook with (default: 0); several seeds give mean "
                        "± std")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="notebooks run in parallel processes (default: 1)")
    p.add_argument("--out", default="runs/", metavar="DIR",
                   help="output folder for executed notebooks, results and reports "
                        "(default: runs/)")
    p.add_argument("--notebooks", dest="notebooks_dir", default=None, metavar="DIR",
                   help="folder holding the notebooks (default: $FLKIT_NOTEBOOKS or the "
                        "repository's notebooks/)")
    p.add_argument("--device", default=None,
                   help="device parameter passed to every notebook (auto, cpu, cuda; default: "
                        "the notebook's own, normally auto)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra notebook parameter, e.g. --set rounds=5 (repeatable); KEY must be "
                        "assigned in each notebook's parameters cell; VALUE is a Python literal "
                        "or a plain string")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="limit per cell (default: none)")
    p.add_argument("--kernel", dest="kernel_name", default="python3", metavar="NAME",
                   help="Jupyter kernel to run the notebooks with (default: python3)")
    p.add_argument("--list", action="store_true",
                   help="list the notebooks and their presets, then exit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args) -> int:
    """Handler of ``flkit reproduce``; raises FlkitError for bad arguments."""
    if args.list:
        found = discover(args.notebooks_dir)
        if not found:
            print(f"no notebooks with a preset file in {args.notebooks_dir or default_notebooks_dir()}"
                  f" (preset files searched in: {', '.join(map(str, _presets.search_path()))})")
        for name, path in sorted(found.items()):
            print(f"{name:28s} {', '.join(_presets.available(name)):28s} {path}")
        return 0
    _, infos = _reproduce(preset=args.preset, only=args.only,
                          seeds=args.seeds if args.seeds is not None else (0,), jobs=args.jobs,
                          out=args.out, notebooks_dir=args.notebooks_dir, timeout=args.timeout,
                          overrides=_parse_set(args.overrides), device=args.device,
                          kernel_name=args.kernel_name, progress=not args.quiet)
    return 0 if all(r["status"] == "ok" for r in infos) else 1


def main(argv=None) -> int:
    """``python -m flkit.reproduce [reproduce] [options]``: the same as ``flkit reproduce ...``."""
    from .cli import main as cli_main
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "reproduce":
        argv = ["reproduce"] + argv
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
