"""What the run pool says while it trains (:class:`PoolProgress`): each run as it ends, runs done
/ total and the time left, a line every :data:`~.pool.HEARTBEAT_S` seconds while runs go, and the
runs that resume from a checkpoint or fail."""

from __future__ import annotations

import sys
import time

__all__ = ["PoolProgress", "fmt_seconds"]


def fmt_seconds(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h10m``; "unknown" for None."""
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class PoolProgress:
    """Lines on ``stream`` for a :class:`~.pool.PoolPlan`'s events: each run as it ends, with runs
    done / total and the time left, estimated from the finished runs' seconds per unit of
    :meth:`~.pool_jobs.PoolJob.cost` (per kind) and the pool's capacity."""

    def __init__(self, plan, stream=None, enabled: bool = True):
        self.plan, self.enabled = plan, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.failed: list[str] = []
        self.started: dict[int, float] = {}
        self.finished: set[int] = set()
        self.rate: dict[str, tuple[float, float]] = {}  # kind -> (seconds, cost) of ok runs

    def _say(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.stream, flush=True)

    def eta(self) -> float | None:
        """Seconds left: the cost of the runs not finished (a running run's less what its time
        so far has done) at the finished runs' pace, spread over the pool's capacity (a timed
        run's over the devices, one each); None before a run of each kind left has finished."""
        now, left = time.monotonic(), {False: 0.0, True: 0.0}
        jobs = [(i, j) for i, j in enumerate(self.plan.jobs) if i not in self.finished]
        for i, job in jobs:
            seconds, cost = self.rate.get(job.kind, (0.0, 0.0))
            if cost <= 0:
                return None
            spent = now - self.started[i] if i in self.started else 0.0
            left[job.timed] += max(0.0, job.cost() * seconds / cost - spent)
        slots = self.plan.slots
        packed = sum(not j.timed for _, j in jobs)
        alone = max(1, len(slots.devices)) if slots.gpu else 1  # a timed run: a device each
        return left[False] / max(1, min(slots.capacity(), packed)) + left[True] / alone

    def start(self) -> None:
        p = self.plan
        for note in p.notes:
            self._say(f"pool: {note}")
        if not p.jobs:
            self._say(f"pool: nothing to train ({p.cached} run(s) already in the run cache)")
            return
        threads = f", {p.threads} torch thread(s) per run" if p.threads else ""
        self._say(
            f"pool: {len(p.jobs)} run(s) to train ({p.cached} already in the run cache) on "
            f"{p.slots.describe()}{threads}; logs in {p.log_dir}"
        )

    def event(self, event) -> None:
        if event[0] == "start":
            _, i, _pid, resume = event
            self.started[i] = time.monotonic()
            if resume:
                self._say(f"pool: {self.plan.jobs[i].label()} resumes from round {resume}")
        elif event[0] == "done":
            _, i, info = event
            job = self.plan.jobs[i]
            self.finished.add(i)
            head = f"pool [{len(self.finished)}/{len(self.plan.jobs)}] {job.label()}"
            if info["status"] == "ok":
                seconds, cost = self.rate.get(job.kind, (0.0, 0.0))
                self.rate[job.kind] = (seconds + info["seconds"], cost + job.cost())
                self._say(
                    f"{head}: ok in {info['seconds']:.1f} s; time left {fmt_seconds(self.eta())}"
                )
            else:
                self.failed.append(job.label())
                self._say(
                    f"{head}: FAILED ({info['error']}; log {info['log']}); its notebook trains "
                    "it, from its last checkpoint"
                )
        elif event[0] == "tick":
            done, total = len(self.finished), len(self.plan.jobs)
            running = len(self.started) - done
            left = fmt_seconds(self.eta())
            self._say(f"pool: {done}/{total} run(s) done, {running} running, time left {left}")

    def end(self, seconds: float) -> None:
        if self.plan.jobs:
            bad = f", {len(self.failed)} failed" if self.failed else ""
            ok, total = len(self.finished) - len(self.failed), len(self.plan.jobs)
            took = fmt_seconds(seconds)
            self._say(
                f"pool: {ok}/{total} run(s) trained in {took}{bad}; the notebooks read them from "
                "the run cache"
            )
