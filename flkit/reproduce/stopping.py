"""Stopping a batch run: SIGTERM (``kill``, a scheduler) or SIGINT (Ctrl-C) to the driver raises
:class:`Stopped` there, so the executor's ``events`` unwinds and ends its workers and their
kernels instead of leaving them training with nobody to collect their results. A stopped run
loses nothing it cached: its training resumes from the last checkpoint on the next run.

SIGKILL (``kill -9``, the out-of-memory killer) ends the driver with no handler run, so each
local pool worker watches for it itself (:func:`end_with_parent`): once its driver is gone it ends
its kernel's process group (the kernel and what it started) and exits.

A worker can itself be what is killed: a pool worker or a Ray worker by the out-of-memory killer,
a Ray worker with its node, or when the end of the driver takes its Ray instance or job along.
The kernel leads a process group of its own, which Ray's clean-up of a worker does not reach, and
ipykernel ends the kernel when its parent is gone but not what the kernel started. So each run
(:func:`.worker.run_one`) starts a :class:`GroupWatchdog`, a small process outside the worker's
process group that is told the kernel's group on a pipe and ends the groups not released when
that pipe closes. The pipe closes the moment the worker is
gone, however it ended: the system closes every file of a process that dies, SIGKILL included.
The watchdog runs this file as a script, standard library only, so it starts in milliseconds
(no torch import)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

__all__ = [
    "Stopped",
    "stop_on_signals",
    "stopped_message",
    "end_with_parent",
    "end_groups",
    "group_alive",
    "GroupWatchdog",
    "watch_groups",
]

#: how often a worker looks whether its driver is still there (a cheap system call)
PARENT_POLL_S = 0.5
#: seconds process groups get to exit on SIGTERM before SIGKILL
GROUP_GRACE_S = 3.0

#: the signals that stop a batch run (SIGTERM does not exist on every platform's ``signal``)
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT") if hasattr(signal, name)
)


class Stopped(KeyboardInterrupt):
    """The driver got a stop signal (a KeyboardInterrupt, so ``except Exception`` lets it by)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum, frame):
    raise Stopped(signum)


@contextlib.contextmanager
def stop_on_signals():
    """Within the block, SIGTERM and SIGINT raise :class:`Stopped`; the previous handlers come
    back after it. Outside the main thread (where Python cannot set handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_stopped) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stopped_message(command: str, stop: Stopped) -> str:
    """The one line a command prints when it was stopped."""
    return (
        f"flkit {command}: stopped by {signal.Signals(stop.signum).name}; its notebook kernels "
        "were ended, and a new run resumes their training from the last checkpoints"
    )


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid`` (to the process ``pgid`` where there are no groups);
    a group that is gone already is no error."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(pgid, sig)
        else:
            os.kill(pgid, sig)
    except OSError:
        pass


def group_alive(pgid: int) -> bool:
    try:
        if hasattr(os, "killpg"):
            os.killpg(pgid, 0)
        else:
            os.kill(pgid, 0)
    except OSError:
        return False
    return True


def end_groups(pgids: Iterable[int], grace_s: float = GROUP_GRACE_S, poll_s: float = 0.1) -> None:
    """SIGTERM to each process group, SIGKILL to those still there after ``grace_s`` seconds."""
    pgids = list(pgids)
    for pgid in pgids:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(group_alive(g) for g in pgids) and time.monotonic() < deadline:
        time.sleep(poll_s)
    hard = getattr(signal, "SIGKILL", signal.SIGTERM)
    for pgid in pgids:
        if group_alive(pgid):
            signal_group(pgid, hard)


def end_with_parent(
    end: Callable[[], None], poll_s: float = PARENT_POLL_S, parent: int | None = None
) -> threading.Thread:
    """In a worker process: a daemon thread that, once the process that started this one is gone,
    calls ``end`` (to end what the worker started) and then exits the process.

    A process whose parent dies is re-parented (to init or a subreaper), so its parent pid
    changes: that is what the thread looks for, every ``poll_s`` seconds, and it works whatever
    killed the parent, SIGKILL included. ``parent``: the pid the parent had when it started this
    process (default: the parent's now), so that a parent killed while this one was still
    starting is seen too. The exit skips the interpreter's clean-up: the main
    thread is busy in a notebook nobody will collect, and the run cache is written atomically,
    so nothing is half-written by it."""
    parent = os.getppid() if parent is None else int(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        try:
            end()
        finally:
            os._exit(1)

    thread = threading.Thread(target=watch, name="flkit-parent-watch", daemon=True)
    thread.start()
    return thread


# ------------------------------------------------------------------------------ the watchdog
def watch_groups(lines: Iterable[str], grace_s: float = GROUP_GRACE_S) -> set[int]:
    """The watchdog's loop over the lines of its pipe: ``+PGID`` watches a process group,
    ``-PGID`` releases it; when the lines end (the pipe closed), the groups still watched are
    ended (:func:`end_groups`) and returned."""
    groups: set[int] = set()
    for line in lines:
        line = line.strip()
        if line[:1] in ("+", "-") and line[1:].isdigit():
            (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    end_groups(groups, grace_s)
    return groups


class GroupWatchdog:
    """The process that ends the process groups it watches once its starter is gone (see the
    module's docstring): :meth:`watch` a kernel's group when it starts, :meth:`close` when the
    run ended and its kernel was shut down (the groups are released first, so nothing is
    ended)."""

    def __init__(self):
        # -I: the standard library only, whatever PYTHONPATH holds; a session of its own, so a
        # clean-up that ends the worker's process group leaves the watchdog to do its work
        self.proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.watched: set[int] = set()

    def _send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # the watchdog is gone: nothing to tell it
            pass

    def watch(self, pgid: int) -> None:
        self.watched.add(int(pgid))
        self._send(f"+{int(pgid)}")

    def close(self, timeout: float = 10.0) -> None:
        for pgid in sorted(self.watched):
            self._send(f"-{pgid}")
        self.watched.clear()
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # the detached watchdog reads the end and exits
        try:
            self.proc.wait(timeout)  # the process started, which exited once it forked
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":  # the watchdog process (GroupWatchdog)
    # detached: a fork whose parent exits at once, so that init adopts it. A worker that ends its
    # children as it exits (a Ray worker whose raylet is gone does) would take it along, and the
    # process group it watches, whose leader is such a child too, with it left running
    if hasattr(os, "fork") and os.fork() > 0:
        os._exit(0)
    watch_groups(sys.stdin)
