"""One task of a simulated FedAST experiment (:class:`TaskConfig`, a row of
:class:`flkit.asyncfl.FedASTRun`) and its resolved numbers as the schedulers read them
(:class:`ResolvedTask`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from .. import models as _models
from ..utils import FlkitError, check_choice, check_range
from .defaults import DATASET_DEFAULTS
from .delays import DELAY_RATIOS

__all__ = ["TaskConfig", "ResolvedTask"]


@dataclass(frozen=True)
class TaskConfig:
    """One task. ``None`` fields take the dataset's default (:data:`DATASET_DEFAULTS`).

    ``requests``/``buffer``: FedAST's initial R_m and b_m (``buffer=None``: max(1, ceil(R/ratio))).
    ``weight``: the Sync client-share weight.
    ``server_lr=None``: 0.1 FedAST, 0.038 NoBuffer, 1 Sync.
    ``train_subset``: a class-stratified subset of the training set (fast presets).
    ``model_flags``: the model's own flags (``flkit.models.flags(model)``), e.g.
    ``{"hidden_size": 32}`` for a narrower Shakespeare LSTM; None: the paper's model."""

    name: str
    dataset: str = "mnist"
    target: float | None = None
    requests: int = 96
    buffer: int | None = 3
    weight: float = 1.0
    model: str | None = None
    lr: float | None = None
    weight_decay: float | None = None
    server_lr: float | None = None
    test_every: int | None = None
    alpha: float | None = None
    samples_per_client: int = 300
    train_subset: int | None = None
    max_rounds: int | None = None
    delay_ratio: float | None = None
    model_flags: dict | None = None

    def validate(self):
        if not isinstance(self.name, str) or not self.name:
            raise FlkitError(f"task name={self.name!r}; accepted: a non-empty string")
        check_choice(f"dataset of task {self.name!r}", self.dataset, DATASET_DEFAULTS)
        if self.model is not None:
            check_choice(f"model of task {self.name!r}", self.model, _models.MODELS)
        if self.target is not None:
            check_range(f"target of task {self.name!r}", self.target, 0, 1, low_open=True)
        check_range(f"requests (active requests) of task {self.name!r}", self.requests, 1)
        if self.buffer is not None:
            check_range(f"buffer of task {self.name!r}", self.buffer, 1)
        check_range(f"weight of task {self.name!r}", self.weight, 0)
        for f in ("lr", "server_lr"):
            v = getattr(self, f)
            if v is not None:
                check_range(f"{f} of task {self.name!r}", v, 0, low_open=True)
        for f in ("weight_decay",):
            v = getattr(self, f)
            if v is not None:
                check_range(f"{f} of task {self.name!r}", v, 0)
        if self.test_every is not None:
            check_range(f"test_every of task {self.name!r}", self.test_every, 1)
        if self.alpha is not None:
            check_range(f"alpha of task {self.name!r}", self.alpha, 0, low_open=True)
        check_range(f"samples_per_client of task {self.name!r}", self.samples_per_client, 1)
        if self.train_subset is not None:
            check_range(f"train_subset of task {self.name!r}", self.train_subset, 1)
        if self.max_rounds is not None:
            check_range(f"max_rounds of task {self.name!r}", self.max_rounds, 1)
        if self.delay_ratio is not None:
            check_range(f"delay_ratio of task {self.name!r}", self.delay_ratio, 0, low_open=True)
        if self.model_flags is not None:
            self.check_model_flags()

    def model_name(self) -> str:
        """The model this task trains: ``model``, else the dataset's default."""
        return self.model or self.default("model")

    def check_model_flags(self) -> None:
        """``model_flags`` is a mapping of flags the task's model accepts (FlkitError naming the
        flag and the accepted ones otherwise); the values are checked when the model is built."""
        if not isinstance(self.model_flags, Mapping):
            raise FlkitError(
                f"model_flags of task {self.name!r}={self.model_flags!r}; accepted: a mapping "
                "of model flags, e.g. {'hidden_size': 32}, or None"
            )
        name = self.model_name()
        accepted = _models.flags(name)
        for key in self.model_flags:
            if key not in accepted:
                raise FlkitError(
                    f"model_flags of task {self.name!r}: unknown flag {key!r} for model "
                    f"{name!r}; accepted: {', '.join(accepted) or '(none)'}"
                )

    def default(self, key):
        return DATASET_DEFAULTS[self.dataset][key]

    def delay_ratio_or_default(self) -> float:
        """The per-step delay ratio: ``delay_ratio``, else the paper's for the dataset (MNIST's
        for datasets the paper does not time, e.g. synthetic)."""
        if self.delay_ratio is not None:
            return float(self.delay_ratio)
        return DELAY_RATIOS.get(self.dataset, DELAY_RATIOS["mnist"])


class ResolvedTask(NamedTuple):
    """A task's numbers as the schedulers use them (read-only; made by
    :meth:`FedASTRun.resolved_tasks`, never written by hand)."""

    name: str
    target: float | None
    delay_ratio: float
    delay_multiplier: float
    requests: int
    buffer: int
    test_every: int
    eta_c: float  # client learning rate
    eta_s: float  # server learning rate
    tau: int  # local steps per request
    weight: float  # Sync client-share weight
    max_rounds: int | None
