"""Notebook 02 (FedDIP) paper folder: data guard, claim verdicts on hand-built tables, exercise."""

import os

import pandas as pd
import pytest
import torch

from flkit.methods import ServerState
from flkit.papers.feddip import claims, exercise, study
from flkit.prune import erk_densities
from flkit.utils import FlkitError
from flkit.workbook import presets


class FakeRun:
    """What the claim functions read from a RunResult: a history and a final state."""

    def __init__(
        self, acc, rounds=4, mask_sparsity=None, target=None, down=1.0, up=1.0, official_up=None
    ):
        n = rounds
        self.history = pd.DataFrame(
            {
                "round": range(1, n + 1),
                "test_accuracy": [acc] * n,
                "client_acc_mean": [acc] * n,
                "cum_bytes_up": [up * (i + 1) for i in range(n)],
                "cum_bytes_down": [down * (i + 1) for i in range(n)],
                "bytes_up": [up] * n,
                "bytes_down": [down] * n,
                "model_sparsity": [0.0] * n,
            }
        )
        if mask_sparsity is not None:
            self.history["mask_sparsity"] = mask_sparsity
            self.history["sparsity_target"] = target
            self.history["reconfig"] = [1, 0, 1, 0]
            self.history["official_bits_up"] = official_up
            self.history["official_bits_down"] = [1.0] * n
        self.final_state = ServerState(
            {"fc.weight": torch.zeros(10, 10), "fc.bias": torch.zeros(10)}
        )

    def final(self, column="test_accuracy"):
        return float(self.history[column].iloc[-1])


def _grid(feddip_acc, feddp_acc, snip_acc=0.5, exact=True):
    t = [0.5, 0.6, 0.7, 0.7]
    ms = t if exact else [0.5, 0.6, 0.73, 0.73]
    g = {("fedavg", 0.0, 0): FakeRun(0.80, down=100, up=100)}
    for s, a, b in zip((0.8, 0.95), feddip_acc, feddp_acc):
        g[("feddip", s, 0)] = FakeRun(
            a, mask_sparsity=ms, target=t, down=10, up=100, official_up=[800.0] * 4
        )
        g[("feddp", s, 0)] = FakeRun(b)
        g[("snip", s, 0)] = FakeRun(snip_acc)
    return g


def test_claims_hold_and_fail_on_hand_built_tables():
    g = _grid((0.79, 0.78), (0.79, 0.70))
    assert claims.sparsity_exact(g)["holds"] is True
    assert claims.close_to_dense(g, max_gap=0.03)["holds"] is True
    assert claims.close_to_dense(g, max_gap=0.01)["holds"] is False
    assert claims.ordering(g)["holds"] is True
    assert claims.gap_grows(g)["holds"] is True
    bad = _grid((0.70, 0.60), (0.75, 0.70), exact=False)
    assert claims.sparsity_exact(bad)["holds"] is False
    assert claims.ordering(bad)["holds"] is False
    assert claims.gap_grows(bad)["holds"] is False
    # the gap grows from -0.6 to 0 points: more than the tie, but FedDIP never beats FedDP
    no_gain = _grid((0.690, 0.677), (0.696, 0.677))
    assert claims.gap_grows(no_gain)["holds"] is False


def test_traffic_and_noniid_claims():
    g = _grid((0.79, 0.78), (0.79, 0.70))
    # FedAvg (no official columns): official up = 100 bytes * 8 = 800 bits per round, as FedDIP's
    # 800 official bits (ratio 1.0); exact download 10 vs 100 bytes per round (ratio 0.1)
    c = claims.traffic(g, min_saving=0.5, dense_upload=0.9)
    assert c["holds"] is True and "s=0.8: 0.10" in c["evidence"]
    assert claims.traffic(g, min_saving=0.95)["holds"] is False
    ni = {
        ("fedavg", 0.0, 0): FakeRun(0.6),
        ("fedprox", 0.0, 0): FakeRun(0.62),
        ("feddip_prox", 0.9, 0): FakeRun(0.60),
    }
    assert claims.noniid_close(ni, max_gap=0.03)["holds"] is True
    assert claims.noniid_close(ni, max_gap=0.01)["holds"] is False


def test_presets_and_method_params():
    for name in ("smoke", "cpu", "paper"):
        preset = presets.load("02_feddip", name)
        for m in preset["methods"]:
            study.method_params(preset, m, max(preset["sparsities"]), preset["rounds"])
    preset = presets.load("02_feddip", "paper")
    assert preset["rounds"] == 1000 and preset["clients"] == 50 and preset["lr_decay"] == 0.998


@pytest.mark.skipif(
    not os.environ.get("FLKIT_MIRROR"), reason="needs the dataset mirror (FLKIT_MIRROR)"
)
def test_paper_preset_refuses_reduced_cifar():
    preset = presets.load("02_feddip", "paper")
    with pytest.raises(FlkitError, match="allow_reduced_data"):
        study.check_data(preset, "cifar10_alexnet")
    info = study.check_data(
        presets.load("02_feddip", "paper", allow_reduced_data=True), "cifar10_alexnet"
    )
    assert info["reduced"] and info["train_images"] < 50_000


def test_exercise_checker_verdicts(capsys):
    def stub(shapes, density, power=1.0):
        raise NotImplementedError

    r = exercise.check_erk(stub)
    assert not r and not r.attempted and "not attempted yet" in capsys.readouterr().out
    assert exercise.check_erk(erk_densities, verbose=False).passed
    r = exercise.check_erk(lambda s, d, p=1.0: {k: d for k in s}, verbose=False)
    assert not r and "uniform" in r.cases[0][2]
