"""What one federated run is: :class:`RunConfig`, its field rules, and its key.

A config is validated on construction, before any data is loaded: each number by the methods'
shared rules (:data:`FIELD_RULES`), each name against the registries, and the method's
hyperparameters by its own ``Params``. :meth:`RunConfig.key` is what identifies a run's results
(the config with the device resolved and, on the CPU, the torch thread count);
:meth:`RunConfig.cache_key` adds the data copy and names the run's folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from . import methods
from .engine import BACKENDS, LocalSpec
from .methods.hyperparameters import check_value
from .utils import FlkitError, check_choice, resolve_device

#: what each number of a RunConfig accepts (the methods' shared check: whole numbers, finite
#: reals, ranges); checked before any data is loaded
FIELD_RULES = {
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
#: what a :meth:`RunConfig.key` holds beside the config's fields
KEY_ONLY = ("threads",)


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
        for name, rule in FIELD_RULES.items():
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

    def key(self, device_type: str | None = None) -> dict:
        """What identifies the results: the config with the device choice 'auto' resolved and, on
        the CPU, ``threads`` (``torch.get_num_threads()``): other thread counts sum in another
        order, so results differ (a GPU run's float work does not depend on them).
        ``device_type`` ("cpu" or "cuda"): the key of the run on such a device, named on a machine
        that may have none (the run pool naming a Ray cluster's folders)."""
        if device_type not in (None, "cpu", "cuda"):
            raise FlkitError(f"device_type={device_type!r}; accepted: None, 'cpu' or 'cuda'")
        d = self.to_dict()
        d["device"] = device_type or str(resolve_device(self.device)).split(":")[0]
        if d["device"] == "cpu":
            d["threads"] = torch.get_num_threads()
        return d

    def data_identity(self) -> dict:
        """The data copy this config reads, checked (:func:`flkit.data.identity`)."""
        from . import data

        return data.identity(self.dataset, **self.dataset_kwargs)

    def cache_key(self, device_type: str | None = None) -> dict:
        """:meth:`key` and the data copy's sizes and label checksum: a run on a reduced copy is
        never served for the full dataset."""
        from .data.provenance import cache_key

        return {**self.key(device_type), "data": cache_key(self.data_identity())}

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


def config_of(key: dict) -> RunConfig:
    """The config a :meth:`RunConfig.key` (a run's config.json) was made from."""
    return RunConfig.from_dict({k: v for k, v in key.items() if k not in KEY_ONLY})
