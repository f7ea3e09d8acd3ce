"""Stopping a batch run: SIGTERM (``kill``, a scheduler) or SIGINT (Ctrl-C) to the driver raises
:class:`Stopped` there, so the executor's ``events`` unwinds and ends its workers and their
kernels instead of leaving them training with nobody to collect their results. A stopped run
loses nothing it cached: its training resumes from the last checkpoint on the next run."""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Stopped", "stop_on_signals", "stopped_message"]

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
