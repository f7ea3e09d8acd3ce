"""FedAST on real data: the :class:`EngineTrainer` and the user-facing :func:`run`.

The schedules (FedAST S/D, NoBuffer, Sync-ST, Sync-UCB-ST, Sync-Bayes-ST) live in
:mod:`flkit.fedast_sched`, which decides *when* requests are sent, kept and aggregated and calls a
``Trainer`` lazily. This module supplies the real trainer (spec ``papers/003-fedast.md``):

- per task a dataset (loaded once per dataset even when several tasks use it, kept on the
  device), a partition (image tasks: Dirichlet(alpha) label proportions x 300 samples per client,
  the fixed-size rule of spec section 6.1; Shakespeare: one speaking role per client), a model and
  a *version store* ``{version: state}`` from which requests start; versions no request
  references are released;
- local training through :func:`flkit.train.train_clients`: every request of one
  (task, version) is trained in **one** batched call (all start from that version). Image tasks
  run 3 epochs of batch 32 with drop_last (floor(300/32) x 3 = 27 steps), Shakespeare 27 steps of
  64, momentum 0, coupled weight decay per task;
- the seed of a request is ``derive_seed(run seed, "local", task, version, ordinal)`` where the
  ordinal counts the requests trained from that (task, version) in dispatch order, i.e. it names
  the request. Duplicated client ids in a batch therefore get distinct batch orders, and training
  the same requests one by one (same order) gives the same updates;
- an update is the weight difference y_tau - x^(v) of the trainable parameters; aggregation applies
  x <- x + eta_s * mean(differences) to the *current* model (stale updates included);
- evaluation on the test set (``eval_subset``: a fixed class-stratified subset for the periodic
  checks, and the full test set whenever the subset reaches the target, so target crossings are
  always confirmed on the full set);
- the normalised dispersion of Realloc (bias tensors excluded for the official rule).

Entry point: ``run(config, seed=0, cache=True) -> SimResult`` validates everything before any data
is loaded, caches results on disk keyed by the configuration hash (:mod:`flkit.store`) and shows a
tqdm bar on simulated time.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from .. import data as _data
from .. import models as _models
from .. import partition as _partition
from .. import store
from ..fedast_sched import (DELAY_RATIOS, FedAST, FedASTConfig, SimResult, SyncConfig, SyncST, TaskSpec)
from ..state import broadcast_state, param_names
from ..metrics import time_gain  # re-exported: the notebook reads gains as F.time_gain
from ..train import LocalSpec, evaluate, train_clients
from ..utils import FlkitError, check_choice, check_range, derive_seed, numpy_rng, resolve_device

__all__ = ["DATASET_DEFAULTS", "TARGETS", "SERVER_LR", "METHODS", "METHOD_LABELS", "TaskConfig", "FedASTRun",
           "EngineTrainer", "Update", "run", "build_schedule", "centralised", "time_gain"]

#: Per-dataset defaults (spec 003 section 3.8; [C] = official code).
DATASET_DEFAULTS: dict[str, dict] = {
    "mnist": dict(model="mlp_mnist", lr=0.1, sync_lr=0.2, weight_decay=3e-4, sync_weight_decay=3e-4,
                  batch_size=32, epochs=3, steps=None, test_every=4, alpha=0.1, normalize="standard",
                  delay_multiplier=None),
    "fmnist": dict(model="lenet5_fedast", lr=0.06, sync_lr=0.06, weight_decay=3e-4, sync_weight_decay=3e-4,
                   batch_size=32, epochs=3, steps=None, test_every=4, alpha=0.1, normalize="mnist",
                   delay_multiplier=None),
    "cifar10": dict(model="cnn_cifar10", lr=0.1, sync_lr=0.1, weight_decay=7e-4, sync_weight_decay=3e-4,
                    batch_size=32, epochs=3, steps=None, test_every=4, alpha=0.1, normalize="half",
                    delay_multiplier=None),
    "cifar100": dict(model="resnet18_gn", lr=0.06, sync_lr=0.06, weight_decay=0.0, sync_weight_decay=0.0,
                     batch_size=32, epochs=None, steps=5, test_every=4, alpha=1.0, normalize="standard",
                     delay_multiplier=5.0),
    "shakespeare": dict(model="lstm_shakespeare", lr=7.0, sync_lr=7.0, weight_decay=1e-5, sync_weight_decay=1e-5,
                        batch_size=64, epochs=None, steps=27, test_every=2, alpha=None, normalize=None,
                        delay_multiplier=None),
    # for tests and demos: no disk access; timed like MNIST
    "synthetic": dict(model="logreg", lr=0.1, sync_lr=0.1, weight_decay=0.0, sync_weight_decay=0.0,
                      batch_size=32, epochs=3, steps=None, test_every=4, alpha=0.5, normalize=None,
                      delay_multiplier=None),
}
#: Table 3 targets (lower / main / higher).
TARGETS = {"mnist": (0.83, 0.93, 0.96), "fmnist": (0.72, 0.82, 0.85), "cifar10": (0.53, 0.63, 0.66),
           "shakespeare": (0.32, 0.42, 0.45)}
#: Server learning rates (spec section 3.8).
SERVER_LR = {"fedast": 0.1, "nobuffer": 0.038, "sync": 1.0}
METHODS = ("fedast_d", "fedast_s", "nobuffer", "sync_st", "sync_st_nomit", "sync_ucb", "sync_bayes")
_ALIASES = {"fedast": "fedast_d", "fedast-d": "fedast_d", "fedast-s": "fedast_s", "fedast-nobuffer": "nobuffer",
            "sync": "sync_st", "sync-st": "sync_st", "sync_nomit": "sync_st_nomit"}
METHOD_LABELS = {"fedast_d": "FedAST", "fedast_s": "FedAST(S)", "nobuffer": "FedAST-NoBuffer",
                 "sync_st": "Sync-ST", "sync_st_nomit": "Sync-ST-NoStragMit", "sync_ucb": "Sync-UCB-ST",
                 "sync_bayes": "Sync-Bayes-ST"}
_CACHE_VERSION = 2


# ============================================================================================
# configuration
# ============================================================================================
@dataclass(frozen=True)
class TaskConfig:
    """One task. ``None`` fields take the dataset's default (:data:`DATASET_DEFAULTS`).

    ``requests``/``buffer``: FedAST's initial R_m and b_m (``buffer=None``: max(1, ceil(R/ratio))).
    ``weight``: the Sync client-share weight. ``server_lr=None``: 0.1 FedAST, 0.038 NoBuffer, 1 Sync.
    ``train_subset``: a class-stratified subset of the training set (fast presets)."""
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
            check_range(f"delay_ratio of task {self.name!r}", self.delay_ratio, 0)

    def default(self, key):
        return DATASET_DEFAULTS[self.dataset][key]


@dataclass(frozen=True)
class FedASTRun:
    """A whole simulated experiment: method, tasks, client pool and scheduler knobs.

    ``method``: one of :data:`METHODS` (aliases: fedast = fedast_d, sync = sync_st).
    ``k``: Sync first-k (None = no straggler mitigation, same as ``sync_st_nomit``). ``option``: FedAST option for ``nobuffer``.
    ``max_time``: stop at this simulated time (None: run until every task reaches its target;
    then every task needs a target or max_rounds). ``eval_subset``: test samples for periodic
    evaluations (None: the full test set; crossings are always confirmed on the full set)."""
    method: str
    tasks: tuple
    num_clients: int = 1000
    availability: float = 0.3
    k: int | None = 30
    ratio: int = 32
    realloc_rule: str = "official"
    option: str = "D"
    max_time: float | None = None
    eval_subset: int | None = None
    data_seed: int = 10
    group_seed: int = 64
    dtype: str = "float32"
    window: int = 8
    period_factor: float = 0.75
    warmup_rounds: int = 8
    sync_test_every: int = 1

    def __post_init__(self):
        method = _ALIASES.get(self.method, self.method)
        object.__setattr__(self, "method", method)
        tasks = tuple(TaskConfig(**t) if isinstance(t, Mapping) else t for t in self.tasks)
        object.__setattr__(self, "tasks", tasks)

    # ---------------------------------------------------------------- validation
    def validate(self) -> "FedASTRun":
        check_choice("method", self.method, METHODS + tuple(_ALIASES))
        if not self.tasks:
            raise FlkitError("tasks is empty; give at least one task")
        for t in self.tasks:
            if not isinstance(t, TaskConfig):
                raise FlkitError(f"tasks must hold TaskConfig objects or dicts; got {type(t).__name__}")
            t.validate()
        check_range("num_clients", self.num_clients, 1)
        check_range("availability (fraction of available clients)", self.availability, 0, 1, low_open=True)
        if self.k is not None:
            check_range("k (first-k)", self.k, 1)
        check_range("ratio (R/b)", self.ratio, 1)
        check_choice("realloc_rule", self.realloc_rule, ("paper", "official"))
        check_choice("option", self.option, ("S", "D"))
        if self.max_time is not None:
            check_range("max_time", self.max_time, 0, low_open=True)
        if self.eval_subset is not None:
            check_range("eval_subset", self.eval_subset, 1)
        check_choice("dtype", self.dtype, ("float32", "float64"))
        if self.max_time is None:
            open_ended = [t.name for t in self.tasks if t.target is None and t.max_rounds is None]
            if open_ended:
                raise FlkitError(f"tasks {open_ended} have neither a target nor max_rounds and max_time is None; "
                                 "the run would never end. Give a target in (0, 1], max_rounds or max_time")
        self.schedule_config()  # the scheduler's own checks (buffer, requests vs clients, ...)
        return self

    @property
    def is_sync(self) -> bool:
        return self.method.startswith("sync")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tasks"] = [asdict(t) for t in self.tasks]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "FedASTRun":
        if isinstance(d, FedASTRun):
            return d
        if not isinstance(d, Mapping):
            raise FlkitError(f"config must be a dict or FedASTRun; got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise FlkitError(f"unknown config key(s) {bad}; accepted: {', '.join(sorted(known))}")
        tasks = []
        tknown = {f.name for f in fields(TaskConfig)}
        for t in d.get("tasks", ()):
            if isinstance(t, Mapping):
                badt = sorted(set(t) - tknown)
                if badt:
                    raise FlkitError(f"unknown task key(s) {badt}; accepted: {', '.join(sorted(tknown))}")
                tasks.append(TaskConfig(**t))
            else:
                tasks.append(t)
        return cls(**{**dict(d), "tasks": tuple(tasks)})

    def replace(self, **changes) -> "FedASTRun":
        return replace(self, **changes)

    # ---------------------------------------------------------------- resolved per-task values
    def server_lr(self, t: TaskConfig) -> float:
        if t.server_lr is not None:
            return float(t.server_lr)
        return SERVER_LR["sync" if self.is_sync else ("nobuffer" if self.method == "nobuffer" else "fedast")]

    def client_lr(self, t: TaskConfig) -> float:
        return float(t.lr if t.lr is not None else t.default("sync_lr" if self.is_sync else "lr"))

    def weight_decay(self, t: TaskConfig) -> float:
        if t.weight_decay is not None:
            return float(t.weight_decay)
        return float(t.default("sync_weight_decay" if self.is_sync else "weight_decay"))

    def buffer(self, t: TaskConfig) -> int:
        if self.method == "nobuffer":
            return 1
        return int(t.buffer) if t.buffer is not None else max(1, -(-int(t.requests) // int(self.ratio)))

    def local_spec(self, t: TaskConfig) -> LocalSpec:
        d = DATASET_DEFAULTS[t.dataset]
        return LocalSpec(lr=self.client_lr(t), batch_size=d["batch_size"], epochs=d["epochs"], steps=d["steps"],
                         momentum=0.0, weight_decay=self.weight_decay(t), drop_last=d["epochs"] is not None)

    def tau(self, t: TaskConfig) -> int:
        d = DATASET_DEFAULTS[t.dataset]
        if d["steps"] is not None:
            return int(d["steps"])
        return int(d["epochs"]) * (int(t.samples_per_client) // int(d["batch_size"]))

    def schedule_config(self):
        specs = []
        for t in self.tasks:
            ratio = t.delay_ratio if t.delay_ratio is not None else DELAY_RATIOS.get(t.dataset, DELAY_RATIOS["mnist"])
            specs.append(TaskSpec(
                name=t.name, target=t.target, dataset=t.dataset, delay_ratio=float(ratio),
                delay_multiplier=t.default("delay_multiplier"), requests=int(t.requests), buffer=self.buffer(t),
                test_every=int(t.test_every if t.test_every is not None else t.default("test_every")),
                eta_c=self.client_lr(t), eta_s=self.server_lr(t), tau=self.tau(t), weight=float(t.weight),
                max_rounds=t.max_rounds))
        common = dict(tasks=specs, num_clients=int(self.num_clients), availability=float(self.availability),
                      group_seed=int(self.group_seed),
                      max_time=math.inf if self.max_time is None else float(self.max_time))
        if self.is_sync:
            k = None if self.method == "sync_st_nomit" else self.k
            sel = {"sync_st": "random", "sync_st_nomit": "random", "sync_ucb": "ucb", "sync_bayes": "bayes"}[self.method]
            return SyncConfig(k=k, selector=sel, test_every=int(self.sync_test_every), **common)
        option = {"fedast_d": "D", "fedast_s": "S", "nobuffer": self.option}[self.method]
        return FedASTConfig(option=option, realloc_rule=self.realloc_rule, no_buffer=self.method == "nobuffer",
                            ratio=int(self.ratio), window=int(self.window), period_factor=float(self.period_factor),
                            warmup_rounds=int(self.warmup_rounds), **common)


# ============================================================================================
# the trainer
# ============================================================================================
class Update:
    """One client's result: the flat weight difference of the trainable parameters and its loss."""
    __slots__ = ("diff", "loss")

    def __init__(self, diff: torch.Tensor, loss: float):
        self.diff = diff
        self.loss = loss


class _Task:
    pass


class EngineTrainer:
    """The :class:`flkit.fedast_sched.Trainer` protocol on real models and data (see module doc).

    Counters: ``trained`` (client trainings performed), ``train_calls`` (batched calls),
    ``batch_sizes`` (requests per call), ``train_seconds`` (wall time inside training)."""

    def __init__(self, config: FedASTRun, seed: int = 0, device="auto", backend: str = "auto", max_batch: int = 64):
        cfg = config.validate() if isinstance(config, FedASTRun) else FedASTRun.from_dict(config).validate()
        self.cfg = cfg
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.backend = backend
        # a fixed chunk size: the engine's automatic chunking follows the machine's free memory,
        # which would make float32 results (and thus target-crossing times) depend on machine state
        check_range("max_batch", max_batch, 1)
        self.max_batch = int(max_batch)
        self.dtype = torch.float64 if cfg.dtype == "float64" else torch.float32
        self.exclude_bias = cfg.realloc_rule == "official"
        self.trained = 0
        self.train_calls = 0
        self.batch_sizes: list[int] = []
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        self.released: list = []
        self.on_evaluate = None       # hook(task, accuracy) for progress bars
        self._datasets: dict = {}
        self._parts: dict = {}
        self.tasks: dict[str, _Task] = {}
        for i, t in enumerate(cfg.tasks):
            self.tasks[t.name] = self._build_task(i, t)

    # ---------------------------------------------------------------- setup
    def _dataset(self, t: TaskConfig):
        norm = t.default("normalize")
        key = (t.dataset, norm, t.train_subset, self.cfg.eval_subset is None)
        if key not in self._datasets:
            kw = {}
            if norm is not None:
                kw["normalize"] = norm
            if t.train_subset is not None:
                kw["train_subset"] = int(t.train_subset)
                kw["seed"] = int(self.cfg.data_seed)
            if t.dataset == "synthetic":
                kw.update(num_clients=30, dim=60, classes=10, iid=True)
            ds = _data.load(t.dataset, device=self.device, **kw)
            if self.dtype == torch.float64 and ds.x_train.is_floating_point():
                ds.x_train, ds.x_test = ds.x_train.double(), ds.x_test.double()
            self._datasets[key] = ds
        return self._datasets[key]

    def _partition(self, t: TaskConfig, ds):
        N = int(self.cfg.num_clients)
        alpha = t.alpha if t.alpha is not None else t.default("alpha")
        key = (t.dataset, t.train_subset, alpha, t.samples_per_client, N, self.cfg.data_seed)
        if key in self._parts:
            return self._parts[key]
        if t.dataset == "shakespeare":
            roles = _partition.partition("natural", ds.y_train, None, self.cfg.data_seed, groups=ds.train_groups)
            rng = numpy_rng(self.cfg.data_seed, "roles")
            order = rng.permutation(len(roles))
            if N <= len(roles):
                pick = order[:N]
            else:  # fewer roles than clients: duplicate random roles (official code)
                pick = np.concatenate([order, rng.choice(len(roles), N - len(roles))])
            parts = [roles[int(i)] for i in pick]
        else:
            parts = _partition.partition("dirichlet", ds.y_train, N, self.cfg.data_seed, alpha=float(alpha),
                                         samples_per_client=int(t.samples_per_client))
        self._parts[key] = parts
        return parts

    def _build_task(self, i: int, t: TaskConfig) -> _Task:
        cfg = self.cfg
        ds = self._dataset(t)
        st = _Task()
        st.cfg = t
        st.data = ds
        st.parts = self._partition(t, ds)
        name = t.model or t.default("model")
        torch.manual_seed(derive_seed(self.seed, "init", t.name))
        kw = {}
        if name == "logreg":
            kw = dict(num_classes=ds.num_classes, in_channels=int(ds.input_shape[0]))
        model = _models.build(name, **kw)
        model = model.to(self.device, dtype=self.dtype)
        st.model = model
        st.pnames = param_names(model)
        state0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
        st.versions = {0: state0}
        st.current = 0
        st.ordinals = {}
        st.spec = cfg.local_spec(t)
        st.server_lr = cfg.server_lr(t)
        st.target = t.target
        st.bias_mask = torch.cat([torch.full((state0[n].numel(),), "bias" not in n, dtype=torch.bool)
                                  for n in st.pnames]).to(self.device)
        st.eval_model = copy.deepcopy(model).eval()
        if cfg.eval_subset is not None and cfg.eval_subset < len(ds.y_test):
            idx = _stratified(ds.y_test, int(cfg.eval_subset), self.cfg.data_seed)
            st.x_eval, st.y_eval = ds.x_test[idx], ds.y_test[idx]
        else:
            st.x_eval, st.y_eval = ds.x_test, ds.y_test
        st.last_loss = None
        return st

    # ---------------------------------------------------------------- helpers
    def _flat(self, st, state) -> torch.Tensor:
        return torch.cat([state[n].reshape(-1) for n in st.pnames])

    def _unflat(self, st, flat, like) -> dict:
        out, pos = dict(like), 0
        for n in st.pnames:
            k = like[n].numel()
            out[n] = flat[pos:pos + k].view_as(like[n]).clone()
            pos += k
        return out

    def state(self, task: str, version: int | None = None) -> dict:
        st = self._task(task)
        return st.versions[st.current if version is None else version]

    def _task(self, task):
        st = self.tasks.get(task)
        if st is None:
            raise FlkitError(f"unknown task {task!r}; accepted: {', '.join(self.tasks)}")
        return st

    # ---------------------------------------------------------------- Trainer protocol
    def train(self, task: str, version: int, client_ids: Sequence[int], ordinals: Sequence[int] | None = None) -> list:
        """Train every request in ``client_ids`` from stored ``version`` in one batched call.

        ``ordinals`` name the requests within (task, version); default: continue the per-version
        counter (dispatch order), so one-by-one calls in the same order give the same seeds."""
        st = self._task(task)
        if version not in st.versions:
            raise FlkitError(f"version {version} of task {task!r} is not stored (released or never made); "
                             f"stored: {sorted(st.versions)}")
        K = len(client_ids)
        if K == 0:
            return []
        if ordinals is None:
            first = st.ordinals.get(version, 0)
            ordinals = list(range(first, first + K))
            st.ordinals[version] = first + K
        seeds = [derive_seed(self.seed, "local", task, int(version), int(o)) for o in ordinals]
        N = len(st.parts)
        for c in client_ids:
            if not 0 <= int(c) < N:
                raise FlkitError(f"client id {c} is outside the accepted range [0, {N - 1}]")
        start_state = st.versions[version]
        t0 = time.perf_counter()
        res = train_clients(st.model, broadcast_state(start_state, K), st.data.x_train, st.data.y_train,
                            [st.parts[int(c)] for c in client_ids], st.spec, seeds, backend=self.backend,
                            chunk_size=min(K, self.max_batch))
        new = torch.cat([res.state[n].reshape(K, -1) for n in st.pnames], dim=1)
        diffs = new - self._flat(st, start_state).unsqueeze(0)
        self.train_seconds += time.perf_counter() - t0
        self.trained += K
        self.train_calls += 1
        self.batch_sizes.append(K)
        losses = res.train_loss.tolist()
        return [Update(diffs[j], float(losses[j])) for j in range(K)]

    def aggregate(self, task: str, updates: Sequence[Update]) -> int:
        st = self._task(task)
        if not updates:
            raise FlkitError(f"aggregate of task {task!r} got no updates")
        mean = torch.stack([u.diff for u in updates]).mean(0)
        cur = st.versions[st.current]
        new_flat = self._flat(st, cur) + st.server_lr * mean
        st.current += 1
        st.versions[st.current] = self._unflat(st, new_flat, cur)
        st.last_loss = float(np.mean([u.loss for u in updates]))
        return st.current

    @torch.no_grad()
    def _evaluate(self, st, x, y) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of the task's current model."""
        st.eval_model.load_state_dict(st.versions[st.current])
        return evaluate(st.eval_model, None, x, y, batch_size=4096)

    def _accuracy(self, st, x, y) -> float:
        return self._evaluate(st, x, y)[0]

    def evaluate(self, task: str) -> tuple[float, dict]:
        """Test accuracy (and test loss, for the paper's Figs. 13/14) of the task's current model."""
        st = self._task(task)
        t0 = time.perf_counter()
        acc, loss = self._evaluate(st, st.x_eval, st.y_eval)
        if st.target is not None and acc >= st.target and st.x_eval is not st.data.x_test:
            acc, loss = self._evaluate(st, st.data.x_test, st.data.y_test)   # confirm on the full test set
        self.eval_seconds += time.perf_counter() - t0
        if self.on_evaluate is not None:
            self.on_evaluate(task, acc)
        return acc, {"test_loss": loss}

    def evaluate_full(self, task: str) -> float:
        st = self._task(task)
        return self._accuracy(st, st.data.x_test, st.data.y_test)

    def dispersion(self, task: str, updates: Sequence[Update]) -> float:
        """sum_k ||u_k - mean||^2 / (K ||mean||^2) (bias tensors excluded for the official rule)."""
        st = self._task(task)
        X = torch.stack([u.diff for u in updates]).double()
        if self.exclude_bias:
            X = X[:, st.bias_mask]
        mean = X.mean(0)
        den = float(mean @ mean) * len(updates)
        num = float(((X - mean) ** 2).sum())
        if den == 0.0:
            return math.inf if num > 0 else 0.0
        return num / den

    def loss(self, task: str, update: Update) -> float:
        """Reported local loss for Sync-UCB-ST: mean loss x batch size (official code's scale)."""
        return float(update.loss) * self._task(task).spec.batch_size

    def release(self, task: str, version: int) -> None:
        st = self._task(task)
        if version != st.current and version in st.versions:
            del st.versions[version]
            st.ordinals.pop(version, None)
            self.released.append((task, version))

    def stored_versions(self, task: str) -> list:
        return sorted(self._task(task).versions)


def _stratified(y: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """A fixed class-stratified subset of ``n`` positions of ``y`` (seeded)."""
    yy = y.cpu().numpy()
    rng = numpy_rng(seed, "eval_subset")
    classes, counts = np.unique(yy, return_counts=True)
    take = np.floor(counts / counts.sum() * n).astype(int)
    for i in np.argsort(-(counts / counts.sum() * n - take))[: n - take.sum()]:
        take[i] += 1
    idx = np.concatenate([rng.permutation(np.flatnonzero(yy == c))[:k] for c, k in zip(classes, take)])
    return torch.as_tensor(np.sort(idx), device=y.device)


# ============================================================================================
# entry points
# ============================================================================================
def build_schedule(config, seed: int = 0, device="auto", trainer: EngineTrainer | None = None):
    """(scheduler, trainer) ready to ``.run()``: validated config, real trainer, no caching."""
    cfg = FedASTRun.from_dict(config).validate() if not isinstance(config, FedASTRun) else config.validate()
    sched_cfg = cfg.schedule_config()
    sched_cfg.seed = int(seed)
    trainer = trainer or EngineTrainer(cfg, seed=seed, device=device)
    sched = (SyncST if cfg.is_sync else FedAST)(sched_cfg, trainer)
    return sched, trainer


def _cache_key(cfg: FedASTRun, seed: int, device) -> dict:
    return {"config": cfg.to_dict(), "seed": int(seed), "device": str(device.type), "v": _CACHE_VERSION}


def _save(folder: Path, res: SimResult, key: dict) -> None:
    store.save_json(folder / "config.json", key)
    store.save_json(folder / "result.json", {
        "method": res.method, "tasks": res.tasks, "events": [list(e) for e in res.events],
        "history": res.history, "completion_time": res.completion_time, "total_time": res.total_time,
        "stats": res.stats, "allocations": res.allocations})
    store.mark_done(folder)


def _load(folder: Path) -> SimResult:
    d = store.load_json(folder / "result.json")
    return SimResult(d["method"], d["tasks"], [tuple(e) for e in d["events"]], d["history"], d["completion_time"],
                     d["total_time"], d["stats"], d["allocations"])


def run(config, seed: int = 0, *, cache: bool = True, progress: bool = True, device="auto",
        root: str | Path | None = None) -> SimResult:
    """Run one simulated experiment (``config``: a :class:`FedASTRun` or its dict) and return its
    :class:`~flkit.fedast_sched.SimResult`.

    Everything is validated before any data is loaded or any model trained. With ``cache`` the
    result is stored under ``root`` (default :func:`flkit.store.default_root`) in a folder named by
    the hash of (config, seed, device type) and loaded from there on the next call. ``stats`` gains
    ``wall_seconds``, ``trained`` (client trainings) and ``train_calls``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise FlkitError(f"seed={seed!r}; accepted: an integer")
    cfg = FedASTRun.from_dict(config).validate() if not isinstance(config, FedASTRun) else config.validate()
    dev = resolve_device(device)
    key = _cache_key(cfg, seed, dev)
    folder = store.run_dir(root, key, prefix=cfg.method) if cache else None
    if folder is not None and store.is_done(folder):
        return _load(folder)
    t0 = time.perf_counter()
    sched, trainer = build_schedule(cfg, seed, dev)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        total = cfg.max_time if cfg.max_time is not None else None
        label = METHOD_LABELS[cfg.method]
        bar = tqdm(total=total, desc=f"{label} ({len(cfg.tasks)} tasks, seed {seed})", unit="t", leave=False,
                   bar_format="{desc}: sim time {n:.0f}{postfix}" if total is None else None)
        accs = {}

        def hook(task, acc):
            accs[task] = acc
            now = sched.sim.now
            bar.n = min(now, total) if total else now
            bar.set_postfix({k: f"{v:.3f}" for k, v in accs.items()}, refresh=True)
        trainer.on_evaluate = hook
    try:
        res = sched.run()
    finally:
        if bar is not None:
            bar.close()
    res.stats["wall_seconds"] = time.perf_counter() - t0
    res.stats["trained"] = trainer.trained
    res.stats["train_calls_engine"] = trainer.train_calls
    res.stats["train_seconds"] = trainer.train_seconds
    res.stats["mean_batch"] = float(np.mean(trainer.batch_sizes)) if trainer.batch_sizes else 0.0
    res.stats["final_accuracy"] = {n: trainer.evaluate_full(n) for n in trainer.tasks}
    if folder is not None:
        _save(folder, res, key)
    return res


def centralised(task, steps: int, seed: int = 0, device="auto", eval_subset: int | None = None,
                cache: bool = True, root=None) -> float:
    """Reference for Fig. 3: one model trained by plain SGD on the pooled data of all clients
    (the union of the partition, iid mini-batches of the task's batch size, the async client lr and
    weight decay) for ``steps`` steps; returns the full test accuracy. [I]: the paper does not say
    how its centralised curve was trained; this is a cheap, clearly-labelled stand-in."""
    t = task if isinstance(task, TaskConfig) else TaskConfig(**task)
    check_range("steps", steps, 1)
    cfg = FedASTRun("fedast_d", (replace(t, target=None, max_rounds=1),), num_clients=1000)
    cfg.validate()
    dev = resolve_device(device)
    key = {"centralised": asdict(t), "steps": int(steps), "seed": int(seed), "device": dev.type, "v": _CACHE_VERSION}
    folder = store.run_dir(root, key, prefix="centralised") if cache else None
    if folder is not None and store.is_done(folder):
        return float(store.load_json(folder / "result.json")["accuracy"])
    tr = EngineTrainer(cfg, seed=seed, device=dev)
    st = tr.tasks[t.name]
    pooled = torch.unique(torch.cat(list(st.parts)))
    spec = replace(st.spec, epochs=None, steps=int(steps), drop_last=True)
    res = train_clients(st.model, broadcast_state(st.versions[0], 1), st.data.x_train, st.data.y_train, [pooled],
                        spec, [derive_seed(seed, "centralised")])
    st.versions[0] = {n: v[0] for n, v in res.state.items()}
    acc = tr.evaluate_full(t.name)
    if folder is not None:
        store.save_json(folder / "result.json", {"accuracy": acc, "key": key})
        store.mark_done(folder)
    return acc
