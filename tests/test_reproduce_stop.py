"""Stopping `flkit reproduce` leaves no process behind.

- SIGTERM (kill, a scheduler) or SIGINT ends every process of the run within seconds: the pool
  worker, its notebook kernel and what the kernel started, and the command exits with 128 + the
  signal's number and a one-line message.
- `kill -9` (which no handler can catch): the pool worker notices that its driver is gone and ends
  its notebook kernel, with what the kernel started, and then itself; nothing keeps writing into
  the run cache unreported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil  # a dependency of ipykernel, which every notebook run needs
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MARKER = "flkit-stop-fixture"  # on the command line of the process the fixture's kernel starts
#: how long the processes of a stopped run get to end (the fixture's sleeps for 600 s otherwise)
SETTLE_S = 30


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """`flkit reproduce` of the fixture notebook, whose kernel starts a sleeping process."""
    env = {
        **os.environ,
        "FLKIT_PRESET_PATH": str(FIXTURES / "stop_presets"),
        "FLKIT_RUNS": str(tmp_path / "cache"),
        "FLKIT_RUNS_DIR": str(tmp_path / "runs"),
    }
    for var in ("FLKIT_PRESET", "FLKIT_REPORT_DIR"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "flkit", "reproduce", "--preset", "smoke", "-q"]
    cmd += ["--notebooks", str(FIXTURES / "stop_notebooks"), "--out", str(tmp_path / "out")]
    log = tmp_path / "stderr.txt"  # a file: a pipe would stay open while any process is left
    with log.open("w") as stderr:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr), log


def _running(proc: subprocess.Popen, log: Path) -> list[psutil.Process]:
    """The run's processes once the fixture's kernel has started its process."""
    seen: list[psutil.Process] = []
    deadline = time.monotonic() + 90
    while not any(MARKER in _cmdline(p) for p in seen):
        assert proc.poll() is None, f"reproduce ended early: {log.read_text()}"
        assert time.monotonic() < deadline, "the fixture notebook never started its process"
        time.sleep(0.2)
        seen = _descendants(proc.pid)
    assert any("ipykernel" in _cmdline(p) for p in seen)
    return seen


def _left_after(seen: list[psutil.Process], since: float, settle: float) -> list[str]:
    left = [p for p in seen if _alive(p)]
    while left and time.monotonic() - since < settle:
        time.sleep(0.2)
        left = [p for p in left if _alive(p)]
    return [_cmdline(p) for p in left]


def _clean_up(proc: subprocess.Popen, seen: list[psutil.Process]) -> None:
    if proc.poll() is None:
        proc.kill()
    for p in seen:
        if _alive(p):
            p.kill()
    proc.wait(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_workers_and_their_kernels(tmp_path, sig):
    proc, log = _start(tmp_path)
    seen: list[psutil.Process] = []
    try:
        seen = _running(proc, log)
        proc.send_signal(sig)
        t0 = time.monotonic()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"flkit reproduce still running 20 s after {sig.name}")
        err = log.read_text()
        left = _left_after(seen, t0, 20)
        assert not left, f"still running after {sig.name}: {left}"
        assert proc.returncode == 128 + sig, err
        assert f"flkit reproduce: stopped by {sig.name};" in err
    finally:
        _clean_up(proc, seen)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL on this platform")
def test_sigkill_of_reproduce_leaves_no_process(tmp_path):
    proc, log = _start(tmp_path)
    seen: list[psutil.Process] = []
    try:
        seen = _running(proc, log)
        # the driver's pool worker, its kernel and the process the kernel started
        assert any(p.ppid() == proc.pid for p in seen)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        left = _left_after(seen, time.monotonic(), SETTLE_S)
        assert not left, f"still running after SIGKILL of the driver: {left}"
    finally:
        _clean_up(proc, seen)
