"""Entry points of a simulated experiment on real data: :func:`run` (validated, cached on disk by
the configuration hash, a tqdm bar on simulated time), :func:`build_schedule` and
:func:`centralised` (the pooled-data reference curve).

Every one trains under the divergence rule of :mod:`flkit.divergence`. :func:`run` and
:func:`build_schedule` watch each task per server update (the history's ``round``): a training
loss (the mean local loss of the updates a server update aggregates) or test loss that is not
finite stops the run with an error naming the task and round, and nothing is cached; a loss above
the rule's limit marks the task diverged (``stats["diverged"]`` and ``"diverged": True`` in its
history rows from that round on), and :func:`run` returns the run with a DivergedWarning each
time, trained or read from the cache. :func:`centralised` is judged on its one training segment
(:func:`judge_central`) the same way."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from .. import data as _data
from .. import divergence, store
from ..data.provenance import cache_key as _data_key
from ..engine import train_clients
from ..progress import bar as new_bar
from ..progress import finish
from ..state import broadcast_state
from ..utils import FlkitError, check_range, derive_seed, resolve_device
from .config import FedASTRun
from .defaults import METHOD_LABELS
from .fedast import FedAST
from .schedule import SimResult
from .sync import SyncST
from .tasks import TaskConfig
from .trainer import EngineTrainer, data_kwargs

__all__ = [
    "run",
    "cached",
    "build_schedule",
    "centralised",
    "judge_central",
    "cache_key",
    "run_folder",
    "open_folder",
    "commit",
    "data_used",
    "CACHE_VERSION",
]

#: the files of a finished run, checked against the folder's manifest before it is served
RUN_FILES = ("config.json", "data.json", "result.json")
#: the file of a cached centralised reference
CENTRAL_FILES = ("result.json",)
#: the losses a centralised reference records, as the divergence rule names them
CENTRAL_LOSSES = {
    "start": "test loss of the untrained model",
    "train_loss": "training loss",
    "test_loss": "test loss",
}

#: part of every cache key: bump it when a change alters results, so old runs are not reused
CACHE_VERSION = 3  # 3: Sync-ST weights in client units; Shakespeare fresh batches


def build_schedule(config, seed: int = 0, device="auto", trainer: EngineTrainer | None = None):
    """(scheduler, trainer) ready to ``.run()``: validated config, real trainer, no caching. The
    default trainer is a :class:`WatchedTrainer`: a non-finite loss stops the schedule with the
    task and round named, and ``trainer.diverged()`` says which tasks passed the limit."""
    cfg = FedASTRun.from_dict(config).validate()
    trainer = trainer or WatchedTrainer(cfg, seed=seed, device=device)
    sched = (SyncST if cfg.is_sync else FedAST)(cfg, trainer, seed=int(seed))
    return sched, trainer


class WatchedTrainer(EngineTrainer):
    """:class:`EngineTrainer` under the divergence rule: each task's training loss is seen at
    every server update, its test loss at every evaluation (the loss the history records)."""

    def __init__(self, config, seed: int = 0, device="auto", **kw):
        super().__init__(config, seed=seed, device=device, **kw)
        advice = "a smaller client or server learning rate usually keeps it finite"
        self.watches = {
            name: {
                c: divergence.LossWatch(what, "round", advice)
                for c, what in (("train_loss", "training loss"), ("test_loss", "test loss"))
            }
            for name in self.tasks
        }

    def _see(self, task: str, column: str, value) -> None:
        rnd = self.tasks[task].current
        self.watches[task][column].see(rnd, value, f"round {rnd} of task {task!r}")

    def aggregate(self, task: str, updates) -> int:
        version = super().aggregate(task, updates)
        self._see(task, "train_loss", self.tasks[task].last_loss)
        return version

    def evaluate(self, task: str) -> tuple[float, dict]:
        acc, extra = super().evaluate(task)
        self._see(task, "test_loss", extra["test_loss"])
        return acc, extra

    def diverged(self) -> dict[str, divergence.Divergence]:
        """{task: where its first loss passed the limit} for the tasks that diverged."""
        found = {
            name: divergence.earliest(w.diverged for w in ws.values())
            for name, ws in self.watches.items()
        }
        return {name: d for name, d in found.items() if d is not None}


def mark_diverged(res: SimResult, found: dict[str, divergence.Divergence]) -> None:
    """Record the diverged tasks in ``res``: ``stats["diverged"]`` ({task: where}) and
    ``"diverged": True`` in the task's history rows from that round on. A run with no diverged
    task is left as it is (its cached files do not change)."""
    if not found:
        return
    res.stats["diverged"] = {name: d.to_dict() for name, d in found.items()}
    for row in res.history:
        d = found.get(row.get("task"))
        if d is not None and row.get("round") is not None and row["round"] >= d.at:
            row["diverged"] = True


def judge(res: SimResult) -> dict[str, divergence.Divergence]:
    """The diverged tasks of a stored run: those its stats record (a training loss that passed
    the limit) and those whose recorded test losses do (so a run cached before the rule is
    judged too)."""
    found = {
        name: divergence.Divergence.from_dict(d)
        for name, d in (res.stats.get("diverged") or {}).items()
    }
    for name in res.tasks:
        rows = [r for r in res.history if r.get("task") == name]
        test = divergence.judge(((r["round"], r.get("test_loss")) for r in rows), "test loss")
        first = divergence.earliest([found.get(name), test])
        if first is not None:
            found[name] = first
    return found


def _warn(where: str, found: dict[str, divergence.Divergence], stacklevel: int = 4) -> None:
    for name, d in found.items():
        divergence.warn(f"task {name!r} of {where}", d, stacklevel=stacklevel)


def data_used(cfg: FedASTRun) -> list[dict]:
    """The identity of each task's data copy (:func:`flkit.data.identity`), one per task; a
    reduced copy is refused here when the active preset needs the full dataset."""
    return [_data.identity(t.dataset, **data_kwargs(t, cfg)) for t in cfg.tasks]


def _threads(device) -> dict:
    """On the CPU, the torch intra-op threads a run computes with now: they split sums into other
    partial sums, so the same run at 1 and at 2 threads gives other floats. A GPU run does its
    float work on the GPU, whatever the CPU thread count: none."""
    return {"threads": torch.get_num_threads()} if torch.device(device).type == "cpu" else {}


def cache_key(cfg: FedASTRun, seed: int, device) -> dict:
    """What names a cached run: the config, the seed, the device type, on the CPU the torch
    thread count (``torch.get_num_threads()`` when called), CACHE_VERSION and the content of every
    task's data copy (sizes and label checksum: a run on a reduced copy is never served for the
    full dataset)."""
    return {
        "config": cfg.to_dict(),
        "seed": int(seed),
        "device": str(device.type),
        **_threads(device),
        "v": CACHE_VERSION,
        "data": [_data_key(d) for d in data_used(cfg)],
    }


def run_folder(cfg: FedASTRun, seed: int, device, root=None, key: dict | None = None) -> Path:
    """The run-cache folder of (validated config, seed, resolved device): named by the hash of
    :func:`cache_key` (pass ``key`` when it is already computed)."""
    key = key if key is not None else cache_key(cfg, seed, device)
    return store.run_dir(root, key, prefix=cfg.method)


def open_folder(cfg: FedASTRun, seed: int, device, root=None, key: dict | None = None):
    """The :class:`~flkit.store.RunFolder` of (validated config, seed, resolved device): its
    config.json records :func:`cache_key` (pass ``key`` when it is already computed)."""
    key = key if key is not None else cache_key(cfg, seed, device)
    return store.RunFolder(run_folder(cfg, seed, device, root, key), RUN_FILES, key)


def commit(folder: store.RunFolder, res: SimResult, data: list[dict]) -> None:
    """Write the finished run ``res`` into ``folder``, with the data copies it used."""
    result = {
        "method": res.method,
        "tasks": res.tasks,
        "events": [list(e) for e in res.events],
        "history": res.history,
        "completion_time": res.completion_time,
        "total_time": res.total_time,
        "stats": res.stats,
        "allocations": res.allocations,
    }
    folder.commit({"data.json": data, "result.json": result}, len(res.history))


def non_finite(res: SimResult) -> str:
    """The first non-finite loss a stored run records ("" when none): the rule stops such a run
    before it is cached, so only a run cached before the rule holds one, and it is never served.
    (A history row holds ``test_loss`` only when that server update was evaluated.)"""
    for row in res.history:
        v = row.get("test_loss", 0.0)
        if v is None or not math.isfinite(float(v)):
            return f"a test loss of {v} at round {row.get('round')} of task {row.get('task')!r}"
    return ""


def _load(folder: store.RunFolder) -> SimResult:
    """A cached run, with its diverged tasks marked and warned about (:func:`judge`); a
    DamagedRunError when it holds a non-finite loss."""
    with folder.reading("result.json") as path:
        d = store.load_json(path)
        res = SimResult(
            d["method"],
            d["tasks"],
            [tuple(e) for e in d["events"]],
            d["history"],
            d["completion_time"],
            d["total_time"],
            d["stats"],
            d["allocations"],
        )
    bad = non_finite(res)
    if bad:
        raise folder.damaged("result.json", f"result.json holds {bad}, which is never served")
    found = judge(res)
    mark_diverged(res, found)
    _warn(f"cached run {folder.path}", found, stacklevel=6)  # the caller of run() or cached()
    return res


def cached(
    config, seed: int = 0, *, device="auto", root: str | Path | None = None, threads=None
) -> SimResult | None:
    """The result :func:`run` would serve from the run cache under ``root`` for (``config``,
    ``seed``, ``device``), or None when no whole run is cached there; nothing is trained.
    ``threads``: the torch thread count the run was cached under on the CPU (None: the current
    count, as :func:`run` looks it up). Read-only, so it can read a cache it must not change: a
    damaged folder, or one written before manifests (which :func:`run` would seal), gives None
    and is left as it is."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise FlkitError(f"seed={seed!r}; accepted: an integer")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1
    ):
        raise FlkitError(
            f"threads={threads!r}; accepted: an integer >= 1 (a CPU run's torch thread count), "
            "or None for the current count"
        )
    cfg = FedASTRun.from_dict(config).validate()
    dev = resolve_device(device)
    key = cache_key(cfg, seed, dev)
    if threads is not None and "threads" in key:
        key["threads"] = int(threads)
    return open_folder(cfg, seed, dev, root, key).serve(_load, repair=False)


def run(
    config,
    seed: int = 0,
    *,
    cache: bool = True,
    progress: bool = True,
    device="auto",
    root: str | Path | None = None,
) -> SimResult:
    """Run one simulated experiment (``config``: a :class:`FedASTRun` or its dict) and return its
    :class:`~flkit.asyncfl.SimResult`.

    Everything is validated before any data is loaded or any model trained. With ``cache`` the
    result is stored under ``root`` (default :func:`flkit.store.default_root`) in a folder named by
    the hash of (config, seed, device type, CPU threads: :func:`cache_key`) and loaded from there
    on the next call, once its files match their manifest (a damaged folder is reported and run
    again; its config.json is the key). ``stats`` gains ``wall_seconds``, ``trained`` (client
    trainings) and ``train_calls``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise FlkitError(f"seed={seed!r}; accepted: an integer")
    cfg = FedASTRun.from_dict(config).validate()
    dev = resolve_device(device)
    folder = open_folder(cfg, seed, dev, root) if cache else None
    served = folder.serve(_load) if folder is not None else None
    if served is not None:
        return served
    if folder is not None:
        folder.begin()  # an unwritable cache fails here, before any simulation
    t0 = time.perf_counter()
    sched, trainer = build_schedule(cfg, seed, dev, WatchedTrainer(cfg, seed=seed, device=dev))
    bar = None
    if progress:
        total = cfg.max_time if cfg.max_time is not None else None
        label = METHOD_LABELS[cfg.method]
        bar = new_bar(
            total=total,
            desc=f"{label} ({len(cfg.tasks)} tasks, seed {seed})",
            unit="t",
            bar_format="{desc}: sim time {n:.3g}{postfix}" if total is None else None,
        )
        accs = {}

        def hook(task, acc):
            accs[task] = acc
            now = sched.sim.now
            bar.n = min(now, total) if total else now
            bar.set_postfix({k: f"{v:.3f}" for k, v in accs.items()}, refresh=True)

        trainer.on_evaluate = hook
    done = False
    try:
        res = sched.run()
        done = True  # also when every task reached its target before max_time
    finally:
        finish(bar, done)
    res.stats["wall_seconds"] = time.perf_counter() - t0
    res.stats["trained"] = trainer.trained
    res.stats["train_calls_engine"] = trainer.train_calls
    res.stats["train_seconds"] = trainer.train_seconds
    res.stats["mean_batch"] = float(np.mean(trainer.batch_sizes)) if trainer.batch_sizes else 0.0
    res.stats["final_accuracy"] = {n: trainer.evaluate_full(n) for n in trainer.tasks}
    mark_diverged(res, trainer.diverged())
    if folder is not None:
        commit(folder, res, data_used(cfg))
    _warn(f"run {folder.path if folder else 'not cached'}", trainer.diverged())
    return res


def centralised(
    task,
    steps: int,
    seed: int = 0,
    device="auto",
    eval_subset: int | None = None,
    cache: bool = True,
    root=None,
) -> float:
    """Reference for Fig. 3: one model trained by plain SGD on the pooled data of all clients
    (the union of the partition, iid mini-batches of the task's batch size, the async client lr and
    weight decay) for ``steps`` steps; returns the full test accuracy. The paper does not say
    how its centralised curve was trained; this is a cheap, clearly-labelled stand-in.

    Under the divergence rule of :mod:`flkit.divergence` (:func:`judge_central`): a training or
    test loss that is not finite stops it with an error and nothing is cached; a loss above the
    rule's limit marks it diverged in its cached result (``"diverged"``) and warns
    (DivergedWarning) each time it is returned, trained or read from the cache."""
    t = task if isinstance(task, TaskConfig) else TaskConfig(**task)
    check_range("steps", steps, 1)
    cfg = FedASTRun("fedast_d", (replace(t, target=None, max_rounds=1),), num_clients=1000)
    cfg.validate()
    dev = resolve_device(device)
    key = {
        "centralised": {k: v for k, v in asdict(t).items() if k != "model_flags" or v is not None},
        "steps": int(steps),
        "seed": int(seed),
        "device": dev.type,
        **_threads(dev),
        "v": CACHE_VERSION,
        "data": [_data_key(d) for d in data_used(cfg)],
    }
    path = store.run_dir(root, key, prefix="centralised")
    folder = store.RunFolder(path, CENTRAL_FILES) if cache else None
    served = folder.serve(_central_result) if folder is not None else None
    if served is not None:
        accuracy, losses = served
        bad = [
            f"{CENTRAL_LOSSES[c]} of {v}" for c, v in (losses or {}).items() if not math.isfinite(v)
        ]
        if not bad:
            found = judge_central(losses, int(steps))
            divergence.warn(f"the centralised reference {path}", found)
            return accuracy
        # cached before the rule stopped such a run: run again, now stopped where it fails
        warnings.warn(f"cached run {path} holds a {bad[0]}: it is run again", stacklevel=2)
        folder.discard()
    tr = EngineTrainer(cfg, seed=seed, device=dev)
    st = tr.tasks[t.name]
    pooled = torch.unique(torch.cat(list(st.parts)))
    spec = replace(st.spec, epochs=None, steps=int(steps), drop_last=True)
    losses = {"start": tr.measure(t.name)[1]}  # the untrained model's test loss
    res = train_clients(
        st.model,
        broadcast_state(st.versions[0], 1),
        st.data.x_train,
        st.data.y_train,
        [pooled],
        spec,
        [derive_seed(seed, "centralised")],
    )
    losses["train_loss"] = float(res.train_loss[0])
    st.versions[0] = {n: v[0] for n, v in res.state.items()}
    acc, losses["test_loss"] = tr.measure(t.name)
    found = judge_central(losses, int(steps))  # raises on a non-finite loss: nothing cached
    if folder is not None:
        result = {
            "accuracy": acc,
            "key": key,
            "data": data_used(cfg),
            "losses": losses,
            "diverged": None if found is None else found.to_dict(),
        }
        folder.commit({"result.json": result}, 1)
    divergence.warn(f"the centralised reference {path if cache else '(not cached)'}", found)
    return acc


def judge_central(losses: dict | None, steps: int) -> divergence.Divergence | None:
    """The divergence rule on the centralised reference's losses (``{"start", "train_loss",
    "test_loss"}``): FlkitError when one is not finite, else where a loss passed the limit, or
    None.

    Its training is one call of ``steps`` steps, so each loss has one value after it: the
    training loss (the mean over the steps) and the test loss of the trained model. Both are
    compared with one start, the untrained model's test loss: before any step the model has seen
    neither the pooled training data nor the test set, which come from one distribution, so its
    loss on the test set is its loss on the training data up to sampling noise (far below the
    rule's factor of 1e3), and it costs no pass over the pooled data. A result cached before the
    rule records no losses (None): nothing is known to judge, and it is served as it is."""
    if losses is None:
        return None
    advice = "a smaller learning rate usually keeps it finite"
    start = divergence.check_finite(
        losses["start"], CENTRAL_LOSSES["start"], "step 0 of the centralised reference", advice
    )
    found = []
    for column in ("train_loss", "test_loss"):
        watch = divergence.LossWatch(CENTRAL_LOSSES[column], "step", advice)
        watch.see(0, start)
        where = f"step {steps}" if column == "test_loss" else f"steps 1-{steps} (their mean)"
        watch.see(steps, losses[column], f"{where} of the centralised reference")
        found.append(watch.diverged)
    return divergence.earliest(found)


def _central_result(folder: store.RunFolder) -> tuple[float, dict | None]:
    """A cached reference's accuracy and losses (None: cached before losses were recorded)."""
    with folder.reading("result.json") as path:
        stored = store.load_json(path)
        return float(stored["accuracy"]), stored.get("losses")
