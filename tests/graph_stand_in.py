"""A stand-in for the CUDA graph recorder (``flkit.engine.graphed.RECORDERS``), for tests on a
CPU: it records nothing, and each replay calls the recorded function again, reading whatever the
driver put in its static inputs, as a CUDA graph's replay reads its captured addresses."""

import pytest

from flkit.engine import graphed


class StandIn:
    """Counts recordings and replays; with ``fail`` every recording raises, as a capture that
    meets an operation it cannot record does."""

    def __init__(self, fail=False):
        self.records = self.replays = 0
        self.fail = fail

    def __call__(self, fn):
        self.records += 1
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")

        def replay():
            self.replays += 1
            fn()

        return replay


@pytest.fixture
def stand_in(monkeypatch):
    """A :class:`StandIn` recording for the CPU."""
    rec = StandIn()
    monkeypatch.setitem(graphed.RECORDERS, "cpu", rec)
    return rec
