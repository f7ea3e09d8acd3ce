"""One federated run: config -> data -> partition -> model -> method rounds -> history.

    cfg = RunConfig(method="fedavg", dataset="mnist", model="lenet5", num_clients=100,
                    partition="dirichlet", partition_kwargs={"alpha": 0.5}, clients_per_round=10,
                    local_epochs=1, batch_size=50, lr=0.05, rounds=20, seed=0)
    result = run(cfg)            # cached: the same config loads from disk instead of retraining
    result.history.plot(x="round", y="test_accuracy")

Every random choice derives from `seed` through named streams (flkit.utils.derive_seed), so a
run resumed from a checkpoint continues exactly as if it had never stopped.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from . import methods, metrics, store
from .progress import finish
from .state import model_state
from .train import BACKENDS, LocalSpec
from .utils import FlkitError, check_choice, check_range, derive_seed, numpy_rng, resolve_device

PARTITIONS = ("iid", "dirichlet", "shards", "classes_per_client", "natural")


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
        check_choice("dataset", self.dataset, data.DATASETS)
        check_choice("model", self.model, models.MODELS)
        check_choice("partition", self.partition, PARTITIONS)
        if self.partition == "natural" and self.dataset not in data.GROUPED:
            raise FlkitError(
                f"dataset {self.dataset!r} has no natural groups (client ids), so "
                f"partition='natural' cannot split it; datasets with groups: "
                f"{', '.join(data.GROUPED)}; or use 'dirichlet', 'iid', 'shards'"
            )
        check_choice("backend", self.backend, BACKENDS)
        for name in ("num_clients", "clients_per_round", "batch_size", "rounds", "eval_every"):
            check_range(name, getattr(self, name), 1)
        if self.clients_per_round > self.num_clients:
            raise FlkitError(
                f"clients_per_round={self.clients_per_round} is more than num_clients="
                f"{self.num_clients}; accepted: 1..{self.num_clients}"
            )
        if "alpha" in self.partition_kwargs:
            check_range(
                "partition_kwargs.alpha", self.partition_kwargs["alpha"], 0, None, low_open=True
            )
        if self.device != "auto":
            resolve_device(self.device)
        self.local_spec()  # validates lr, momentum, epochs/steps

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
        """What identifies the results: everything but the device choice 'auto' is resolved."""
        d = self.to_dict()
        d["device"] = str(resolve_device(self.device)).split(":")[0]
        return d

    def data_identity(self) -> dict:
        """The data copy this config reads, checked (:func:`flkit.data.identity`)."""
        from . import data

        return data.identity(self.dataset, **self.dataset_kwargs)

    def cache_key(self) -> dict:
        """:meth:`key` and the data copy's sizes and label checksum: a run on a reduced copy is
        never served for the full dataset."""
        from .datasets.identity import cache_key

        return {**self.key(), "data": cache_key(self.data_identity())}

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise FlkitError(f"unknown RunConfig field(s) {unknown}; accepted: {sorted(names)}")
        return cls(**d)


@dataclass
class RunResult:
    config: RunConfig
    history: pd.DataFrame
    final_state: dict | None
    run_dir: Path | None
    client_accuracy: torch.Tensor | None = None  # [clients] at the last evaluation

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
        from . import partition as part_mod

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


def sample_clients(seed: int, rnd: int, num_clients: int, m: int) -> list[int]:
    """Uniform participation (what `Method.select_clients` does by default)."""
    return sorted(
        numpy_rng(seed, "sample", rnd).choice(num_clients, size=m, replace=False).tolist()
    )


def client_accuracy(per_class_acc: torch.Tensor, parts, y, num_classes) -> torch.Tensor:
    """Per-client accuracy = sum_c pi_i(c) * acc_c, with pi_i client i's label distribution.

    (The protocol we chose for the STC-projection paper: deterministic, keeps all training data;
    a class the global model never saw in the test set counts as accuracy 0 for clients holding
    it.)"""
    acc = torch.nan_to_num(per_class_acc, nan=0.0)
    out = []
    for ix in parts:
        pi = torch.bincount(y[ix], minlength=num_classes).float()
        out.append(float((pi / pi.sum() * acc).sum()))
    return torch.tensor(out)


def resolve_backend(
    config: RunConfig,
    out_dir: str | Path | None = None,
    cache: bool = True,
    setup: Setup | None = None,
) -> tuple[RunConfig, Setup | None, dict | None]:
    """`config` with backend "auto" replaced by the backend measured fastest for its model, batch
    size, clients and device on this machine (flkit.backend_choice, cached per machine and shape
    in the run cache); a pinned backend is kept. Returns (config, setup built for the
    measurement or the one given, the measurement record or None)."""
    if config.backend != "auto":
        return config, setup, None
    from . import backend_choice

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
        return backend_choice.measure(
            built.model, d.x_train, d.y_train, config.clients_per_round, config.local_spec()
        )

    chosen, record = backend_choice.choose(shape, probe, out_dir, cache)
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
    A checkpoint is written every `checkpoint_every` rounds when given, else whenever
    `checkpoint_seconds` of training have passed since the last one (a resume then repeats at most
    that much work, and a short run writes none)."""
    config, setup, choice = resolve_backend(config, out_dir, cache, setup)
    data_used = config.data_identity()  # refuses a reduced copy at `paper` before any work
    folder = run_folder(config, out_dir) if cache else None
    if folder is not None and store.is_done(folder):
        return load(folder)
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
    ckpt = folder / "checkpoint.pt" if folder is not None else None
    if ckpt is not None and ckpt.exists():
        saved = store.load_torch(ckpt, setup.device)
        state, rows, start_round = saved["state"], saved["rows"], saved["round"] + 1
    if folder is not None:
        store.save_json(folder / "config.json", config.key())
    client_acc = None
    bar = _progress(config.rounds, start_round - 1, config.method, progress)
    t0 = last_ckpt = time.perf_counter()
    cum_up = rows[-1]["cum_bytes_up"] if rows else 0
    cum_down = rows[-1]["cum_bytes_down"] if rows else 0
    for rnd in range(start_round, config.rounds + 1):
        clients = method.select_clients(state, rnd)
        state, log = method.round(state, clients, rnd)
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
            row.update(_evaluate(setup, method, state, config.per_client_eval))
            row.update(method.eval_metrics(state, setup.data.x_test, setup.data.y_test))
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
        if ckpt is not None and due and rnd < config.rounds:
            store.save_torch(ckpt, {"state": state, "rows": rows, "round": rnd})
            last_ckpt = time.perf_counter()
    finish(bar)
    history = pd.DataFrame(rows)
    history.attrs["config"] = config.key()
    history.attrs["wall_seconds"] = time.perf_counter() - t0
    history.attrs["backend"] = config.backend
    history.attrs["data"] = data_used
    result = RunResult(config, history, state, folder, client_acc)
    if folder is not None:
        store.save_frame(folder / "history.csv", history)
        store.save_torch(
            folder / "final_state.pt", {"state": state["model"], "client_accuracy": client_acc}
        )
        store.save_json(
            folder / "meta.json",
            {
                "wall_seconds": history.attrs["wall_seconds"],
                "device": str(setup.device),
                "torch": torch.__version__,
                "backend": config.backend,
                "backend_choice": choice,
                "data": data_used,
            },
        )
        store.mark_done(folder)
        if ckpt.exists():
            ckpt.unlink()
    return result


def load(folder: str | Path) -> RunResult:
    """A finished run from its folder (history, config, final model state)."""
    folder = Path(folder)
    if not store.is_done(folder):
        raise FlkitError(
            f"{folder} holds no finished run (no DONE marker); run it or resume it with run()"
        )
    cfg = RunConfig.from_dict(store.load_json(folder / "config.json"))
    history = pd.read_csv(folder / "history.csv")
    history.attrs["config"] = cfg.key()
    meta = store.load_json(folder / "meta.json") if (folder / "meta.json").exists() else {}
    history.attrs["wall_seconds"] = meta.get("wall_seconds")
    history.attrs["backend"] = cfg.backend
    history.attrs["data"] = meta.get("data")
    final = store.load_torch(folder / "final_state.pt")
    return RunResult(cfg, history, {"model": final["state"]}, folder, final.get("client_accuracy"))


def _evaluate(setup: Setup, method, state: dict, per_client: bool) -> dict:
    ds = setup.data
    if not per_client:
        acc, loss = method.evaluate(state, ds.x_test, ds.y_test)
        return {"test_accuracy": acc, "test_loss": loss}
    acc, loss, per_class = method.evaluate(state, ds.x_test, ds.y_test, per_class=ds.num_classes)
    ca = client_accuracy(per_class, setup.parts, ds.y_train, ds.num_classes)
    return {
        "test_accuracy": acc,
        "test_loss": loss,
        "client_acc_mean": float(ca.mean()),
        "client_acc_std": float(ca.std(unbiased=False)),
        "client_acc_var": float(ca.var(unbiased=False)),
        "_client_acc": ca,
    }


def _progress(total: int, done: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from .progress import bar

    return bar(total=total, initial=done, desc=desc, unit="round")
