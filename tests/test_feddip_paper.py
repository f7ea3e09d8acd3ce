"""Notebook 02 (FedDIP) paper folder: data guard, claim verdicts on hand-built tables, exercise."""

import os

import pandas as pd
import pytest
import torch

from flkit.methods import ServerState
from flkit.papers.feddip import claims, exercise, study
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


def _grid(feddip_acc, feddp_acc, snip_acc=0.5, short=0):
    """FakeRun's model has 100 prunable weights: FedDIP's final mask ends `short` weights below
    round(s_p * 100)."""
    g = {("fedavg", 0.0, 0): FakeRun(0.80, down=100, up=100)}
    for s, a, b in zip((0.8, 0.95), feddip_acc, feddp_acc):
        end = s - short / 100
        g[("feddip", s, 0)] = FakeRun(
            a,
            mask_sparsity=[0.5, 0.6, end, end],
            target=[0.5, 0.6, s, s],
            down=10,
            up=100,
            official_up=[800.0] * 4,
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
    bad = _grid((0.70, 0.60), (0.75, 0.70), short=3)  # 92 of 100 pruned for s_p = 0.95
    assert claims.sparsity_exact(bad)["holds"] is False
    assert "3 weights" in claims.sparsity_exact(bad)["evidence"]
    assert claims.sparsity_exact(_grid((0.7, 0.6), (0.7, 0.6), short=1))["holds"] is True
    assert claims.ordering(bad)["holds"] is False
    assert claims.gap_grows(bad)["holds"] is False
    # the gap grows from -0.6 to 0 points: more than the tie, but FedDIP never beats FedDP
    no_gain = _grid((0.690, 0.677), (0.696, 0.677))
    assert claims.gap_grows(no_gain)["holds"] is False


def test_sparsity_claim_is_judged_against_s_p_not_the_schedule():
    """A mask equal to its schedule at every update but short of s_p at the end does not hold
    (the old check compared the mask with the schedule that built it)."""
    g = _grid((0.79, 0.78), (0.79, 0.70), short=3)
    for (m, _s, _), r in g.items():
        if m == "feddip":
            r.history["sparsity_target"] = r.history["mask_sparsity"]
    assert claims.sparsity_exact(g)["holds"] is False


def test_baselines_claim_with_its_tie():
    g = _grid((0.79, 0.78), (0.79, 0.70))
    for m, a in (("prunefl", 0.784), ("prunetrain", 0.70), ("feddst", 0.10), ("dpf", 0.75)):
        g[(m, 0.95, 0)] = FakeRun(a)
    c = claims.baselines(g, tie=0.005)  # FedDIP 78 % >= 78.4 - 0.5 and above the rest
    assert c["holds"] is True and "s_p=0.95" in c["evidence"] and "feddst" not in c["evidence"]
    assert claims.beats_feddst(g)["holds"] is True  # FedDST at 10 %
    g[("feddst", 0.95, 0)] = FakeRun(0.80)
    assert claims.beats_feddst(g)["holds"] is False
    g[("prunefl", 0.95, 0)] = FakeRun(0.786)  # 0.6 points above FedDIP: beyond the tie
    assert claims.baselines(g, tie=0.005)["holds"] is False
    assert claims.baselines(g, tie=0.01)["holds"] is True
    only = {k: v for k, v in g.items() if k[0] in ("fedavg", "feddip")}
    assert claims.baselines(only)["holds"] is None


def test_all_claims_derive_tie_and_regime_from_the_run():
    g = _grid((0.79, 0.78), (0.79, 0.70))
    g[("fedavg", 0.0, 1)] = FakeRun(0.82, down=100, up=100)
    for m in ("prunefl", "prunetrain", "dpf", "feddst"):
        for s in (0.8, 0.95):
            g[(m, s, 0)] = FakeRun(0.7)
    ni = {
        (m, s, 0): FakeRun(0.6)
        for m, s in (("fedavg", 0.0), ("fedprox", 0.0), ("feddip_prox", 0.9))
    }
    cpu = presets.load("02_feddip", "cpu")
    # close to dense: seed sd of FedAvg (0.80, 0.82) 0.0141 > binomial sqrt(0.81 * 0.19 / 2000)
    assert claims.tie_of(g, cpu, "close_to_dense") == pytest.approx(0.02 / 2**0.5)
    # FedAvg's two seeds do not enter a claim that does not compare FedAvg: SNIP's binomial sd
    assert claims.tie_of(g, cpu, "ordering") == pytest.approx((0.5 * 0.5 / 2000) ** 0.5)
    out = claims.all_claims(g, ni, cpu, spreads={"snip": 0.11, "feddst": 0.006})
    texts = [c["text"] for c in out]
    assert any("PruneFL" in t for t in texts) and len(out) == 8
    order = next(c for c in out if c["text"].startswith("At the highest sparsity FedDIP >="))
    keys = [r.indicator.key for r in order["regime"]]
    assert keys == [
        "penalty_shrink",
        "learns_top",
        "seed_noise_top",
        "sparsity_shortfall",
        "snip_start",
    ]
    inside = {r.indicator.key: r.inside for r in order["regime"]}
    assert inside["penalty_shrink"] is False  # cpu: 0.24 against half of the paper's 1.27
    assert inside["learns_top"] is None  # one seed of FedDIP, FedDP and SNIP: no spread
    assert all(c["test"] and c["seeds"] in ([0], [0, 1]) for c in out)
    # a claim naming a method the grid has no runs of is refused by name
    del g[("prunefl", 0.95, 0)], g[("prunefl", 0.8, 0)]
    with pytest.raises(FlkitError, match=r"'baselines' compares method\(s\) \['prunefl'\]"):
        claims.all_claims(g, ni, cpu, spreads={"snip": 0.11, "feddst": 0.006})


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
    for name in ("smoke", "cpu", "long", "paper"):
        preset = presets.load("02_feddip", name)
        for m in preset["methods"]:
            study.method_params(preset, m, max(preset["sparsities"]), preset["rounds"])
    preset = presets.load("02_feddip", "paper")
    assert preset["rounds"] == 1000 and preset["num_clients"] == 50 and preset["lr_decay"] == 0.998


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


def test_data_note_names_the_copy_under_the_data_root_not_the_machine_path():
    """The claims table a reader sees says which copy was read ('FashionMNIST/raw'), not where
    it lies on the machine that ran the notebook."""
    notes = {}

    class Recorder:
        def number(self, key, measured, note=""):
            notes[key] = (measured, note)

    info = {
        "dataset": "fmnist",
        "train_images": 60_000,
        "full_train_images": 60_000,
        "source": "/home/alice/flkit-data/FashionMNIST/raw",
        "reduced": False,
    }
    reduced = dict(
        info, dataset="cifar10", train_images=12_000, full_train_images=50_000, reduced=True
    )
    reduced["source"] = "/srv/x/cifar10.npz"
    study.record_data(Recorder(), [info, reduced])
    assert notes["fmnist: training images available"] == (
        60_000,
        "of 60,000 in the full set; source FashionMNIST/raw",
    )
    assert notes["cifar10: training images available"] == (
        12_000,
        "of 50,000 in the full set; source x/cifar10.npz; REDUCED COPY",
    )


def _erk_by_the_text(shapes, density, power=1.0):
    """ERK written from the exercise's text alone (not the library): scores (sum / prod)^power,
    eps solved over the non-dense layers, the largest-score layer made dense while eps r > 1."""
    import math

    n = {k: math.prod(s) for k, s in shapes.items()}
    score = {k: (sum(s) / math.prod(s)) ** power for k, s in shapes.items()}
    dense = set()
    while True:
        rest = [k for k in shapes if k not in dense]
        eps = (density * sum(n.values()) - sum(n[k] for k in dense)) / sum(
            score[k] * n[k] for k in rest
        )
        top = max(score[k] for k in rest)
        if eps * top <= 1.0 + 1e-12:
            return {k: 1.0 if k in dense else eps * score[k] for k in shapes}
        dense |= {k for k in rest if score[k] == top}


def test_exercise_checker_verdicts(capsys):
    def stub(shapes, density, power=1.0):
        raise NotImplementedError

    r = exercise.check_erk(stub)
    assert not r and not r.attempted and "not attempted yet" in capsys.readouterr().out
    assert exercise.check_erk(_erk_by_the_text, verbose=False).passed
    assert not exercise.check_erk(lambda s, d, p=1.0: _erk_by_the_text(s, d, 2 * p), verbose=False)
    r = exercise.check_erk(lambda s, d, p=1.0: {k: d for k in s}, verbose=False)
    assert not r and "uniform" in r.cases[0][2]


def test_every_preset_run_lands_on_s_p():
    """Every method of every preset (main grid, non-IID, ablations) is accepted and its schedule
    ends at s_p: the sparsity of its last round's update is s_p exactly."""
    from flkit import methods, models
    from flkit.engine import LocalSpec
    from flkit.methods import RunContext

    net = models.build("lenet5")
    ctx = RunContext(
        net,
        torch.zeros(4, 1, 28, 28),
        torch.zeros(4, dtype=torch.long),
        [torch.arange(4)],
        LocalSpec(lr=0.1, batch_size=2, epochs=1),
        0,
        10,
    )
    for name in ("smoke", "cpu", "long", "paper"):
        p = presets.load("02_feddip", name)
        rounds = int(p["rounds"])
        runs = [(m, s, {}) for m in p["methods"] for s in p["sparsities"]]
        runs += [(m, p["noniid_sparsity"], {}) for m in p["noniid_methods"]]
        runs += [("feddip", max(p["sparsities"]), {"R": r}) for r in study.ablation_rs(p)]
        for m, s, over in runs:
            if m in study.DENSE:
                continue
            method = methods.get(m)(ctx, **study.method_params(p, m, s, rounds, **over))
            if hasattr(method.hp, "s0"):
                assert method.target(rounds - 1) == pytest.approx(s, abs=1e-12), (name, m, over)
