"""The verdict vocabulary (flkit.workbook.verdict) and Report.claim on hand-built claim rows:
each of the four verdicts, the regime indicator shown beside the paper's value, smoke always
inconclusive, the verdicts combined over seeds, and clear errors for bad input."""

from __future__ import annotations

import pytest

from flkit.utils import FlkitError
from flkit.workbook import verdict
from flkit.workbook.report import Report
from flkit.workbook.results import claim_counts, load_results, summarize

SHARE = verdict.Indicator(
    "fedavg_share",
    "FedAvg: share of rounds to target",
    0.985,
    verdict.at_least(0.75, missing="outside"),
    source="ours: FedAvg must spend three quarters of the run reaching the target",
)
GAP = verdict.Indicator(
    "gap",
    "Unstale - Unweighted",
    "≥ 3.8 (Table 10)",
    verdict.at_least(4.0),
    unit="points",
    source="paper: Table 10, GI's gain of 3.8 points",
)


def _report(tmp_path, preset="cpu"):
    return Report("01_test", preset, 0, out_dir=tmp_path, device="cpu")


def test_the_four_verdicts_on_hand_built_claims(tmp_path):
    r = _report(tmp_path)
    assert r.claim("a", True, regime=[SHARE.read(0.9)]) == verdict.HOLDS
    assert r.claim("b", False, regime=[SHARE.read(0.9)]) == verdict.DOES_NOT_HOLD
    # the same failed comparison with FedAvg at the target after 30 % of the run: outside regime
    assert r.claim("c", False, regime=[SHARE.read(0.3)]) == verdict.OUTSIDE_REGIME
    assert r.claim("d", None, evidence="no method reached 95 %", reason="no target reached") == (
        verdict.INCONCLUSIVE
    )
    c = {x["text"]: x for x in load_results(r.path)["claims"]}
    assert [c[k]["verdict"] for k in "abcd"] == list(verdict.VERDICTS)
    assert [c[k]["holds"] for k in "abcd"] == [True, False, None, None]  # the old field stays
    assert c["c"]["face"] is False  # what the run showed at face value is kept
    assert c["c"]["reason"] == (
        "FedAvg: share of rounds to target: ours 0.3, paper 0.985 (rule ≥ 0.75); "
        "at face value it does not hold"
    )
    reading = c["c"]["regime"][0]
    assert (reading["ours"], reading["paper"], reading["rule"], reading["inside"]) == (
        0.3,
        0.985,
        "≥ 0.75",
        False,
    )
    assert c["d"]["reason"] == "no target reached"
    rows = summarize([load_results(r.path)])
    assert claim_counts(rows) == {v: 1 for v in verdict.VERDICTS}
    assert [row["holds"] for row in rows if row["kind"] == "claim"] == list(verdict.VERDICTS)


def test_a_claim_that_holds_outside_the_regime_is_outside_regime(tmp_path):
    r = _report(tmp_path)
    assert r.claim("x", True, regime=[SHARE.read(0.9), GAP.read(0.4)]) == verdict.OUTSIDE_REGIME
    assert "Unstale - Unweighted: ours 0.4 points" in load_results(r.path)["claims"][0]["reason"]


def test_unmeasured_indicator_is_inconclusive_unless_its_rule_says_outside(tmp_path):
    r = _report(tmp_path)
    assert r.claim("x", True, regime=[GAP.read(None)]) == verdict.INCONCLUSIVE
    assert load_results(r.path)["claims"][0]["reason"].startswith("regime not measured")
    assert r.claim("y", True, regime=[SHARE.read(None)]) == verdict.OUTSIDE_REGIME  # never reached


def test_smoke_is_always_inconclusive(tmp_path):
    r = _report(tmp_path, "smoke")
    for holds, regime in ((True, []), (False, []), (False, [SHARE.read(0.3)]), (None, [])):
        assert (
            r.claim(f"{holds}{regime}", holds, evidence="e", regime=regime) == verdict.INCONCLUSIVE
        )
    assert r.claim("shapes", False, judge_at_smoke=True) == verdict.DOES_NOT_HOLD
    c = load_results(r.path)["claims"]
    assert [x["reason"] for x in c[:-1]] == [
        verdict.SMOKE_REASON + "; at face value it holds",
        verdict.SMOKE_REASON + "; at face value it does not hold",
        verdict.SMOKE_REASON + "; at face value it does not hold",  # smoke comes before the regime
        verdict.SMOKE_REASON,
    ]
    assert c[0]["evidence"] == "e" and c[0]["face"] is True


@pytest.mark.parametrize(
    "verdicts, combined",
    [
        ([verdict.HOLDS, verdict.HOLDS], verdict.HOLDS),
        ([verdict.HOLDS, verdict.DOES_NOT_HOLD], verdict.DOES_NOT_HOLD),
        ([verdict.DOES_NOT_HOLD, verdict.OUTSIDE_REGIME], verdict.OUTSIDE_REGIME),
        ([verdict.HOLDS, verdict.INCONCLUSIVE], verdict.INCONCLUSIVE),
        ([verdict.INCONCLUSIVE, verdict.INCONCLUSIVE], verdict.INCONCLUSIVE),
    ],
)
def test_combined_over_seeds(verdicts, combined):
    assert verdict.combine(verdicts) == combined


def test_rules_by_hand():
    assert verdict.at_least(0.75).check(0.75, None) and not verdict.at_least(0.75).check(0.74, None)
    assert verdict.at_most(3).check(3, None) and not verdict.at_most(3).check(3.1, None)
    assert verdict.above(0).check(1e-9, None) and not verdict.above(0).check(0.0, None)
    assert verdict.below(1).check(0.99, None) and not verdict.below(1).check(1.0, None)
    assert verdict.below(1).text() == "< 1"
    assert verdict.between(0.7, 0.9).check(0.8, None) and not verdict.between(0.7, 0.9).check(
        0.95, None
    )
    assert verdict.within(0.2).check(31.0, 37.2) and not verdict.within(0.2).check(29.0, 37.2)
    assert verdict.within(0.2).text(40.0) == "within 20 % of the paper's (32–48)"
    assert verdict.at_least(0.5).check(None, None) is None
    assert verdict.at_least(0.5, missing="outside").check(None, None) is False


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda r: r.claim("x", "mostly"), "'mostly'.*accepted: 'holds', 'does not hold'"),
        (lambda r: r.claim("x", verdict.OUTSIDE_REGIME), "derived, not given"),
        (lambda r: r.claim("x", 1), "True, False or None"),
        (lambda r: r.claim("x", True, regime=[{"indicator": "gap", "ours": 1}]), "readings"),
        (lambda r: r.claim("x", True, regime=SHARE.read(0.9)), "a list of readings"),
    ],
)
def test_bad_verdicts_and_regimes_are_refused(tmp_path, call, message):
    with pytest.raises(FlkitError, match=message):
        call(_report(tmp_path))


def test_an_indicator_needs_the_papers_value_and_a_rule():
    with pytest.raises(FlkitError, match="'gap' has no paper value"):
        verdict.Indicator("gap", "gap", None, verdict.at_least(4.0), source="ours: x")
    with pytest.raises(FlkitError, match="'gap' rule=None; accepted: a Rule"):
        verdict.Indicator("gap", "gap", 3.8, None, source="ours: x")
    with pytest.raises(FlkitError, match="numeric paper value"):
        verdict.Indicator("gap", "gap", "about 4", verdict.within(0.2), source="ours: x")
    with pytest.raises(FlkitError, match="rule op 'near'"):
        verdict.Rule("near", 1.0)
    with pytest.raises(FlkitError, match="verdict 'maybe'"):
        verdict.check_verdict("maybe")
