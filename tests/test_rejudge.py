"""Judging rules v2 on hand-built measurements: every threshold has a source, diagnostics never
gate, a claim reads its own indicators on its own methods, a *does not hold* names its test, and
re-judging a recorded results file gives exactly the page the current rules give, without
training."""

from __future__ import annotations

import json

import pytest

from flkit.reproduce import rejudge, results_page
from flkit.utils import FlkitError
from flkit.workbook import verdict
from flkit.workbook.regime import ClaimRule, Regime
from flkit.workbook.report import Report

LEARNS = verdict.Indicator(
    "above_chance",
    "final accuracy above chance",
    "clearly above chance",
    verdict.above(5.0),
    unit="points",
    source="ours: five points is more than the seed spread of every method here",
)
GAP = verdict.Indicator(
    "gap",
    "Unstale minus Unweighted",
    3.8,
    verdict.at_least(3.8),
    unit="points",
    source="paper: Table 10, GI gains 3.8 points over Unweighted",
)
DISPARITY = verdict.Indicator(
    "disparity",
    "inversion: final / initial Disparity",
    "not reported",
    verdict.at_most(0.5),
    source="ours: the true data score above 4 under the server's unroll, so no inversion can",
    diagnostic=True,
)
REG = Regime(
    indicators=[LEARNS, GAP],
    diagnostics=[DISPARITY],
    claims={
        "a_beats_b": ClaimRule(("above_chance",), methods=("A", "B")),
        "gi": ClaimRule(("gap", "disparity")),
    },
)


def test_an_indicator_without_a_source_is_refused():
    for bad in (None, "", "Table 10", "paper:", "guess: 4 points"):
        with pytest.raises(FlkitError, match="'g'.*source.*'paper: \\.\\.\\.', 'computed"):
            verdict.Indicator("g", "gap", 3.8, verdict.at_least(4.0), source=bad)
    ok = verdict.Indicator("g", "gap", 3.8, verdict.at_least(4.0), source="computed: 2 x 175")
    assert ok.source_kind == "computed"


def test_a_regime_refuses_unknown_keys_and_misfiled_diagnostics():
    with pytest.raises(FlkitError, match="'nope'.*declared: above_chance, gap"):
        Regime(indicators=[LEARNS, GAP], claims={"c": ("nope",)})
    with pytest.raises(FlkitError, match="'disparity' is listed under indicators"):
        Regime(indicators=[DISPARITY], claims={})
    with pytest.raises(FlkitError, match="declared twice"):
        Regime(indicators=[GAP, GAP], claims={})


def test_a_method_the_claim_does_not_compare_changes_nothing():
    # C has not learned (2 points above chance), but the claim compares A and B only
    ours = {"above_chance": {"A": 40.0, "B": 12.0, "C": 2.0}}
    assert REG.inside(ours, "a_beats_b") is True
    r = REG.readings(ours, "a_beats_b")[0]
    assert r.ours == {"A": 40.0, "B": 12.0}
    # B itself at 2 points: outside, and the text names B, not A
    low = {"above_chance": {"A": 40.0, "B": 2.0}}
    v, why = verdict.decide(False, "cpu", REG.readings(low, "a_beats_b"))
    assert v == verdict.OUTSIDE_REGIME and "B 2 points" in why and "A 40" not in why
    with pytest.raises(FlkitError, match=r"compares method\(s\) \['B'\].*measured for \['A'\]"):
        REG.readings({"above_chance": {"A": 40.0}}, "a_beats_b")


def test_a_diagnostic_is_shown_and_never_gates():
    ours = {"gap": 6.0, "disparity": 0.9}  # the diagnostic far outside its rule
    rs = REG.readings(ours, "gi")
    assert [r.inside for r in rs] == [True, False]
    assert verdict.decide(True, "cpu", rs) == (verdict.HOLDS, "")
    assert REG.inside(ours, "gi") is True
    small = {"gap": 1.0, "disparity": 0.1}
    assert verdict.decide(True, "cpu", REG.readings(small, "gi"))[0] == verdict.OUTSIDE_REGIME


def test_does_not_hold_names_the_test_it_missed():
    v, why = verdict.decide(False, "cpu", (), test="gain >= 2 points in every seed")
    assert (v, why) == (verdict.DOES_NOT_HOLD, "missed: gain >= 2 points in every seed")
    assert verdict.decide(True, "cpu", (), test="gain >= 2")[1] == ""


def test_report_records_key_measurements_test_and_training_seeds(tmp_path):
    r = Report("05_staleness", "cpu", 0, out_dir=tmp_path, device="cpu")
    ours = {"gap": 6.0, "disparity": 0.9, "extra": 1.5}
    r.claim("GI beats Unweighted", False, regime=REG.readings(ours, "gi"), test="t", seeds=[2, 1])
    c = json.loads(r.path.read_text())["claims"][0]
    assert (c["key"], c["test"], c["seeds"]) == ("gi", "t", [1, 2])
    assert c["measured"] == {"gap": 6.0, "disparity": 0.9, "extra": 1.5}
    assert c["reason"] == "missed: t" and c["verdict"] == verdict.DOES_NOT_HOLD
    assert [x["source"] for x in c["regime"]] == [GAP.source, DISPARITY.source]
    assert json.loads(r.path.read_text())["rules"] == verdict.RULES_VERSION


# ------------------------------------------------------------------------------ re-judging
def _entry(measured, face=True, verdict_was="holds", rules=2):
    claim = {
        "text": "GI beats Unweighted",
        "paper": "Table 10",
        "verdict": verdict_was,
        "reason": "",
        "evidence": "gain 3 points",
        "per_seed": {"0": verdict_was},
        "face": {"0": face},
        "regime": [],
        "test": "gain >= 2 points",
        "seeds": [0, 1],
        "judge_at_smoke": False,
        "face_reason": "",
        "key": "gi",
        "measured": {"0": measured},
    }
    return {
        "notebook": "05_staleness",
        "title": "Unlimited staleness",
        "preset": "cpu",
        "seeds": [0],
        "date": "2026-11-29 00:00 UTC",
        "commit": "0123456789abcdef",
        "dirty": False,
        "status": "ok",
        "data": [],
        "rules": rules,
        "claims": [claim],
    }


@pytest.fixture
def fake_regime(monkeypatch):
    monkeypatch.setattr(rejudge, "regime_of", lambda notebook: REG)


def test_rejudge_applies_the_current_rules_to_recorded_measurements(fake_regime):
    # judged "holds" under an old rule; the recorded gap of 1 point is outside today's rule
    out = rejudge.rejudge_entry(_entry({"gap": 1.0, "disparity": 0.2}))
    c = out["claims"][0]
    assert c["verdict"] == verdict.OUTSIDE_REGIME and c["previous_verdict"] == verdict.HOLDS
    assert "Unstale minus Unweighted: ours 1 points" in c["reason"]
    assert [r["key"] for r in c["regime"]] == ["gap", "disparity"]
    assert c["regime"][0]["source"] == GAP.source and c["regime"][1]["diagnostic"] is True
    # in the regime the face value decides, and a failed face names the test
    fail = rejudge.rejudge_entry(_entry({"gap": 6.0, "disparity": 2.0}, face=False))
    assert fail["claims"][0]["reason"] == "missed: gain >= 2 points"
    same = rejudge.rejudge_entry(_entry({"gap": 6.0, "disparity": 2.0}))
    assert "previous_verdict" not in same["claims"][0]
    # re-judging again keeps the previous verdict beside the changed one (one publication)
    again = rejudge.rejudge_entry(out)
    assert again["claims"][0]["previous_verdict"] == verdict.HOLDS


def test_rejudge_refuses_what_it_cannot_judge(fake_regime):
    with pytest.raises(FlkitError, match="rules version 1.*re-run the notebook"):
        rejudge.rejudge_entry(_entry({"gap": 6.0}, rules=None))
    with pytest.raises(FlkitError, match="'disparity', which was not measured"):
        rejudge.rejudge_entry(_entry({"gap": 6.0}))
    e = _entry({"gap": 6.0, "disparity": 0.1})
    del e["claims"][0]["measured"]
    with pytest.raises(FlkitError, match="no measurements for run 0"):
        rejudge.rejudge_entry(e)
    e = _entry({"gap": 6.0, "disparity": 0.1})
    e["claims"][0]["key"] = "gone"
    with pytest.raises(FlkitError, match="'gone' has no rule"):
        rejudge.rejudge_entry(e)


def test_rejudge_file_rewrites_the_page_and_check_mode_catches_drift(fake_regime, tmp_path):
    (tmp_path / "docs").mkdir()
    store = tmp_path / "docs" / "results.json"
    store.write_text(json.dumps([_entry({"gap": 1.0, "disparity": 0.2})]))
    with pytest.raises(FlkitError, match="1 verdict"):
        rejudge.rejudge_file(tmp_path, check=True)
    page, changes = rejudge.rejudge_file(tmp_path)
    assert changes == ["05_staleness cpu: GI beats Unweighted: holds -> outside regime"]
    new = json.loads(store.read_text())
    assert page.read_text() == results_page.docs_page(new, tmp_path)
    assert rejudge.rejudge_file(tmp_path, check=True) == (page, [])  # now the page is current


def test_verdict_changes_lists_both_directions():
    a = _entry({}, verdict_was="holds")
    b = _entry({}, verdict_was="outside regime")
    b["claims"][0]["verdict"] = "outside regime"
    assert rejudge.verdict_changes([a], [b]) == [
        "05_staleness cpu: GI beats Unweighted: holds -> outside regime"
    ]
    assert rejudge.verdict_changes([b], [a]) == [
        "05_staleness cpu: GI beats Unweighted: outside regime -> holds"
    ]
    assert rejudge.verdict_changes([a], [a]) == []
