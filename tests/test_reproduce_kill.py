"""`kill -9` of `flkit reproduce` (which no handler can catch) leaves no process behind: the pool
worker notices that its driver is gone and ends its notebook kernel, with what the kernel
started, and then itself; nothing keeps writing into the run cache unreported."""

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
#: how long the processes left by the killed driver get to end (they sleep for 600 s otherwise)
SETTLE_S = 30


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL on this platform")
def test_sigkill_of_reproduce_leaves_no_process(tmp_path):
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
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    seen: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while not any(MARKER in _cmdline(p) for p in seen):
            assert proc.poll() is None, f"reproduce ended early: {log.read_text()}"
            assert time.monotonic() < deadline, "the fixture notebook never started its process"
            time.sleep(0.2)
            try:
                seen = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                seen = []
        # the driver's pool worker, its kernel and the process the kernel started
        assert any("ipykernel" in _cmdline(p) for p in seen)
        assert any(p.ppid() == proc.pid for p in seen)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        left = [p for p in seen if _alive(p)]
        end = time.monotonic() + SETTLE_S
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        assert not left, f"still running after SIGKILL of the driver: {[_cmdline(p) for p in left]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in seen:
            if _alive(p):
                p.kill()
        proc.wait(timeout=10)
