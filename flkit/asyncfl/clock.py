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
from collections.abc import Iterable, Sequence

import numpy as np

from ..utils import FlkitError, check_range, numpy_rng
from .delays import DelayModel
from .events import ARRIVED, CANCELLED, DISCARDED, QUEUED, EventQueue, Request, RoundResult

__all__ = [
    "EventQueue",
    "Request",
    "RoundResult",
    "Simulator",
    "QUEUED",
    "ARRIVED",
    "CANCELLED",
    "DISCARDED",
]


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
    record : keep an event log in :attr:`log`
        (rows ``(time, task, client, version, staleness, kind)``).
    client_draws : optional scripted sequence of client ids for :meth:`draw_client` (tests).

    Semantics: ``dispatch`` at the current time ``now`` draws a service time d, ``start =
    max(now, last_finish[client])``, ``finish = start + d``, ``last_finish[client] = finish``.
    Cancelling a request does not roll ``last_finish`` back (the client stays blocked until the
    cancelled job would have ended) but it stops counting as outstanding immediately.
    """

    def __init__(
        self,
        num_clients: int,
        delays: DelayModel,
        *,
        num_tasks: int = 1,
        max_busy: int | None = None,
        seed: int = 0,
        record: bool = True,
        client_draws: Iterable[int] | None = None,
        draw_block: int = 8192,
    ):
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
        self.outstanding = [0] * n  # per client: queued requests not yet arrived/cancelled
        self.num_busy = 0  # distinct clients with outstanding > 0
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
                raise FlkitError(
                    f"scripted client {c} is outside the accepted range [0, {self.num_clients - 1}]"
                )
            return c
        i = self._draw_i
        buf = self._draw_buf
        if i >= len(buf):
            buf = self._draw_buf = self._rng_clients.integers(
                0, self.num_clients, self._draw_block
            ).tolist()
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
    def dispatch(
        self,
        task: int,
        client: int,
        version: int | None = None,
        *,
        check_availability: bool = False,
        enqueue: bool = True,
    ) -> Request | None:
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

    def dispatch_random(
        self, task: int, version: int | None = None, *, check_availability: bool = True
    ):
        """Draw a client uniformly from all N and :meth:`dispatch` to it (availability-checked)."""
        return self.dispatch(
            task, self.draw_client(), version, check_availability=check_availability
        )

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
        return [
            e[2]
            for e in self._heap
            if e[2].status is QUEUED and (task is None or e[2].task == task)
        ]

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
        victims = sorted(
            (e for e in self._heap if e[2].task == task and e[2].status is QUEUED),
            key=lambda e: (e[0], e[1]),
        )
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
            raise FlkitError(
                f"time={time!r} is before the current simulated time {self.now!r}; "
                "time cannot go back"
            )
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
                raise FlkitError(
                    f"k={k} is outside the accepted range [0, {len(reqs)}] for task {task}"
                )
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
