"""Notebook 02's regime indicators and rules (papers/feddip/regime.py) on hand-built inputs."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from flkit.papers.feddip import regime, study
from flkit.workbook import presets


def _run(acc, sparsity):
    h = pd.DataFrame({"test_accuracy": [0.1, acc], "model_sparsity": [0.0, sparsity]})
    for c in ("cum_bytes_up", "cum_bytes_down", "bytes_up", "bytes_down"):
        h[c] = [1.0, 2.0]
    return SimpleNamespace(history=h, final=lambda col, h=h: float(h[col].iloc[-1]))


def test_penalty_shrink_by_hand():
    # T = 4, Q = 2 (code variant): segments of 2 rounds, lambda = 0, 0, 5e-4, 5e-4;
    # eta_t = 0.1 * 0.5^t, 10 steps: 10 * 0.1 * 5e-4 * (0.25 + 0.125) = 1.875e-4
    assert regime.penalty_shrink(4, 2, 1e-2, 10, 0.1, 0.5) == pytest.approx(1.875e-4)


def test_paper_shrink_in_closed_form():
    """Official setting: 50 steps per round (5 epochs of ceil(1200 / 128) = 10), segments of 50
    rounds, lambda_i = 5e-4 + 5e-4 (i - 1) / 19 in segment i >= 1: a geometric sum per segment."""
    seg = sum(0.998**t for t in range(50))
    want = sum(
        (5e-4 + 5e-4 * (i - 1) / 19) * 0.1 * 0.998 ** (50 * i) * seg * 50 for i in range(1, 20)
    )
    assert regime.paper_shrink() == pytest.approx(want)
    assert regime.PAPER_SHRINK == pytest.approx(1.27)


def test_local_steps_and_shrink_of_presets():
    cpu, long, paper = (presets.load("02_feddip", n) for n in ("cpu", "long", "paper"))
    # 6000 images / 20 clients = 300 per client, batch 32: 10 steps per epoch
    assert regime.local_steps(cpu, "fmnist_lenet5") == 10
    assert regime.local_steps(long, "fmnist_lenet5") == 30
    assert regime.local_steps(paper, "fmnist_lenet5") == 50  # 60000 / 50 = 1200, batch 128
    assert regime.shrink_of(long, "fmnist_lenet5") == pytest.approx(
        3 * regime.shrink_of(cpu, "fmnist_lenet5")
    )


def test_shrink_rule_is_half_the_paper():
    r = regime.readings({"penalty_shrink": 0.64})[0]
    assert r.inside is True
    assert regime.readings({"penalty_shrink": 0.24})[0].inside is False


def test_shortfall_leaves_prunetrain_out_and_counts_one_weight():
    grid = {
        ("fedavg", 0.0, 0): _run(0.8, 0.0),
        ("prunetrain", 0.95, 0): _run(0.7, 0.935),  # first and last layers dense
        ("feddip", 0.95, 0): _run(0.7, 0.95),
        ("snip", 0.95, 0): _run(0.6, 0.95),
    }
    assert regime.shortfall(grid) == 0.0
    grid[("feddst", 0.95, 0)] = _run(0.1, 0.95 - 2 / 61_470)  # two LeNet-5 weights short
    assert regime.shortfall(grid) == pytest.approx(2 / 61_470)
    assert regime.readings({"sparsity_shortfall": 1 / 61_470})[0].inside is True
    assert regime.readings({"sparsity_shortfall": 2 / 61_470})[0].inside is False


def test_seed_noise_and_tie_by_hand():
    grid = {
        ("fedavg", 0.0, 0): _run(0.80, 0.0),
        ("fedavg", 0.0, 1): _run(0.82, 0.0),
        ("feddip", 0.9, 0): _run(0.70, 0.9),
    }
    # FedAvg: sd (ddof 1) of 0.80, 0.82 = 0.02 / sqrt(2); FedDIP has one seed: no spread
    assert regime.seed_noise(grid) == pytest.approx(100 * 0.02 / math.sqrt(2))
    # tie: max(floor 0.005, binomial sqrt(0.81 * 0.19 / 2000) = 0.00877, seed sd 0.01414)
    assert regime.tie_threshold(grid, 0.005, 2000) == pytest.approx(0.02 / math.sqrt(2))
    one = {k: v for k, v in grid.items() if k[2] == 0}
    assert regime.seed_noise(one) is None
    assert regime.tie_threshold(one, 0.005, 2000) == pytest.approx(math.sqrt(0.8 * 0.2 / 2000))
    assert regime.tie_threshold(one, 0.05, 2000) == 0.05
    assert regime.readings({"seed_noise": None})[0].inside is None  # one seed: inconclusive
    assert regime.readings({"seed_noise": 2.5})[0].inside is False


def test_dense_gap_uses_the_plateau_of_the_preset_subset():
    cpu = presets.load("02_feddip", "cpu")
    grid = {("fedavg", 0.0, 0): _run(0.77, 0.0)}
    ours = regime.measure(grid, "fmnist_lenet5", cpu)
    assert ours["dense_gap"] == pytest.approx(85.0 - 77.0)  # 6,000-image subset: plateau 85 %
    assert regime.measure(grid, "fmnist_lenet5")["dense_gap"] == pytest.approx(90.0 - 77.0)
    assert ours["penalty_shrink"] == pytest.approx(regime.shrink_of(cpu, "fmnist_lenet5"))
    assert regime.readings({"dense_gap": 8.0})[0].inside is False
    assert regime.readings({"dense_gap": 1.0})[0].inside is True


def test_fair_r_ablation_rule_on_the_presets():
    """cpu and long: R and every ablation R divide T - 1, so each run's last mask update is in
    the final round on the same ramp; every preset's R values land (R <= T - 1)."""
    for name in ("smoke", "cpu", "long", "paper"):
        p = presets.load("02_feddip", name)
        values = study.ablation_rs(p)
        assert values == [int(r) for r in p["ablation_R"]]
        if name in ("cpu", "long"):
            assert all((p["rounds"] - 1) % r == 0 for r in [p["R"], *values])
            assert p["rounds"] >= 60 and p["rounds"] // p["Q"] >= 6


def test_start_spread_rule_and_logit_spread_by_hand():
    import torch
    from torch import nn

    assert regime.readings({"feddst_start": 0.006})[0].inside is False
    assert regime.readings({"snip_start": 0.11})[0].inside is True
    assert regime.readings({"snip_start": None})[0].inside is None
    # a linear layer y = W x with W = diag(2, 0) on x = (0, 0), (1, 1): logits (0, 0), (2, 0);
    # per-logit std (ddof 1) over the two images: sqrt(2) and 0, mean sqrt(2) / 2
    net = nn.Linear(2, 2, bias=False)
    state = {"weight": torch.tensor([[2.0, 0.0], [0.0, 0.0]])}
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    assert study.logit_spread(net, state, x) == pytest.approx(math.sqrt(2) / 2)
