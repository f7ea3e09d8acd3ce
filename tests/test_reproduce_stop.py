"""Stopping `flkit reproduce` with SIGTERM (kill, a scheduler) or SIGINT ends every process of the
run within seconds: the pool worker, its notebook kernel and what the kernel started, and the
command exits with 128 + the signal's number and a one-line message."""

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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_workers_and_their_kernels(tmp_path, sig):
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
    # stderr goes to a file: a pipe would stay open while any process of the run is left
    log = tmp_path / "stderr.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    seen: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while not any(MARKER in _cmdline(p) for p in seen):
            assert proc.poll() is None, f"reproduce ended early: {log.read_text()}"
            assert time.monotonic() < deadline, "the fixture notebook never started its process"
            time.sleep(0.2)
            seen = _descendants(proc.pid)
        assert any("ipykernel" in _cmdline(p) for p in seen)
        proc.send_signal(sig)
        t0 = time.monotonic()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"flkit reproduce still running 20 s after {sig.name}")
        err = log.read_text()
        left = [p for p in seen if _alive(p)]
        while left and time.monotonic() - t0 < 20:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        assert not left, f"still running after {sig.name}: {[_cmdline(p) for p in left]}"
        assert proc.returncode == 128 + sig, err
        assert f"flkit reproduce: stopped by {sig.name};" in err
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in seen:
            if _alive(p):
                p.kill()
        proc.wait(timeout=10)
