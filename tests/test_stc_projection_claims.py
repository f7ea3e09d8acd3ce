"""STC-PA claim verdicts (flkit.papers.stc_projection.claims) on hand-built summary tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from flkit.papers.stc_projection import claims as stc_claims
from flkit.papers.stc_projection.regime import REGIME
from flkit.utils import FlkitError
from flkit.workbook.report import Report

NAN = math.nan


def _tab(rows, target=0.9):
    """rows: (method, seed, rounds_to_target, variance, oscillation, factor_up, factor_down)."""
    cols = [
        "method",
        "seed",
        "rounds_to_target",
        "variance",
        "oscillation",
        "factor_up",
        "factor_down",
    ]
    return pd.DataFrame(rows, columns=cols).assign(target=target)


GOOD = _tab(
    [
        ("fedavg", 0, 50, 300.0, 1.0, 1.0, 1.0),
        ("stc", 0, 60, 280.0, 2.0, 47.0, 46.0),
        ("stc_pa", 0, 40, 200.0, 1.5, 47.5, 45.5),
        ("fedavg", 1, 55, 310.0, 1.1, 1.0, 1.0),
        ("stc", 1, None, 290.0, 2.5, 47.0, 46.0),  # STC never reaches the target in seed 1
        ("stc_pa", 1, 55, 250.0, 1.2, 47.5, 45.5),
    ]
)


def _by_text(claims):
    return {c["text"].split(": ", 1)[1]: c for c in claims}


def test_all_claims_hold_on_a_good_table():
    out = _by_text(stc_claims.verdicts(GOOD, "mnist", model="cnn3_mnist"))
    stc_first = out.pop("STC reaches 90% before FedAvg (paper: 157 vs 197 rounds to 95%)")
    assert stc_first["holds"] is False  # STC 60 after FedAvg 50, and never in seed 1
    assert [c["holds"] for c in out.values()] == [True] * 5
    assert all(c["test"] for c in out.values())  # every claim says its own test
    traffic = out["STC / STC-PA per-round traffic ≈ 45× below FedAvg (within 10%)"]
    assert traffic["exact"] and "45.5–47.5×" in traffic["evidence"]
    rounds = out["STC-PA reaches 90% in fewer rounds than STC and no later than FedAvg"]
    assert "seed 1: FedAvg 55, STC —, STC-PA 55" in rounds["evidence"]  # ties FedAvg: allowed
    assert out["STC oscillates more than FedAvg (non-IID, 2 shards)"]["paper"] == "Fig. 3"


def test_each_threshold_and_direction():
    # 45 x (1 +- 10 %) = 40.5 .. 49.5: 50 is outside, unless the tolerance grows
    far = GOOD.assign(factor_up=GOOD.factor_up.where(GOOD.method == "fedavg", 50.0))
    assert stc_claims.traffic(far, "mnist")["holds"] is False
    assert stc_claims.traffic(far, "mnist", tolerance=0.2)["holds"] is True
    assert stc_claims.traffic(GOOD[GOOD.method == "fedavg"], "mnist") is None  # nothing compressed
    # STC-PA one round later than FedAvg in seed 0 -> fails
    late = GOOD.copy()
    late.loc[(late.method == "stc_pa") & (late.seed == 0), "rounds_to_target"] = 51
    assert stc_claims.rounds(late, "mnist")["holds"] is False
    # nobody reached the target in any seed -> inconclusive, says why
    none = GOOD.assign(rounds_to_target=None)
    r = stc_claims.rounds(none, "cifar10")
    assert r["holds"] is None and "no method reached 90%" in r["evidence"]
    # STC-PA not the lowest variance in one seed
    var = GOOD.copy()
    var.loc[(var.method == "fedavg") & (var.seed == 1), "variance"] = 100.0
    v = stc_claims.variance(var, "mnist")
    assert v["holds"] is False and "(1/2 seeds)" in v["evidence"] and v["paper"] == "Fig. 4"
    # oscillation: STC-PA must be strictly below STC
    osc = GOOD.copy()
    osc.loc[(osc.method == "stc_pa") & (osc.seed == 0), "oscillation"] = 2.0
    assert stc_claims.oscillation(osc, "mnist", "stc_pa", "stc", more=False)["holds"] is False
    assert stc_claims.oscillation(GOOD, "cifar10", "stc", "fedavg", more=True)["paper"] == "Fig. 5"


def test_stc_before_fedavg_at_face_value():
    def tab(stc, fedavg):
        rows = [("fedavg", s, f, 1.0, 1.0, 1.0, 1.0) for s, f in enumerate(fedavg)]
        rows += [("stc", s, r, 1.0, 1.0, 47.0, 47.0) for s, r in enumerate(stc)]
        return _tab(rows, target=0.95)

    # the paper's Table 2: STC 157, FedAvg 197
    c = stc_claims.stc_before_fedavg(tab([157], [197]), "mnist")
    assert c["holds"] is True and c["key"] == "stc_before_fedavg"
    assert c["text"] == "MNIST: STC reaches 95% before FedAvg (paper: 157 vs 197 rounds to 95%)"
    assert c["evidence"] == "seed 0: STC 157, FedAvg 197 (— = not reached)"
    # the published `long` run: seed 0 STC never, FedAvg 193; seed 1 STC 179, FedAvg 153
    assert stc_claims.stc_before_fedavg(tab([None, 179], [193, 153]), "mnist")["holds"] is False
    assert stc_claims.stc_before_fedavg(tab([150], [None]), "mnist")["holds"] is True
    assert stc_claims.stc_before_fedavg(tab([150], [150]), "mnist")["holds"] is False  # a tie
    none = stc_claims.stc_before_fedavg(tab([None], [None]), "mnist")
    assert none["holds"] is None and "neither reached 95%" in none["evidence"]
    # a CIFAR-10 claim it is not: the paper gives only differences there (STC after FedAvg)
    keys = [c["key"] for c in stc_claims.verdicts(GOOD, "cifar10")]
    assert "stc_before_fedavg" not in keys and len(keys) == 5


def test_bad_part():
    with pytest.raises(FlkitError, match="mnist"):
        stc_claims.verdicts(GOOD, "svhn")


def test_record_qualitative_and_smoke(tmp_path):
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path / "cpu")
    df = stc_claims.record(r, GOOD, "cifar10", qualitative="a 30-round run")
    assert df.verdict.tolist() == ["holds"] + ["inconclusive"] * 4  # traffic stays judged
    reason = r.claims[df.claim[1]]["reason"]
    assert reason == "too short at this preset (a 30-round run); at face value it holds"
    df = stc_claims.record(r, GOOD, "mnist")
    assert df.verdict.tolist() == ["holds", "does not hold"] + ["holds"] * 4
    missed = r.claims[df.claim[1]]
    assert missed["reason"] == (
        "missed: STC's rounds to 90% below FedAvg's in every seed (not reached: never)"
    )
    assert missed["seeds"] == [0, 1]  # the training seeds of the table, not the report's seed
    s = Report("01_stc_projection", "smoke", 0, out_dir=tmp_path / "smoke")
    df = stc_claims.record(s, GOOD, "mnist")
    assert df.verdict.tolist() == ["holds"] + ["inconclusive"] * 5  # the report's smoke rule


def test_record_puts_the_regime_beside_every_training_claim(tmp_path):
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path)
    outside = {"fedavg_share": 0.365}  # FedAvg at the target after 73 of 200
    df = stc_claims.record(r, GOOD, "mnist", ours=outside, rules=REGIME)
    assert df.verdict.tolist() == ["holds"] + ["outside regime"] * 5  # never "does not hold"
    assert df.regime[0] == "" and "ours 0.365, paper 0.985" in df.regime[1]
    rec = r.claims[df.claim[1]]
    assert rec["regime"][0]["paper"] == 0.985 and rec["regime"][0]["inside"] is False
    assert rec["regime"][0]["source"].startswith("ours:")
    assert rec["key"] == "stc_before_fedavg" and rec["measured"] == outside  # for a re-judge
    assert r.claims[df.claim[0]]["regime"] == []  # the traffic claim does not depend on training
    inside = stc_claims.record(r, GOOD, "mnist", ours={"fedavg_share": 0.985}, rules=REGIME)
    assert inside.verdict.tolist() == ["holds", "does not hold"] + ["holds"] * 4


def test_closing_text_follows_the_recorded_verdicts():
    from flkit.papers.stc_projection import claims as cl

    rec = pd.DataFrame(
        {
            "claim": ["A holds here", "B fails here", "C out"],
            "verdict": ["holds", "does not hold", "outside regime"],
        }
    )
    text = cl.closing([rec, None], [0, 1])
    assert "[0, 1]" in text
    assert "**holds** (1): A holds here" in text
    assert "**does not hold** (1): B fails here" in text
    assert "**outside regime** (1): C out" in text and "inconclusive" not in text
    flipped = rec.assign(verdict=["inconclusive"] * 3)
    text = cl.closing([flipped], [0])
    assert "**inconclusive** (3)" in text and "**holds**" not in text


def test_link_summary_from_the_table():
    from flkit.papers.stc_projection import claims as cl

    tab = pd.DataFrame(
        {
            "variant": ["FedFV", "FedFV", "both", "both"],
            "seed": [0, 1, 0, 1],
            "rounds_to_target": [100, 120, None, 190],
            "oscillation": [1.0, 2.0, 3.0, 1.0],
        }
    )
    text = cl.link_summary(tab, 0.95)
    assert "FedFV: reaches 95% at round 110 (mean of 2/2 seeds); oscillation 1.50" in text
    assert "both: reaches 95% at round 190 (mean of 1/2 seeds); oscillation 2.00" in text


def _long_run():
    """The published `long` run's MNIST numbers (2 seeds, 200 rounds): FedAvg at 193 and 153,
    STC never and 179, STC-PA never and 169; variances and oscillations of its evidence."""
    return _tab(
        [
            ("fedavg", 0, 193, 31.0, 1.65, 1.0, 1.0),
            ("stc", 0, None, 47.0, 1.29, 47.4, 47.4),
            ("stc_pa", 0, None, 33.0, 0.88, 47.4, 47.4),
            ("fedavg", 1, 153, 27.0, 1.22, 1.0, 1.0),
            ("stc", 1, 179, 36.0, 0.94, 47.4, 47.4),
            ("stc_pa", 1, 169, 26.0, 0.65, 47.4, 47.4),
        ],
        target=0.95,
    ).assign(rounds=200)


def test_every_mnist_claim_at_long_under_the_rules(tmp_path):
    """FedAvg's share is 153 / 200 = 0.765 >= 0.75, so every training claim is judged at face
    value: STC trailing FedAvg is the finding of its own claim, not a reason to set the others
    aside."""
    from flkit.papers.stc_projection import regime

    tab = _long_run()
    assert regime.measure(tab)["fedavg_share"] == pytest.approx(0.765)
    r = Report("01_stc_projection", "long", 0, out_dir=tmp_path)
    df = stc_claims.record(r, tab, "mnist", ours=regime.measure(tab), rules=REGIME)
    assert dict(zip(df.claim.str.split(": ", n=1).str[1], df.verdict)) == {
        "STC / STC-PA per-round traffic ≈ 45× below FedAvg (within 10%)": "holds",  # 47.4
        "STC reaches 95% before FedAvg (paper: 157 vs 197 rounds to 95%)": "does not hold",
        "STC-PA reaches 95% in fewer rounds than STC and no later than FedAvg": "does not hold",
        "STC-PA has the lowest across-client accuracy variance": "does not hold",  # 33 > 31
        "STC oscillates more than FedAvg (non-IID, 2 shards)": "does not hold",
        "STC-PA oscillates less than STC (non-IID, 2 shards)": "holds",
    }


def test_record_refuses_measurements_without_the_indicator_or_of_another_kind(tmp_path):
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path)
    tab = _long_run()
    with pytest.raises(FlkitError, match="'fedavg_share', which was not measured"):
        stc_claims.record(r, tab, "mnist", ours={"stc_ratio": 0.8}, rules=REGIME)
    assert r.claims == {}  # refused before any claim was recorded
    with pytest.raises(FlkitError, match="regime.measure"):
        stc_claims.record(r, tab, "mnist", ours=[0.765], rules=REGIME)
