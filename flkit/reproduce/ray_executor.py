"""The ``ray`` executor: each (notebook, seed, overrides) run is one Ray task.

Without an address flkit uses the Ray already initialized in this process if there is one, else
starts a Ray instance on this machine (bound to 127.0.0.1, ``jobs x cpus`` CPUs) and stops it at
the end; with one it joins that cluster (started with Ray's own
``ray start --head`` / ``ray start --address``; flkit must be installed on every node). Nothing
assumes a shared file system: the driver ships each notebook with its task, the task runs it in
a temporary folder on its worker and returns every file of the run folder (executed notebook,
results.json, figures, run.json), and the driver writes them into ``<out>`` where a local run
would have put them, so the reports are the same. The run pool's folders (:mod:`.pool_ray`) go out
the same way: :meth:`RayExecutor.ship` hands Ray each once, and a notebook's task writes those its
node's run cache lacks before the kernel starts; the runs its notebook trains itself come back.
A task whose worker dies (killed, out of memory, node lost) is recorded as failed and the
others go on; tasks are not retried, because a notebook that crashed its worker once would crash
it again. Its kernel, with whatever the kernel
started, is ended by the run's watchdog (:class:`.stopping.GroupWatchdog`, started by
:func:`.worker.run_one`), so no notebook goes on writing into the run cache unseen, and a run
interrupted there resumes from its last checkpoint when it is run again.

A task computes with the driver's torch thread count (:func:`.plan.run_threads`), not with
the CPUs it asks for and not with a worker node's own ``FLKIT_THREADS``: the count changes a CPU
run's floats, so a notebook records the same numbers as a Ray task as on the local executor."""

from __future__ import annotations

import math
import os
import shutil
import socket
import tempfile
from pathlib import Path

from ..utils import FlkitError
from .plan import check_machine, with_threads
from .pool_ray import on_device
from .run_transfer import files_under, folder_files, holds, install, manifest
from .worker import clean_run_dir, failed_info, run_one

__all__ = [
    "RayExecutor",
    "run_task",
    "write_run_files",
    "LOOPBACK_ENV",
    "START_ADVICE",
    "LOCAL_START_ATTEMPTS",
]

#: with this set before ``import ray``, a Ray instance started here binds to 127.0.0.1
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: a local Ray is started again once if it fails to start: its raylet gives the helper processes
#: a fixed 15 s to come up, which a cold or busy machine can miss once
LOCAL_START_ATTEMPTS = 2
START_ADVICE = (
    "start a cluster with `ray start --head` on one machine and `ray start --address "
    "HEAD:6379` on the others, then pass --address HEAD:6379; or leave --address out for a "
    "Ray instance on this machine"
)


def run_task(run: dict, events=None) -> tuple[dict, dict, dict]:
    """Runs on a Ray worker: the notebook in a temporary folder (the shipped copy in
    ``run["notebook_source"]`` when its path does not exist there); returns (info, files, runs),
    files as ``{path relative to the run folder: bytes}``, runs the run folders named in
    ``run["wanted"]`` that this node's cache holds whole after the notebook (those it trained
    itself), as ``{path relative to the cache: bytes}``."""
    tmp = Path(tempfile.mkdtemp(prefix="flkit-ray-"))
    try:
        run = dict(run)
        _receive(run.pop("cache", None) or [])
        device_type = run.pop("device_type", None)
        wanted = run.pop("wanted", None) or []
        if run.get("threads"):  # the driver's count, over whatever this worker's node sets
            os.environ["FLKIT_THREADS"] = str(run["threads"])
        source = run.pop("notebook_source")
        if not Path(run["input"]).is_file():  # another machine: use the shipped copy
            nb = tmp / "notebooks" / Path(run["input"]).name
            nb.parent.mkdir()
            nb.write_bytes(source)
            run["input"] = str(nb)
        run_dir = tmp / "run"
        run["run_dir"] = str(run_dir)
        with on_device(device_type):  # the pool's runs' device type, when it sent any
            info = run_one(run, events)
        return info, files_under(run_dir, hidden=True), _trained(wanted)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _receive(shipped: list) -> None:
    """On a Ray worker: the notebook's pool runs, ``[(sizes, ref), ...]`` as
    :meth:`RayExecutor.ship` sends them, written into this node's run cache (the one the
    notebook's kernel reads) unless it holds them already."""
    if not shipped:
        return
    import ray

    from ..store import default_root

    root = default_root()
    for sizes, ref in shipped:
        if not holds(root, sizes):
            install(root, ray.get(ref))


def _whole(folder: Path) -> bool:
    """Whether ``folder`` holds a finished run whose every file matches its manifest."""
    from .. import store

    return store.RunFolder(folder, ()).whole(None, repair=False)


def _trained(names: list) -> dict:
    """On a Ray worker: the files of the run folders ``names`` this node's cache holds whole."""
    if not names:
        return {}
    from ..store import default_root

    root = default_root()
    return folder_files(root, [root / n for n in names if _whole(root / n)])


def write_run_files(run: dict, files: dict) -> None:
    """On the driver: put a task's files where a local run would have written them."""
    run_dir = Path(run["run_dir"])
    clean_run_dir(run_dir, run["notebook"])
    for rel, data in files.items():
        dest = run_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def _check_reachable(address: str) -> None:
    """Fail fast (seconds, not Ray's minutes of retries) when nothing listens at ``address``."""
    if address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise FlkitError(
            f"--address {address!r} is not HOST:PORT; accepted: HOST:PORT (as printed by "
            "`ray start --head`), 'auto' or ray://HOST:PORT"
        )
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise FlkitError(
            f"no Ray cluster reachable at --address {address!r} ({e.strerror or e}); "
            + START_ADVICE
        ) from None


class RayExecutor:
    """Runs as Ray tasks asking for ``cpus`` CPUs and ``gpus`` GPUs each."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int = 1, cpus=1, gpus=0):
        self.address = address
        self.jobs = jobs
        self.cpus = cpus
        self.gpus = gpus
        self.started = False
        self.shipped: dict[str, list] = {}
        self.wanted: dict[str, list] = {}
        self.device_type: str | None = None
        self.root: Path | None = None
        if address is not None:
            _check_reachable(address)

    def ship(self, root, folders: dict, device_type: str | None = None) -> None:
        """Send each notebook's run folders (``{notebook: [folder under root, ...]}``, the
        pool's) with its tasks: Ray holds each folder once, and a task's node takes those its
        run cache lacks before the kernel starts (:mod:`.run_transfer`); its notebook then
        trains on ``device_type``, the type the folders were named by. A folder not whole here
        (a timed run the pool left to its notebook, a failed one) comes back with the task once
        its notebook has trained it, into the cache at ``root``, so the next call sends it."""
        import ray

        self.device_type, self.root = device_type, Path(root)
        for notebook, paths in folders.items():
            for path in paths:
                files = folder_files(root, [path])  # a run, or a checkpoint to resume from
                if files:
                    entry = (manifest(files), ray.put(files))
                    self.shipped.setdefault(notebook, []).append(entry)
                if not _whole(Path(path)):  # its notebook trains it: it comes back with the task
                    self.wanted.setdefault(notebook, []).append(Path(path).name)

    def describe(self) -> str:
        where = f"cluster {self.address}" if self.address else "a local Ray instance"
        return f"ray on {where}, {self.cpus} CPU / {self.gpus} GPU per task"

    def _init(self):
        if self.address is None:
            for k, v in LOOPBACK_ENV.items():
                os.environ.setdefault(k, v)
        import ray

        if ray.is_initialized():
            if self.address is None:  # the caller's own Ray (a notebook, a test): use it as is
                return ray
            ray.shutdown()
        kw = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if self.address is None:
            # "local": a new instance even when `ray start` left one running on this machine
            kw.update(
                address="local",
                num_cpus=math.ceil(self.jobs * self.cpus),
                _node_ip_address="127.0.0.1",
            )
        else:
            kw.update(address=self.address)
        for attempt in range(1, (LOCAL_START_ATTEMPTS if self.address is None else 1) + 1):
            try:
                ray.init(**kw)
                break
            except Exception as e:
                ray.shutdown()  # stops whatever this attempt started
                if attempt < LOCAL_START_ATTEMPTS and self.address is None:
                    continue
                if self.address is None:
                    what = "start a local Ray"
                    why = (
                        " (on a busy machine its helper processes can miss the raylet's "
                        "start deadline)"
                    )
                else:
                    what, why = f"join the Ray cluster at {self.address!r}", ""
                raise FlkitError(
                    f"could not {what}: {type(e).__name__}: {e}{why}; " + START_ADVICE
                ) from None
        self.started = True
        return ray

    def prepare(self, runs: list[dict]) -> None:
        """Join or start Ray and check that some node can hold one task (before queueing); a
        Ray started here runs on this machine: the device and run cache the runs need, too."""
        if self.address is None:
            check_machine(runs)
        ray = self._init()
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if not any(r.get("CPU", 0) >= self.cpus and r.get("GPU", 0) >= self.gpus for r in nodes):
            total_cpu = sum(r.get("CPU", 0) for r in nodes)
            total_gpu = sum(r.get("GPU", 0) for r in nodes)
            where = f"the Ray cluster at {self.address}" if self.address else "this machine"
            preset = runs[0]["preset"] if runs else "?"
            self.close()
            raise FlkitError(
                f"each task asks for {self.cpus} CPU(s) and {self.gpus} GPU(s) (preset "
                f"{preset!r}; --cpus-per-task/--gpus-per-task), but no node of {where} has "
                f"that ({len(nodes)} node(s), {total_cpu:g} CPUs and {total_gpu:g} GPUs in "
                "all); accepted: --gpus-per-task 0 to run on CPUs, fewer --cpus-per-task, "
                "or a cluster with such a node"
            )

    def close(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False
        self.shipped, self.wanted = {}, {}

    def events(self, runs: list[dict]):
        import ray
        from ray.util.queue import Empty, Queue

        if not runs:
            return
        events = Queue(actor_options={"num_cpus": 0})
        task = ray.remote(run_task).options(
            num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0, name="flkit-notebook"
        )
        sources: dict[str, bytes] = {}
        pending = {}
        for i, run in enumerate(with_threads(runs)):
            if run["input"] not in sources:
                sources[run["input"]] = Path(run["input"]).read_bytes()
            payload = {**run, "notebook_source": sources[run["input"]]}
            payload["cache"] = self.shipped.get(run["notebook"], [])
            payload["device_type"] = self.device_type
            payload["wanted"] = self.wanted.get(run["notebook"], [])
            pending[task.remote(payload, events)] = i
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            try:
                batch = events.get_nowait_batch(events.size())
            except Empty:
                batch = []
            yield from batch
            for ref in ready:
                i = pending.pop(ref)
                run = runs[i]
                try:
                    info, files, trained = ray.get(ref)
                except Exception as e:  # the task's worker died: WorkerCrashedError & co.
                    info = failed_info(run, e)
                    files, trained = {}, {}
                write_run_files(run, files)
                if trained:  # the runs its notebook trained on its node, into this cache
                    install(self.root, trained)
                yield ("done", i, info)
        events.shutdown(force=True)
