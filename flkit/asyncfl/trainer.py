"""FedAST on real data: the :class:`EngineTrainer` (the :class:`Trainer` of the schedulers).

The schedules (FedAST S/D, NoBuffer, Sync-ST, Sync-UCB-ST, Sync-Bayes-ST) live in
:mod:`flkit.asyncfl`, which decides *when* requests are sent, kept and aggregated and calls a
``Trainer`` lazily. This module supplies the real trainer:

- per task a dataset (loaded once per dataset even when several tasks use it, kept on the
  device), a partition (image tasks: Dirichlet(alpha) label proportions x 300 samples per client,
  the fixed-size Dirichlet rule of :func:`flkit.data.partition.partition`; Shakespeare: one speaking
  role per client), a model and
  a *version store* ``{version: state}`` from which requests start; versions no request
  references are released;
- local training through :func:`flkit.engine.train_clients`: every request of one
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

The user-facing entry point is :func:`flkit.asyncfl.runner.run`.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence

import numpy as np
import torch

from .. import data as _data
from .. import models as _models
from ..data import partition as _partition
from ..engine import evaluate, train_clients
from ..state import broadcast_state, param_names
from ..utils import FlkitError, check_range, derive_seed, numpy_rng, resolve_device
from .config import FedASTRun
from .tasks import TaskConfig

__all__ = ["EngineTrainer", "Update"]


def data_kwargs(t: TaskConfig, cfg: FedASTRun) -> dict:
    """The ``flkit.data.load`` options of task ``t`` (also what names its data in a cache key)."""
    kw = {}
    norm = t.default("normalize")
    if norm is not None:
        kw["normalize"] = norm
    if t.train_subset is not None:
        kw["train_subset"] = int(t.train_subset)
        kw["seed"] = int(cfg.data_seed)
    if t.dataset == "synthetic":
        kw.update(num_clients=30, dim=60, classes=10, iid=True)
    return kw


class Update:
    """One client's result: the flat weight difference of the trainable parameters and its loss."""

    __slots__ = ("diff", "loss", "row")

    def __init__(self, diff: torch.Tensor, loss: float):
        self.diff = diff
        self.loss = loss
        self.row = None  # (biases excluded?, its float64 row of the dispersion matrix)


class _Task:
    pass


class EngineTrainer:
    """The :class:`flkit.asyncfl.Trainer` protocol on real models and data (see module doc).

    Counters: ``trained`` (client trainings performed), ``train_calls`` (batched calls),
    ``batch_sizes`` (requests per call), ``train_seconds`` (wall time inside training)."""

    def __init__(
        self,
        config: FedASTRun,
        seed: int = 0,
        device="auto",
        backend: str = "auto",
        max_batch: int = 64,
    ):
        cfg = FedASTRun.from_dict(config).validate()
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
        self.on_evaluate = None  # hook(task, accuracy) for progress bars
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
            ds = _data.load(t.dataset, device=self.device, **data_kwargs(t, self.cfg))
            if self.dtype == torch.float64 and ds.x_train.is_floating_point():
                ds.x_train, ds.x_test = ds.x_train.double(), ds.x_test.double()
            self._datasets[key] = ds
        return self._datasets[key]

    def _partition(self, t: TaskConfig, ds):
        n_clients = int(self.cfg.num_clients)
        alpha = t.alpha if t.alpha is not None else t.default("alpha")
        key = (
            t.dataset,
            t.train_subset,
            alpha,
            t.samples_per_client,
            n_clients,
            self.cfg.data_seed,
        )
        if key in self._parts:
            return self._parts[key]
        if t.dataset == "shakespeare":
            roles = _partition.partition(
                "natural", ds.y_train, None, self.cfg.data_seed, groups=ds.train_groups
            )
            rng = numpy_rng(self.cfg.data_seed, "roles")
            order = rng.permutation(len(roles))
            if n_clients <= len(roles):
                pick = order[:n_clients]
            else:  # fewer roles than clients: duplicate random roles (official code)
                pick = np.concatenate([order, rng.choice(len(roles), n_clients - len(roles))])
            parts = [roles[int(i)] for i in pick]
        else:
            parts = _partition.partition(
                "dirichlet",
                ds.y_train,
                n_clients,
                self.cfg.data_seed,
                alpha=float(alpha),
                samples_per_client=int(t.samples_per_client),
            )
        self._parts[key] = parts
        return parts

    def _build_task(self, i: int, t: TaskConfig) -> _Task:
        cfg = self.cfg
        ds = self._dataset(t)
        st = _Task()
        st.cfg = t
        st.data = ds
        st.parts = self._partition(t, ds)
        name = t.model_name()
        torch.manual_seed(derive_seed(self.seed, "init", t.name))
        kw = dict(t.model_flags or {})
        if name == "logreg":
            kw.update(num_classes=ds.num_classes, in_channels=int(ds.input_shape[0]))
        model = _models.build(name, **kw)
        model = model.to(self.device, dtype=self.dtype)
        st.model = model
        st.pnames = param_names(model)
        state0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
        st.versions = {0: state0}
        st.current = 0
        st.ordinals = {}
        st.spec = cfg.local_spec(t)
        st.backend = self.backend
        if self.backend == "auto" and self.device.type == "cpu":
            # the dataset may name a faster backend on a CPU (an LSTM's vmap runs far slower
            # than a plain loop there); on a GPU the automatic rule stays
            st.backend = t.default("cpu_backend") or "auto"
        st.server_lr = cfg.server_lr(t)
        st.target = t.target
        st.bias_mask = torch.cat(
            [torch.full((state0[n].numel(),), "bias" not in n, dtype=torch.bool) for n in st.pnames]
        ).to(self.device)
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
            out[n] = flat[pos : pos + k].view_as(like[n]).clone()
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
    def train(
        self,
        task: str,
        version: int,
        client_ids: Sequence[int],
        ordinals: Sequence[int] | None = None,
    ) -> list:
        """Train every request in ``client_ids`` from stored ``version`` in one batched call.

        ``ordinals`` name the requests within (task, version); default: continue the per-version
        counter (dispatch order), so one-by-one calls in the same order give the same seeds."""
        st = self._task(task)
        if version not in st.versions:
            raise FlkitError(
                f"version {version} of task {task!r} is not stored (released or never made); "
                f"stored: {sorted(st.versions)}"
            )
        n_requests = len(client_ids)
        if n_requests == 0:
            return []
        if ordinals is None:
            first = st.ordinals.get(version, 0)
            ordinals = list(range(first, first + n_requests))
            st.ordinals[version] = first + n_requests
        seeds = [derive_seed(self.seed, "local", task, int(version), int(o)) for o in ordinals]
        n_parts = len(st.parts)
        for c in client_ids:
            if not 0 <= int(c) < n_parts:
                raise FlkitError(f"client id {c} is outside the accepted range [0, {n_parts - 1}]")
        start_state = st.versions[version]
        t0 = time.perf_counter()
        res = train_clients(
            st.model,
            broadcast_state(start_state, n_requests),
            st.data.x_train,
            st.data.y_train,
            [st.parts[int(c)] for c in client_ids],
            st.spec,
            seeds,
            backend=st.backend,
            chunk_size=min(n_requests, self.max_batch),
        )
        new = torch.cat([res.state[n].reshape(n_requests, -1) for n in st.pnames], dim=1)
        diffs = new - self._flat(st, start_state).unsqueeze(0)
        self.train_seconds += time.perf_counter() - t0
        self.trained += n_requests
        self.train_calls += 1
        self.batch_sizes.append(n_requests)
        losses = res.train_loss.tolist()
        return [Update(diffs[j], float(losses[j])) for j in range(n_requests)]

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

    def evaluate(self, task: str) -> tuple[float, dict]:
        """Test accuracy (and test loss, for the paper's Figs. 13/14) of the current model."""
        st = self._task(task)
        t0 = time.perf_counter()
        acc, loss = self._evaluate(st, st.x_eval, st.y_eval)
        if st.target is not None and acc >= st.target and st.x_eval is not st.data.x_test:
            acc, loss = self._evaluate(
                st, st.data.x_test, st.data.y_test
            )  # confirm on the full test set
        self.eval_seconds += time.perf_counter() - t0
        if self.on_evaluate is not None:
            self.on_evaluate(task, acc)
        return acc, {"test_loss": loss}

    def evaluate_full(self, task: str) -> float:
        return self.measure(task)[0]

    def measure(self, task: str) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of the task's current model on the full test set."""
        st = self._task(task)
        return self._evaluate(st, st.data.x_test, st.data.y_test)

    def dispersion(self, task: str, updates: Sequence[Update]) -> float:
        """sum_k ||u_k - mean||^2 / (K ||mean||^2) (bias tensors excluded for the official rule)."""
        st = self._task(task)
        rows = torch.stack([self._row(st, u) for u in updates])
        mean = rows.mean(0)
        den = float(mean @ mean) * len(updates)
        num = float(((rows - mean) ** 2).sum())
        if den == 0.0:
            return math.inf if num > 0 else 0.0
        return num / den

    def _row(self, st, u: Update) -> torch.Tensor:
        """``u`` in float64 without the bias entries (official rule), computed once per update:
        the official rule re-reads each update at every one of its window's arrivals."""
        if u.row is None or u.row[0] != self.exclude_bias:
            row = u.diff.double()[st.bias_mask] if self.exclude_bias else u.diff.double()
            u.row = (self.exclude_bias, row)
        return u.row[1]

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
    idx = np.concatenate(
        [rng.permutation(np.flatnonzero(yy == c))[:k] for c, k in zip(classes, take)]
    )
    return torch.as_tensor(np.sort(idx), device=y.device)


# ============================================================================================
