"""EngineTrainer + flkit.asyncfl.run on tiny synthetic two-task runs (no disk data)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import torch

from flkit import asyncfl
from flkit import data as flkit_data
from flkit.asyncfl import FedAST, FixedDelays, runner
from flkit.utils import FlkitError


def _task(name, **kw):
    d = dict(
        name=name,
        dataset="synthetic",
        target=None,
        requests=4,
        buffer=2,
        samples_per_client=64,
        max_rounds=6,
        test_every=2,
    )
    d.update(kw)
    return d


def _cfg(method="fedast_d", **kw):
    d = dict(
        method=method,
        num_clients=12,
        availability=0.75,
        ratio=2,
        k=2,
        tasks=[_task("a"), _task("b", delay_ratio=0.3)],
    )
    d.update(kw)
    return d


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------------------ hand trace
def test_event_log_matches_hand_computed_trace():
    """Two tasks, R = 1, b = 1, option S, fixed delays (task a: 2, task b: 3), scripted clients.

    t=0  a -> c0 (v0, ends 2); b -> c1 (v0, ends 3)
    t=2  a arrives, a v1, new a request -> c1 (busy until 3: starts 3, ends 5)
    t=3  b arrives, b v1, new b request -> c0 (ends 6)
    t=5  a arrives (v1), a v2 = max_rounds: stop; its R goes to b, burst request b -> c2
         (v1, ends 8)
    t=6  b arrives (v1), b v2: stop; b's request at c2 is cancelled. Both v1 requests of b were
         trained in one batch at t=6 (same version), so 5 trainings for 4 arrivals."""
    cfg = asyncfl.FedASTRun.from_dict(
        dict(
            method="fedast_s",
            num_clients=4,
            availability=1.0,
            ratio=32,
            tasks=[
                _task("a", requests=1, buffer=1, max_rounds=2, test_every=1),
                _task("b", requests=1, buffer=1, max_rounds=2, test_every=1),
            ],
        )
    ).validate()
    trainer = asyncfl.EngineTrainer(cfg, seed=0, device="cpu")
    sched = FedAST(
        cfg,
        trainer,
        delays=FixedDelays(lambda t, c: 2.0 if t == 0 else 3.0),
        client_draws=[0, 1, 1, 0, 2],
    )
    res = sched.run()
    n = None
    expected = [
        (0, 0, 0, 0, n, "dispatch"),
        (0, 1, 1, 0, n, "dispatch"),
        (2, 0, 0, 0, 0, "arrive"),
        (2, 0, n, 1, n, "aggregate"),
        (2, 0, 1, 1, n, "dispatch"),
        (3, 1, 1, 0, 0, "arrive"),
        (3, 1, n, 1, n, "aggregate"),
        (3, 1, 0, 1, n, "dispatch"),
        (5, 0, 1, 1, 0, "arrive"),
        (5, 0, n, 2, n, "aggregate"),
        (5, 0, n, 2, n, "stop"),
        (5, 1, 2, 1, n, "dispatch"),
        (6, 1, 0, 1, 0, "arrive"),
        (6, 1, n, 2, n, "aggregate"),
        (6, 1, n, 2, n, "stop"),
        (6, 1, 2, 1, n, "cancel"),
    ]
    assert [tuple(e) for e in res.events] == expected
    assert trainer.trained == 5 and trainer.batch_sizes == [1, 1, 1, 2]
    assert res.completion_time == {"a": None, "b": None}
    assert res.total_time == 6


# ------------------------------------------------------------------------------ laziness
class CountingTrainer:
    """Wraps an EngineTrainer and counts, from the outside, every client it is asked to train:
    (task, version, client) per request, and the calls. Everything else is delegated."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = Counter()
        self.calls = []

    def train(self, task, version, client_ids, *args, **kw):
        self.calls.append((task, version, [int(c) for c in client_ids]))
        self.requests.update((task, int(version), int(c)) for c in client_ids)
        return self.inner.train(task, version, client_ids, *args, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_lazy_training_trains_exactly_the_kept_requests_fedast():
    """Every arrival was trained exactly from its dispatch version; the only extra trainings are
    batch-mates (same task and version) of an arrival that were cancelled later; requests never
    popped are never trained. Counted from the outside, checked against the event log."""
    cfg = asyncfl.FedASTRun.from_dict(
        _cfg(
            "fedast_d",
            tasks=[
                _task("a", target=0.3, max_rounds=40),
                _task("b", delay_ratio=0.3, max_rounds=12),
            ],
        )
    ).validate()
    counting = CountingTrainer(asyncfl.EngineTrainer(cfg, seed=1, device="cpu"))
    res = FedAST(cfg, counting, seed=1).run()
    names = res.tasks
    ev = res.events
    arrived = Counter((names[e[1]], e[3], e[2]) for e in ev if e[5] == "arrive")
    cancelled = Counter((names[e[1]], e[3], e[2]) for e in ev if e[5] == "cancel")
    dispatched = Counter((names[e[1]], e[3], e[2]) for e in ev if e[5] == "dispatch")
    assert sum(arrived.values()) > 20
    assert not arrived - counting.requests  # every arrival trained (same task, version, client)
    extra = counting.requests - arrived
    assert not extra - cancelled  # anything else was cancelled afterwards
    assert not counting.requests - dispatched  # nothing that was never dispatched
    assert sum(counting.requests.values()) < sum(dispatched.values())  # lazy: not all dispatched


def test_lazy_training_sync_trains_only_first_k():
    """Sync-ST: per round and task one call with exactly the k = 2 earliest finishers (the
    'arrive' events), never a discarded straggler. Counted from the outside."""
    cfg = asyncfl.FedASTRun.from_dict(_cfg("sync_st", availability=1.0, k=2)).validate()
    counting = CountingTrainer(asyncfl.EngineTrainer(cfg, seed=0, device="cpu"))
    res = asyncfl.SyncST(cfg, counting, seed=0).run()
    names = res.tasks
    arrived = Counter((names[e[1]], e[3], e[2]) for e in res.events if e[5] == "arrive")
    discarded = Counter((names[e[1]], e[3], e[2]) for e in res.events if e[5] == "discard")
    assert sum(discarded.values()) > 0
    assert counting.requests == arrived and not counting.requests & discarded
    rounds = res.stats["rounds"]
    assert len(counting.calls) == 2 * rounds and all(len(c[2]) == 2 for c in counting.calls)
    assert sum(counting.requests.values()) == rounds * 2 * 2


# ------------------------------------------------------------------------------ batching
def test_batched_equals_one_by_one_float64():
    cfg = asyncfl.FedASTRun.from_dict(_cfg(dtype="float64")).validate()
    t1 = asyncfl.EngineTrainer(cfg, seed=3, device="cpu")
    t2 = asyncfl.EngineTrainer(cfg, seed=3, device="cpu")
    clients = [3, 1, 3, 7, 0]
    batched = t1.train("a", 0, clients)
    single = [t2.train("a", 0, [c])[0] for c in clients]
    assert len(batched) == len(single) == 5
    for u, v in zip(batched, single):
        assert u.diff.dtype == torch.float64
        torch.testing.assert_close(u.diff, v.diff, rtol=0, atol=1e-12)
        assert u.loss == pytest.approx(v.loss, abs=1e-9)
    # duplicated client ids are distinct requests (distinct batch orders)
    assert not torch.allclose(batched[0].diff, batched[2].diff)
    # a second batch from the same version continues the request numbering
    again = t1.train("a", 0, [3])
    assert not torch.allclose(again[0].diff, batched[0].diff)


def test_aggregate_applies_mean_difference_to_current_model():
    cfg = asyncfl.FedASTRun.from_dict(_cfg(dtype="float64")).validate()
    tr = asyncfl.EngineTrainer(cfg, seed=0, device="cpu")
    ups = tr.train("a", 0, [0, 1, 2])
    x0 = tr._flat(tr.tasks["a"], tr.state("a"))
    assert tr.aggregate("a", ups) == 1
    x1 = tr._flat(tr.tasks["a"], tr.state("a"))
    torch.testing.assert_close(x1, x0 + 0.1 * torch.stack([u.diff for u in ups]).mean(0))
    # stale updates (from version 0) are applied to the current version 1
    assert tr.aggregate("a", ups[:1]) == 2
    torch.testing.assert_close(tr._flat(tr.tasks["a"], tr.state("a")), x1 + 0.1 * ups[0].diff)


def test_version_store_releases_unreferenced_versions():
    cfg = asyncfl.FedASTRun.from_dict(
        _cfg("fedast_s", tasks=[_task("a", max_rounds=10), _task("b", max_rounds=10)])
    ).validate()
    sched, trainer = asyncfl.build_schedule(cfg, seed=0, device="cpu")
    sched.run()
    assert trainer.released
    for name in ("a", "b"):
        stored = trainer.stored_versions(name)
        assert trainer.tasks[name].current in stored
        assert len(stored) <= 3  # current + versions still referenced at the end
    task, v = trainer.released[0]
    with pytest.raises(FlkitError, match="not stored"):
        trainer.train(task, v, [0])


def test_dispersion_excludes_bias_for_official_rule():
    """Two hand-made updates: every weight entry 1 and 3, every bias entry +100 and -100.
    Without biases (official rule): per entry mean 2, squared deviations 1 + 1, so
    D = 2 nW / (2 * 4 nW) = 0.25. With biases: (2 nW + 2 * 100^2 nB) / (8 nW)."""
    cfg = asyncfl.FedASTRun.from_dict(_cfg(dtype="float64")).validate()
    tr = asyncfl.EngineTrainer(cfg, seed=0, device="cpu")
    mask = tr.tasks["a"].bias_mask  # True on non-bias entries
    n_weight, n_bias = int(mask.sum()), int((~mask).sum())
    assert n_weight > 0 and n_bias > 0
    u1 = torch.where(mask, 1.0, 100.0).double()
    u2 = torch.where(mask, 3.0, -100.0).double()
    ups = [asyncfl.Update(u1, 0.0), asyncfl.Update(u2, 0.0)]
    assert tr.dispersion("a", ups) == pytest.approx(0.25, rel=1e-12)
    tr.exclude_bias = False
    assert tr.dispersion("a", ups) == pytest.approx(
        (2 * n_weight + 20000 * n_bias) / (8 * n_weight), rel=1e-12
    )


# ------------------------------------------------------------------------ run(): determinism, cache
def test_run_is_deterministic_given_the_seed():
    r1 = asyncfl.run(_cfg(), seed=5, cache=False, progress=False, device="cpu")
    r2 = asyncfl.run(_cfg(), seed=5, cache=False, progress=False, device="cpu")
    r3 = asyncfl.run(_cfg(), seed=6, cache=False, progress=False, device="cpu")
    assert r1.events == r2.events and r1.history == r2.history
    assert r1.stats["final_accuracy"] == r2.stats["final_accuracy"]
    assert r1.events != r3.events


def test_history_records_test_loss_at_evaluations():
    """Figs. 13/14 need the test loss: every evaluated row carries the cross-entropy of that model,
    and it falls as the model learns (first vs last evaluation of each task)."""
    res = asyncfl.run(_cfg(), seed=5, cache=False, progress=False, device="cpu")
    rows = [h for h in res.history if h["accuracy"] is not None]
    assert rows and all(h["test_loss"] > 0 and h["test_loss"] == h["test_loss"] for h in rows)
    assert all("test_loss" not in h for h in res.history if h["accuracy"] is None)
    from flkit.papers.fedast.tables import curves

    c = curves(res)
    for _, g in c.groupby("task"):
        if len(g) > 1:
            assert g.test_loss.iloc[-1] < g.test_loss.iloc[0]


def test_run_caches_by_config(tmp_path, monkeypatch):
    r1 = asyncfl.run(_cfg("sync_st"), seed=0, root=tmp_path, progress=False, device="cpu")

    def boom(*a, **k):
        raise AssertionError("should have been loaded from the cache")

    monkeypatch.setattr(runner, "WatchedTrainer", boom)  # the trainer run() builds
    r2 = asyncfl.run(_cfg("sync_st"), seed=0, root=tmp_path, progress=False, device="cpu")
    assert r2.completion_time == r1.completion_time and r2.events == r1.events
    with pytest.raises(AssertionError):
        asyncfl.run(_cfg("sync_st"), seed=1, root=tmp_path, progress=False, device="cpu")


def _cut_history(path):
    """Valid JSON that keeps only the first 3 history rows: only the checksum can tell."""
    d = json.loads(path.read_text())
    d["history"] = d["history"][:3]
    path.write_text(json.dumps(d))


def _cut_bytes(path):
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize("damage", [_cut_history, _cut_bytes])
def test_a_damaged_cached_run_is_reported_and_run_again(tmp_path, monkeypatch, damage):
    cfg = _cfg("sync_st")
    r1 = asyncfl.run(cfg, seed=0, root=tmp_path, progress=False, device="cpu")
    folder = runner.run_folder(
        asyncfl.FedASTRun.from_dict(cfg).validate(), 0, torch.device("cpu"), tmp_path
    )
    assert (folder / "MANIFEST.json").is_file() and len(r1.history) > 3
    damage(folder / "result.json")
    built = []
    real = runner.WatchedTrainer

    def counting(*a, **k):
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(runner, "WatchedTrainer", counting)
    match = rf"run folder {re.escape(str(folder))} is damaged: result.json does not match"
    with pytest.warns(UserWarning, match=match):
        r2 = asyncfl.run(cfg, seed=0, root=tmp_path, progress=False, device="cpu")
    assert built and r2.history == r1.history and r2.events == r1.events
    # the re-run is sealed again and then served without training
    built.clear()
    r3 = asyncfl.run(cfg, seed=0, root=tmp_path, progress=False, device="cpu")
    assert not built and r3.history == r1.history


def test_a_cached_run_without_a_manifest_is_run_again_and_sealed(tmp_path, monkeypatch):
    """Nothing in a folder without a manifest can be checked (flkit.store): it is never served."""
    cfg = _cfg("sync_st")
    r1 = asyncfl.run(cfg, seed=0, root=tmp_path, progress=False, device="cpu")
    folder = runner.run_folder(
        asyncfl.FedASTRun.from_dict(cfg).validate(), 0, torch.device("cpu"), tmp_path
    )
    (folder / "MANIFEST.json").unlink()
    built = []
    real = runner.WatchedTrainer
    monkeypatch.setattr(runner, "WatchedTrainer", lambda *a, **k: built.append(1) or real(*a, **k))
    with pytest.warns(UserWarning, match=r"is damaged: it has no MANIFEST.json"):
        r2 = asyncfl.run(cfg, seed=0, root=tmp_path, progress=False, device="cpu")
    assert built and r2.history == r1.history and (folder / "MANIFEST.json").is_file()


@pytest.mark.parametrize(
    "method",
    ["fedast_d", "fedast_s", "nobuffer", "sync_st", "sync_st_nomit", "sync_ucb", "sync_bayes"],
)
def test_every_method_runs(method):
    res = asyncfl.run(_cfg(method), seed=0, cache=False, progress=False, device="cpu")
    assert res.stats["trained"] > 0
    assert (
        res.method
        == {
            "fedast_d": "FedAST(D)",
            "fedast_s": "FedAST(S)",
            "nobuffer": "FedAST-NoBuffer",
            "sync_st": "Sync-ST",
            "sync_st_nomit": "Sync-ST-NoStragMit",
            "sync_ucb": "Sync-UCB-ST",
            "sync_bayes": "Sync-Bayes-ST",
        }[method]
    )


# ------------------------------------------------------------------------------ bad input
BAD = [
    (dict(tasks=[_task("a", buffer=0)]), "buffer"),
    (dict(tasks=[_task("a", requests=0)]), "requests"),
    (dict(tasks=[_task("a", requests=10), _task("b", requests=10)]), "requests"),  # > 12 clients
    (dict(tasks=[_task("a", dataset="imagenet")]), "dataset"),
    (dict(tasks=[_task("a", target=1.5)]), "target"),
    (dict(tasks=[_task("a", target=0.0)]), "target"),
    (dict(tasks=[_task("a", delay_ratio=-0.1)]), "delay_ratio"),
    (dict(tasks=[_task("a", lr=-1.0)]), "lr"),
    (dict(availability=0.0), "availability"),
    (dict(availability=1.5), "availability"),
    (dict(method="fedbuff"), "method"),
    (dict(k=0), "k"),
    (dict(tasks=[_task("a"), _task("a")]), "unique"),
    (dict(tasks=[_task("a", max_rounds=None)]), "never end"),
    (dict(bogus=1), "unknown config key"),
    (dict(tasks=[dict(_task("a"), colour="red")]), "unknown task key"),
]


@pytest.mark.parametrize("changes,match", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_refused_before_any_work(changes, match, monkeypatch):
    def no_data(*a, **k):
        raise AssertionError("data was loaded before validation finished")

    monkeypatch.setattr(flkit_data, "load", no_data)
    with pytest.raises(FlkitError, match=match):
        asyncfl.run(_cfg(**changes), seed=0, cache=False, progress=False, device="cpu")


def test_sync_k_none_means_no_mitigation():
    a = asyncfl.run(_cfg("sync_st", k=None), seed=0, cache=False, progress=False, device="cpu")
    b = asyncfl.run(_cfg("sync_st_nomit"), seed=0, cache=False, progress=False, device="cpu")
    assert a.method == b.method == "Sync-ST-NoStragMit" and a.events == b.events


def test_bad_seed_and_unknown_task():
    with pytest.raises(FlkitError, match="seed"):
        asyncfl.run(_cfg(), seed=1.5, cache=False, progress=False)
    tr = asyncfl.EngineTrainer(asyncfl.FedASTRun.from_dict(_cfg()), device="cpu")
    with pytest.raises(FlkitError, match="unknown task"):
        tr.evaluate("zzz")
    with pytest.raises(FlkitError, match="client id"):
        tr.train("a", 0, [99])


def test_cache_key_is_the_one_written_before_the_asyncfl_move():
    """The config part of the key of a fixed config (less the CPU thread count, tested in
    test_run_threads.py) differs from the one the old flkit.methods.fedast computed
    (acd355ed3fe7) only by CACHE_VERSION (3 since issue 13 changed
    Sync-ST and Shakespeare results, so older runs are not reused), a knob left at its default does
    not enter it, and the key also names each task's data copy (so runs cached before the data was
    part of the key are not reused: they cannot say which copy they trained on)."""
    from flkit import data, store
    from flkit.asyncfl.runner import cache_key
    from flkit.utils import resolve_device

    if data.locate("mnist") is None:
        pytest.skip("needs MNIST (FLKIT_MIRROR or the data root): the key names its copy")
    cfg = asyncfl.FedASTRun(
        "fedast",
        (
            {"name": "a", "dataset": "synthetic", "target": 0.5, "requests": 4, "buffer": 2},
            {"name": "b", "dataset": "mnist", "max_rounds": 3, "requests": 5},
        ),
        num_clients=20,
        max_time=50.0,
    ).validate()
    key = cache_key(cfg, 3, resolve_device("cpu"))
    copies = key.pop("data")
    assert key.pop("threads") == torch.get_num_threads()  # a CPU run's own thread count
    assert key["v"] == 3 and store.config_hash(key) == "33ae018a5f9d"
    assert store.config_hash(dict(key, v=2)) == "acd355ed3fe7"
    assert store.run_dir("/r", key, prefix=cfg.method).name == "fedast_d-33ae018a5f9d"
    assert [d["dataset"] for d in copies] == ["synthetic", "mnist"]
    assert all(
        set(d) == {"dataset", "train", "test", "labels_sha256", "content_sha256"} for d in copies
    )
    changed = cache_key(cfg.replace(ucb_gamma=0.9), 3, resolve_device("cpu"))
    assert changed["config"]["ucb_gamma"] == 0.9 and "ucb_gamma" not in key["config"]


def test_shakespeare_local_steps_draw_a_fresh_full_batch_each():
    """Issue 13 item 4: the official code draws each of the 27 Shakespeare steps from a new
    shuffled loader with drop_last, i.e. 27 full batches of 64 distinct samples, each from its
    own permutation (not consecutive slices of one: for 100 samples 64, 36, ...)."""
    from flkit.engine import batch_plan

    cfg = asyncfl.FedASTRun.from_dict(
        dict(method="fedast_d", num_clients=12, tasks=[dict(name="s", dataset="shakespeare")])
    )
    spec = cfg.local_spec(cfg.tasks[0])
    assert (spec.steps, spec.batch_size, spec.fresh_batches, spec.drop_last) == (27, 64, True, True)
    plan = batch_plan(100, spec, seed=0)
    assert len(plan) == 27
    for b in plan:
        assert (
            len(b) == 64 and len(set(b.tolist())) == 64 and 0 <= int(b.min()) <= int(b.max()) < 100
        )
    # consecutive steps overlap (with replacement across steps): 64 + 64 > 100 positions
    assert all(len(set(a.tolist()) & set(b.tolist())) >= 28 for a, b in zip(plan, plan[1:]))
    # our choice for a role with fewer than 64 samples: all of them, every step
    assert all(sorted(b.tolist()) == list(range(30)) for b in batch_plan(30, spec, seed=1))
    # image tasks keep 3 epochs of batch 32 with the short batch dropped
    img = asyncfl.FedASTRun.from_dict(
        dict(method="fedast_d", num_clients=12, tasks=[dict(name="m", dataset="mnist")])
    )
    ispec = img.local_spec(img.tasks[0])
    assert not ispec.fresh_batches and [len(b) for b in batch_plan(300, ispec, 0)] == [32] * 27


def test_lstm_trains_with_the_loop_backend_on_a_cpu():
    """The dataset's ``cpu_backend`` (Shakespeare: "loop") replaces "auto" on a CPU only; a pinned
    backend is kept."""
    from flkit import asyncfl

    tasks = (
        {"name": "sh", "dataset": "shakespeare", "requests": 2},
        {"name": "syn", "dataset": "synthetic", "requests": 2},
    )
    cfg = asyncfl.FedASTRun("fedast_s", tasks, num_clients=20, max_time=1.0)
    tr = asyncfl.EngineTrainer(cfg, seed=0, device="cpu")
    assert tr.tasks["sh"].backend == "loop" and tr.tasks["syn"].backend == "auto"
    pinned = asyncfl.EngineTrainer(cfg, seed=0, device="cpu", backend="vmap")
    assert pinned.tasks["sh"].backend == "vmap"
