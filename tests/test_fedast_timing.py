"""Regime first (notebook 03): timing-only runs of the paper's settings and of ours
(flkit.papers.fedast.timing_only on flkit.asyncfl.timing_run), the task-mix checks and Fig. 3's
equal arrivals."""

import dataclasses

import numpy as np
import pytest

from flkit import asyncfl
from flkit.papers.fedast import regime, study, timing_only
from flkit.utils import FlkitError
from flkit.workbook import presets

#: timing-only indicators of one seed vary by a few % around the multi-seed values
TOL = 0.08


@pytest.fixture(scope="module")
def paper():
    return presets.load("03_fedast", "paper")


@pytest.mark.parametrize("experiment", ["heterogeneous", "identical"])
def test_paper_settings_round_length(paper, experiment):
    """The paper's four-task mix has a Sync-ST round of about 16 time units, its six identical
    CIFAR-10 tasks about 10.8 (first-30 of 50 clients per task)."""
    cfgs = timing_only.experiment_configs(paper, experiment)
    ind = timing_only.timing_indicators(**cfgs, seeds=(0,), horizon=200.0)
    length = timing_only.PAPER_ROUND_LENGTH[experiment]
    assert ind["sync_round_length"] == pytest.approx(length, rel=TOL)
    # FedAST's rate is about r / (mean request time): R = 96, b = 3 (mix) or R = 64, b = 2
    # (identical) both give r = 32 and staleness ~ R / b
    assert 26 <= ind["staleness_mean"] <= 36
    assert ind["updates_per_sync_round"] == pytest.approx(
        ind["fedast_rate"] * ind["sync_round_length"]
    )


def test_paper_setting_staleness_round_length_and_rounds():
    """The timing-only simulation of the paper's four-task mix. With R requests of a task
    outstanding and one server update per b arrivals, about R arrivals of that task happen while
    one request is out: staleness ~ R/b = 96/3 = 32. A Sync-ST round lasts about 16 time units
    (the slowest task's clients), so the paper's inferred completion time is a few dozen rounds."""
    p = timing_only.paper_setting(seed=0, horizon=300.0)
    assert 26 <= p["staleness_mean"] <= 36 and p["staleness_p90"] > p["staleness_mean"]
    assert 12 <= p["sync_round_length"] <= 20
    # the paper's Sync-ST rounds are its inferred completion time over our round length
    assert p["sync_rounds"] == pytest.approx(1033 / p["sync_round_length"])
    # a round waits for the 30th earliest of >= 48 clients: longer than the fastest possible
    # request of the cheapest task (MNIST, fast group: 27 x 0.7 x 0.148 / 2)
    assert p["sync_round_length"] > 27 * 0.7 * 0.148 / 2


def test_cpu_preset_matches_paper_timing(paper):
    """The rule fixed before any training run: every timing indicator of the reduced preset
    within TIMING_TOLERANCE of the paper setting's."""
    cpu = presets.load("03_fedast", "cpu")
    tab = timing_only.timing_table(cpu, paper, seeds=(0,), horizon=200.0)
    assert set(tab.experiment) == set(regime.TIMING_EXPERIMENTS)
    assert tab.within.all(), tab.to_string()


def test_realloc_room_by_hand(paper):
    """The official Realloc gives every task a floor of one unit: 1 - 4 * 32 / 384 = 2/3 of the
    paper's requests can move; at cpu 1 - 4 * 11 / 128 = 0.65625; with r = 32 as the unit the
    reduced pool could move nothing (4 * 32 = 128)."""
    room = timing_only.realloc_room
    assert room(study.heterogeneous(paper, "fedast_d")) == pytest.approx(2 / 3)
    cpu = presets.load("03_fedast", "cpu")
    cfg = study.heterogeneous(cpu, "fedast_d")
    assert room(cfg) == pytest.approx(1 - 44 / 128)
    assert room(dict(cfg, realloc_unit=None)) == 0.0
    assert room(dict(cfg, realloc_rule="paper")) == pytest.approx(1 - 4 / 128)


def test_realloc_unit_sets_the_official_allocation():
    """Two tasks, 64 requests, dispersion 3:1: with the unit 32 both keep their floor of 32; with
    unit 8 the official rule hands out 8 at a time toward floor(64 * 3/4) = 48."""
    assert asyncfl.realloc_official([3.0, 1.0], 64, 32) == [32, 32]
    assert asyncfl.realloc_official([3.0, 1.0], 64, 8) == [48, 16]
    t = asyncfl.TaskConfig("a", dataset="synthetic", target=0.5)
    with pytest.raises(FlkitError, match="realloc_unit"):
        asyncfl.FedASTRun("fedast_d", (t,), realloc_unit=0).validate()


def test_timing_config_is_option_s_with_fixed_buffer(paper):
    cfg = asyncfl.timing_config(study.heterogeneous(paper, "fedast_d"), 50.0)
    assert cfg.method == "fedast_s" and cfg.max_time == 50.0
    assert [t.buffer for t in cfg.tasks] == [3, 3, 3, 3]
    assert all(t.target is None for t in cfg.tasks)


def test_paper_mix_is_the_papers(paper):
    cfg = study.heterogeneous(paper, "sync_st")
    assert [t["dataset"] for t in cfg["tasks"]] == ["mnist", "fmnist", "cifar10", "shakespeare"]
    assert [t["delay_ratio"] for t in cfg["tasks"]] == [0.148, 0.24, 0.228, 0.555]
    assert [t["weight"] for t in cfg["tasks"]] == [100.0, 84.0, 48.0, 68.0]


def _bad(preset, **changes):
    d = dict(preset)
    d.update(changes)
    return d


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"het_datasets": ["mnist", "fmnist", "cifar11", "shakespeare"]}, ["cifar11", "cifar10"]),
        ({"cifar10_model": "cnn_big"}, ["cnn_big", "cnn_cifar10"]),
        ({"het_delay_ratios": [0.148, 0.0, 0.228, 0.555]}, ["0.0", "positive"]),
        ({"het_delay_ratios": [0.148, -1.0, 0.228, 0.555]}, ["-1.0", "positive"]),
        ({"het_shares": [100.0, 84.0, 48.0, 60.0]}, ["292", "300"]),
        ({"het_shares": [100.0, 84.0, 48.0]}, ["3 entries", "one per task"]),
    ],
)
def test_bad_task_mix(paper, changes, words):
    with pytest.raises(FlkitError) as e:
        study.heterogeneous(_bad(paper, **changes), "fedast_d")
    for w in words:
        assert w in str(e.value)


def test_bad_option_and_delay_ratio():
    t = asyncfl.TaskConfig("a", dataset="synthetic", target=0.5)
    with pytest.raises(FlkitError, match="'X'.*S.*D"):
        asyncfl.FedASTRun("nobuffer", (t,), option="X").validate()
    with pytest.raises(FlkitError, match="delay_ratio"):
        asyncfl.FedASTRun("fedast_s", (dataclasses.replace(t, delay_ratio=0.0),)).validate()


def test_option_s_identical_tasks_equal_requests():
    """Option S keeps R_m fixed: on identical tasks every task sends the same number of requests
    (R initial ones plus one per arrival while nothing is dropped: the pool has room for all)."""
    pre = presets.load("03_fedast", "cpu")
    cfg = study.fig2_config(pre, "fedast_s", availability=1.0)
    res = asyncfl.timing_run(cfg, seed=0, horizon=100.0)
    sends = [e for e in res.events if e[-1] == "dispatch"]
    counts = np.bincount([e[1] for e in sends], minlength=6)
    arrivals = np.bincount([e[1] for e in res.events if e[-1] == "arrive"], minlength=6)
    assert (counts == arrivals + 32).all()  # R = 192 / 6 outstanding per task, always
    assert cfg["method"] == "fedast_s"


def test_fig3_points_have_equal_arrivals():
    pre = presets.load("03_fedast", "cpu")
    n = int(pre["active_tasks"]) * int(pre["active_arrivals"])
    arrivals = []
    for r in pre["active_requests"]:
        for m in ("fedast_d", "nobuffer"):
            cfg = study.active_config(pre, r, m)
            assert cfg["max_events"] == n and cfg["max_time"] is None
            res = asyncfl.timing_run(cfg, seed=0, horizon=1e9, max_events=n)
            arrivals.append(sum(1 for e in res.events if e[-1] == "arrive"))
    assert set(arrivals) == {n}


class _Recorder(asyncfl.TimingTrainer):
    """Records the model version every training starts from."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def train(self, task, version, client_ids, *args, **kw):
        self.calls.append((version, len(client_ids)))
        return super().train(task, version, client_ids)


@pytest.mark.parametrize("version0", ["paper", "official"])
def test_version0_aliasing(version0):
    """R = 6 requests sent with version 0, b = 2: in the paper's description all six train from
    the initial model (one batched call); with the official code's aliasing the first b train from
    version 0 and the other R - b from the model current at their arrival (versions 1, 2, ...)."""
    task = asyncfl.TaskConfig("a", dataset="synthetic", requests=6, buffer=2)
    cfg = asyncfl.FedASTRun(
        "fedast_s", (task,), num_clients=50, availability=1.0, max_events=6, version0=version0
    )
    rec = _Recorder()
    asyncfl.run_fedast(cfg.validate(), rec, seed=0)
    from_initial = [n for v, n in rec.calls if v == 0]
    if version0 == "paper":
        # the six initial ones in one call, and the one sent after the first arrival (before the
        # first aggregation, so still with version 0)
        assert rec.calls[0] == (0, 6) and from_initial == [6, 1]
    else:
        # one by one; only the two arrivals before the first aggregation see version 0
        assert from_initial == [1, 1] and max(v for v, _ in rec.calls) >= 2


def test_version0_bad_value():
    task = asyncfl.TaskConfig("a", dataset="synthetic", target=0.5)
    with pytest.raises(FlkitError, match="'live'.*paper.*official"):
        asyncfl.FedASTRun("fedast_s", (task,), version0="live").validate()
