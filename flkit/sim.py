"""Simulated wall-clock time for federated learning (training-agnostic).

Wall-clock is simulated, never measured. This module only decides *when* things happen:

- delay models: how long one request (download + local training + upload) takes at a client
  (:func:`shifted_exponential`, :class:`ShiftedExponentialDelays` with speed groups, per-task
  ratios and a local-step multiplier; :class:`FixedDelays` for hand-checked traces);
- a discrete-event core (:class:`EventQueue`: binary heap, ties broken by insertion order);
- :class:`Simulator`: per-client FCFS queues (``start = max(now, last_finish_i)``), an
  availability cap on the number of distinct busy clients (new requests for idle clients are
  *dropped*, not redrawn, when the cap is reached), model versions carried by every request and
  the staleness (server versions between dispatch and arrival) recorded on every arrival, and
  synchronous rounds as the special case "dispatch a group, keep the first k finishers".

Nothing here knows about models or training; methods (FedAST, staleness experiments) drive a
:class:`Simulator` and train lazily when arrivals are popped.

Event-log rows are tuples ``(time, task, client, version, staleness, kind)`` with ``kind`` in
``dispatch, drop, arrive, cancel, discard`` (methods add their own kinds); fields that do not
apply are ``None``.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .utils import FlkitError, check_range, numpy_rng

__all__ = [
    "SPEED_GROUP_FRACTIONS", "SPEED_GROUP_FACTORS", "LOCAL_STEPS_MULTIPLIER",
    "shifted_exponential", "assign_speed_groups",
    "DelayModel", "ShiftedExponentialDelays", "FixedDelays",
    "EventQueue", "Request", "RoundResult", "Simulator",
    "QUEUED", "ARRIVED", "CANCELLED", "DISCARDED",
]

#: FedAST speed groups: 25 % slow, 50 % normal, 25 % fast ...
SPEED_GROUP_FRACTIONS = (0.25, 0.5, 0.25)
#: ... whose delays are multiplied by 1.3 / 1 / 0.7.
SPEED_GROUP_FACTORS = (1.3, 1.0, 0.7)
#: FedAST multiplies the per-step delay by the number of local steps (27).
LOCAL_STEPS_MULTIPLIER = 27.0

# request states (module constants so the hot path compares by identity)
QUEUED = "queued"
ARRIVED = "arrived"
CANCELLED = "cancelled"
DISCARDED = "discarded"


# --------------------------------------------------------------------------------------------
# delay models
# --------------------------------------------------------------------------------------------
def shifted_exponential(shift: float, mean: float, size=None, *, rng: np.random.Generator | None = None,
                        seed: int = 0):
    """Draw ``shift + Exp(mean)``: minimum ``shift``, expected value ``shift + mean``.

    The FedAST paper writes X = beta + Exp(mean 2 beta) (so E[X] = 3 beta); its code uses
    ``shift = ratio / 2`` and ``mean = ratio``, i.e. beta = ratio / 2. Without ``rng`` a generator
    is made from the named stream ``(seed, "shifted_exponential")``."""
    check_range("shift", shift, 0)
    check_range("mean", mean, 0)
    if rng is None:
        rng = numpy_rng(seed, "shifted_exponential")
    return shift + mean * rng.standard_exponential(size)


def assign_speed_groups(num_clients: int, fractions: Sequence[float] = SPEED_GROUP_FRACTIONS,
                        seed: int = 64) -> np.ndarray:
    """Group index per client (0 = first group, e.g. slow), exact proportions.

    A random permutation of the clients (stream ``(seed, "speed_groups")``) is cut at
    ``floor(cumulative_fraction * N)`` like the official code, so the last group takes the
    rounding remainder. The assignment depends on ``seed`` only, so it can stay fixed across
    Monte Carlo runs whose run seed varies."""
    check_range("num_clients", num_clients, 1)
    fr = [float(f) for f in fractions]
    for f in fr:
        check_range("speed group fraction", f, 0, 1)
    if not math.isclose(sum(fr), 1.0, abs_tol=1e-9):
        raise FlkitError(f"speed group fractions={tuple(fractions)!r} sum to {sum(fr)}; they must sum to 1")
    perm = numpy_rng(seed, "speed_groups").permutation(num_clients)
    groups = np.empty(num_clients, dtype=np.int64)
    cum, lo = 0.0, 0
    for g, f in enumerate(fr):
        cum += f
        hi = num_clients if g == len(fr) - 1 else int(cum * num_clients + 1e-9)
        groups[perm[lo:hi]] = g
        lo = hi
    return groups


class DelayModel:
    """Service time of one request: ``sample(task, client) -> float`` (>= 0).

    ``task`` and ``client`` are integer indices. Subclass and override :meth:`sample`."""

    def sample(self, task: int, client: int) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def mean(self, task: int, client: int) -> float:  # pragma: no cover - optional
        raise NotImplementedError


class ShiftedExponentialDelays(DelayModel):
    """FedAST delays: ``multiplier * factor_i * (shift_fraction * ratio_m + Exp(mean = ratio_m))``.

    - ``task_ratios``: per-task base ratio (per local step), e.g. MNIST 0.148, FMNIST 0.240.
    - ``multiplier``: number of local steps (27), a scalar or one value per task.
    - speed groups: ``group_fractions`` (25/50/25 %) with ``group_factors`` (1.3/1/0.7) applied to
      both shift and mean; assignment from ``group_seed`` only (fixed across runs by default).
    - exponential draws come from the named stream ``(seed, *stream)``; they are generated in
      blocks (cheap per event) and consumed in order, so a run is reproducible from its seed.

    Mean duration of client i for task m: ``multiplier * factor_i * ratio_m * (shift_fraction + 1)``.
    """

    def __init__(self, num_clients: int, task_ratios: Sequence[float], *,
                 multiplier: float | Sequence[float] = LOCAL_STEPS_MULTIPLIER,
                 shift_fraction: float = 0.5,
                 group_fractions: Sequence[float] = SPEED_GROUP_FRACTIONS,
                 group_factors: Sequence[float] = SPEED_GROUP_FACTORS,
                 group_seed: int = 64, seed: int = 0, stream: tuple = ("delays",), block: int = 16384):
        check_range("num_clients", num_clients, 1)
        ratios = [float(r) for r in task_ratios]
        if not ratios:
            raise FlkitError("task_ratios is empty; give one delay ratio per task")
        for r in ratios:
            check_range("delay ratio", r, 0)
        mults = [float(multiplier)] * len(ratios) if np.isscalar(multiplier) else [float(x) for x in multiplier]
        if len(mults) != len(ratios):
            raise FlkitError(f"multiplier has {len(mults)} values for {len(ratios)} tasks; give one per task or a scalar")
        for x in mults:
            check_range("delay multiplier", x, 0)
        check_range("shift_fraction", shift_fraction, 0)
        factors = [float(f) for f in group_factors]
        if len(factors) != len(group_fractions):
            raise FlkitError(f"group_factors has {len(factors)} values for {len(group_fractions)} speed groups")
        for f in factors:
            check_range("speed group factor", f, 0)
        check_range("block", block, 1)
        self.num_clients = int(num_clients)
        self.ratios = ratios
        self.multipliers = mults
        self.shift_fraction = float(shift_fraction)
        self.groups = assign_speed_groups(num_clients, group_fractions, group_seed)
        self.factors = np.asarray(factors)[self.groups]          # per client
        self._shift = [(m * r * self.shift_fraction * self.factors).tolist() for r, m in zip(ratios, mults)]
        self._scale = [(m * r * self.factors).tolist() for r, m in zip(ratios, mults)]
        self._rng = numpy_rng(seed, *stream)
        self._block = int(block)
        self._buf: list = []
        self._i = 0

    def sample(self, task: int, client: int) -> float:
        i = self._i
        buf = self._buf
        if i >= len(buf):
            buf = self._buf = self._rng.standard_exponential(self._block).tolist()
            i = 0
        self._i = i + 1
        return self._shift[task][client] + self._scale[task][client] * buf[i]

    def mean(self, task: int, client: int) -> float:
        return self._shift[task][client] + self._scale[task][client]

    def minimum(self, task: int, client: int) -> float:
        return self._shift[task][client]


class FixedDelays(DelayModel):
    """Deterministic delays, for hand-computed traces and experiments with scripted timing.

    ``durations`` is a number (every request), a callable ``f(task, client) -> float``, or a dict
    ``{(task, client): value_or_list}`` where a list is consumed one value per request (the last
    value repeats). ``default`` covers pairs missing from the dict."""

    def __init__(self, durations, default: float | None = None):
        self._const = self._fn = self._table = None
        if callable(durations):
            self._fn = durations
        elif isinstance(durations, dict):
            self._table = {}
            for key, v in durations.items():
                vals = [float(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
                if not vals:
                    raise FlkitError(f"FixedDelays entry {key!r} is empty")
                for x in vals:
                    check_range(f"delay for (task, client)={key!r}", x, 0)
                self._table[tuple(key)] = [vals, 0]
        else:
            check_range("delay", float(durations), 0)
            self._const = float(durations)
        if default is not None:
            check_range("default delay", default, 0)
        self.default = default

    def sample(self, task: int, client: int) -> float:
        if self._const is not None:
            return self._const
        if self._fn is not None:
            d = float(self._fn(task, client))
            if not d >= 0:
                raise FlkitError(f"delay function returned {d!r} for task {task}, client {client}; accepted: >= 0")
            return d
        entry = self._table.get((task, client))
        if entry is None:
            if self.default is None:
                raise FlkitError(f"no delay given for (task, client)=({task}, {client}) and no default")
            return self.default
        vals, i = entry
        entry[1] = i + 1
        return vals[i] if i < len(vals) else vals[-1]


# --------------------------------------------------------------------------------------------
# event core
# --------------------------------------------------------------------------------------------
class EventQueue:
    """Binary heap of ``(time, item)``; equal times pop in insertion order (stable)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self):
        self._heap: list = []
        self._seq = 0

    def push(self, time: float, item) -> int:
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, (time, seq, item))
        return seq

    def pop(self):
        """Return ``(time, item)`` of the earliest event."""
        time, _, item = heapq.heappop(self._heap)
        return time, item

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)


class Request:
    """One unit of client work: carries the model ``version`` current at *dispatch* time.

    ``staleness`` (server versions of its task between dispatch and arrival) is set on arrival."""

    __slots__ = ("id", "task", "client", "version", "dispatch_time", "start", "finish", "status",
                 "staleness")

    def __init__(self, id, task, client, version, dispatch_time, start, finish):
        self.id = id
        self.task = task
        self.client = client
        self.version = version
        self.dispatch_time = dispatch_time
        self.start = start
        self.finish = finish
        self.status = QUEUED
        self.staleness = None

    @property
    def duration(self) -> float:
        """Service time (excludes queueing)."""
        return self.finish - self.start

    def __repr__(self):
        return (f"Request(id={self.id}, task={self.task}, client={self.client}, version={self.version}, "
                f"dispatch={self.dispatch_time:.4g}, start={self.start:.4g}, finish={self.finish:.4g}, "
                f"status={self.status}, staleness={self.staleness})")


@dataclass
class RoundResult:
    """Outcome of :meth:`Simulator.sync_round`: per group the kept (first-k, in finish order)
    and discarded requests, and the round end (max over groups of the k-th earliest finish)."""
    kept: list
    discarded: list
    end_time: float
    start_time: float = 0.0
    per_group_end: list = field(default_factory=list)


class Simulator:
    """Clock, per-client FCFS queues, availability cap, versions and staleness.

    Parameters
    ----------
    num_clients : pool size N.
    delays : a :class:`DelayModel` (``sample(task, client)``).
    num_tasks : number of independent models (tasks); versions are kept per task.
    max_busy : availability cap on *distinct* clients holding >= 1 outstanding request (None = N).
        :meth:`dispatch` with ``check_availability=True`` drops (does not redraw) a request for an
        idle client when the cap is reached; already-busy clients can always queue more.
    seed : run seed; client draws use the named stream ``(seed, "clients")``.
    record : keep an event log in :attr:`log` (rows ``(time, task, client, version, staleness, kind)``).
    client_draws : optional scripted sequence of client ids for :meth:`draw_client` (tests).

    Semantics: ``dispatch`` at the current time ``now`` draws a service time d, ``start =
    max(now, last_finish[client])``, ``finish = start + d``, ``last_finish[client] = finish``.
    Cancelling a request does not roll ``last_finish`` back (the client stays blocked until the
    cancelled job would have ended) but it stops counting as outstanding immediately.
    """

    def __init__(self, num_clients: int, delays: DelayModel, *, num_tasks: int = 1, max_busy: int | None = None,
                 seed: int = 0, record: bool = True, client_draws: Iterable[int] | None = None,
                 draw_block: int = 8192):
        check_range("num_clients", num_clients, 1)
        check_range("num_tasks", num_tasks, 1)
        n = int(num_clients)
        if max_busy is None:
            max_busy = n
        check_range("max_busy (available clients)", max_busy, 1, n)
        self.num_clients = n
        self.num_tasks = int(num_tasks)
        self.delays = delays
        self.max_busy = int(max_busy)
        self.now = 0.0
        self.last_finish = [0.0] * n
        self.outstanding = [0] * n          # per client: queued requests not yet arrived/cancelled
        self.num_busy = 0                   # distinct clients with outstanding > 0
        self.version = [0] * self.num_tasks
        self._heap: list = []
        self._next_id = 0
        self._num_cancelled_in_heap = 0
        self.log: list | None = [] if record else None
        self._rng_clients = numpy_rng(seed, "clients")
        self._draw_block = int(draw_block)
        self._draw_buf: list = []
        self._draw_i = 0
        self._script = iter(client_draws) if client_draws is not None else None
        self.counts = {"dispatched": 0, "dropped": 0, "arrived": 0, "cancelled": 0, "discarded": 0}

    # ---------------------------------------------------------------- clients
    def draw_client(self) -> int:
        """A client uniformly at random from all N (or the next scripted one)."""
        if self._script is not None:
            try:
                c = int(next(self._script))
            except StopIteration:
                raise FlkitError("the scripted client_draws sequence is exhausted") from None
            if not 0 <= c < self.num_clients:
                raise FlkitError(f"scripted client {c} is outside the accepted range [0, {self.num_clients - 1}]")
            return c
        i = self._draw_i
        buf = self._draw_buf
        if i >= len(buf):
            buf = self._draw_buf = self._rng_clients.integers(0, self.num_clients, self._draw_block).tolist()
            i = 0
        self._draw_i = i + 1
        return buf[i]

    def permutation(self) -> np.ndarray:
        """A random permutation of all clients (synchronous rounds draw their clients from it)."""
        return self._rng_clients.permutation(self.num_clients)

    def is_available(self, client: int) -> bool:
        """Whether a new request for ``client`` would pass the availability cap."""
        return self.outstanding[client] > 0 or self.num_busy < self.max_busy

    # ---------------------------------------------------------------- dispatch / arrival
    def dispatch(self, task: int, client: int, version: int | None = None, *, check_availability: bool = False,
                 enqueue: bool = True) -> Request | None:
        """Send one request of ``task`` (model ``version``, default: current) to ``client`` now.

        Returns the :class:`Request`, or None when the availability check drops it. With
        ``enqueue=False`` the request is timed (and blocks the client's FCFS queue) but is not put
        in the event heap and does not count as outstanding (used by synchronous rounds)."""
        out = self.outstanding
        if version is None:
            version = self.version[task]
        now = self.now
        if check_availability and out[client] == 0 and self.num_busy >= self.max_busy:
            self.counts["dropped"] += 1
            if self.log is not None:
                self.log.append((now, task, client, version, None, "drop"))
            return None
        lf = self.last_finish[client]
        start = now if now > lf else lf
        finish = start + self.delays.sample(task, client)
        self.last_finish[client] = finish
        rid = self._next_id
        self._next_id = rid + 1
        req = Request(rid, task, client, version, now, start, finish)
        if enqueue:
            if out[client] == 0:
                self.num_busy += 1
            out[client] += 1
            heapq.heappush(self._heap, (finish, rid, req))
        self.counts["dispatched"] += 1
        if self.log is not None:
            self.log.append((now, task, client, version, None, "dispatch"))
        return req

    def dispatch_random(self, task: int, version: int | None = None, *, check_availability: bool = True):
        """Draw a client uniformly from all N and :meth:`dispatch` to it (availability-checked)."""
        return self.dispatch(task, self.draw_client(), version, check_availability=check_availability)

    def pop(self) -> Request | None:
        """Advance the clock to the earliest outstanding request and return it (None if none).

        Sets ``status = ARRIVED`` and ``staleness = version[task] - request.version``."""
        heap = self._heap
        while heap:
            finish, _, req = heapq.heappop(heap)
            if req.status is not QUEUED:
                self._num_cancelled_in_heap -= 1
                continue
            self.now = finish
            c = req.client
            n = self.outstanding[c] - 1
            self.outstanding[c] = n
            if n == 0:
                self.num_busy -= 1
            req.status = ARRIVED
            s = self.version[req.task] - req.version
            req.staleness = s
            self.counts["arrived"] += 1
            if self.log is not None:
                self.log.append((finish, req.task, c, req.version, s, "arrive"))
            return req
        return None

    def peek_time(self) -> float | None:
        """Finish time of the next outstanding request (None if none)."""
        heap = self._heap
        while heap and heap[0][2].status is not QUEUED:
            heapq.heappop(heap)
            self._num_cancelled_in_heap -= 1
        return heap[0][0] if heap else None

    def pending(self, task: int | None = None) -> list:
        """Outstanding requests (of ``task``), in no particular order."""
        return [e[2] for e in self._heap if e[2].status is QUEUED and (task is None or e[2].task == task)]

    def __len__(self) -> int:
        return len(self._heap) - self._num_cancelled_in_heap

    # ---------------------------------------------------------------- cancellation
    def cancel(self, req: Request) -> bool:
        """Cancel an outstanding request. Its client's ``last_finish`` is *not* rolled back."""
        if req.status is not QUEUED:
            return False
        req.status = CANCELLED
        c = req.client
        n = self.outstanding[c] - 1
        self.outstanding[c] = n
        if n == 0:
            self.num_busy -= 1
        self._num_cancelled_in_heap += 1
        self.counts["cancelled"] += 1
        if self.log is not None:
            self.log.append((self.now, req.task, c, req.version, None, "cancel"))
        return True

    def cancel_task(self, task: int) -> list:
        """Cancel every outstanding request of ``task``; returns them (in finish order)."""
        victims = sorted((e for e in self._heap if e[2].task == task and e[2].status is QUEUED),
                         key=lambda e: (e[0], e[1]))
        for e in victims:
            self.cancel(e[2])
        if self._num_cancelled_in_heap > 64 and self._num_cancelled_in_heap * 2 > len(self._heap):
            self._heap = [e for e in self._heap if e[2].status is QUEUED]
            heapq.heapify(self._heap)
            self._num_cancelled_in_heap = 0
        return [e[2] for e in victims]

    # ---------------------------------------------------------------- versions / time
    def advance_version(self, task: int) -> int:
        """The server of ``task`` produced a new model; returns the new version number."""
        v = self.version[task] + 1
        self.version[task] = v
        return v

    def advance_to(self, time: float) -> None:
        if time < self.now:
            raise FlkitError(f"time={time!r} is before the current simulated time {self.now!r}; time cannot go back")
        self.now = float(time)

    # ---------------------------------------------------------------- synchronous rounds
    def sync_round(self, groups: Sequence[tuple]) -> RoundResult:
        """One synchronous round started at ``now``.

        ``groups``: ``(task, clients, k)`` or ``(task, clients, k, version)`` tuples. Every client
        gets a request (FCFS-timed, not enqueued); per group the ``k`` earliest finishers are kept
        (ties by dispatch order) and the rest discarded — discarded jobs still block their clients
        until their would-be finish (``last_finish`` is not reset). The clock moves to the round
        end = max over groups of the k-th earliest finish. Kept requests get staleness 0 against
        the version they carry."""
        t0 = self.now
        kept_all, disc_all, ends = [], [], []
        log = self.log
        for g in groups:
            task, clients, k = g[0], g[1], int(g[2])
            version = g[3] if len(g) > 3 else None
            reqs = [self.dispatch(task, int(c), version, enqueue=False) for c in clients]
            if not 0 <= k <= len(reqs):
                raise FlkitError(f"k={k} is outside the accepted range [0, {len(reqs)}] for task {task}")
            reqs.sort(key=lambda r: (r.finish, r.id))
            kept_all.append(reqs[:k])
            disc_all.append(reqs[k:])
            ends.append(reqs[k - 1].finish if k > 0 else t0)
        end = max(ends) if ends else t0
        for kept in kept_all:
            for r in kept:
                r.status = ARRIVED
                r.staleness = self.version[r.task] - r.version
                if log is not None:
                    log.append((r.finish, r.task, r.client, r.version, r.staleness, "arrive"))
        self.counts["arrived"] += sum(len(k) for k in kept_all)
        for disc in disc_all:
            for r in disc:
                r.status = DISCARDED
                if log is not None:
                    log.append((end, r.task, r.client, r.version, None, "discard"))
        self.counts["discarded"] += sum(len(d) for d in disc_all)
        self.now = end if end > t0 else t0
        return RoundResult(kept_all, disc_all, self.now, t0, ends)
