"""Stopping `flkit reproduce` leaves no process behind.

- SIGTERM (kill, a scheduler) or SIGINT ends every process of the run within seconds: the pool
  worker, its notebook kernel and what the kernel started, and the command exits with 128 + the
  signal's number and a one-line message.
- `kill -9` (which no handler can catch): the pool worker notices that its driver is gone and ends
  its notebook kernel, with what the kernel started, and then itself; nothing keeps writing into
  the run cache unreported. Nor does `kill -9` of the worker running a notebook (a pool or Ray
  worker): the run's watchdog ends the kernel's process group."""

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
#: how long a kernel may take to start: minutes on a loaded 2-core machine (a bound, not a timing)
START_S = 300


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


def _start(tmp_path: Path, *options: str) -> tuple[subprocess.Popen, Path]:
    """`flkit reproduce` of the fixture notebook, whose kernel starts a sleeping process, with
    the extra command-line ``options`` (the Ray tests start it with ``--executor ray``)."""
    env = {
        **os.environ,
        "FLKIT_PRESET_PATH": str(FIXTURES / "stop_presets"),
        "FLKIT_RUNS": str(tmp_path / "cache"),
        "FLKIT_RUNS_DIR": str(tmp_path / "runs"),
    }
    for var in ("FLKIT_PRESET", "FLKIT_REPORT_DIR"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "flkit", "reproduce", "--preset", "smoke", "-q"]
    cmd += [*options, "--notebooks", str(FIXTURES / "stop_notebooks")]
    cmd += ["--out", str(tmp_path / "out")]
    log = tmp_path / "stderr.txt"  # a file: a pipe would stay open while any process is left
    with log.open("w") as stderr:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr), log


def _running(proc: subprocess.Popen, log: Path) -> list[psutil.Process]:
    """The run's processes once the fixture's kernel has started its process."""
    seen: list[psutil.Process] = []
    deadline = time.monotonic() + START_S
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


#: a worker running one notebook (a Ray task's, or a local pool worker's), with a stand-in for
#: papermill that starts a "kernel" (the leader of a process group of its own, as jupyter_client
#: starts one) which starts a process of its own; both would sleep far longer than the test
WORKER = r"""
import queue, subprocess, sys, time
from pathlib import Path
import papermill
from flkit.reproduce import ray_executor, worker

kind, marker, pid_file = sys.argv[1:4]
kernel_code = (
    "import subprocess, sys, time; "
    f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}]); "
    "time.sleep(600)"
)

def execute_notebook(input_path, output_path, kernel_manager_class=None, **kw):
    kernel = subprocess.Popen([sys.executable, "-c", kernel_code, marker], start_new_session=True)
    if hasattr(kernel_manager_class, "report"):  # as the kernel manager reports a kernel it starts
        kernel_manager_class.report(kernel.pid)
    Path(pid_file).write_text(str(kernel.pid))
    time.sleep(600)

papermill.execute_notebook = execute_notebook
run = {"notebook": "nb", "seed": 0, "preset": "smoke", "parameters": {}, "kernel_name": "python3",
       "timeout": None, "input": "/nowhere/nb.ipynb"}
if kind == "ray":
    ray_executor.run_task({**run, "notebook_source": b"{}"})
else:
    worker.init_worker(queue.Queue())
    worker.run_one({**run, "run_dir": str(Path(pid_file).parent / "run")})
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL on this platform")
@pytest.mark.parametrize("kind", ["ray", "pool"])
def test_a_killed_worker_leaves_no_kernel_behind(tmp_path, kind):
    """The worker running a notebook killed with SIGKILL (the out-of-memory killer; for Ray also
    a lost node, or the end of a driver that took its Ray along): the run's watchdog ends the
    kernel's process group, the kernel and what it started. Ray itself is not needed: the worker
    here is a plain process running the Ray task function, or a pool worker's. (ipykernel would
    end a real kernel whose parent is gone, but not what that kernel started.)"""
    marker = f"flkit-worker-fixture {tmp_path}"
    pid_file = tmp_path / "kernel.pid"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, kind, marker, str(pid_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + START_S
        while len(started) < 2:  # the kernel and the process it started
            assert proc.poll() is None, "the worker ended before its kernel started"
            assert time.monotonic() < deadline, "the kernel never started its process"
            time.sleep(0.2)
            started = [
                p for p in psutil.process_iter() if marker in _cmdline(p) and p.pid != proc.pid
            ]
        assert pid_file.is_file() and int(pid_file.read_text()) in {p.pid for p in started}
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        left, end = started, time.monotonic() + SETTLE_S
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        assert not left, f"still running after SIGKILL of the worker: {[_cmdline(p) for p in left]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in started:
            if _alive(p):
                p.kill()


def test_the_watchdog_leaves_a_released_group_alone(tmp_path):
    """A run that ended normally releases its kernel's group before closing the watchdog: the
    watchdog exits and ends nothing (the group's number may name another process by then)."""
    from flkit.reproduce.stopping import GroupWatchdog

    group = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    try:
        watchdog = GroupWatchdog()
        watchdog.watch(group.pid)
        watchdog.close()
        time.sleep(1.0)  # the watchdog has read the end of its pipe by now
        assert group.poll() is None
    finally:
        group.kill()
        group.wait(timeout=10)
