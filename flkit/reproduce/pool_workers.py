"""The run pool's worker processes as its driver sees them (:class:`.pool.Pool`): start one for a
slot, hand it a run, read the run's outcome, end them all.

A worker (:mod:`.pool_worker`) serves one slot, a GPU or the CPU at one torch thread count
(:func:`slot_key`), for as long as the pool has runs for it: it reads one spec path per line on
its stdin and writes each run's outcome to the status file the spec names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .pool_jobs import PoolJob

__all__ = ["WorkerProcess", "slot_key", "run_info", "stop", "STOP_GRACE_S"]

#: seconds a stopped pool's workers get to exit on SIGTERM before SIGKILL
STOP_GRACE_S = 5.0


def slot_key(job: PoolJob, gpu: int | None) -> tuple:
    """What a worker process is fixed to: its GPU, or on the CPU its torch thread count."""
    return ("cuda", gpu) if gpu is not None else ("cpu", job.threads)


@dataclass
class WorkerProcess:
    """A worker process of the pool and the run it is training (``job``: its index, or None
    while it waits for one)."""

    proc: subprocess.Popen
    key: tuple
    job: int | None = None
    log: Path | None = None
    status: Path | None = None
    started: float = 0.0

    @classmethod
    def start(cls, key: tuple, env: dict, log: Path) -> WorkerProcess:
        """A new worker for slot ``key`` with environment ``env``; what it says before its first
        run (an import that fails) goes to that run's ``log``."""
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "flkit.reproduce.pool_worker", str(os.getpid())],
                env=env,
                stdin=subprocess.PIPE,
                stdout=fh,
                stderr=subprocess.STDOUT,
            )
        return cls(proc, key)

    def give(self, i: int, spec: dict, folder: Path) -> None:
        """Hand it run ``i``: ``spec`` (the job, the cache root, ``log``...) written to ``folder``
        with the status file's path, and that file's path written on the worker's stdin."""
        self.log, self.status = Path(spec["log"]), folder / f"job{i}.done"
        path = folder / f"job{i}.json"
        spec = dict(spec, log=str(self.log), status=str(self.status))
        path.write_text(json.dumps(spec, default=str), encoding="utf-8")
        self.job, self.started = i, time.monotonic()
        try:
            self.proc.stdin.write(f"{path}\n".encode())
            self.proc.stdin.flush()
        except OSError:  # it died between runs: seen as a failed run by the next poll
            pass

    def outcome(self) -> int | None:
        """The current run's exit status once it is over (0: whole), else None: the status the
        worker wrote, or the worker's own exit status when it died first."""
        if self.status is not None and self.status.exists():
            return int(json.loads(self.status.read_text(encoding="utf-8"))["returncode"])
        code = self.proc.poll()
        if code is None:
            return None
        return code if code != 0 else 1  # gone without a word about its run: not whole

    def seconds(self) -> float:
        """Seconds since it was given its current run."""
        return time.monotonic() - self.started

    def close(self) -> None:
        """No more runs for it: end of input, on which it exits."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def run_info(returncode: int, seconds: float, log: Path) -> dict:
    """A run's outcome as the pool's ``done`` event carries it: status "ok" or "failed",
    seconds, returncode, log, and the log's last line as the error of a failed run."""
    info = {"status": "ok" if returncode == 0 else "failed", "seconds": seconds}
    info.update(returncode=returncode, log=str(log), error="")
    if returncode != 0:
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            lines = []
        info["error"] = lines[-1][:300] if lines else f"exit status {returncode}"
    return info


def stop(procs, grace_s: float = STOP_GRACE_S, wait_first: bool = False) -> None:
    """SIGTERM to every running worker, SIGKILL to what is left after ``grace_s`` seconds
    (``wait_first``: the workers first get ``grace_s`` seconds to exit on their own)."""
    if wait_first:
        deadline = time.monotonic() + grace_s
        for p in procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + grace_s
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
