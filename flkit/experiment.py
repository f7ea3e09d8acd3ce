"""One federated run: config -> data -> partition -> model -> method rounds -> history.

    cfg = RunConfig(method="fedavg", dataset="mnist", model="lenet5", num_clients=100,
                    partition="dirichlet", partition_kwargs={"alpha": 0.5}, clients_per_round=10,
                    local_epochs=1, batch_size=50, lr=0.05, rounds=20, seed=0)
    result = run(cfg)            # cached: the same config loads from disk instead of retraining
    result.history.plot(x="round", y="test_accuracy")

Every random choice derives from `seed` through named streams (flkit.utils.derive_seed); dropout
draws from torch's global generator, seeded with the model's initialisation, whose state every
checkpoint saves and a resume restores (the "auto" backend's timing probe puts it back after
drawing from it). A run resumed from a checkpoint therefore writes, byte for byte, the history of
a run never stopped, and a measured backend choice trains like a remembered or pinned one.

A CPU run's identity (key, folder name) holds its torch thread count: a run at 1 thread is never
served to a process at 2, and a checkpoint resumes only under its own count.

A run goes through its folder (:class:`flkit.store.RunFolder`), then builds its setup, trains
its rounds and commits the folder. A finished folder is served only when its files match their
manifest; a damaged one is reported with the file and why and trained again, a damaged
checkpoint is never resumed from, and divergence follows :mod:`flkit.divergence` (trained or
served, a run is marked diverged). The config, :class:`RunConfig`, is :mod:`flkit.run_config`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from . import divergence, methods, metrics, rng_state, store
from .methods.hyperparameters import check_value
from .progress import bar as progress_bar
from .progress import finish
from .run_config import RunConfig, config_of
from .state import model_state
from .utils import FlkitError, derive_seed, resolve_device

if TYPE_CHECKING:  # imported when the history is built: a run needs pandas only at its end
    import pandas as pd

__all__ = [
    "RunConfig",
    "RunResult",
    "Setup",
    "config_of",
    "is_cached",
    "load",
    "resolve_backend",
    "run",
    "run_folder",
    "computed_history",
]

#: the files of a finished run, checked against its manifest before it is served
RUN_FILES = ("config.json", "history.csv", "final_state.pt", "meta.json")
#: the history's losses the divergence rule watches, with their names in messages
LOSSES = {"train_loss": "training loss", "test_loss": "test loss"}


@dataclass
class RunResult:
    config: RunConfig
    history: pd.DataFrame
    final_state: methods.ServerState | None  # a loaded run keeps only the global model
    run_dir: Path | None
    client_accuracy: torch.Tensor | None = None  # [clients] at the last evaluation
    diverged: divergence.Divergence | None = None  # where its loss passed the divergence limit

    def final(self, column: str = "test_accuracy") -> float:
        return float(self.history[column].dropna().iloc[-1])

    def rounds_to(self, target: float, column: str = "test_accuracy") -> int | None:
        return metrics.rounds_to(self.history, target, column)


@dataclass
class Setup:
    """Data, partition and model of a config, built once (notebooks reuse it across methods)."""

    config: RunConfig
    data: Any
    parts: list
    model: torch.nn.Module
    device: torch.device

    @classmethod
    def build(cls, cfg: RunConfig, data_obj=None) -> Setup:
        from . import data as data_mod
        from . import models
        from .data import partition as part_mod

        device = resolve_device(cfg.device)
        ds = (
            data_obj
            if data_obj is not None
            else data_mod.load(cfg.dataset, device=device, **cfg.dataset_kwargs)
        )
        kw = dict(cfg.partition_kwargs)
        if cfg.partition == "natural":
            kw.setdefault("groups", ds.train_groups)
        parts = part_mod.partition(
            cfg.partition, ds.y_train, cfg.num_clients, derive_seed(cfg.seed, "partition"), **kw
        )
        parts = [p.to(device) for p in parts]
        torch.manual_seed(derive_seed(cfg.seed, "init"))
        in_ch = ds.input_shape[0] if len(ds.input_shape) == 3 else None
        model = models.build(
            cfg.model, num_classes=ds.num_classes, in_channels=in_ch, **cfg.model_kwargs
        )
        model = model.to(device)
        if ds.x_train.is_floating_point():
            model = model.to(ds.x_train.dtype)
        models.check_fits(model, ds.input_shape, ds.num_classes)
        return cls(cfg, ds, parts, model, device)


def resolve_backend(
    config: RunConfig,
    out_dir: str | Path | None = None,
    cache: bool = True,
    setup: Setup | None = None,
) -> tuple[RunConfig, Setup | None, dict | None]:
    """`config` with backend "auto" replaced by the backend measured fastest for its model, batch
    size, clients and device on this machine (flkit.engine.backend, remembered per machine and
    shape in flkit.paths.machine_dir()); a pinned backend is kept. Returns (config, setup built
    for the measurement or the one given, the measurement record or None)."""
    if config.backend != "auto":
        return config, setup, None
    from .engine import backend

    shape = {
        k: getattr(config, k)
        for k in ("model", "model_kwargs", "dataset", "dataset_kwargs", "batch_size", "momentum")
    }
    shape["clients"] = config.clients_per_round
    shape["device"] = config.key()["device"]
    built = setup

    def probe():
        nonlocal built
        built = built or Setup.build(config)
        d = built.data
        # the probe's dropout draws come from torch's global generators, which the run draws
        # from next: they are put back, so that a measured and a remembered choice train alike
        with rng_state.untouched(built.device):
            return backend.time_backends(
                built.model, d.x_train, d.y_train, config.clients_per_round, config.local_spec()
            )

    chosen, record = backend.measure_backend(shape, probe, cache=cache)
    return config.replace(backend=chosen), built, record


def run_folder(config: RunConfig, out_dir: str | Path | None = None) -> Path:
    """The cache folder of ``config`` (backend resolved) named by :meth:`RunConfig.cache_key`."""
    return store.run_dir(out_dir, config.cache_key(), prefix=config.method)


def computed_history(folder: str | Path) -> bytes:
    """A run folder's history.csv less its wall-clock columns (``*_seconds``, e.g. the personal
    methods' ``train_seconds``): what the run computed, the bytes a rerun, a resume or another
    packing of the same run must give again."""
    rows = [line.split(",") for line in (Path(folder) / "history.csv").read_text().split("\n")]
    keep = [i for i, name in enumerate(rows[0]) if not name.endswith("_seconds")]
    return "\n".join(",".join(r[i] for i in keep if i < len(r)) for r in rows).encode()


def is_cached(config: RunConfig, out_dir: str | Path | None = None) -> bool:
    """Whether :func:`run` would load ``config`` (backend resolved) from ``out_dir`` instead of
    training it: a whole finished run in its folder. Nothing is changed."""
    folder = store.RunFolder(run_folder(config, out_dir), RUN_FILES, config.key())
    return folder.whole(config.rounds, repair=False)


def run(
    config: RunConfig,
    out_dir: str | Path | None = None,
    progress: bool = True,
    cache: bool = True,
    setup: Setup | None = None,
    checkpoint_every: int | None = None,
    checkpoint_seconds: float = 60.0,
) -> RunResult:
    """Train `config.rounds` rounds; return the history with its config.

    out_dir: the cache root (default $FLKIT_RUNS or runs/cache); the run lives in ``run_folder``
    (its meta.json records the data copy used). A finished run is loaded; a damaged one is
    reported (the folder, the file, why) and trained again; an interrupted one resumes.
    backend "auto" is first resolved by measurement (`resolve_backend`): the result's config, the
    run's config.json and its cache key hold the backend that ran.
    A checkpoint (the method's state, the history so far and every global random state) is
    written every `checkpoint_every` rounds when given, else whenever `checkpoint_seconds` of
    training have passed since the last one (a resume then repeats at most that much work, and a
    short run writes none); the CLI's --checkpoint-every / --checkpoint-seconds.
    A non-finite loss raises FlkitError naming the round; one past the limit of
    :mod:`flkit.divergence` marks the run diverged (history, result, a warning)."""
    due = _CheckpointClock(checkpoint_every, checkpoint_seconds)
    config, setup, choice = resolve_backend(config, out_dir, cache, setup)
    key = config.key()  # the thread count the run computes with, for its folder and records
    data_used = config.data_identity()  # refuses a reduced copy at `paper` before any work
    folder = store.RunFolder(run_folder(config, out_dir), RUN_FILES, key) if cache else None
    served = folder.serve(_read, config.rounds) if folder else None
    if served is not None:
        return served
    setup = setup or Setup.build(config)
    method = _method(config, setup)
    start = _start(setup, method, folder, key.get("threads"))
    if folder is not None:
        folder.begin()  # an unwritable cache fails here, before any round
    t0, rounds_started_unix = time.perf_counter(), time.time()  # start-up: less process start
    state, rows, client_acc, watches = _rounds(config, setup, method, start, folder, due, progress)
    import pandas as pd

    history = _with_attrs(pd.DataFrame(rows), key, time.perf_counter() - t0, data_used)
    diverged = divergence.conclude(history, watches)
    if folder is not None:
        meta = _meta(history, rounds_started_unix, setup, config.backend, choice, data_used)
        final = {"state": state.model, "client_accuracy": client_acc}
        folder.commit(
            {"history.csv": history, "final_state.pt": final, "meta.json": meta}, len(history)
        )
    where = folder.path if folder else None
    divergence.warn(f"run {config.method} ({where or 'not cached'})", diverged)
    return RunResult(config, history, state, where, client_acc, diverged)


class _CheckpointClock:
    """When a run writes a checkpoint: every ``every`` rounds when given, else once ``seconds``
    have passed since the last one (the clock starts with the rounds, :meth:`start`)."""

    def __init__(self, every: int | None = None, seconds: float = 60.0):
        if every is not None:
            check_value("checkpoint_every", every, {"kind": "integer", "low": 1})
        check_value("checkpoint_seconds", seconds, {"kind": "real", "low": 0})
        self.every, self.seconds, self.last = every, seconds, time.perf_counter()

    def start(self) -> None:
        self.last = time.perf_counter()

    def due(self, rnd: int) -> bool:
        if self.every:
            return rnd % self.every == 0
        return time.perf_counter() - self.last >= self.seconds

    def written(self) -> None:
        self.last = time.perf_counter()


def _start(setup: Setup, method, folder: store.RunFolder | None, threads) -> store.Checkpoint:
    """Where the rounds start: the folder's checkpoint, its random states restored, else round
    0 with the method's initial state (computed either way, as a fresh process would)."""
    fresh = store.Checkpoint(method.init_state(model_state(setup.model)), [], 0, threads=threads)
    saved = folder.resume(setup.device, threads) if folder is not None else None
    if saved is None:
        return fresh
    if saved.rng is not None:
        rng_state.restore(saved.rng, setup.device)
    return saved


def _method(config: RunConfig, setup: Setup) -> methods.Method:
    ctx = methods.RunContext(
        setup.model,
        setup.data.x_train,
        setup.data.y_train,
        setup.parts,
        config.local_spec(),
        config.seed,
        setup.data.num_classes,
        config.backend,
        config.clients_per_round,
    )
    return methods.get(config.method)(ctx, **config.method_params)


def _rounds(
    config, setup, method, start: store.Checkpoint, folder, due: _CheckpointClock, progress
):
    """Rounds ``start.round + 1 .. config.rounds`` from ``start``: one history row each, under
    the divergence rule, a checkpoint in ``folder`` whenever ``due``. Returns (the last server
    state, the rows, the per-client accuracy of the last evaluation, the loss watches)."""
    state, rows, client_acc = start.state, start.rows, None
    said = f"method {config.method!r}, lr={config.lr}, method_params={config.method_params}"
    watches = divergence.watch_rows(LOSSES, rows, said + ": a smaller lr usually keeps it finite")
    bar = (
        progress_bar(config.rounds, config.method, "round", initial=start.round)
        if progress
        else None
    )
    cum_up = rows[-1]["cum_bytes_up"] if rows else 0
    cum_down = rows[-1]["cum_bytes_down"] if rows else 0
    due.start()
    for rnd in range(start.round + 1, config.rounds + 1):
        clients = method.select_clients(state, rnd)
        state, log = method.round(state, clients, rnd)
        watches["train_loss"].see(rnd, log.train_loss)
        cum_up, cum_down = cum_up + log.bytes_up, cum_down + log.bytes_down
        row = {
            "round": rnd,
            "train_loss": log.train_loss,
            "bytes_up": log.bytes_up,
            "bytes_down": log.bytes_down,
            "cum_bytes_up": cum_up,
            "cum_bytes_down": cum_down,
            "test_accuracy": float("nan"),
            "test_loss": float("nan"),
            **log.metrics,
        }
        if rnd % config.eval_every == 0 or rnd == config.rounds:
            row.update(
                metrics.evaluate_round(
                    setup.data, setup.parts, method, state, config.per_client_eval
                )
            )
            row.update(method.eval_metrics(state, setup.data.x_test, setup.data.y_test))
            watches["test_loss"].see(rnd, row["test_loss"])
            if config.per_client_eval:
                client_acc = row.pop("_client_acc")
        rows.append(row)
        if bar is not None:
            bar.update(1)
            if row["test_accuracy"] == row["test_accuracy"]:
                bar.set_postfix(acc=f"{row['test_accuracy']:.3f}")
        if folder is not None and due.due(rnd) and rnd < config.rounds:
            rng = rng_state.capture(setup.device)
            folder.checkpoint(replace(start, state=state, rows=rows, round=rnd, rng=rng))
            due.written()
    finish(bar)
    return state, rows, client_acc, watches


def load(folder: str | Path) -> RunResult:
    """A finished run from its folder (history, config, final model state, divergence mark);
    FlkitError naming the folder when it holds none or a damaged one (the file and why)."""
    found = store.RunFolder(folder, RUN_FILES)
    if not found.finished:
        raise FlkitError(
            f"{folder} holds no finished run (no DONE marker); run it or resume it with run()"
        )
    found.verify()
    return _read(found)


def _read(folder: store.RunFolder) -> RunResult:
    """The run in ``folder``, verified against its manifest; a file that does not read, or a
    history that is not its config's (rows, a non-finite loss), is a DamagedRunError naming it."""
    with folder.reading("config.json") as path:
        key = store.load_json(path)
        cfg = config_of(key)
    with folder.reading("history.csv") as path:
        import pandas as pd

        history = pd.read_csv(path)
        if len(history) != cfg.rounds:
            raise ValueError(f"it holds {len(history)} rows, its config {cfg.rounds} rounds")
        diverged = divergence.stored_history(history, LOSSES, cfg.eval_every, cfg.rounds)
    with folder.reading("meta.json") as path:
        meta = store.load_json(path)
    with folder.reading("final_state.pt") as path:
        final = store.load_torch(path)
        final_state = methods.ServerState(model=final["state"])
    history = _with_attrs(history, key, meta.get("wall_seconds"), meta.get("data"))
    divergence.warn(f"cached run {folder.path}", diverged)
    return RunResult(cfg, history, final_state, folder.path, final.get("client_accuracy"), diverged)


def _meta(history, rounds_started_unix, setup, backend, choice, data_used) -> dict:
    """What meta.json records beside the history: wall time, machine, backend, data copy."""
    return {
        "wall_seconds": history.attrs["wall_seconds"],
        "rounds_started_unix": rounds_started_unix,
        "device": str(setup.device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "backend": backend,
        "backend_choice": choice,
        "data": data_used,
    }


def _with_attrs(history: pd.DataFrame, key: dict, wall_seconds, data) -> pd.DataFrame:
    """The history with what describes its run: the config's key (with the thread count it was
    computed with), the training wall time, the backend that ran and the data copy read."""
    history.attrs.update(config=key, wall_seconds=wall_seconds, backend=key["backend"], data=data)
    return history
