"""Tests for flkit.asyncfl (delays, clock): delay models, event queue, FCFS queues, availability,
staleness, rounds."""

import math

import numpy as np
import pytest

from flkit.asyncfl import (
    ARRIVED,
    CANCELLED,
    DISCARDED,
    EventQueue,
    FixedDelays,
    ShiftedExponentialDelays,
    Simulator,
    assign_speed_groups,
    shifted_exponential,
)
from flkit.utils import FlkitError


# ----------------------------------------------------------------------------- delay sampler
def test_shifted_exponential_mean_and_minimum():
    n = 200_000
    shift, mean = 2.0, 3.0
    x = shifted_exponential(shift, mean, size=n, seed=1)
    se = mean / math.sqrt(n)  # std of Exp(mean) is mean
    assert abs(x.mean() - (shift + mean)) < 5 * se
    assert x.min() >= shift
    assert x.min() - shift < 1e-3  # E[min] of n Exp(3) draws = 3/n
    # the paper's parametrisation: X = beta + Exp(mean 2 beta) -> E[X] = 3 beta
    beta = 0.074
    y = shifted_exponential(beta, 2 * beta, size=n, seed=2)
    assert abs(y.mean() - 3 * beta) < 5 * (2 * beta) / math.sqrt(n)


def test_shifted_exponential_rejects_negative():
    with pytest.raises(FlkitError, match="shift"):
        shifted_exponential(-1.0, 1.0)
    with pytest.raises(FlkitError, match="mean"):
        shifted_exponential(1.0, -0.5)


def test_speed_groups_exact_proportions_and_fixed_seed():
    g = assign_speed_groups(1000, seed=64)
    assert np.bincount(g).tolist() == [250, 500, 250]
    assert np.bincount(assign_speed_groups(10)).tolist() == [2, 5, 3]  # floor(2.5)=2, floor(7.5)=7
    # the assignment depends on the group seed only, not on the run seed
    a = ShiftedExponentialDelays(1000, [0.148], seed=1, group_seed=64)
    b = ShiftedExponentialDelays(1000, [0.148], seed=2, group_seed=64)
    c = ShiftedExponentialDelays(1000, [0.148], seed=1, group_seed=65)
    assert np.array_equal(a.groups, b.groups)
    assert not np.array_equal(a.groups, c.groups)
    # ... while the delay draws follow the run seed
    assert a.sample(0, 0) != b.sample(0, 0)
    with pytest.raises(FlkitError, match="sum to"):
        assign_speed_groups(10, (0.5, 0.6))


@pytest.mark.parametrize("group,factor", [(0, 1.3), (1, 1.0), (2, 0.7)])
def test_fedast_delay_model_group_factors(group, factor):
    ratios = [0.148, 0.555]
    d = ShiftedExponentialDelays(1000, ratios, seed=3)
    client = int(np.flatnonzero(d.groups == group)[0])
    n = 40_000
    for task, ratio in enumerate(ratios):
        shift = 27 * factor * ratio / 2  # beta = ratio / 2, times speed factor and 27 steps
        scale = 27 * factor * ratio  # exponential mean = 2 beta
        x = np.array([d.sample(task, client) for _ in range(n)])
        assert d.mean(task, client) == pytest.approx(shift + scale)
        assert abs(x.mean() - (shift + scale)) < 5 * scale / math.sqrt(n)
        assert x.min() >= shift - 1e-12
    # the paper: mean duration of a normal client = 81 beta (MNIST 5.99, Shakespeare 22.48)
    normal = int(np.flatnonzero(d.groups == 1)[0])
    assert d.mean(0, normal) == pytest.approx(81 * 0.074)
    assert d.mean(1, normal) == pytest.approx(22.4775)


def test_fixed_delays_table_and_validation():
    d = FixedDelays({(0, 1): [1.0, 2.0], (1, 1): 5.0}, default=7.0)
    assert [d.sample(0, 1) for _ in range(3)] == [1.0, 2.0, 2.0]
    assert d.sample(1, 1) == 5.0 and d.sample(0, 0) == 7.0
    with pytest.raises(FlkitError):
        FixedDelays({(0, 0): -1.0})
    with pytest.raises(FlkitError):
        FixedDelays(-2.0)
    with pytest.raises(FlkitError):
        FixedDelays(lambda t, c: -1.0).sample(0, 0)


# ----------------------------------------------------------------------------- event queue
def test_event_queue_stable_ties():
    q = EventQueue()
    for t, item in [(2.0, "a"), (1.0, "b"), (2.0, "c"), (1.0, "d"), (0.5, "e")]:
        q.push(t, item)
    assert q.peek_time() == 0.5
    assert [q.pop()[1] for _ in range(len(q))] == ["e", "b", "d", "a", "c"]


# ----------------------------------------------------------------------------- FCFS + staleness
def test_fcfs_hand_trace():
    # delays: (task, client) -> duration(s), consumed in order
    delays = FixedDelays({(0, 0): [4.0, 2.0], (1, 0): 5.0, (0, 1): 3.0, (0, 2): 3.0})
    sim = Simulator(3, delays, num_tasks=2)
    r0 = sim.dispatch(0, 0)  # t=0: client 0 idle -> start 0, finish 4, version 0
    r1 = sim.dispatch(1, 0)  # t=0: queued behind r0 -> start 4, finish 9
    r2 = sim.dispatch(0, 1)  # t=0: start 0, finish 3
    r3 = sim.dispatch(0, 2)  # t=0: start 0, finish 3 (tie with r2; r2 was inserted first)
    assert (r0.start, r0.finish, r1.start, r1.finish, r2.finish, r3.finish) == (0, 4, 4, 9, 3, 3)
    assert sim.outstanding == [2, 1, 1] and sim.num_busy == 3

    a = sim.pop()  # t=3: r2 (tie broken by insertion order), staleness 0 - 0 = 0
    assert a is r2 and sim.now == 3 and a.staleness == 0 and a.status is ARRIVED
    assert sim.advance_version(0) == 1  # task 0 server update -> version 1
    b = sim.pop()  # t=3: r3, dispatched at version 0, task 0 now at 1 -> staleness 1
    assert b is r3 and b.staleness == 1
    r4 = sim.dispatch(0, 0)  # t=3, version 1, client 0 busy until 9 -> start 9, finish 9+2 = 11
    assert (r4.version, r4.dispatch_time, r4.start, r4.finish) == (1, 3, 9, 11)
    c = sim.pop()  # t=4: r0 (version 0), task 0 at version 1 -> staleness 1
    assert c is r0 and sim.now == 4 and c.staleness == 1
    sim.advance_version(0)  # task 0 -> version 2
    d = sim.pop()  # t=9: r1 of task 1 (version 0), task 1 still at 0 -> staleness 0
    assert d is r1 and sim.now == 9 and d.staleness == 0
    e = sim.pop()  # t=11: r4 (version 1), task 0 at version 2 -> staleness 1
    assert e is r4 and sim.now == 11 and e.staleness == 1
    assert sim.pop() is None and sim.num_busy == 0 and sim.outstanding == [0, 0, 0]
    arrivals = [(row[0], row[1], row[2], row[3], row[4]) for row in sim.log if row[5] == "arrive"]
    assert arrivals == [
        (3, 0, 1, 0, 0),
        (3, 0, 2, 0, 1),
        (4, 0, 0, 0, 1),
        (9, 1, 0, 0, 0),
        (11, 0, 0, 1, 1),
    ]


def test_availability_drop_rule():
    sim = Simulator(4, FixedDelays(1.0), num_tasks=1, max_busy=2)
    r0 = sim.dispatch(0, 0, check_availability=True)
    sim.dispatch(0, 1, check_availability=True)
    assert sim.num_busy == 2
    assert sim.dispatch(0, 2, check_availability=True) is None  # idle client, cap reached: dropped
    assert sim.counts["dropped"] == 1 and sim.log[-1][5] == "drop" and sim.outstanding[2] == 0
    r = sim.dispatch(0, 0, check_availability=True)  # busy client may queue more
    assert r is not None and r.start == 1.0 and sim.outstanding[0] == 2
    assert (
        sim.dispatch(0, 3, check_availability=False) is not None
    )  # initial requests ignore the cap
    assert sim.num_busy == 3
    assert sim.pop() is r0  # client 0 still holds one
    sim.pop()  # client 1 free again
    assert sim.num_busy == 2 and not sim.is_available(2)
    sim.pop()  # client 3 free
    assert sim.is_available(2) and sim.dispatch(0, 2, check_availability=True) is not None


def test_scripted_client_draws_and_random_draws_deterministic():
    sim = Simulator(5, FixedDelays(1.0), client_draws=[3, 1])
    assert [sim.draw_client(), sim.draw_client()] == [3, 1]
    with pytest.raises(FlkitError, match="exhausted"):
        sim.draw_client()
    a = Simulator(50, FixedDelays(1.0), seed=7)
    b = Simulator(50, FixedDelays(1.0), seed=7)
    xs = [a.draw_client() for _ in range(1000)]
    assert xs == [b.draw_client() for _ in range(1000)]
    counts = np.bincount(xs, minlength=50)
    assert counts.min() > 0 and max(xs) < 50


def test_cancel_keeps_client_blocked():
    sim = Simulator(2, FixedDelays({(0, 0): 10.0, (1, 0): 1.0, (1, 1): 1.0}), num_tasks=2)
    r0 = sim.dispatch(0, 0)
    sim.dispatch(1, 1)
    cancelled = sim.cancel_task(0)
    assert cancelled == [r0] and r0.status is CANCELLED
    assert sim.outstanding[0] == 0 and sim.num_busy == 1 and len(sim) == 1
    r = sim.dispatch(1, 0)  # cancelled job still blocks client 0 until t=10
    assert (r.start, r.finish) == (10.0, 11.0)
    assert [sim.pop().finish, sim.pop().finish] == [1.0, 11.0] and sim.pop() is None


# ----------------------------------------------------------------------------- synchronous rounds
def test_sync_round_time_is_max_over_tasks_of_kth_finish():
    table = {
        (0, 0): 4.0,
        (0, 1): 1.0,
        (0, 2): 2.0,
        (1, 3): 3.0,
        (1, 4): 6.0,
        (1, 5): 5.0,
        (0, 4): 1.0,
    }
    sim = Simulator(6, FixedDelays(table), num_tasks=2)
    res = sim.sync_round([(0, [0, 1, 2], 2), (1, [3, 4, 5], 2)])
    # task 0 finishes 4, 1, 2 -> 2nd earliest 2; task 1 finishes 3, 6, 5 -> 2nd earliest 5
    assert res.per_group_end == [2.0, 5.0]
    assert res.end_time == 5.0 and sim.now == 5.0  # not 6 (all) and not 3 (first finishers)
    assert [r.client for r in res.kept[0]] == [1, 2] and [r.client for r in res.kept[1]] == [3, 5]
    assert [r.client for r in res.discarded[0]] == [0] and [r.client for r in res.discarded[1]] == [
        4
    ]
    assert all(r.status is DISCARDED for d in res.discarded for r in d)
    assert all(r.status is ARRIVED and r.staleness == 0 for k in res.kept for r in k)
    assert len(sim) == 0 and sim.num_busy == 0  # rounds do not use the event heap
    # the discarded job of client 4 (finish 6) still blocks it in the next round
    res2 = sim.sync_round([(0, [4], 1)])
    assert (res2.kept[0][0].start, res2.end_time) == (6.0, 7.0)
