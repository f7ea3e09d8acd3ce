"""The pieces of the discrete-event core: the event queue (a binary heap, ties broken by
insertion order), a request (one unit of client work carrying its model version) and the
outcome of a synchronous round."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

__all__ = ["EventQueue", "Request", "RoundResult", "QUEUED", "ARRIVED", "CANCELLED", "DISCARDED"]

# request states (module constants so the hot path compares by identity)
QUEUED = "queued"
ARRIVED = "arrived"
CANCELLED = "cancelled"
DISCARDED = "discarded"


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

    __slots__ = (
        "id",
        "task",
        "client",
        "version",
        "dispatch_time",
        "start",
        "finish",
        "status",
        "staleness",
    )

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
        return (
            f"Request(id={self.id}, task={self.task}, client={self.client}, "
            f"version={self.version}, "
            f"dispatch={self.dispatch_time:.4g}, start={self.start:.4g}, finish={self.finish:.4g}, "
            f"status={self.status}, staleness={self.staleness})"
        )


@dataclass
class RoundResult:
    """Outcome of :meth:`Simulator.sync_round`: per group the kept (first-k, in finish order)
    and discarded requests, and the round end (max over groups of the k-th earliest finish)."""

    kept: list
    discarded: list
    end_time: float
    start_time: float = 0.0
    per_group_end: list = field(default_factory=list)
