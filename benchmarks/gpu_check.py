"""The GPU check in one command: every notebook at `smoke`, workload R1 against the naive loop, one
round of every method at its `paper` settings, how much the run pool's packing of runs on the GPU
gains, the GPU hours each notebook's `paper` preset would take (one run at a time, and packed), and
batched against one-after-another gradient inversion.

    python benchmarks/gpu_check.py [--device cuda] [--steps notebooks,r1,inversion,packing,methods]
        [--tiny] [--out DIR] [--budget-s 570] [--notebooks 00_fl_primer ...]

Each step runs in its own process with a share of ``--budget-s`` (what a step leaves unused goes to
the steps after it). The steps always run in the order notebooks, r1, inversion, packing,
methods, since ``methods`` fills whatever time it gets with probes. A step that fails is
recorded with its error, one that outlasts its share is stopped and recorded as such, and the
other steps still run.
``--tiny`` shrinks every step to seconds while keeping every code path (the `smoke` presets stand
in for the `paper` ones, one probe per notebook), so ``--device cpu --tiny`` checks the whole
script on a machine without a GPU.

Writes ``<out>/gpu-<device name>.json`` (``-tiny`` appended with ``--tiny``) and the same table as
Markdown (``.md``), and prints the table.

Steps:

- ``notebooks``: every ``notebooks/*.ipynb`` at preset ``smoke`` with ``device`` set, through
  papermill, each into a fresh run cache; per notebook: ok or the error, and its seconds.
- ``r1``: FedAvg, 10 clients x 5 local epochs x 600 MNIST images, LeNet-5, evaluation every round,
  at batch 10 and 50: rounds per second through ``flkit.experiment.run`` (after a warm-up run) and
  through the naive per-client loop of ``benchmarks/naive_fedavg.py`` in the same process.
- ``methods``: one timed round (after a warm-up round) of every distinct (method, model, data,
  clients) of each notebook's ``paper`` runs, on data tiled up to the official training-set size
  (speed does not depend on the pixel values; the mirror holds reduced copies), with the peak GPU
  memory; the notebook's GPU hours = sum over its runs of rounds x seconds per round (evaluation
  spread over ``eval_every``); a gradient-inversion run of notebook 05 adds, to each round, its
  expected stale clients' inversions for all ``gi_iters`` iterations, timed first since no probe
  round holds one (at the preset's R; on a GPU eager and replayed from a CUDA graph, the faster
  costed). FedAST (simulated time): seconds per simulated time unit of the
  heterogeneous run, times each run's horizon (``paper_cost.fedast_horizon``: its ``max_time``,
  an upper bound as runs stop at their targets; Fig. 3's arrival-limited runs: the time of their
  last arrival in a timing-only run).
- ``inversion``: 10 clients' gradient inversions batched against one after another, interleaved;
  on a GPU also the batched inversion replayed from a CUDA graph against the eager one.
- ``packing``: the packing factor of each notebook (``benchmarks/packing.py``): ``k`` processes
  on the GPU, as many as the run pool would put there, each training one run of the notebook,
  against one such process alone, interleaved. The report's packed estimate
  (``paper_cost.packed_hours``) divides the hours of the runs the pool packs by it; the runs a
  notebook times (``study.timed``) and the GI runs' inversions stay one at a time, and a notebook
  without a factor (03's simulations, or one the step had no time for) keeps its hours unpacked.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: flkit from this checkout
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:  # the sibling benchmarks (naive_fedavg, bench_inversion)
    sys.path.insert(0, str(HERE))

from paper_cost import _sync  # noqa: E402 (found through the path set just above)

# The run order, whatever order --steps names them in. `methods` times probes until its deadline
# (more time, more notebooks complete), so it goes last and gets what the fixed-size steps leave.
STEPS = ("notebooks", "r1", "inversion", "packing", "methods")
# Each step's share, in seconds of the default budget (renormalised over the steps chosen and
# the time left). On an H200 the fixed-size steps took: notebooks 123-162 s over four leases
# (162 s when run alone), r1 68 s, inversion 35 s; each share is 1.2-1.3x the most seen
# (inversion's 55 s adds the graphed inversion's timings, about 8 s more). The packing step has
# never run on a GPU: 80 s is our guess (five notebooks, each a build and three pairs of about
# 0.5 + 2 s), and it stops measuring at its deadline.
WEIGHTS = {"notebooks": 195.0, "r1": 85.0, "inversion": 55.0, "packing": 80.0, "methods": 155.0}
DEFAULT_BUDGET_S = sum(WEIGHTS.values())
GRACE_S = 20.0  # past its share, a step gets this long to finish its report before it is killed
NOTEBOOKS_DIR = ROOT / "notebooks"


_PARTIAL: dict = {}  # the running step's result so far (written out if the step is stopped)


def _partial(result: dict) -> dict:
    """Register ``result`` (filled in place by the step) as what a stopped step reports."""
    _PARTIAL["result"] = result
    return result


class CheckError(Exception):
    """Bad input to the check (flkit.utils.FlkitError when flkit imports)."""


def _flkit_error():
    try:
        from flkit.utils import FlkitError

        return FlkitError
    except Exception:  # pragma: no cover - flkit broken: still say what was wrong
        return CheckError


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def device_name(device: str) -> str:
    import torch

    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"


# ------------------------------------------------------------------------------- arguments
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="torch device (default cuda)")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma list of {', '.join(STEPS)}")
    ap.add_argument("--tiny", action="store_true", help="every step at seconds' size")
    ap.add_argument("--out", default=str(HERE / "results"), help="folder of the JSON and table")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="total seconds for all steps (default %(default)s)",
    )
    ap.add_argument(
        "--notebooks",
        nargs="*",
        default=None,
        help="notebook names for the notebooks, packing and methods steps (default all; with "
        "--tiny, the notebooks step runs 00_fl_primer)",
    )
    ap.add_argument(
        "--backends",
        default="auto",
        help="comma list of engine backends the r1 step times, each pinned (default auto: the "
        "run's own measured choice)",
    )
    ap.add_argument(
        "--grace-s",
        type=float,
        default=GRACE_S,
        help="seconds a step may run past its share to report what it has (default %(default)s)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one step
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    err = _flkit_error()
    asked = [s.strip() for s in a.steps.split(",") if s.strip()]
    unknown = [s for s in asked if s not in STEPS]
    if unknown or not asked:
        raise err(f"unknown step(s) {unknown or asked!r}; accepted: {', '.join(STEPS)}")
    a.steps = [s for s in STEPS if s in asked]
    if not a.grace_s >= 0:
        raise err(f"--grace-s={a.grace_s}; accepted: a number of seconds >= 0")
    if not a.budget_s > 0:
        raise err(f"--budget-s={a.budget_s}; accepted: a number of seconds > 0")
    check_device(a.device)
    from flkit.engine import BACKENDS

    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    bad = [b for b in a.backends if b not in BACKENDS]
    if bad or not a.backends:
        raise err(f"--backends {bad or a.backends!r}; accepted: {', '.join(BACKENDS)}")
    if a.notebooks is not None:
        known = [p.stem for p in sorted(NOTEBOOKS_DIR.glob("*.ipynb"))]
        bad = [n for n in a.notebooks if Path(n).stem not in known]
        if bad:
            raise err(f"unknown notebook(s) {bad}; accepted: {', '.join(known)}")
    return a


def check_device(device: str) -> None:
    import torch

    err = _flkit_error()
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise err(f"--device {device!r} is not a torch device ({e}); accepted: cuda, cpu") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise err(
            f"--device {device!r} was asked for but CUDA is not available on this machine; "
            "accepted here: cpu"
        )
    if dev.type not in ("cuda", "cpu"):
        raise err(f"--device {device!r}; accepted: cuda, cuda:N, cpu")


# ------------------------------------------------------------------------------- step: notebooks
def step_notebooks(device: str, tiny: bool, deadline: float, names=None) -> dict:
    import papermill as pm

    paths = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    if names is None and tiny:
        names = ["00_fl_primer"]
    if names is not None:
        wanted = {Path(n).stem for n in names}
        paths = [p for p in paths if p.stem in wanted]
    rows = {}
    out = _partial({"notebooks": rows, "passed": 0, "failed": []})
    with tempfile.TemporaryDirectory(prefix="gpu-check-nb-") as tmp:
        env_before = {k: os.environ.get(k) for k in ("FLKIT_RUNS_DIR", "FLKIT_PRESET")}
        for p in paths:
            left = deadline - time.time()
            if left < 5:
                rows[p.stem] = {"status": "skipped", "error": "out of the step's time"}
                continue
            os.environ["FLKIT_RUNS_DIR"] = str(Path(tmp) / "runs" / p.stem)  # fresh cache
            os.environ["FLKIT_PRESET"] = "smoke"
            t0 = time.perf_counter()
            try:
                pm.execute_notebook(
                    str(p),
                    str(Path(tmp) / p.name),
                    parameters={"preset": "smoke", "device": device},
                    kernel_name="python3",
                    cwd=str(NOTEBOOKS_DIR),
                    progress_bar=False,
                    execution_timeout=max(5, int(left)),
                )
                rows[p.stem] = {"status": "ok", "seconds": time.perf_counter() - t0}
            except Exception as e:  # one notebook's failure is reported; the others still run
                rows[p.stem] = {
                    "status": "error",
                    "seconds": time.perf_counter() - t0,
                    "error": _short_error(e),
                }
            out["failed"] = [n for n, r in rows.items() if r["status"] != "ok"]
            out["passed"] = len(rows) - len(out["failed"])
        out["failed"] = [n for n, r in rows.items() if r["status"] != "ok"]
        out["passed"] = len(rows) - len(out["failed"])
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


def _short_error(e: BaseException, limit: int = 1500) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[:limit] + " ..."


# ------------------------------------------------------------------------------- step: r1
def r1_sizes(tiny: bool) -> dict:
    if tiny:
        return dict(clients=2, epochs=1, subset=200, rounds=1, naive_rounds=1, batches=(10, 50))
    return dict(clients=10, epochs=5, subset=6000, rounds=3, naive_rounds=1, batches=(10, 50))


def r1_config(sizes: dict, batch_size: int, device: str):
    """Workload R1 at `sizes` (`r1_sizes`) and one batch size, one round: FedAvg, LeNet-5 on
    IID MNIST, lr 0.05, seed 0."""
    from flkit.experiment import RunConfig

    return RunConfig(
        method="fedavg",
        dataset="mnist",
        model="lenet5",
        num_clients=sizes["clients"],
        clients_per_round=sizes["clients"],
        partition="iid",
        dataset_kwargs={"train_subset": sizes["subset"]},
        local_epochs=sizes["epochs"],
        batch_size=batch_size,
        lr=0.05,
        rounds=1,
        seed=0,
        device=device,
    )


def step_r1(device: str, tiny: bool, deadline: float, backends=("auto",)) -> dict:
    """Each batch size, each backend: a one-round warm-up run (it pays compilation and, for
    `auto`, the backend measurement), then the timed rounds with that backend pinned; the naive
    loop once per batch size."""
    import naive_fedavg

    from flkit.experiment import Setup, run

    z = r1_sizes(tiny)
    out = _partial({"workload": z, "backends": list(backends), "batches": {}})
    for b in z["batches"]:
        cfg = r1_config(z, b, device)
        setup = Setup.build(cfg)
        naive = naive_fedavg.fedavg(
            batch_size=b,
            rounds=z["naive_rounds"],
            clients=z["clients"],
            epochs=z["epochs"],
            subset=z["subset"],
            device=device,
            warmup=True,
        )
        naive_rps = 1.0 / naive["seconds_per_round"]
        for backend in backends:
            with tempfile.TemporaryDirectory(prefix="gpu-check-r1-") as tmp:
                warm = run(
                    cfg.replace(backend=backend),
                    out_dir=tmp,
                    progress=False,
                    cache=False,
                    setup=setup,
                )
            timed_cfg = cfg.replace(rounds=z["rounds"], backend=warm.config.backend)
            _sync(device)
            res = run(timed_cfg, progress=False, cache=False, setup=setup)
            _sync(device)
            engine_rps = z["rounds"] / res.history.attrs["wall_seconds"]
            key = str(b) if backend == "auto" and len(backends) == 1 else f"{b}/{backend}"
            out["batches"][key] = {
                "asked": backend,
                "backend": warm.config.backend,
                "engine_rounds": z["rounds"],
                "engine_rounds_per_s": engine_rps,
                "engine_accuracy": res.final(),
                "naive_rounds": z["naive_rounds"],
                "naive_rounds_per_s": naive_rps,
                "naive_accuracy": naive["accuracy"],
                "ratio": engine_rps / naive_rps,
            }
            if time.time() > deadline:
                return out
    return out


# ------------------------------------------------------------------------------- step: methods
# the paper runs, their probes and estimates: benchmarks/paper_cost.py


def step_methods(device: str, tiny: bool, deadline: float, names=None) -> dict:
    """Probes taken round-robin over the notebooks (the first distinct run of each, then the
    second, ...), so that a step cut short still has an estimate for every notebook; FedAST's
    simulated run comes last. The estimates are refreshed after every probe."""
    import torch
    from paper_cost import (
        _presets,
        estimate,
        notebook_runs,
        notebook_timed,
        paper_notebooks,
        probe_key,
        time_round,
    )

    presets = _presets()
    preset_name = "smoke" if tiny else "paper"
    out = _partial({"preset": preset_name, "probes": [], "notebooks": {}})
    data_cache: dict = {}
    plans = {}  # notebook -> (preset, runs, keys, first run of each key, timed probes)
    alone = {}  # notebook -> identities of the runs it times (the pool runs them alone)
    stems = None if names is None else {Path(n).stem for n in names}
    wanted = [n for n in paper_notebooks() if stems is None or n in stems]
    for nb in wanted:
        preset = presets.load(nb, preset_name)
        info = out["notebooks"][nb] = {"runs": 0, "probed": 0, "errors": []}
        try:
            runs = notebook_runs(nb, preset)
        except Exception as e:
            info["errors"].append(_short_error(e))
            continue
        info["runs"] = len(runs)
        alone[nb] = notebook_timed(nb, preset)
        if nb == "03_fedast":
            plans[nb] = (preset, runs, [], {}, {})
            continue
        first = {}
        for c in runs:
            first.setdefault(probe_key(c), c)
        keys = list(first)[:1] if tiny else list(first)
        plans[nb] = (preset, runs, keys, first, {})
    if "05_staleness" in plans:  # first: a step cut short must not drop it (it did, four times)
        _time_inversion(*plans["05_staleness"][:2], device, tiny, out["notebooks"]["05_staleness"])
    engine = [nb for nb in plans if nb != "03_fedast"]
    for i in range(max((len(plans[nb][2]) for nb in engine), default=0)):
        for nb in engine:
            preset, runs, keys, first, timed = plans[nb]
            if i >= len(keys):
                continue
            info = out["notebooks"][nb]
            if time.time() > deadline - 15:
                if "untimed" not in " ".join(info["errors"]):
                    info["errors"].append("out of the step's time: probes left untimed")
                continue
            k = keys[i]
            try:
                r = time_round(first[k], device, tiny, data_cache)
                r["notebook"] = nb
                timed[k] = r
                out["probes"].append(r)
            except Exception as e:  # a failing probe is reported; the others still run
                info["errors"].append(f"{k[0]}/{k[2]}: {_short_error(e, 400)}")
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
            info["probed"] = len(timed)
            estimate(runs, timed, info, info.get("gi_extra_s_per_round"), alone[nb])
    if "03_fedast" in plans:
        preset, runs, *_ = plans["03_fedast"]
        _fedast_estimate(preset, runs, device, tiny, deadline, out["notebooks"]["03_fedast"], out)
    return out


def _time_inversion(preset, runs, device: str, tiny: bool, info: dict) -> None:
    """Seconds of inversion a GI run adds per round, into ``info``. No probe round holds an
    inversion (stale updates arrive after tau rounds), so they are timed apart: the expected stale
    clients of a round, each at one client's iteration time, for all ``gi_iters`` iterations (an
    upper bound: the method inverts a round's stale clients in one batch, and the switch back to
    plain aggregation ends inversions)."""
    from paper_cost import gi_seconds_per_round, inversion_seconds_per_iter

    if not any(c.method == "gi_staleness" for c in runs):
        return
    import torch

    # on a GPU the graphed inversion too (25 iterations: 3 eager, the recording, 21 replays); the
    # estimate takes the faster, as a run that pins it would
    backends = ("wide", "graph") if torch.device(device).type == "cuda" else ("wide",)
    size, iters = int(preset["gi_size"]), 2 if tiny else 25
    by_backend = {}
    for backend in backends:
        try:
            by_backend[backend] = inversion_seconds_per_iter(device, size, iters, backend)
        except Exception as e:
            info["errors"].append(f"inversion timing ({backend}): {_short_error(e, 400)}")
    if not by_backend:
        return
    backend, s_iter = min(by_backend.items(), key=lambda kv: kv[1])
    info["inversion_s_per_iter"] = s_iter
    info["inversion_backend"] = backend
    info["inversion_s_per_iter_by_backend"] = by_backend
    info["inversion_size"] = size
    info["gi_extra_s_per_round"] = gi_seconds_per_round(preset, s_iter)


def _fedast_estimate(preset, runs, device, tiny, deadline, info, out) -> None:
    from paper_cost import fedast_hours, fedast_probe_config, time_fedast

    probe_cfg = fedast_probe_config(runs)
    horizon = 5.0 if tiny else 20.0
    if time.time() > deadline - 15:
        info["errors"].append("out of the step's time: not probed")
        info["gpu_hours"], info["complete"] = None, False
        return
    try:
        r = time_fedast(probe_cfg, device, horizon)
    except Exception as e:
        info["errors"].append(_short_error(e, 400))
        info["gpu_hours"], info["complete"] = None, False
        return
    r["notebook"] = "03_fedast"
    out["probes"].append(r)
    info["probed"] = 1
    info["gpu_hours"] = fedast_hours(runs, r["seconds_per_time_unit"])
    info["complete"] = False  # one probe for every run, and runs stop at their targets
    info["note"] = (
        "every run to its horizon at the heterogeneous run's speed: an upper bound, but for "
        "Fig. 3's arrival-limited runs, timed to their last arrival"
    )


# ------------------------------------------------------------------------------- step: inversion
def step_inversion(device: str, tiny: bool, deadline: float) -> dict:
    import statistics

    import bench_inversion
    import torch

    from flkit import models

    dev = torch.device(device)
    r, iters, repeats, k = (8, 2, 1, 10) if tiny else (64, 20, 3, 10)
    torch.manual_seed(0)
    model = models.build("cnn_mnist", num_classes=10, in_channels=1).to(dev)
    bench_inversion.one(model, k, r, 1, dev)  # warm-up of both shapes
    bench_inversion.one(model, 1, r, 1, dev)
    batched, seq = [], []
    for _ in range(repeats):
        batched.append(bench_inversion.one(model, k, r, iters, dev))
        seq.append(sum(bench_inversion.one(model, 1, r, iters, dev) for _ in range(k)))
        if time.time() > deadline - 10:
            break
    ratios = [s / b for s, b in zip(seq, batched)]
    out = {
        "clients": k,
        "R": r,
        "iters": iters,
        "repeats": len(batched),
        "batched_s": batched,
        "sequential_s": seq,
        "speedup_min": min(ratios),
        "speedup_median": statistics.median(ratios),
    }
    if dev.type == "cuda":  # the batched inversion replayed from a CUDA graph, interleaved
        gi_iters = 25  # 3 eager, the recording, 21 replays
        bench_inversion.one(model, k, r, gi_iters, dev, "graph")  # warm-up
        wide, graph = [], []
        for _ in range(repeats):
            if time.time() > deadline - 10:
                break
            wide.append(bench_inversion.one(model, k, r, gi_iters, dev, "wide"))
            graph.append(bench_inversion.one(model, k, r, gi_iters, dev, "graph"))
        if graph:
            out.update(
                graph_iters=gi_iters,
                batched_wide_s=wide,
                batched_graph_s=graph,
                graph_ms_per_client_iter=1e3 * min(graph) / (k * gi_iters),
                wide_ms_per_client_iter=1e3 * min(wide) / (k * gi_iters),
            )
    return out


# ------------------------------------------------------------------------------- step: packing
def step_packing(device: str, tiny: bool, deadline: float, names=None) -> dict:
    """The packing factor of every notebook named (default all), :func:`packing.measure`."""
    import packing
    from paper_cost import paper_notebooks

    stems = None if names is None else {Path(n).stem for n in names}
    wanted = [n for n in paper_notebooks() if stems is None or n in stems]
    return packing.measure(device, tiny, deadline, wanted, _partial({"notebooks": {}}))


STEP_FUNCS = {
    "notebooks": step_notebooks,
    "packing": step_packing,
    "r1": step_r1,
    "methods": step_methods,
    "inversion": step_inversion,
}


# ------------------------------------------------------------------------------- driver
def run_child(a) -> int:
    """One step in this process; its record goes to ``a.result`` (JSON)."""
    t0 = time.perf_counter()
    rec = {"status": "ok"}
    watchdog = threading.Timer(
        max(0.1, a.deadline - time.time() + a.grace_s / 2), _stopped, (a.result, t0)
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        if a.child == "notebooks":
            rec["result"] = step_notebooks(a.device, a.tiny, a.deadline, a.notebooks)
        elif a.child == "r1":
            rec["result"] = step_r1(a.device, a.tiny, a.deadline, a.backends)
        elif a.child == "methods":
            rec["result"] = step_methods(a.device, a.tiny, a.deadline, a.notebooks)
        elif a.child == "packing":
            rec["result"] = step_packing(a.device, a.tiny, a.deadline, a.notebooks)
        else:
            rec["result"] = STEP_FUNCS[a.child](a.device, a.tiny, a.deadline)
    except BaseException as e:  # the parent reports it; the other steps still run
        rec = {"status": "error", "error": _short_error(e), "traceback": traceback.format_exc()}
    watchdog.cancel()
    rec["wall_s"] = time.perf_counter() - t0
    Path(a.result).write_text(json.dumps(rec, indent=1, default=str))
    return 0


def _stopped(result_path: str, t0: float) -> None:
    """The step outlasted its share: write what it has so far and end the process."""
    for _ in range(5):  # the step may be changing the result while it is written
        try:
            text = json.dumps(
                {
                    "status": "timeout",
                    "error": "stopped at the end of its share of the budget; result partial",
                    "result": _PARTIAL.get("result"),
                    "wall_s": time.perf_counter() - t0,
                },
                indent=1,
                default=str,
            )
            break
        except RuntimeError:
            time.sleep(0.05)
    else:
        text = json.dumps({"status": "timeout", "error": "stopped at the end of its share"})
    Path(result_path).write_text(text)
    _kill_group(os.getpid())  # this step's process group: this process and its kernels
    os._exit(3)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def step_share(step: str, left: float, steps_left: list[str]) -> float:
    """Seconds ``step`` may take of the ``left`` ones, ``steps_left`` (it first) still to run."""
    return left * WEIGHTS[step] / sum(WEIGHTS[s] for s in steps_left)


def run_steps(a) -> dict:
    import torch

    t_start = time.perf_counter()
    report = {
        "device": a.device,
        "device_name": device_name(a.device),
        "torch": torch.__version__,
        "tiny": bool(a.tiny),
        "budget_s": a.budget_s,
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "steps": {},
    }
    for i, step in enumerate(a.steps):
        used = time.perf_counter() - t_start
        left = a.budget_s - used
        share = step_share(step, left, a.steps[i:])
        print(f"[gpu_check] {step}: up to {share:.0f} s", flush=True)
        if share < 1:
            report["steps"][step] = {"status": "skipped", "error": "no budget left", "wall_s": 0}
            continue
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
            res_path = Path(tmp) / "result.json"
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                step,
                "--device",
                a.device,
                "--result",
                str(res_path),
                "--deadline",
                str(time.time() + share),
                "--grace-s",
                str(a.grace_s),
            ]
            if a.tiny:
                cmd.append("--tiny")
            if a.notebooks is not None:
                cmd += ["--notebooks", *a.notebooks]
            cmd += ["--backends", ",".join(a.backends)]
            t0 = time.perf_counter()
            # its own process group: a stopped step takes its notebook kernels down with it
            proc = subprocess.Popen(cmd, start_new_session=True)
            try:
                rc = proc.wait(timeout=share + a.grace_s)
            except subprocess.TimeoutExpired:
                rc = None
            _kill_group(proc.pid)
            proc.wait()
            wall = time.perf_counter() - t0
            if res_path.exists():
                rec = json.loads(res_path.read_text())
            elif rc is None:
                rec = {
                    "status": "timeout",
                    "error": f"stopped after {wall:.0f} s (share {share:.0f} s)",
                }
            else:
                rec = {"status": "error", "error": f"step process exited with code {rc}"}
            rec["wall_s"] = wall
            rec["share_s"] = share
        report["steps"][step] = rec
    report["wall_s"] = time.perf_counter() - t_start
    return report


def _f(x, fmt="{:.3g}") -> str:
    return "-" if x is None else fmt.format(x)


def table(report: dict) -> str:
    """The Markdown table of a report."""
    lines = [
        f"GPU check on {report['device_name']} ({report['device']}, torch {report['torch']}"
        f"{', tiny sizes' if report['tiny'] else ''}), {report['started_utc']} UTC, "
        f"whole check {report.get('wall_s', 0):.0f} s",
        "",
        "| step | status | wall s | result |",
        "| --- | --- | --- | --- |",
    ]
    for step, rec in report["steps"].items():
        res = rec.get("result") or {}
        what = rec.get("error", "") if rec["status"] != "ok" else _summary(step, res)
        if step == "notebooks" and res.get("failed"):
            what += "; " + "; ".join(
                f"{n}: {res['notebooks'][n].get('error', '')[-300:]}" for n in res["failed"]
            )
        lines.append(f"| {step} | {rec['status']} | {rec.get('wall_s', 0):.0f} | {_cell(what)} |")
    methods = (report["steps"].get("methods") or {}).get("result")
    if methods:
        lines += [
            "",
            f"Methods, one round at the `{methods['preset']}` settings (after a warm-up round):",
            "",
            "| notebook | method | model | data | clients/round | setup s | s/round | peak GiB "
            "| off device |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for p in methods["probes"]:
            if "round_s" in p:
                peak = None if p["peak_mem_bytes"] is None else p["peak_mem_bytes"] / 2**30
                lines.append(
                    f"| {p['notebook']} | {p['method']} | {p['model']} | {p['dataset']} "
                    f"({p['train_samples']}) | {p['clients_per_round']} | "
                    f"{_f(p.get('setup_s'))} | {_f(p['seconds_per_round'])} | "
                    f"{_f(peak, '{:.2f}')} | "
                    f"{_cell(', '.join(p['off_device']) or 'none', 200)} |"
                )
            else:
                lines.append(
                    f"| {p['notebook']} | {p['method']} | tasks {'+'.join(p['tasks'])} | "
                    f"{p['simulated_time']:.1f} time units | - | {_f(p.get('setup_s'))} | "
                    f"{_f(p['seconds_per_time_unit'])} per time unit | - | - |"
                )
        est = report.get("estimates") or {"notebooks": {}, "total": {}}
        lines += [
            "",
            f"Estimated GPU hours of each notebook's `{methods['preset']}` preset: one run at a "
            "time (sum over its runs of rounds x s/round; a GI run adds its inversions to each "
            "round), and packed (the runs the pool packs, divided by the notebook's packing "
            "factor: k runs per GPU against one alone; the runs it times and the inversions "
            "stay one at a time; no factor: unpacked):",
            "",
            "| notebook | runs | probes | GPU hours, one at a time | packing factor (k) "
            "| GPU hours, packed | complete | errors |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for nb, info in methods["notebooks"].items():
            errs = _cell("; ".join(info.get("errors", [])), 300)
            row = est["notebooks"].get(nb, {})
            f = row.get("factor")
            pack = "not measured" if f is None else f"{f:.2f} ({row['k']})"
            lines.append(
                f"| {nb} | {info.get('runs', 0)} | {info.get('probed', 0)} | "
                f"{_f(info.get('gpu_hours'))} | {pack} | {_f(row.get('packed_gpu_hours'))} | "
                f"{info.get('complete')} | {errs} |"
            )
        tot = est.get("total") or {}
        if tot:
            left = ", ".join(tot["without_estimate"]) or "none"
            lines.append(
                f"| all | | | {_f(tot['gpu_hours'])} | | {_f(tot['packed_gpu_hours'])} | | "
                f"without an estimate: {left} |"
            )
        for nb, info in methods["notebooks"].items():
            if "gi_extra_s_per_round" in info:
                lines.append(
                    f"\n{nb}: inversion ({info.get('inversion_backend', 'wide')}, R = "
                    f"{info.get('inversion_size')}) {_f(info['inversion_s_per_iter'])} s per "
                    "iteration, "
                    f"{_f(info['gi_extra_s_per_round'])} s per GI round (an upper bound: every "
                    "iteration, every round)."
                )
    return "\n".join(lines) + "\n"


def _cell(text: str, limit: int = 600) -> str:
    """One Markdown table cell: one line, no bare '|', at most ``limit`` characters."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _summary(step: str, res: dict) -> str:
    if step == "notebooks":
        bad = ", ".join(res.get("failed", [])) or "none"
        return f"{res.get('passed', 0)} passed; failed: {bad}"
    if step == "r1":
        return "; ".join(
            f"batch {b}: engine ({v['backend']}) {v['engine_rounds_per_s']:.3g} rounds/s, naive "
            f"{v['naive_rounds_per_s']:.3g} rounds/s, ratio {v['ratio']:.3g}x"
            for b, v in res.get("batches", {}).items()
        )
    if step == "methods":
        return f"{len(res.get('probes', []))} probes (tables below)"
    if step == "packing":
        rows = res.get("notebooks", {})
        got = [f"{nb} {r['factor']:.2f}x" for nb, r in rows.items() if "factor" in r]
        k = {r["k"] for r in rows.values() if "k" in r}
        head = f"k = {', '.join(map(str, sorted(k)))} runs per device: " if k else ""
        return (
            head
            + ("; ".join(got) or "no factor measured")
            + (
                f"; not measured: {', '.join(nb for nb, r in rows.items() if 'factor' not in r)}"
                if any("factor" not in r for r in rows.values())
                else ""
            )
        )
    if step == "inversion":
        text = (
            f"{res['clients']} clients, R={res['R']}, {res['iters']} iterations: batched "
            f"{min(res['batched_s']):.3g} s, one after another {min(res['sequential_s']):.3g} s, "
            f"speedup min {res['speedup_min']:.3g}x median {res['speedup_median']:.3g}x"
        )
        if "batched_graph_s" in res:
            text += (
                f"; batched, {res['graph_iters']} iterations: graph "
                f"{res['graph_ms_per_client_iter']:.3g} ms per client-iteration, wide "
                f"{res['wide_ms_per_client_iter']:.3g} ms"
            )
        return text
    return ""


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.child:
        return run_child(a)
    report = run_steps(a)
    methods = (report["steps"].get("methods") or {}).get("result")
    if methods:
        from paper_cost import packed_estimates

        packing = (report["steps"].get("packing") or {}).get("result")
        report["estimates"] = packed_estimates(methods, packing)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{_slug(report['device_name'])}" + ("-tiny" if a.tiny else "")
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    text = table(report)
    (out / f"{stem}.md").write_text(text)
    print(text, flush=True)
    print(f"[gpu_check] wrote {out / (stem + '.json')} and {stem}.md", flush=True)
    return 0 if all(r["status"] == "ok" for r in report["steps"].values()) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:
        if type(e).__name__ in ("FlkitError", "CheckError"):
            print(f"gpu_check: error: {e}", file=sys.stderr)
            sys.exit(2)
        raise
