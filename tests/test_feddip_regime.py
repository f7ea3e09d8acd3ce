"""Notebook 02's regime (papers/feddip/regime.py) and each claim's verdict on hand-built runs."""

import math

import pandas as pd
import pytest
import torch

from flkit.methods import ServerState
from flkit.papers.feddip import claims, regime, study
from flkit.utils import FlkitError
from flkit.workbook import presets
from flkit.workbook.report import Report
from flkit.workbook.verdict import Indicator, at_most, decide

SPARSITIES = (0.8, 0.9, 0.95)
PRUNED = ("snip", "prunetrain", "prunefl", "feddst", "dpf", "feddp", "feddip")


class Run:
    """What the regime and the claims read of a RunResult: a history and a final state with 100
    prunable weights."""

    def __init__(self, acc, sparsity=0.0, mask=None):
        self.history = pd.DataFrame(
            {
                "round": [1, 2],
                "test_accuracy": [0.1, acc],
                "client_acc_mean": [0.1, acc],
                "model_sparsity": [0.0, sparsity],
                "mask_sparsity": [0.5, sparsity if mask is None else mask],
                "cum_bytes_up": [1.0, 2.0],
                "cum_bytes_down": [1.0, 2.0 * (1 - sparsity)],
                "bytes_up": [1.0, 1.0],
                "bytes_down": [1.0, 1.0],
            }
        )
        self.final_state = ServerState({"fc.weight": torch.zeros(10, 10)})

    def final(self, column="test_accuracy"):
        return float(self.history[column].iloc[-1])


def _grid(acc=None, seeds=(0, 1)):
    """Every method of the grid at every s_p, two seeds; ``acc`` {(method, s) or method: (a0,
    a1)} over the defaults: FedAvg 84 %, every pruned method 80 % with a 0.4-point spread."""
    acc = acc or {}
    out = {}
    for i, seed in enumerate(seeds):
        out[("fedavg", 0.0, seed)] = Run(acc.get("fedavg", (0.84, 0.84))[i])
        for m in PRUNED:
            for s in SPARSITIES:
                a = acc.get((m, s), acc.get(m, (0.80, 0.804)))[i]
                out[(m, s, seed)] = Run(a, 0.935 if m == "prunetrain" else s)
    return out


def _noniid(acc=None, seeds=(0, 1)):
    acc = {
        "fedavg": (0.60, 0.60),
        "fedprox": (0.61, 0.61),
        "feddip_prox": (0.59, 0.59),
        **(acc or {}),
    }
    out = {}
    for i, seed in enumerate(seeds):
        for m, a in acc.items():
            out[(m, 0.0 if m in study.DENSE else 0.9, seed)] = Run(
                a[i], 0.0 if m in study.DENSE else 0.9
            )
    return out


SPREADS = {"snip": 0.11, "feddst": 0.006}  # the recorded starts at s = 0.95


def _verdicts(grid, noniid, preset="long"):
    """{claim key: verdict} of every claim as the notebook records it."""
    p = presets.load("02_feddip", preset)
    report = Report("02_feddip", p, 0, device="cpu", autosave=False)
    out = {}
    for c in claims.all_claims(grid, noniid, p, spreads=SPREADS):
        out[c["regime"].claim] = (report.claim(**c), c)
    return out


# ------------------------------------------------------------------------ the rules themselves
def test_every_indicator_names_its_source_and_one_without_is_refused():
    for ind in regime.REGIME.all.values():
        assert ind.source_kind in ("paper", "computed", "ours"), ind.key
    with pytest.raises(FlkitError, match="has no source"):
        Indicator("seed_noise", "noise", "not reported", at_most(2.0))


def test_each_claim_compares_exactly_its_methods():
    rules = regime.REGIME.claims
    assert rules["beats_feddst"].methods == ("feddip", "feddst")
    assert rules["baselines"].methods == ("feddip", "prunefl", "prunetrain", "dpf", "snip")
    assert rules["ordering"].methods == ("feddip", "feddp", "snip")
    assert rules["close_to_dense"].methods == ("fedavg", "feddip")
    assert rules["noniid_close"].methods == ("fedavg", "fedprox", "feddip_prox")
    # dense FedAvg near its plateau is read where FedDIP is compared with dense FedAvg
    assert [k for k, r in rules.items() if "dense_gap" in r.indicators] == ["close_to_dense"]
    # the non-IID claim reads the non-IID grid's indicators only
    assert set(rules["noniid_close"].indicators) == {"noniid_learns", "noniid_seed_noise"}
    # the fixed-mask starts are diagnostics: shown, never gating
    assert {"snip_start", "feddst_start", "sparsity_shortfall"} == set(regime.REGIME.diagnostics)


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
    rule = regime.REGIME.indicators["penalty_shrink"]
    assert rule.read(0.64).inside is True and rule.read(0.24).inside is False  # half of 1.27


def test_learns_is_above_chance_beyond_the_spread_by_hand():
    g = _grid({("feddst", 0.95): (0.10, 0.10), ("feddst", 0.8): (0.60, 0.69)})
    # chance 10 % on 2,000 images: binomial sd sqrt(0.1 * 0.9 / 2000) = 0.671 points
    floor = 100 * math.sqrt(0.09 / 2000)
    top = regime.learns(g, 10.0, 2000, "top")
    assert top["feddst"] == pytest.approx(0.0 - floor)  # at chance: not learning
    # FedDIP at 0.95: 80.2 % (80, 80.4), its seed sd 0.283 points is below the floor
    assert top["feddip"] == pytest.approx(80.2 - 10 - floor)
    every = regime.learns(g, 10.0, 2000, "all")
    assert every["feddst"] == pytest.approx(0.0 - floor)  # the smallest over s_p
    # at 0.8 alone: 64.5 - 10 - sd(60, 69) = 54.5 - 6.36
    at_08 = {k: v for k, v in g.items() if k[1] in (0.0, 0.8)}
    assert regime.learns(at_08, 10.0, 2000)["feddst"] == pytest.approx(54.5 - 9 / math.sqrt(2))
    # two seeds agreeing on 10.2 % (a near-constant predictor) have no spread: the floor decides
    near = _grid({("feddst", 0.95): (0.102, 0.102)})
    assert regime.learns(near, 10.0, 2000, "top")["feddst"] == pytest.approx(0.2 - floor)
    one = _grid(seeds=(0,))
    assert regime.learns(one, 10.0, 2000, "top")["feddip"] is None  # one seed: no spread


def test_seed_noise_is_per_method_and_per_scope():
    g = _grid({("feddst", 0.8): (0.60, 0.69), "fedavg": (0.80, 0.82)})
    every, top = regime.seed_noise(g, "all"), regime.seed_noise(g, "top")
    assert every["feddst"] == pytest.approx(100 * 0.09 / math.sqrt(2))  # 6.4 points at s = 0.8
    assert top["feddst"] == pytest.approx(100 * 0.004 / math.sqrt(2))  # none of it at 0.95
    assert every["fedavg"] == top["fedavg"] == pytest.approx(100 * 0.02 / math.sqrt(2))
    assert regime.seed_noise(_grid(seeds=(0,)))["feddip"] is None
    with pytest.raises(FlkitError, match="scope='middle'.*accepted"):
        regime.seed_noise(g, "middle")


def test_tie_of_a_claim_reads_only_its_methods():
    """The old tie took the largest spread of every method and sparsity (FedDST's 6.4 points at
    s = 0.8) for every claim; a claim's tie now comes from the methods and runs it compares."""
    long = presets.load("02_feddip", "long")
    g = _grid({("feddst", 0.8): (0.60, 0.69)})
    # ordering: FedDIP, FedDP, SNIP at 0.95, sd 0.283 points; binomial of 80.2 % on 2,000 images
    binom = math.sqrt(0.802 * 0.198 / 2000)
    assert claims.tie_of(g, long, "ordering") == pytest.approx(binom)
    calm = _grid()
    for key in ("close_to_dense", "ordering", "gap_grows", "baselines", "beats_feddst"):
        assert claims.tie_of(g, long, key) == pytest.approx(claims.tie_of(calm, long, key)), key
    # FedDST's noise is read by no claim at the highest s_p; it would be by one at every s_p
    assert regime.tie_threshold(g, ("feddst",), 0.005, 2000, "all") == pytest.approx(
        0.09 / math.sqrt(2)
    )


def test_shortfall_is_per_method():
    g = _grid()
    g[("feddst", 0.95, 1)] = Run(0.1, 0.95 - 2 / 100)
    short = regime.shortfall(g)
    assert short["fedavg"] == 0.0 and short["feddip"] == pytest.approx(0.0, abs=1e-12)
    assert short["prunetrain"] == pytest.approx(0.95 - 0.935)  # first and last layers dense
    assert short["feddst"] == pytest.approx(0.02)


def test_measure_and_the_plateau_of_the_preset_subset():
    cpu = presets.load("02_feddip", "cpu")
    g = _grid({"fedavg": (0.77, 0.77)})
    ours = regime.measure(g, "fmnist_lenet5", cpu, SPREADS, _noniid())
    assert ours["dense_gap"] == pytest.approx(85.0 - 77.0)  # 6,000-image subset: plateau 85 %
    assert regime.measure(g, "fmnist_lenet5")["dense_gap"] == pytest.approx(90.0 - 77.0)
    assert ours["penalty_shrink"] == pytest.approx(regime.shrink_of(cpu, "fmnist_lenet5"))
    assert set(ours["noniid_learns"]) == {"fedavg", "fedprox", "feddip_prox"}
    assert regime.measure(g, "fmnist_lenet5", cpu)["noniid_learns"] is None
    with pytest.raises(FlkitError, match="workload 'mnist'.*accepted"):
        regime.measure(g, "mnist", cpu)


# ------------------------------------------------------------------------ each claim's verdict
def test_each_claim_verdict_on_hand_built_runs_at_long():
    """Every baseline learns and is calm; `long`'s shrink is 0.73 (>= 0.635) and FedAvg ends 1
    point below the 85 % plateau: every claim is judged at face value."""
    g = _grid(
        {
            "feddip": (0.82, 0.822),
            ("feddp", 0.8): (0.82, 0.822),  # FedDIP - FedDP: 0 at 0.8, 2 points at 0.95
            ("feddp", 0.9): (0.81, 0.812),
            ("feddp", 0.95): (0.80, 0.802),
            "snip": (0.70, 0.702),
        }
    )
    v = _verdicts(g, _noniid())
    assert {k: verdict for k, (verdict, _) in v.items()} == {
        "sparsity_exact": "holds",
        "close_to_dense": "holds",  # 84 - 82.1 = 1.9 <= 3 points
        "ordering": "holds",  # 82.1 >= 80.1 >= 70.1
        "gap_grows": "holds",  # 2 points > max(0, 0) + tie 0.86
        "baselines": "holds",
        "beats_feddst": "holds",
        "traffic": "holds",  # download (1 - s_p) of FedAvg's, upload counted alike
        "noniid_close": "holds",  # 61 - 59 = 2 <= 3 points
    }
    c = v["ordering"][1]
    # the tie: the largest binomial sd of the three, SNIP's at 70.1 % on 2,000 images
    assert c["seeds"] == [0, 1] and "tie 1.02 points" in c["test"]
    # gap_grows fails when FedDP keeps up at 0.95: the test it missed is named
    g.update({k: Run(0.821, k[1]) for k in list(g) if k[0] == "feddp" and k[1] == 0.95})
    verdict, c = _verdicts(g, _noniid())["gap_grows"]
    assert verdict == "does not hold" and c["test"].startswith("FedDIP - FedDP")


def test_feddst_at_chance_gates_only_the_feddst_claim():
    """FedDST at chance at s = 0.95 (both seeds 10 %): the FedDST comparison reads outside
    regime; the other claims, which do not compare FedDST, read the same as when it learns."""
    learning = _verdicts(_grid(), _noniid())
    chance = _verdicts(_grid({("feddst", 0.95): (0.10, 0.10)}), _noniid())
    assert chance["beats_feddst"][0] == "outside regime"
    assert "beyond the seed spread" in chance["beats_feddst"][1]["regime"][0].describe()
    for key in learning:
        if key != "beats_feddst":
            assert chance[key][0] == learning[key][0], key
    # its start spread of 0.006 is shown, never gating: a FedDST that learns is judged
    assert learning["beats_feddst"][0] == "holds"
    start = [r for r in learning["beats_feddst"][1]["regime"] if r.indicator.key == "feddst_start"]
    assert start[0].inside is False and start[0].diagnostic


def test_a_noisy_method_gates_only_the_claims_that_compare_it():
    """FedDST's seeds 9 points apart at s = 0.8 (the 6.4-point spread that used to gate every
    claim): no claim reads FedDST there, so no verdict changes; FedDP that noisy at 0.8 puts the
    claims reading FedDP at every s_p outside regime, not the ones at the highest s_p only."""
    base = _verdicts(_grid(), _noniid())
    dst = _verdicts(_grid({("feddst", 0.8): (0.60, 0.69)}), _noniid())
    assert {k: v[0] for k, v in dst.items()} == {k: v[0] for k, v in base.items()}
    dp = _verdicts(_grid({("feddp", 0.8): (0.60, 0.69)}), _noniid())
    assert dp["gap_grows"][0] == "outside regime"
    assert dp["ordering"][0] == base["ordering"][0]  # reads FedDP at 0.95 only


def test_dense_gap_gates_only_the_claim_comparing_dense_fedavg():
    far = _verdicts(_grid({"fedavg": (0.77, 0.77)}), _noniid())  # 8 points below 85 %
    assert far["close_to_dense"][0] == "outside regime"
    assert far["noniid_close"][0] == "holds"  # read on the non-IID grid
    assert far["baselines"][0] == "holds"


def test_noniid_claim_reads_the_noniid_grid():
    v = _verdicts(_grid(), _noniid({"fedprox": (0.10, 0.10)}))
    assert v["noniid_close"][0] == "outside regime"  # FedProx at chance on 2 classes a client
    noisy = _verdicts(_grid(), _noniid({"feddip_prox": (0.50, 0.60)}))
    assert noisy["noniid_close"][0] == "outside regime"  # 7.1 points of seed spread
    assert _verdicts(_grid(), _noniid())["noniid_close"][0] == "holds"


def test_cpu_shrink_puts_the_feddip_feddp_claims_outside():
    v = _verdicts(_grid(), _noniid(), preset="cpu")  # cpu: shrink 0.24 < 0.635
    assert v["ordering"][0] == "outside regime" and v["gap_grows"][0] == "outside regime"
    assert v["baselines"][0] == "holds"  # FedDIP against the other baselines: no penalty rule


def test_a_claim_naming_a_method_without_runs_is_an_error():
    g = {k: r for k, r in _grid().items() if k[0] != "prunefl"}
    ours = regime.measure(g, "fmnist_lenet5", presets.load("02_feddip", "long"), SPREADS)
    with pytest.raises(FlkitError, match=r"compares method\(s\) \['prunefl'\]"):
        regime.REGIME.readings(ours, "baselines")


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


def test_logit_spread_by_hand():
    from torch import nn

    # a linear layer y = W x with W = diag(2, 0) on x = (0, 0), (1, 1): logits (0, 0), (2, 0);
    # per-logit std (ddof 1) over the two images: sqrt(2) and 0, mean sqrt(2) / 2
    net = nn.Linear(2, 2, bias=False)
    state = {"weight": torch.tensor([[2.0, 0.0], [0.0, 0.0]])}
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    assert study.logit_spread(net, state, x) == pytest.approx(math.sqrt(2) / 2)
    start = regime.REGIME.diagnostics["feddst_start"]
    assert start.read(0.006).inside is False and start.diagnostic


def test_decide_ignores_the_diagnostics():
    ours = regime.measure(_grid(), "fmnist_lenet5", presets.load("02_feddip", "long"), SPREADS)
    r = regime.REGIME.readings(ours, "beats_feddst")
    assert decide(True, "long", r) == ("holds", "")
