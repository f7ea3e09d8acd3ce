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

A finished run folder is served only when its files match their manifest (:mod:`flkit.store`);
a damaged one is reported with its path and trained again, a damaged checkpoint is never resumed
from, and divergence follows :mod:`flkit.divergence` (trained or served, a run is marked diverged).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from . import divergence, methods, metrics, rng_state, store
from .engine import BACKENDS, LocalSpec
from .methods.hyperparameters import check_value
from .state import model_state
from .utils import FlkitError, check_choice, derive_seed, resolve_device
from .workbook.progress import finish

if TYPE_CHECKING:  # imported when the history is built: a run needs pandas only at its end
    import pandas as pd

#: what each number of a RunConfig accepts (the methods' shared check: whole numbers, finite
#: reals, ranges); checked before any data is loaded
_FIELD_RULES = {
    **{
        name: {"kind": "integer", "low": 1}
        for name in ("num_clients", "clients_per_round", "batch_size", "rounds", "eval_every")
    },
    "local_epochs": {"kind": "integer", "low": 1, "optional": True},
    "local_steps": {"kind": "integer", "low": 1, "optional": True},
    "seed": {"kind": "integer"},
    "lr": {"kind": "real", "low": 0, "low_open": True},
    "momentum": {"kind": "real", "low": 0, "high": 1, "high_open": True},
    "weight_decay": {"kind": "real", "low": 0},
}
#: the files of a finished run, checked against its manifest before it is served
RUN_FILES = ("config.json", "history.csv", "final_state.pt", "meta.json")
#: the history's losses the divergence rule watches, with their names in messages
LOSSES = {"train_loss": "training loss", "test_loss": "test loss"}


@dataclass(frozen=True)
class RunConfig:
    method: str = "fedavg"
    dataset: str = "synthetic"
    model: str = "mlp_mnist"
    num_clients: int = 100
    partition: str = "iid"
    partition_kwargs: dict = field(default_factory=dict)
    clients_per_round: int = 10
    local_epochs: int | None = 1
    local_steps: int | None = None
    batch_size: int = 50
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    rounds: int = 20
    eval_every: int = 1
    per_client_eval: bool = False
    method_params: dict = field(default_factory=dict)
    dataset_kwargs: dict = field(default_factory=dict)
    model_kwargs: dict = field(default_factory=dict)
    seed: int = 0
    device: str = "auto"
    backend: str = "auto"

    def __post_init__(self):
        from . import data, models

        check_choice("method", self.method, methods.names())
        # each hyperparameter alone, before any data is loaded (the config keeps the dict as given)
        methods.get(self.method).Params.build(self.method, self.method_params)
        check_choice("dataset", self.dataset, data.DATASETS)
        check_choice("model", self.model, models.MODELS)
        check_choice("partition", self.partition, data.partition.SCHEMES)
        if self.partition == "natural" and self.dataset not in data.GROUPED:
            raise FlkitError(
                f"dataset {self.dataset!r} has no natural groups (client ids), so "
                f"partition='natural' cannot split it; datasets with groups: "
                f"{', '.join(data.GROUPED)}; or use 'dirichlet', 'iid', 'shards'"
            )
        check_choice("backend", self.backend, BACKENDS)
        for name, rule in _FIELD_RULES.items():
            value = getattr(self, name)
            value = int(value) if isinstance(value, np.integer) else value
            checked = check_value(name, value, rule)
            if rule["kind"] == "integer":  # 20.0 runs as 20; reals stay as given (the cache key)
                object.__setattr__(self, name, checked)
        self._check_against_rounds()
        if self.clients_per_round > self.num_clients:
            raise FlkitError(
                f"clients_per_round={self.clients_per_round} is more than num_clients="
                f"{self.num_clients}; accepted: 1..{self.num_clients}"
            )
        if "alpha" in self.partition_kwargs:
            alpha = {"kind": "real", "low": 0, "low_open": True}
            check_value("partition_kwargs.alpha", self.partition_kwargs["alpha"], alpha)
        if self.device != "auto":
            resolve_device(self.device)
        self.local_spec()  # validates lr, momentum, epochs/steps

    def _check_against_rounds(self) -> None:
        """Method parameters that only mean something within the run's rounds."""
        cls = methods.get(self.method)
        given = self.method_params
        if getattr(cls, "stale_enabled", False):
            tau = given.get("tau", cls.Params().tau)
            if isinstance(tau, (int, float)) and 0 < tau >= self.rounds:
                raise FlkitError(
                    f"tau={tau} never lets a client be stale within rounds={self.rounds} (a stale "
                    f"client trains from the model of round t - tau, first at round tau + 1); "
                    f"accepted: tau in 1..{self.rounds - 1}, or more rounds"
                )
        horizon = given.get("horizon")
        if isinstance(horizon, (int, float)) and horizon < self.rounds:
            raise FlkitError(
                f"horizon={horizon} is shorter than rounds={self.rounds}: the schedule ends "
                f"before the run does; accepted: horizon >= {self.rounds}"
            )

    def local_spec(self) -> LocalSpec:
        return LocalSpec(
            lr=self.lr,
            batch_size=self.batch_size,
            epochs=self.local_epochs,
            steps=self.local_steps,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key(self) -> dict:
        """What identifies the results: the config with the device choice 'auto' resolved and, on
        the CPU, ``threads`` (``torch.get_num_threads()``): other thread counts sum in another
        order, so results differ (a GPU run's float work does not depend on them)."""
        d = self.to_dict()
        d["device"] = str(resolve_device(self.device)).split(":")[0]
        if d["device"] == "cpu":
            d["threads"] = torch.get_num_threads()
        return d

    def data_identity(self) -> dict:
        """The data copy this config reads, checked (:func:`flkit.data.identity`)."""
        from . import data

        return data.identity(self.dataset, **self.dataset_kwargs)

    def cache_key(self) -> dict:
        """:meth:`key` and the data copy's sizes and label checksum: a run on a reduced copy is
        never served for the full dataset."""
        from .data.provenance import cache_key

        return {**self.key(), "data": cache_key(self.data_identity())}

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """The config of a field dict; a :meth:`key` is read with :func:`config_of`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise FlkitError(f"unknown RunConfig field(s) {unknown}; accepted: {sorted(names)}")
        return cls(**d)


#: what a :meth:`RunConfig.key` holds beside the config's fields
KEY_ONLY = ("threads",)


def config_of(key: dict) -> RunConfig:
    """The config a :meth:`RunConfig.key` (a run's config.json) was made from."""
    return RunConfig.from_dict({k: v for k, v in key.items() if k not in KEY_ONLY})


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
    (its meta.json records the data copy used). A finished run is loaded; an interrupted one
    resumes.
    backend "auto" is first resolved by measurement (`resolve_backend`): the result's config, the
    run's config.json and its cache key hold the backend that ran.
    A checkpoint (the method's state, the history so far and every global random state) is
    written every `checkpoint_every` rounds when given, else whenever `checkpoint_seconds` of
    training have passed since the last one (a resume then repeats at most that much work, and a
    short run writes none); the CLI's --checkpoint-every / --checkpoint-seconds.
    A finished folder whose files do not match its manifest is reported (a warning naming the
    folder) and trained again. A non-finite loss raises FlkitError naming the round; one past the
    limit of :mod:`flkit.divergence` marks the run diverged (history, result, a warning)."""
    if checkpoint_every is not None:
        check_value("checkpoint_every", checkpoint_every, {"kind": "integer", "low": 1})
    check_value("checkpoint_seconds", checkpoint_seconds, {"kind": "real", "low": 0})
    config, setup, choice = resolve_backend(config, out_dir, cache, setup)
    key = config.key()  # the thread count the run computes with, for its folder and records
    data_used = config.data_identity()  # refuses a reduced copy at `paper` before any work
    folder = run_folder(config, out_dir) if cache else None
    if folder is not None and store.is_done(folder):
        problem = store.check_finished(folder, config.rounds, RUN_FILES)
        if not problem:
            try:
                return load(folder)
            except FlkitError as e:  # unreadable, or a non-finite loss cached before the rule
                problem = str(e)
        _damaged(folder, problem, "it is trained again")
        store.discard_finished(folder, RUN_FILES)
    setup = setup or Setup.build(config)
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
    method = methods.get(config.method)(ctx, **config.method_params)
    state = method.init_state(model_state(setup.model))
    rows, start_round = [], 1
    saved, problem = store.load_checkpoint(folder, setup.device) if folder else (None, "")
    if problem:
        _damaged(folder, problem, "training starts again from round 1")
        store.remove_checkpoint(folder)
    if saved is not None:
        store.check_checkpoint_threads(folder, saved, key.get("threads"))
        state, rows, start_round = saved["state"], saved["rows"], saved["round"] + 1
        if "rng" in saved:
            rng_state.restore(saved["rng"], setup.device)
    if folder is not None:
        store.save_json(folder / "config.json", key)
    client_acc = None
    said = f"method {config.method!r}, lr={config.lr}, method_params={config.method_params}"
    watches = divergence.watch_rows(LOSSES, rows, said + ": a smaller lr usually keeps it finite")
    bar = _progress(config.rounds, start_round - 1, config.method, progress)
    t0 = last_ckpt = time.perf_counter()
    rounds_started_unix = time.time()  # start-up = this less the process's start
    cum_up = rows[-1]["cum_bytes_up"] if rows else 0
    cum_down = rows[-1]["cum_bytes_down"] if rows else 0
    for rnd in range(start_round, config.rounds + 1):
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
        due = (
            rnd % checkpoint_every == 0
            if checkpoint_every
            else time.perf_counter() - last_ckpt >= checkpoint_seconds
        )
        if folder is not None and due and rnd < config.rounds:
            saved = {
                "state": state,
                "rows": rows,
                "round": rnd,
                "rng": rng_state.capture(setup.device),
                "threads": key.get("threads"),
            }
            store.save_checkpoint(folder, saved, rnd)
            last_ckpt = time.perf_counter()
    finish(bar)
    import pandas as pd

    history = _with_attrs(pd.DataFrame(rows), key, time.perf_counter() - t0, data_used)
    diverged = divergence.conclude(history, watches)
    result = RunResult(config, history, state, folder, client_acc, diverged)
    if folder is not None:
        store.save_frame(folder / "history.csv", history)
        store.save_torch(
            folder / "final_state.pt", {"state": state.model, "client_accuracy": client_acc}
        )
        store.save_json(
            folder / "meta.json",
            {
                "wall_seconds": history.attrs["wall_seconds"],
                "rounds_started_unix": rounds_started_unix,
                "device": str(setup.device),
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "backend": config.backend,
                "backend_choice": choice,
                "data": data_used,
            },
        )
        store.mark_done(folder)
        store.write_manifest(folder, RUN_FILES, len(history))  # last: the run is whole
        store.remove_checkpoint(folder)
    divergence.warn(f"run {config.method} ({folder or 'not cached'})", diverged)
    return result


def load(folder: str | Path) -> RunResult:
    """A finished run from its folder (history, config, final model state, divergence mark)."""
    folder = Path(folder)
    if not store.is_done(folder):
        raise FlkitError(
            f"{folder} holds no finished run (no DONE marker); run it or resume it with run()"
        )
    problem = store.check_finished(folder, None, RUN_FILES)
    try:
        if problem:
            raise ValueError(problem)
        key = store.load_json(folder / "config.json")
        cfg = config_of(key)
        problem = store.check_finished(folder, cfg.rounds, RUN_FILES)
        if problem:
            raise ValueError(problem)
        import pandas as pd

        history = pd.read_csv(folder / "history.csv")
        diverged = divergence.stored_history(history, LOSSES, cfg.eval_every, cfg.rounds)
        meta = store.load_json(folder / "meta.json")
        final = store.load_torch(folder / "final_state.pt")
    except Exception as e:  # noqa: BLE001 - whatever failed to read, the folder is damaged
        raise FlkitError(
            f"run folder {folder} is damaged ({e}); it is not loaded: delete it, or run its "
            "config again with run() (which trains it again)"
        ) from e
    history = _with_attrs(history, key, meta.get("wall_seconds"), meta.get("data"))
    final_state = methods.ServerState(model=final["state"])
    divergence.warn(f"cached run {folder}", diverged)
    return RunResult(cfg, history, final_state, folder, final.get("client_accuracy"), diverged)


def _damaged(folder: Path, problem: str, action: str) -> None:
    warnings.warn(f"run folder {folder} is damaged: {problem}; {action}", stacklevel=3)


def _with_attrs(history: pd.DataFrame, key: dict, wall_seconds, data) -> pd.DataFrame:
    """The history with what describes its run: the config's key (with the thread count it was
    computed with), the training wall time, the backend that ran and the data copy read."""
    history.attrs.update(config=key, wall_seconds=wall_seconds, backend=key["backend"], data=data)
    return history


def _progress(total: int, done: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from .workbook.progress import bar

    return bar(total=total, initial=done, desc=desc, unit="round")
