"""STC-PA claim verdicts (flkit.papers.stc_projection.claims) on hand-built summary tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from flkit.papers.stc_projection import claims as stc_claims
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
    assert [c["holds"] for c in out.values()] == [True] * 5
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


def test_bad_part():
    with pytest.raises(FlkitError, match="mnist"):
        stc_claims.verdicts(GOOD, "svhn")


def test_record_qualitative_and_smoke(tmp_path):
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path / "cpu")
    df = stc_claims.record(r, GOOD, "cifar10", qualitative="a 30-round run")
    assert df.verdict.tolist() == ["holds"] + ["inconclusive"] * 4  # traffic stays judged
    reason = r.claims[df.claim[1]]["reason"]
    assert reason == "too short at this preset (a 30-round run); at face value it holds"
    assert stc_claims.record(r, GOOD, "mnist").verdict.tolist() == ["holds"] * 5
    s = Report("01_stc_projection", "smoke", 0, out_dir=tmp_path / "smoke")
    df = stc_claims.record(s, GOOD, "mnist")
    assert df.verdict.tolist() == ["holds"] + ["inconclusive"] * 4  # the report's smoke rule


def test_record_puts_the_regime_beside_every_training_claim(tmp_path):
    from flkit.papers.stc_projection import regime

    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path)
    outside = regime.readings({"fedavg_share": 0.365})  # FedAvg at the target after 73 of 200
    df = stc_claims.record(r, GOOD, "mnist", regime=outside)
    assert df.verdict.tolist() == ["holds"] + ["outside regime"] * 4  # never "does not hold"
    assert df.regime[0] == "" and "ours 0.365, paper 0.985" in df.regime[1]
    rec = r.claims[df.claim[1]]
    assert rec["regime"][0]["paper"] == 0.985 and rec["regime"][0]["inside"] is False
    assert r.claims[df.claim[0]]["regime"] == []  # the traffic claim does not depend on training
    inside = stc_claims.record(r, GOOD, "mnist", regime=regime.readings({"fedavg_share": 0.985}))
    assert inside.verdict.tolist() == ["holds"] * 5


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


def _in_fedavg_regime(stc_rounds):
    """One seed, 200 rounds, FedAvg at 180 (share 0.9): every claim holds at face value as long as
    STC reaches the target after STC-PA (150)."""
    return _tab(
        [
            ("fedavg", 0, 180, 300.0, 1.0, 1.0, 1.0),
            ("stc", 0, stc_rounds, 280.0, 2.0, 47.0, 46.0),
            ("stc_pa", 0, 150, 200.0, 1.5, 47.5, 45.5),
        ],
        target=0.95,
    ).assign(rounds=200)


def test_record_reads_each_claims_own_indicators(tmp_path):
    from flkit.papers.stc_projection import regime

    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path / "behind")
    behind = _in_fedavg_regime(190)  # STC / FedAvg 190 / 180 = 1.06: STC behind, not the paper's
    df = stc_claims.record(r, behind, "mnist", regime=regime.claim_readings(behind))
    assert df.verdict.tolist() == [
        "holds",  # traffic: no regime
        "outside regime",  # rounds
        "outside regime",  # variance
        "holds",  # STC oscillates more than FedAvg: FedAvg's share only
        "outside regime",  # STC-PA oscillates less than STC
    ]
    assert "STC / FedAvg" in df.regime[1] and "STC / FedAvg" not in df.regime[3]
    assert r.claims[df.claim[1]]["regime"][1]["ours"] == pytest.approx(190 / 180)
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path / "ahead")
    ahead = _in_fedavg_regime(160)  # 160 / 180 = 0.89: inside 0.70-0.90
    df = stc_claims.record(r, ahead, "mnist", regime=regime.claim_readings(ahead))
    assert df.verdict.tolist() == ["holds"] * 5
    never = _in_fedavg_regime(None)  # STC never reaches it: outside, not "does not hold"
    df = stc_claims.record(r, never, "mnist", regime=regime.claim_readings(never))
    assert df.verdict.tolist()[1:] == [
        "outside regime",
        "outside regime",
        "holds",
        "outside regime",
    ]


def test_record_refuses_a_mapping_without_every_training_claim(tmp_path):
    from flkit.papers.stc_projection import regime

    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path)
    tab = _in_fedavg_regime(160)
    partial = {"rounds": regime.readings(tab, ["fedavg_share"])}
    with pytest.raises(FlkitError, match="variance") as err:
        stc_claims.record(r, tab, "mnist", regime=partial)
    assert "claim_readings" in str(err.value)
    assert r.claims == {}  # refused before any claim was recorded
