"""Tests for flkit.asyncfl schedulers: FedAST / Sync-ST schedules with toy trainers (no neural
networks)."""

import math

import numpy as np
import pytest

from flkit.asyncfl import (
    DATASET_DEFAULTS,
    FedAST,
    FedASTRun,
    FixedDelays,
    SyncST,
    TaskConfig,
    client_units,
    estimate_variance_official,
    estimate_variance_paper,
    expected_improvement,
    k_rule,
    normalized_dispersion,
    realloc_official,
    realloc_paper,
    redistribute,
    run_fedast,
    run_sync,
    sync_shares,
    ucb_scores,
)
from flkit.utils import FlkitError, numpy_rng


# ============================================================================ toy trainers
class VersionTrainer:
    """Accuracy = version / rounds_to_target[task]; updates are (task, version, client) tags."""

    def __init__(self, rounds_to_target):
        self.rtt = dict(rounds_to_target)
        self.v = {t: 0 for t in self.rtt}
        self.calls = []
        self.released = []

    def train(self, task, version, client_ids):
        self.calls.append((task, version, list(client_ids)))
        return [(task, version, c) for c in client_ids]

    def aggregate(self, task, updates):
        self.v[task] += 1
        return self.v[task]

    def evaluate(self, task):
        return min(1.0, self.v[task] / self.rtt[task])

    def release(self, task, version):
        self.released.append((task, version))

    def loss(self, task, update):
        return 1.0 + update[2] % 3


class QuadraticTrainer:
    """Each task minimises mean_i ||x - c_i||^2 / 2 with client optima c_i = opt + het * noise_i.

    A local update from version v is the difference lr * (c_i - x_v) (one exact gradient step);
    the server applies x <- x + eta_s * mean(differences); accuracy = exp(-||x - opt||)."""

    def __init__(self, het, dim=6, lr=0.5, eta_s=0.5, num_clients=1000, seed=0):
        self.het = dict(het)
        rng = numpy_rng(seed, "toy")
        self.opt = {t: rng.normal(size=dim) for t in self.het}
        self.noise = {t: rng.normal(size=(num_clients, dim)) for t in self.het}
        self.x = {t: {0: np.zeros(dim)} for t in self.het}
        self.v = {t: 0 for t in self.het}
        self.lr, self.eta_s = lr, eta_s
        self.calls = []

    def train(self, task, version, client_ids):
        self.calls.append((task, version, list(client_ids)))
        x = self.x[task][version]
        return [
            self.lr * (self.opt[task] + self.het[task] * self.noise[task][c] - x)
            for c in client_ids
        ]

    def aggregate(self, task, updates):
        v = self.v[task]
        self.x[task][v + 1] = self.x[task][v] + self.eta_s * np.mean(updates, axis=0)
        self.v[task] = v + 1
        return v + 1

    def evaluate(self, task):
        return float(np.exp(-np.linalg.norm(self.x[task][self.v[task]] - self.opt[task])))

    def loss(self, task, update):
        return float(np.linalg.norm(update))


class DriftTrainer(QuadraticTrainer):
    """Updates = a fixed task direction + het * client noise, so the normalised dispersion stays
    about het^2 * dim / ||direction||^2 (no convergence effect); accuracy stays 0."""

    def train(self, task, version, client_ids):
        self.calls.append((task, version, list(client_ids)))
        return [self.opt[task] + self.het[task] * self.noise[task][c] for c in client_ids]

    def evaluate(self, task):
        return 0.0


# ============================================================================ pure functions
@pytest.mark.parametrize(
    "outstanding,requests,total_requests,total_outstanding,expected",
    [
        (95, 96, 384, 383, 1),  # one missing -> 1
        (94, 96, 384, 382, 2),  # two missing -> 2
        (90, 96, 384, 380, 2),  # six missing, capped at 2
        (90, 96, 384, 383, 1),  # global slack sum R - sum A = 1
        (90, 96, 384, 384, 0),  # no global slack
        (10, 32, 100, 120, 0),  # negative slack -> 0
        (96, 96, 384, 383, 0),  # A = R
        (97, 96, 384, 383, 0),  # A > R (target lowered by Realloc)
        (0, 0, 288, 200, 0),  # finished task
    ],
)
def test_k_rule_table(outstanding, requests, total_requests, total_outstanding, expected):
    assert k_rule(outstanding, requests, total_requests, total_outstanding) == expected


def test_realloc_official_by_hand():
    # R=384, r=32, sigma 1:2:3:4 -> residuals floor(384*s/10) - 32 = 6, 44, 83, 121; every task
    # gets 32, then 8 units of 32 go to the largest residual: t3 (121->89), t3 (89->57),
    # t2 (83->51), t3 (57->25), t2 (51->19), t1 (44->12), t3 (25->-7), t2 (19->-13)
    # =>  32, 64, 128, 160
    assert realloc_official([1, 2, 3, 4], 384, 32) == [32, 64, 128, 160]
    # task 2 finished: sum sigma = 7; residuals floor(384/7)-32=22, floor(768/7)-32=77,
    # floor(1536/7)-32=187;
    # 9 units: t3 t3 t3 t3(91>77) t1(77>59) t3(59>45) t1(45>27) t3(27>22) t0(22>13)
    # => 64, 96, 0, 224
    assert realloc_official([1, 2, 3, 4], 384, 32, active_mask=[True, True, False, True]) == [
        64,
        96,
        0,
        224,
    ]
    # floor of r per task even for tiny sigma; scale of sigma does not matter
    assert realloc_official([1e-9, 1.0], 128, 32) == [32, 96]
    # total not a multiple of r: the remainder goes to the largest residual, sum preserved
    assert realloc_official([1, 1], 70, 32) == [38, 32]
    with pytest.raises(FlkitError):
        realloc_official([1, -1], 64, 32)


def test_realloc_paper_by_hand():
    # sigma2_hat = 1, 4, 9, 16 -> sqrt 1:2:3:4; R = 100: one each, 96 left -> quotas 9.6 19.2
    # 28.8 38.4, floors 9 19 28 38 (94), the 2 largest remainders (.8 -> t2, .6 -> t0) get +1
    # =>  11, 20, 30, 39
    assert realloc_paper([1, 4, 9, 16], 100) == [11, 20, 30, 39]
    # proportional to the square root, not the variance: 4:1 variance -> 2:1 requests
    assert realloc_paper([4.0, 1.0], 300, min_per_task=0) == [200, 100]
    assert realloc_paper([4.0, 1.0, 9.0], 91, active_mask=[True, False, True]) == [37, 0, 54]
    assert sum(realloc_paper([0.3, 0.1, 0.7], 384)) == 384
    assert realloc_paper([0.0, 0.0], 10) == [5, 5]


def test_variance_estimates_by_hand():
    ups = [np.array([1.0, 0.0]), np.array([3.0, 0.0])]
    # mean (2, 0); sum ||u - mean||^2 = 2; K ||mean||^2 = 2 * 4 = 8  ->  0.25
    assert normalized_dispersion(ups) == pytest.approx(0.25)
    assert estimate_variance_paper(ups, eta_c=0.1, eta_s=0.1, tau=27) == pytest.approx(
        0.1 * 0.1 * 27 * 0.25
    )
    dict_ups = [
        {"w": np.array([1.0, 0.0]), "bias": np.array([100.0])},
        {"w": np.array([3.0, 0.0]), "bias": np.array([-100.0])},
    ]
    # official: bias tensors excluded, times eta_s / (eta_c tau^2), halved (no square root)
    assert estimate_variance_official(dict_ups, eta_c=0.1, eta_s=0.1, tau=27) == pytest.approx(
        0.25 * 0.1 / (0.1 * 27**2) / 2
    )
    assert normalized_dispersion(dict_ups) > 100  # with the bias it would be dominated by it


def test_redistribute_and_sync_shares():
    rng = np.random.default_rng(0)
    shares = redistribute(10, [0, 3, 1], [False, True, True], rng)
    assert shares[0] == 0 and sum(shares) == 10 and shares[1] >= 7 and shares[2] >= 2
    n = sync_shares([100, 84, 47, 67], 300, np.random.default_rng(1))
    assert sum(n) == 300 and all(a - b in (0, 1, 2) for a, b in zip(n, [100, 84, 47, 67]))
    assert sync_shares([1, 0, 1], 5, np.random.default_rng(2))[1] == 0


def test_ucb_and_ei_formulas():
    rewards, plays = np.array([2.0, 0.0, 1.0]), np.array([1.0, 0.0, 2.0])
    s = ucb_scores(rewards, plays, t=3, gamma=0.5)  # sum_{s<3} 0.5^s = 1.75
    assert s[0] == pytest.approx(2 + math.sqrt(2 * math.log(1.75)))
    assert s[1] == math.inf
    assert s[2] == pytest.approx(0.5 + math.sqrt(2 * math.log(1.75) / 2))
    assert expected_improvement([1.0], [0.0], 2.0)[0] == pytest.approx(1.0)
    assert expected_improvement([2.0], [1.0], 2.0)[0] == pytest.approx(1 / math.sqrt(2 * math.pi))


# ============================================================================ validation
def _t(name="mnist", dataset=None, **kw):
    """A task timed like the dataset of its name (else given a delay_ratio), client lr 0.1."""
    kw.setdefault("lr", 0.1)
    return TaskConfig(
        name, dataset=dataset or (name if name in DATASET_DEFAULTS else "synthetic"), **kw
    )


def _cfg(method="fedast_d", tasks=None, **kw):
    return FedASTRun(method, tuple([_t()] if tasks is None else tasks), **kw)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(tasks=[_t(buffer=0)]), "buffer"),
        (dict(tasks=[_t(requests=0)]), "requests"),
        (dict(tasks=[_t(requests=600), _t("fmnist", requests=600)]), "total active requests"),
        (dict(tasks=[_t(target=0.0)]), "target"),
        (dict(tasks=[_t(target=1.5)]), "target"),
        (dict(tasks=[_t(delay_ratio=-0.1)]), "delay_ratio"),
        (dict(tasks=[_t("x", dataset="mnsit")]), "mnsit"),
        (dict(tasks=[_t(), _t()]), "unique"),
        (dict(tasks=[_t()], availability=0.0), "availability"),
        (dict(tasks=[_t()], availability=1.2), "availability"),
        (dict(method="nobuffer", tasks=[_t()], option="X"), "option"),
        (dict(tasks=[_t()], realloc_rule="fancy"), "realloc_rule"),
        (dict(tasks=[_t()], delay_multiplier=-1), "delay_multiplier"),
        (dict(tasks=[]), "tasks"),
    ],
)
def test_fedast_config_validation(kwargs, match):
    with pytest.raises(FlkitError, match=match):
        _cfg(**{"max_time": 10.0, **kwargs}).validate()


def test_sync_config_validation_and_custom_task_names():
    with pytest.raises(FlkitError, match="sync_greedy"):
        _cfg("sync_greedy", max_time=1.0).validate()
    with pytest.raises(FlkitError, match="k"):
        _cfg("sync_st", k=0, max_time=1.0).validate()
    with pytest.raises(FlkitError, match="ucb_gamma"):
        _cfg("sync_ucb", ucb_gamma=1.0, max_time=1.0).validate()
    with pytest.raises(FlkitError, match="never end"):
        _cfg("sync_st").validate()  # no target, no limit
    _cfg("sync_st", sync_max_rounds=3).validate()  # a round limit ends it
    # a custom task name is fine: the delay ratio comes from its dataset or is given
    _cfg(
        tasks=[_t("mnist-a", dataset="mnist"), _t("toy", delay_ratio=0.2)], max_time=1.0
    ).validate()
    with pytest.raises(FlkitError, match="loss"):
        SyncST(
            _cfg("sync_ucb", max_time=1.0),
            object.__new__(
                type(
                    "T",
                    (),
                    {
                        "train": lambda *a: [],
                        "aggregate": lambda *a: None,
                        "evaluate": lambda *a: 0.0,
                    },
                )
            ),
        )
    with pytest.raises(FlkitError, match="Sync method"):
        SyncST(_cfg("fedast_d", max_time=1.0), VersionTrainer({"mnist": 1}))


# ============================================================================ FedAST hand trace
def test_fedast_two_task_hand_trace():
    """N=4, 2 available; task A (R=2, b=2), task B (R=1, b=1); option S; test every update.

    Delays: task A at client c takes 2 + c, task B always 5. Accuracy = version / (2 for A, 3 for
    B), targets 1.0. Scripted client draws. Hand trace (busy = distinct clients with outstanding
    work):
      t=0  A->c0 [0,2]  A->c1 [0,3]  B->c0 queued [2,7]                      busy {c0,c1}
      t=2  A@c0 arrives (v0, stale 0); group (A,v0)={c0,c1} trained in one call; buffer 1/2;
           A_A=1, sum A=2 -> K=min(1,1,2)=1: c2 idle, 2 busy -> drop
      t=3  A@c1 arrives; buffer full -> A v1; A_A=0, sum A=1 -> K=2: c1 [3,6] (v1), c3 dropped
      t=6  A@c1 (v1, stale 0) trained alone; buffer 1/2; K=2: c0 busy until 7 -> [7,9]; c2 [6,10]
      t=7  B@c0 (v0) -> B v1; A_B=0, sum A=2 -> K=1: c3 dropped (c0,c2 busy)
      t=9  A@c0 (v1, stale 0): group (A,v1)={c0,c2} trained; A v2 -> acc 1 -> A done at 9;
           A@c2 cancelled (c2 stays blocked until 10); R_A=2 moves to B (R_B=3);
           option S burst (no availability check): B->c1 [9,14], B->c2 [10,15] (blocked by
           cancelled job)
      t=14 B@c1 (v1, stale 0): group (B,v1)={c1,c2}; B v2; A_B=1, sum A=1 -> K=2: c0 [14,19],
           c3 dropped
      t=15 B@c2 (v1, B at v2 -> stale 1) -> B v3 -> acc 1 -> B done at 15; B@c0 cancelled.
    """
    tasks = [
        _t("A", target=1.0, delay_ratio=1.0, requests=2, buffer=2, test_every=1),
        _t("B", target=1.0, delay_ratio=1.0, requests=1, buffer=1, test_every=1),
    ]
    cfg = _cfg("fedast_s", tasks, num_clients=4, availability=0.5)
    trainer = VersionTrainer({"A": 2, "B": 3})
    delays = FixedDelays(lambda task, client: 2.0 + client if task == 0 else 5.0)
    draws = [0, 1, 0, 2, 1, 3, 0, 2, 3, 1, 2, 0, 3]
    res = FedAST(cfg, trainer, delays=delays, client_draws=draws).run()
    dispatch, drop, arrive, aggregate, complete, cancel = (
        "dispatch",
        "drop",
        "arrive",
        "aggregate",
        "complete",
        "cancel",
    )
    expected = [
        (0, 0, 0, 0, None, dispatch),
        (0, 0, 1, 0, None, dispatch),
        (0, 1, 0, 0, None, dispatch),
        (2, 0, 0, 0, 0, arrive),
        (2, 0, 2, 0, None, drop),
        (3, 0, 1, 0, 0, arrive),
        (3, 0, None, 1, None, aggregate),
        (3, 0, 1, 1, None, dispatch),
        (3, 0, 3, 1, None, drop),
        (6, 0, 1, 1, 0, arrive),
        (6, 0, 0, 1, None, dispatch),
        (6, 0, 2, 1, None, dispatch),
        (7, 1, 0, 0, 0, arrive),
        (7, 1, None, 1, None, aggregate),
        (7, 1, 3, 1, None, drop),
        (9, 0, 0, 1, 0, arrive),
        (9, 0, None, 2, None, aggregate),
        (9, 0, None, 2, None, complete),
        (9, 0, 2, 1, None, cancel),
        (9, 1, 1, 1, None, dispatch),
        (9, 1, 2, 1, None, dispatch),
        (14, 1, 1, 1, 0, arrive),
        (14, 1, None, 2, None, aggregate),
        (14, 1, 0, 2, None, dispatch),
        (14, 1, 3, 2, None, drop),
        (15, 1, 2, 1, 1, arrive),
        (15, 1, None, 3, None, aggregate),
        (15, 1, None, 3, None, complete),
        (15, 1, 0, 2, None, cancel),
    ]
    assert res.events == expected
    assert res.completion_time == {"A": 9.0, "B": 15.0} and res.total_time == 15.0
    # lazy, batched training: one call per (task, version) group of outstanding requests
    assert trainer.calls == [
        ("A", 0, [0, 1]),
        ("A", 1, [1]),
        ("B", 0, [0]),
        ("A", 1, [0, 2]),
        ("B", 1, [1, 2]),
    ]
    assert [(h["task"], h["round"], h["sim_time"], h["accuracy"]) for h in res.history] == [
        ("A", 1, 3, 0.5),
        ("B", 1, 7, 1 / 3),
        ("A", 2, 9, 1.0),
        ("B", 2, 14, 2 / 3),
        ("B", 3, 15, 1.0),
    ]
    assert [h["mean_staleness"] for h in res.history] == [0, 0, 0, 0, 1]
    # the B request cancelled at t=15 (client 0) was never trained; old versions were released
    assert res.stats["trained_requests"] == 8 and res.stats["cancelled"] == 2
    assert ("A", 0) in trainer.released and ("B", 0) in trainer.released
    df = res.events_frame()
    assert list(df.columns) == ["time", "task", "client", "version", "staleness", "kind"]
    assert df["task"].iloc[0] == "A"
    # rows without a task (e.g. a reallocation) must not break the frame
    res.events.append((16.0, None, None, None, None, "realloc"))
    df = res.events_frame()
    assert df["task"].iloc[-1] is None and df["task"].iloc[0] == "A"


# ============================================================================ FedAST behaviour
HET_TASKS = [
    _t("hom", dataset="mnist", requests=40, buffer=5, test_every=4),
    _t("het", dataset="fmnist", requests=40, buffer=5, test_every=4),
]


def _het_cfg(option="D", no_buffer=False, **kw):
    base = dict(num_clients=200, availability=0.3, ratio=8, max_time=400.0)
    base.update(kw)
    method = "nobuffer" if no_buffer else {"D": "fedast_d", "S": "fedast_s"}[option]
    return _cfg(method, HET_TASKS, option=option, **base)


@pytest.mark.parametrize("rule", ["official", "paper"])
def test_option_d_moves_requests_to_heterogeneous_task(rule):
    sched = FedAST(
        _het_cfg(option="D", realloc_rule=rule), DriftTrainer({"hom": 0.1, "het": 1.0}), seed=3
    )
    res = sched.run()
    assert res.stats["reallocations"] >= 1
    for alloc in res.allocations:
        assert sum(alloc["requests"].values()) == 80
        assert alloc["requests"]["het"] > alloc["requests"]["hom"]
    if rule == "official":
        assert all(v % 8 == 0 and v >= 8 for a in res.allocations for v in a["requests"].values())
    # the outstanding counts moved towards the new targets, and b = max(1, ceil(A / r))
    assert sched.A[1] > sched.A[0]
    assert sched.b == [max(1, -(-a // 8)) for a in sched.A]


def test_option_s_keeps_allocation_and_nobuffer_is_staler():
    s = FedAST(_het_cfg(option="S"), QuadraticTrainer({"hom": 0.5, "het": 0.5}), seed=3)
    res = s.run()
    assert res.stats["reallocations"] == 0 and s.R == [40, 40] and s.b == [5, 5]
    assert {h["buffer"] for h in res.history} == {5}
    nb = run_fedast(
        _het_cfg(option="S", no_buffer=True), QuadraticTrainer({"hom": 0.5, "het": 0.5}), seed=3
    )
    assert {h["buffer"] for h in nb.history} == {1}
    st = [h["mean_staleness"] for h in res.history]
    st_nb = [h["mean_staleness"] for h in nb.history]
    # staleness scale ~ R/b: about 8 server updates with b=5, about 40 with b=1
    assert np.mean(st_nb) > 3 * np.mean(st)


def test_completion_cancels_redistributes_and_never_trains_finished_tasks():
    tasks = [
        _t("easy", dataset="mnist", target=0.9, requests=30, buffer=3, test_every=2),
        _t("hard", dataset="cifar10", target=0.999, requests=30, buffer=3, test_every=2),
    ]
    trainer = QuadraticTrainer({"easy": 0.1, "hard": 0.5}, lr=0.5, eta_s=0.5)
    sched = FedAST(
        _cfg("fedast_s", tasks, num_clients=200, availability=0.3, ratio=10, max_time=2000.0),
        trainer,
        seed=1,
    )
    call_times = []
    train = trainer.train
    trainer.train = lambda task, v, clients: (
        call_times.append((task, sched.sim.now)) or train(task, v, clients)
    )
    res = sched.run()
    t_easy = res.completion_time["easy"]
    assert t_easy is not None and res.stats["cancelled"] > 0
    assert sched.R == [0, 60]  # freed requests moved to the remaining task
    ev = res.events_frame()
    # nothing of the finished task is dispatched or arrives after its completion
    after = ev[(ev.task == "easy") & (ev.time > t_easy)]
    assert after.empty
    # no training call for a task after it finished
    assert all(t <= t_easy for task, t in call_times if task == "easy")
    assert any(t > t_easy for task, t in call_times if task == "hard")
    assert [h for h in res.history if h["task"] == "easy"][-1]["accuracy"] >= 0.9
    # every arrival was trained; besides, only batch-mates of arrivals (same task and version)
    trained = res.stats["trained_requests"]
    assert (
        res.stats["arrived"]
        <= trained
        <= res.stats["arrived"] + res.stats["cancelled"] + len(sched.sim)
    )
    assert len(set(sched.trained_ids)) == trained
    # option S burst: right after completion the remaining task got requests at once
    burst = ev[(ev.time == t_easy) & (ev.task == "hard") & (ev.kind == "dispatch")]
    assert len(burst) >= 30


def test_fedast_deterministic_given_seed():
    cfg = _het_cfg(option="D", max_time=150.0)
    a = run_fedast(cfg, QuadraticTrainer({"hom": 0.1, "het": 1.0}), seed=3)
    b = run_fedast(cfg, QuadraticTrainer({"hom": 0.1, "het": 1.0}), seed=3)
    c = run_fedast(cfg, QuadraticTrainer({"hom": 0.1, "het": 1.0}), seed=4)
    assert a.events == b.events and a.history == b.history
    assert a.events != c.events


def test_max_events_and_max_rounds_stop():
    cfg = _cfg(
        "fedast_s",
        [_t("mnist", requests=10, buffer=2, max_rounds=5)],
        num_clients=50,
        max_events=1000,
    )
    res = run_fedast(cfg, VersionTrainer({"mnist": 100}))
    assert res.history[-1]["round"] == 5 and res.completion_time == {"mnist": None}
    assert res.stats["stop_reason"] == "completed"
    cfg2 = _cfg("fedast_s", [_t("mnist", requests=10, buffer=2)], num_clients=50, max_events=37)
    assert run_fedast(cfg2, VersionTrainer({"mnist": 100})).stats["events"] == 37


# ============================================================================ synchronous baselines
def test_sync_round_time_and_lazy_training_of_kept_only():
    tasks = [_t("A", delay_ratio=1.0, weight=1), _t("B", delay_ratio=1.0, weight=1)]

    def durations(t, c):
        return 1.0 + ((7 * c + 3 * t) % 5) + 0.1 * c  # distinct, deterministic

    trainer = VersionTrainer({"A": 100, "B": 100})
    cfg = _cfg("sync_st", tasks, num_clients=12, availability=0.5, k=2, sync_max_rounds=1)
    res = SyncST(cfg, trainer, delays=FixedDelays(durations)).run()
    dispatched = {0: [], 1: []}
    for _time, task, client, _version, _st, kind in res.events:
        if kind == "dispatch":
            dispatched[task].append(client)
    assert (
        len(dispatched[0]) == 3
        and len(dispatched[1]) == 3
        and not set(dispatched[0]) & set(dispatched[1])
    )
    finishes = {m: sorted((durations(m, c), c) for c in cl) for m, cl in dispatched.items()}
    expected_end = max(finishes[m][1][0] for m in (0, 1))  # 2nd earliest finish, max over tasks
    assert res.total_time == pytest.approx(expected_end)
    kept = {m: [c for _, c in finishes[m][:2]] for m in (0, 1)}  # in finish order
    assert trainer.calls == [("A", 0, kept[0]), ("B", 0, kept[1])]  # one batch per task, kept only
    assert res.stats["trained_requests"] == 4 and res.stats["discarded"] == 2


def test_sync_no_mitigation_keeps_all_and_is_slower():
    tasks = [_t("mnist", target=0.95), _t("cifar10", target=0.95)]
    kw = dict(num_clients=200, availability=0.3, sync_max_rounds=8)
    fast = run_sync(
        _cfg("sync_st", tasks, k=10, **kw), VersionTrainer({"mnist": 50, "cifar10": 50}), seed=2
    )
    slow = run_sync(
        _cfg("sync_st", tasks, k=None, **kw), VersionTrainer({"mnist": 50, "cifar10": 50}), seed=2
    )
    assert slow.method == "Sync-ST-NoStragMit" and slow.stats["discarded"] == 0
    assert fast.stats["trained_requests"] == 8 * 2 * 10
    assert slow.stats["trained_requests"] == 8 * 60
    assert slow.total_time > fast.total_time


def test_sync_task_completion_redistributes():
    tasks = [_t("mnist", target=1.0, weight=2), _t("fmnist", target=1.0, weight=1)]
    res = run_sync(
        _cfg("sync_st", tasks, num_clients=60, availability=0.5, k=5),
        VersionTrainer({"mnist": 3, "fmnist": 6}),
        seed=0,
    )
    assert res.completion_time["mnist"] is not None and res.completion_time["fmnist"] is not None
    assert res.completion_time["mnist"] < res.completion_time["fmnist"]
    rows = [h for h in res.history if h["task"] == "fmnist"]
    assert (
        rows[0]["clients"] == 10 and rows[-1]["clients"] == 30
    )  # all 30 available after mnist is done


def test_sync_ucb_first_round_all_clients_then_scores():
    tasks = [_t("mnist"), _t("fmnist")]
    trainer = VersionTrainer({"mnist": 100, "fmnist": 100})
    res = run_sync(
        _cfg("sync_ucb", tasks, num_clients=20, availability=0.5, k=3, sync_max_rounds=4), trainer
    )
    assert res.method == "Sync-UCB-ST"
    assert sorted(trainer.calls[0][2]) == list(range(20)) and sorted(trainer.calls[1][2]) == list(
        range(20)
    )
    assert all(len(c[2]) == 3 for c in trainer.calls[2:])
    assert res.stats["trained_requests"] == 40 + 3 * 2 * 3
    for rnd in range(1, 4):  # disjoint clients across tasks within a round
        a, b = trainer.calls[2 * rnd][2], trainer.calls[2 * rnd + 1][2]
        assert not set(a) & set(b)


def test_sync_bayes_runs_and_keeps_first_k():
    tasks = [_t("mnist"), _t("shakespeare")]
    trainer = VersionTrainer({"mnist": 100, "shakespeare": 100})
    res = run_sync(
        _cfg(
            "sync_bayes",
            tasks,
            num_clients=30,
            availability=0.5,
            k=4,
            sync_max_rounds=5,
            bods_candidates=20,
        ),
        trainer,
    )
    assert res.method == "Sync-Bayes-ST" and res.stats["rounds"] == 5
    assert all(len(c[2]) == 4 for c in trainer.calls) and len(trainer.calls) == 10
    assert res.stats["discarded"] == 5 * (15 - 8)


def test_sync_identical_tasks_split_a_finished_tasks_clients_evenly():
    """Issue 13 item 1: 4 identical tasks (weight 1 each) on 300 available clients get 75 each;
    when one finishes, its 75 clients are split in proportion to the others' shares: 25 each,
    100/100/100 (the unit-weight rule gave the whole freed unit to one task: 150/75/75)."""
    tasks = [_t(n, delay_ratio=0.148, target=1.0, weight=1) for n in "ABCD"]
    cfg = _cfg("sync_st", tasks, num_clients=1000, availability=0.3, k=30, sync_max_rounds=4)
    res = run_sync(cfg, VersionTrainer({"A": 2, "B": 100, "C": 100, "D": 100}), seed=3)
    assert res.completion_time["A"] is not None
    by_round = {}
    for h in res.history:
        by_round.setdefault(h["round"], {})[h["task"]] = h["clients"]
    assert by_round[1] == {"A": 75, "B": 75, "C": 75, "D": 75}
    assert by_round[3] == by_round[4] == {"B": 100, "C": 100, "D": 100}


def test_client_units_by_hand():
    # floor(300 w / sum w), at least 1 for a positive weight, 0 for weight 0
    assert client_units([1, 1, 1, 1], 300) == [75, 75, 75, 75]
    assert client_units([100, 84, 47, 67], 300) == [100, 84, 47, 67]  # sum 298: floors
    assert client_units([1, 0, 1000], 10) == [1, 0, 9]


def test_sync_ucb_first_scored_round_has_no_exploration_term(monkeypatch):
    """Issue 13 item 6, checked against the official code (server.py, sync_ucb_run): after the
    all-clients round 0, round_list = 1, so U = sqrt(2 ln(sum_{t in range(1)} gamma^t) / N)
    = sqrt(2 ln 1 / N) = 0, and N = gamma * 0 + 1 = 1 for every client: the first scored round
    ranks clients by their reported loss alone (score = L / N = loss). Hand value for client c
    of VersionTrainer: loss 1 + c % 3."""
    from flkit.asyncfl import sync as sync_mod

    seen = []

    def spy(rewards, plays, t, gamma):
        out = ucb_scores(rewards, plays, t, gamma)
        seen.append((t, plays.copy(), rewards.copy(), out))
        return out

    monkeypatch.setattr(sync_mod, "ucb_scores", spy)
    tasks = [_t("mnist"), _t("fmnist")]
    run_sync(
        _cfg("sync_ucb", tasks, num_clients=12, availability=0.5, k=3, sync_max_rounds=2),
        VersionTrainer({"mnist": 100, "fmnist": 100}),
    )
    first = [x for x in seen if x[0] == 1]
    assert len(first) == 2  # one per task, in the first scored round (round index 1)
    hand = np.array([1.0 + c % 3 for c in range(12)])
    for _t1, plays, rewards, score in first:
        assert np.array_equal(plays, np.ones(12)) and np.array_equal(rewards, hand)
        assert np.array_equal(score, hand)  # exploration term exactly 0
    # from round 2 on the term is positive: t = 2 -> sqrt(2 ln(1 + 0.99))
    assert ucb_scores(np.zeros(1), np.ones(1), 2, 0.99)[0] == pytest.approx(
        math.sqrt(2 * math.log(1.99))
    )
