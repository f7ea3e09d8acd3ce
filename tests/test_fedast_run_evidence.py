"""Sync-ST rounds and staleness of notebook 03's trained runs (flkit.papers.fedast.run_evidence)."""

import numpy as np
import pytest

from flkit import asyncfl
from flkit.papers.fedast import run_evidence
from flkit.utils import FlkitError


def _res(staleness=(), rounds=0, done=True):
    events = [(float(i), 0, i, 0, s, "arrive") for i, s in enumerate(staleness)]
    return asyncfl.SimResult(
        "x", ["a"], events, [], {"a": 5.0 if done else None}, 10.0, {"rounds": rounds}
    )


def test_of_runs_by_hand():
    fed = {0: _res(range(5)), 1: _res(range(5, 10))}  # staleness 0..9 over both seeds
    sync = {0: _res(rounds=7), 1: _res(rounds=100, done=False)}  # seed 1 never finished
    ind = run_evidence.of_runs(fed, sync)
    assert ind["staleness_mean"] == pytest.approx(4.5)
    assert ind["staleness_p90"] == pytest.approx(8.1)  # numpy's linear rule on 0..9
    assert ind["sync_rounds"] == 7.0  # the unfinished seed's 100 rounds are not a time to target
    assert run_evidence.of_runs(fed, {0: _res(rounds=3, done=False)})["sync_rounds"] is None


def test_note_and_ablation_table():
    paper = {"sync_rounds": 64.0, "staleness_mean": 31.0, "staleness_p90": 64.0}
    before = {"sync_rounds": 6.0, "staleness_mean": 9.0, "staleness_p90": 18.0}
    after = {"sync_rounds": None, "staleness_mean": 30.0, "staleness_p90": 60.0}
    note = run_evidence.note(before, paper)
    assert "Sync-ST rounds 6 (paper ≈ 64, inferred)" in note and "mean 9 / p90 18" in note
    t = run_evidence.ablation_rows(
        paper, before, after, [False, False], [True, True], "does not hold", "inconclusive"
    )
    assert list(t.columns) == [
        "indicator",
        "paper",
        "ours before",
        "ours after",
        "face value before",
        "face value after",
        "verdict before",
        "verdict after",
    ]
    assert np.isnan(t["ours after"].iloc[0]) and t["paper"].iloc[0] == 64.0
    # the paper reports no staleness of its trained runs: no paper value beside ours
    assert t["paper"].iloc[1:].isna().all()
    assert set(t["face value before"]) == {"does not hold"}
    assert set(t["face value after"]) == {"holds"}
    # the verdict columns are the claims' verdicts as given, not the face values
    assert set(t["verdict before"]) == {"does not hold"}
    assert set(t["verdict after"]) == {"inconclusive"}
    assert np.isclose(t["ours before"].iloc[1], 9.0)


def test_note_without_a_paper_value_gives_ours_alone():
    ours = {"sync_rounds": 7.0, "staleness_mean": 24.0, "staleness_p90": 48.0}
    assert run_evidence.note(ours) == (
        "regime: Sync-ST rounds 7; FedAST staleness in the run mean 24 / p90 48"
    )
    assert run_evidence.note(ours, {"staleness_mean": 30.0}) == run_evidence.note(ours)


def test_ablation_table_rejects_a_verdict_outside_the_vocabulary():
    ind = {"sync_rounds": 6.0, "staleness_mean": 9.0, "staleness_p90": 18.0}
    with pytest.raises(FlkitError, match=r"verdict_after='ok'.*'outside regime'"):
        run_evidence.ablation_rows({}, ind, ind, [True], [True], "holds", "ok")
