"""Regime indicators of notebook 01 (flkit.papers.stc_projection.regime) on hand-made histories
whose rounds to each target and variances are known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from flkit.papers.stc_projection import regime, tables
from flkit.utils import FlkitError

ROUNDS = 10


def _history(first_90, first_95, var):
    """Accuracy 0.5 until round first_90 - 1, 0.9 from first_90, 0.95 from first_95 (None: never);
    across-client variance `var` (a fraction², so var * 1e4 in %²) in every round."""
    acc = []
    for r in range(1, ROUNDS + 1):
        a = 0.5
        if first_90 is not None and r >= first_90:
            a = 0.9
        if first_95 is not None and r >= first_95:
            a = 0.95
        acc.append(a)
    return pd.DataFrame(
        {
            "round": range(1, ROUNDS + 1),
            "client_acc_mean": acc,
            "client_acc_var": [var] * ROUNDS,
            "bytes_up": [1000.0] * ROUNDS,
            "bytes_down": [1000.0] * ROUNDS,
        }
    )


def _results(seeds=(0,), **override):
    cfg = SimpleNamespace(clients_per_round=10, dataset="mnist")
    spec = {  # method: (round to 90 %, round to 95 %, variance)
        "fedavg": (3, 9, 0.02),
        "stc": (4, None, 0.03),
        "stc_pa": (2, 5, 0.01),
        **override,
    }
    return {
        (m, s): SimpleNamespace(history=_history(*spec[m]), config=cfg) for s in seeds for m in spec
    }


def test_indicators_by_construction():
    ind = regime.indicators(tables.summary(_results(seeds=(0, 1)), 0.95)).set_index("indicator")
    assert ind.loc["FedAvg: rounds to 95%", "ours"] == 9
    assert ind.loc["FedAvg: rounds to 95%", "paper"] == 197  # Table 2
    assert ind.loc["STC-PA: rounds to 95%", "paper"] == 100
    assert ind.loc["STC: rounds to 95%", "ours"] is None  # never reached: not averaged away
    share = ind.loc["FedAvg: share of the 10 rounds spent reaching 95%"]
    assert share["ours"] == 0.9 and share["paper"] == 0.985  # 197 / 200
    var = ind.loc["FedAvg: across-client variance %², 2nd half"]
    assert var["ours"] == pytest.approx(200.0) and var["paper"] is None  # 0.02 x 1e4
    assert var["per seed"] == [pytest.approx(200.0)] * 2


def test_paper_values_only_at_the_papers_target():
    ind = regime.indicators(tables.summary(_results(), 0.9)).set_index("indicator")
    assert ind.loc["FedAvg: rounds to 90%", "ours"] == 3
    assert ind.loc["FedAvg: rounds to 90%", "paper"] is None  # the paper has no 90 % figure


def test_in_regime_rule():
    share = ["fedavg_share"]
    assert regime.in_regime(tables.summary(_results(), 0.95), keys=share)  # 9 / 10 >= 0.75
    assert not regime.in_regime(tables.summary(_results(), 0.9), keys=share)  # 3 / 10 < 0.75
    assert not regime.in_regime(tables.summary(_results(), 0.95), min_fraction=0.95, keys=share)
    # every indicator: STC never reaches 95 %, so its ratio to FedAvg is outside the band
    assert not regime.in_regime(tables.summary(_results(), 0.95))
    assert regime.in_regime(tables.summary(_results(stc=(4, 7, 0.03)), 0.95))  # 7 / 9 = 0.78
    with pytest.raises(FlkitError, match="min_fraction"):
        regime.in_regime(tables.summary(_results(), 0.95), min_fraction=2)


def test_target_ablation_table():
    tab = regime.target_ablation(_results(), [0.9, 0.95]).set_index("indicator")
    row = tab.loc["FedAvg: rounds to target"]
    assert (row["paper"], row["ours at 90%"], row["ours at 95%"]) == (197, 3, 9)
    # rounds claim: at 90 % STC-PA 2 < STC 4 and <= FedAvg 3; at 95 % 5 < never and <= 9
    assert row["verdict at 90%"] is True and row["verdict at 95%"] is True
    var = tab.loc["FedAvg: across-client variance %², 2nd half"]
    assert var["verdict at 95%"] is True  # STC-PA 100 %² is the lowest
    reg = tab.loc["in the paper's regime (regime.in_regime)"]
    # 90 %: FedAvg's share 0.3 and STC / FedAvg 4 / 3; 95 %: share 0.9 but STC never gets there
    assert reg["ours at 90%"] is False and reg["ours at 95%"] is False
    ratio = tab.loc["STC / FedAvg: rounds to target"]
    assert ratio["paper"] == regime.PAPER_STC_RATIO
    assert ratio["ours at 90%"] == pytest.approx(4 / 3, abs=5e-3) and ratio["ours at 95%"] is None
    with pytest.raises(FlkitError, match="two targets"):
        regime.target_ablation(_results(), [0.9])


def test_describe_names_every_indicator():
    line = regime.describe(tables.summary(_results(), 0.95))
    assert "FedAvg: rounds to 95%: 9 (paper 197)" in line
    assert "STC: rounds to 95%: not reached (paper 157)" in line
    assert "in the paper's regime" in line


# --------------------------------------------------------------------------- calibrating STC
def _setting(name, fed, stc, osc_fed, osc_stc, run=200):
    return {
        "setting": name,
        "run_rounds": run,
        "fedavg_rounds": fed,
        "stc_rounds": stc,
        "fedavg_oscillation": osc_fed,
        "stc_oscillation": osc_stc,
    }


def test_calibration_rule_picks_the_setting_closest_to_the_papers_ratio():
    table = [
        _setting("A: FedAvg too fast", 100, 80, 1.0, 2.0),  # ratio 0.80, but share 0.5 < 0.75
        _setting("B: STC calm", 190, 152, 1.5, 1.0),  # ratio 0.80, STC oscillates less
        _setting("C", 180, 171, 1.0, 1.4),  # ratio 0.95
        _setting("D", 196, 147, 1.2, 1.9),  # ratio 0.75: closest admissible to 0.797
        _setting("E: STC never", 199, None, 1.0, 3.0),  # no ratio
    ]
    out = regime.choose_setting(table)
    assert out["chosen"] == "D"
    assert out["meets_rule"] and out["in_band"]
    tab = out["table"]
    assert tab["ratio"].iloc[2] == pytest.approx(171 / 180)
    assert tab["fedavg_share"].iloc[0] == pytest.approx(0.5)
    assert list(tab["chosen"]) == [False, False, False, True, False]
    assert regime.PAPER_STC_RATIO == pytest.approx(157 / 197, abs=5e-4)


def test_calibration_rule_says_when_no_setting_meets_it():
    table = [
        _setting("slow STC", 190, None, 1.6, 1.2),
        _setting("m=20", 180, 198, 1.6, 1.2),  # ratio 1.1, STC calmer: best, rule not met
        _setting("fast FedAvg", 60, 50, 1.0, 2.0),  # out of the regime
    ]
    out = regime.choose_setting(table)
    assert out["chosen"] == "m=20"
    assert not out["meets_rule"] and not out["in_band"]
    none = regime.choose_setting([_setting("x", None, None, 1.0, 2.0)])
    assert none["chosen"] is None and not none["in_band"]


def test_calibration_rule_bad_table():
    with pytest.raises(FlkitError, match="stc_rounds"):
        regime.choose_setting([{"setting": "a", "run_rounds": 10, "fedavg_rounds": 9}])
    with pytest.raises(FlkitError, match="accepted"):
        regime.choose_setting([])


def test_calibration_text_and_the_recorded_search():
    good = regime.choose_setting([_setting("D", 196, 147, 1.2, 1.9)])
    text = regime.calibration_text(good)
    assert "`D`" in text and "0.75" in text and "inside the band" in text
    assert "meets the rule" in text
    bad = regime.choose_setting([_setting("x", None, None, 1.0, 2.0)])
    assert regime.calibration_text(bad).startswith("No searched setting")
    rec = regime.calibration()  # the stored search table goes through the same rule
    assert len(rec["table"]) == len(regime.CALIBRATION_SEARCH)
    for row in regime.CALIBRATION_SEARCH:
        assert set(regime.CALIBRATION_COLUMNS) <= set(row)


def test_readme_shows_every_row_of_the_recorded_search():
    from pathlib import Path

    readme = (Path(regime.__file__).parent / "README.md").read_text(encoding="utf-8")
    for row in regime.CALIBRATION_SEARCH:
        assert f"| {row['setting']} | {row['run_rounds']} |" in readme, row["setting"]


# --------------------------------------------------------------------------- STC against FedAvg
def _summary(rows, run=200, target=0.95):
    """A hand-built ``tables.summary`` table: rows (method, seed, rounds to the target)."""
    return pd.DataFrame(rows, columns=["method", "seed", "rounds_to_target"]).assign(
        rounds=run, target=target, variance=10.0
    )


def test_stc_ratio_is_the_largest_over_seeds():
    tab = _summary(
        [("fedavg", 0, 180), ("stc", 0, 140), ("fedavg", 1, 190), ("stc", 1, 160)]
    )  # 140 / 180 = 0.778, 160 / 190 = 0.842
    assert regime.stc_ratios(tab) == pytest.approx([140 / 180, 160 / 190])
    ours = regime.measure(tab)
    assert ours["stc_ratio"] == pytest.approx(160 / 190)
    r = {x.indicator.key: x for x in regime.readings(tab)}["stc_ratio"]
    assert r.inside is True and r.indicator.paper == pytest.approx(0.797)  # 157 / 197
    assert r.indicator.rule.text() == "0.7–0.9"
    assert regime.in_regime(tab)  # shares 0.9 and 0.95 too


def test_stc_ratio_outside_the_band_or_missing_is_outside():
    slow = _summary([("fedavg", 0, 180), ("stc", 0, 171)])  # 0.95: STC barely ahead
    fast = _summary([("fedavg", 0, 180), ("stc", 0, 117)])  # 0.65: far ahead
    never = _summary(
        [("fedavg", 0, 180), ("stc", 0, 140), ("fedavg", 1, 190), ("stc", 1, None)]
    )  # seed 1: STC never reaches the target, however good seed 0 is
    for tab, ratio in ((slow, 0.95), (fast, 0.65), (never, None)):
        ours = regime.measure(tab)["stc_ratio"]
        assert ours == (None if ratio is None else pytest.approx(ratio))
        r = {x.indicator.key: x for x in regime.readings(tab)}["stc_ratio"]
        assert r.inside is False  # never "unknown": STC not reaching is not the paper's STC
        assert not regime.in_regime(tab) and regime.in_regime(tab, keys=["fedavg_share"])
    ind = regime.indicators(never).set_index("indicator").loc["STC / FedAvg: rounds to 95%"]
    assert ind["ours"] is None and ind["per seed"] == [pytest.approx(0.778), None]


def test_claims_map_to_their_indicators():
    from flkit.papers.stc_projection import claims as stc_claims

    assert regime.CLAIMS == {
        "rounds": ("fedavg_share", "stc_ratio"),
        "variance": ("fedavg_share", "stc_ratio"),
        "stc_oscillates_more_than_fedavg": ("fedavg_share",),  # STC against FedAvg itself
        "stc_pa_oscillates_less_than_stc": ("fedavg_share", "stc_ratio"),
    }
    tab = _summary([("fedavg", 0, 180), ("stc", 0, 140), ("stc_pa", 0, 100)]).assign(
        variance=1.0, oscillation=1.0, factor_up=47.0, factor_down=47.0
    )
    training = {c["key"] for c in stc_claims.verdicts(tab, "mnist") if not c["exact"]}
    assert training == set(regime.CLAIMS)  # every training claim has its indicators
    per_claim = regime.claim_readings(tab)
    keys = {c: [r.indicator.key for r in rs] for c, rs in per_claim.items()}
    assert keys == {c: list(k) for c, k in regime.CLAIMS.items()}
