"""The run pool as Ray tasks (flkit.reproduce.pool_ray), what is checked before Ray starts: which
runs go to Ray, the device type their folders are named by, what each notebook's task receives,
and the settings refused. Training on Ray itself: tests/test_reproduce_ray.py (the Ray extra)."""

from __future__ import annotations

import os

import pytest
from test_pool import _plan_dict as _plan

from flkit import store
from flkit.experiment import RunConfig
from flkit.papers.hidenseek import study as hidenseek
from flkit.preset_runs import identity
from flkit.reproduce.pool import prepare_pool
from flkit.reproduce.pool_jobs import notebook_jobs
from flkit.utils import FlkitError
from flkit.workbook import presets


def _ids(jobs) -> set:
    return {identity(RunConfig.from_dict(j.config)) for j in jobs}


def test_every_run_but_the_timed_ones_goes_to_ray_and_every_folder_goes_with_its_notebook(
    tmp_path, monkeypatch
):
    # 02's runs compute with every core of this 2-core machine, so the local CPU pool leaves
    # them to the notebook; on Ray each is a task with its own CPUs, so the pool keeps them. 04's
    # timed runs are left to its notebook's task, yet their folders go out with it (cached ones
    # are then read, not trained again).
    monkeypatch.setenv("FLKIT_THREADS", "2")
    root = tmp_path / "cache"
    plan = _plan(tmp_path, ["02_feddip", "04_hidenseek"])
    pooled = prepare_pool(plan, executor="ray", ray_resources=(2, 0), root=root)
    assert pooled.ray and pooled.place == "cpu" and pooled.threads is None
    p = presets.load("04_hidenseek", "smoke")
    timed = {identity(c) for c in hidenseek.timed(p, [0])}
    listed = {nb: notebook_jobs(nb, "smoke", [0], {}, 2) for nb in ("02_feddip", "04_hidenseek")}
    assert _ids(pooled.jobs) == _ids(listed["02_feddip"] + listed["04_hidenseek"]) - timed
    assert not any(j.timed for j in pooled.jobs)
    assert pooled.notes == [
        f"04_hidenseek trains its own {len(timed)} timed run(s) in its task: it reads their "
        "wall-clock times, so each goes alone"
    ]
    for nb, jobs in listed.items():
        assert pooled.folders[nb] == [j.folder(root, "cpu") for j in jobs]
    assert (pooled.slots.cpus, pooled.slots.gpus) == (2, 0)


def test_runs_per_device_shares_a_tasks_gpus(tmp_path):
    plan = _plan(tmp_path, ["00_fl_primer"])
    pooled = prepare_pool(
        plan, executor="ray", ray_resources=(1, 1), per_device=4, root=tmp_path / "c"
    )
    assert pooled.place == "cuda" and pooled.slots.gpus == 0.25
    assert pooled.slots.describe() == "a local Ray instance, 1 CPU, 0.25 GPU per run (0 at once)"
    # the notebooks' own device, when set, names the folders
    cpu = _plan(tmp_path, ["00_fl_primer"], overrides={"device": "cpu"})
    assert prepare_pool(cpu, executor="ray", ray_resources=(1, 1), root=tmp_path / "c").place == (
        "cpu"
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"devices": "cuda:0"}, r"--pool-devices 'cuda:0' with --executor ray: Ray places"),
        (
            {"per_device": 2},
            r"--runs-per-device 2 with --executor ray puts that many runs on each GPU, and the "
            r"tasks ask for 0 GPU",
        ),
        ({"per_device": 0, "ray_resources": (1, 1)}, r"--runs-per-device 0 .*integer >= 1"),
    ],
)
def test_settings_ray_cannot_follow_are_refused(tmp_path, settings, message):
    plan = _plan(tmp_path, ["00_fl_primer"])
    with pytest.raises(FlkitError, match=message):
        prepare_pool(plan, executor="ray", root=tmp_path / "c", **settings)


def test_a_gpu_runs_folder_is_named_on_a_machine_without_one(tmp_path):
    # the driver of a GPU cluster may have no GPU: the folder of a run on "cuda" is the key of
    # the run with the device type cuda and no CPU thread count (a GPU run's floats do not
    # depend on it), the rest as on the CPU
    job = notebook_jobs("00_fl_primer", "smoke", [0], {}, 1)[0]
    cfg = RunConfig.from_dict({**job.config, "device": "cpu"})
    key = cfg.cache_key()
    assert key["device"] == "cpu" and "threads" in key
    key = {k: v for k, v in key.items() if k != "threads"} | {"device": "cuda"}
    assert job.folder(tmp_path, "cuda") == store.run_dir(tmp_path, key, prefix=cfg.method)
    assert job.folder(tmp_path, "cuda") != job.folder(tmp_path, "cpu")
    with pytest.raises(FlkitError, match=r"device_type='cuda:0'; accepted: None, 'cpu' or 'cuda'"):
        cfg.cache_key("cuda:0")
    sim = notebook_jobs("03_fedast", "smoke", [0], {}, 1)[0]
    assert sim.kind == "simulation"
    assert sim.folder(tmp_path, "cuda").parent == tmp_path
    assert sim.folder(tmp_path, "cuda") != sim.folder(tmp_path, "cpu")


def test_a_task_trains_on_its_folders_device_type_and_leaves_the_worker_as_it_was(monkeypatch):
    from flkit.reproduce.pool_ray import on_device
    from flkit.utils import resolve_device

    monkeypatch.delenv("FLKIT_DEVICE", raising=False)
    with on_device("cpu"):
        assert str(resolve_device("auto")) == "cpu"  # "auto" goes by $FLKIT_DEVICE
    assert "FLKIT_DEVICE" not in os.environ  # a Ray worker goes on to other tasks
    monkeypatch.setenv("FLKIT_DEVICE", "mps")
    with on_device(None):
        assert os.environ["FLKIT_DEVICE"] == "mps"
    with on_device("cpu"):
        assert os.environ["FLKIT_DEVICE"] == "cpu"
    assert os.environ["FLKIT_DEVICE"] == "mps"


class _Ray:
    """What check_gpu_fit asks of Ray, answered here: one GPU of ``free`` bytes free, read
    at once or (``ready`` False) never within the wait."""

    def __init__(self, free: int, ready: bool = True):
        self.free, self.ready, self.asked, self.cancelled = free, ready, [], []

    def remote(self, fn=None):  # ray.remote(fn), then .options(...).remote(): the task
        if fn is None:
            return "ref"
        self.asked.append(fn.__name__)
        return self

    def options(self, **kw):
        assert kw["num_gpus"] == 1  # one whole GPU, to read its memory
        return self

    def wait(self, refs, timeout):
        return (refs, []) if self.ready else ([], refs)

    def get(self, ref):
        return [{"index": 0, "name": "H", "free": self.free, "total": self.free}]

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


def test_more_runs_per_gpu_than_a_cluster_gpu_holds_is_refused_before_training(tmp_path):
    from flkit.reproduce.pool_ray import check_gpu_fit

    plan = _plan(tmp_path, ["02_feddip"])
    pooled = prepare_pool(plan, executor="ray", ray_resources=(1, 1), per_device=50, root=tmp_path)
    tiny = _Ray(2**30)
    with pytest.raises(FlkitError, match=r"50 runs per device do not fit cuda:0: each needs"):
        check_gpu_fit(tiny, pooled)
    assert tiny.asked == ["gpu_memory"]
    assert check_gpu_fit(_Ray(80 * 2**30), pooled) is None
    busy = _Ray(80 * 2**30, ready=False)
    note = check_gpu_fit(busy, pooled, wait_s=0)
    assert note.startswith("no GPU of the cluster came free within 0 s") and busy.cancelled
    one = prepare_pool(plan, executor="ray", ray_resources=(1, 1), root=tmp_path)
    unasked = _Ray(0)
    assert check_gpu_fit(unasked, one) is None and unasked.asked == []  # Ray counts whole GPUs


def test_the_runs_ray_holds_at_once_are_counted_node_by_node():
    # by hand, per live node, the fewest of CPUs // CPUs per run and GPUs // GPU per run: node A
    # (4 CPUs, 1 GPU) holds min(4 // 1, 1 // 0.5) = 2 runs of 1 CPU and half a GPU; node B (8
    # CPUs, no GPU) none that needs a GPU, and 8 // 2 = 4 of 2 CPUs alone; a dead node none
    from flkit.reproduce.pool_ray import capacity

    class Nodes:
        @staticmethod
        def nodes():
            return [
                {"Alive": True, "Resources": {"CPU": 4.0, "GPU": 1.0}},
                {"Alive": True, "Resources": {"CPU": 8.0}},
                {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}},
            ]

    assert capacity(Nodes, 1, 0.5) == 2
    assert capacity(Nodes, 2, 0) == 2 + 4
    assert capacity(Nodes, 3, 0.25) == 1
