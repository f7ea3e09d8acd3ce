"""The rule that checks each supermask method's MNIST score lr at the `long` preset's rounds and
seeds (``long_lr.choose_long_lr``) and the runs that feed it (``long_lr_runs.long_lr_search``), on
hand-built tables: which lr the rule takes, in which order the runs are made, where they stop."""

import pandas as pd
import pytest

from flkit.papers.hidenseek import long_lr, long_lr_runs, searches, study
from flkit.utils import FlkitError


def _table(rows):
    cols = ("method", "lr", "seed", "above_chance", "flip_share")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_order_is_the_current_lr_then_the_grid_ascending():
    order = searches.lr_sequence(searches.SCORE_LR_GRID, 10.0)
    assert order == [10.0, 0.001, 0.01, 0.1, 1.0, 100.0]
    assert searches.lr_sequence((100, 0.1, 1), 1) == [1.0, 0.1, 100.0]
    assert long_lr.LONG_LR_ROUNDS == 90 and long_lr.LONG_LR_SEEDS == (0, 1)


def test_verdict_needs_flips_in_every_seed_and_the_mean_above_chance():
    # 25 and 16 points: mean 20.5 passes, though one seed is below 20
    assert long_lr.long_lr_verdict(_table([("H", 1, 0, 25.0, 1e-4), ("H", 1, 1, 16.0, 1e-5)]))
    # 25 and 14: mean 19.5 fails
    assert not long_lr.long_lr_verdict(_table([("H", 1, 0, 25.0, 1e-4), ("H", 1, 1, 14.0, 1e-5)]))
    # one seed with a round without a flip fails at once, even with the other seed missing
    assert long_lr.long_lr_verdict(_table([("H", 1, 0, 60.0, 0.0)])) is False
    assert long_lr.long_lr_verdict(_table([("H", 1, 0, 60.0, None)])) is False
    # flips fine but seed 1 not run: the rule cannot answer yet
    assert long_lr.long_lr_verdict(_table([("H", 1, 0, 60.0, 1e-3)])) is None


def test_current_lr_kept_when_it_passes_else_the_first_passing_of_the_grid():
    table = _table(
        [
            # HideNseek at its lr 10 stops flipping in seed 0 (seed 1 never run); 0.001 and
            # 0.01 flip but sit near chance; 0.1 passes; 1 would end higher but is never read
            ("HideNseek", 10.0, 0, 28.9, 0.0),
            ("HideNseek", 0.001, 0, 1.0, 1e-3),
            ("HideNseek", 0.001, 1, 2.0, 1e-3),
            ("HideNseek", 0.01, 0, 5.0, 0.0),
            ("HideNseek", 0.1, 0, 30.0, 1e-4),
            ("HideNseek", 0.1, 1, 24.0, 2e-4),
            ("HideNseek", 1.0, 0, 70.0, 1e-4),
            ("HideNseek", 1.0, 1, 72.0, 1e-4),
            # FedMask passes at its lr: nothing else is tried
            ("FedMask", 10.0, 0, 38.0, 1e-4),
            ("FedMask", 10.0, 1, 40.0, 1e-4),
        ]
    )
    out = long_lr.choose_long_lr(table, {"HideNseek": 10.0, "FedMask": 10.0})
    assert out["HideNseek"] == {"lr": 0.1, "passes": True, "tried": [10.0, 0.001, 0.01, 0.1]}
    assert out["FedMask"] == {"lr": 10.0, "passes": True, "tried": [10.0]}


def test_no_passing_lr_keeps_the_current_one_and_says_so():
    rows = [("BNNAvg", lr, 0, 5.0, 0.0) for lr in searches.SCORE_LR_GRID]
    out = long_lr.choose_long_lr(_table(rows), {"BNNAvg": 1.0})
    tried = [1.0, 0.001, 0.01, 0.1, 10.0, 100.0]
    assert out["BNNAvg"] == {"lr": 1.0, "passes": False, "tried": tried}


def test_missing_runs_and_foreign_lrs_are_refused():
    with pytest.raises(FlkitError, match=r"lr=0.001: seeds \[\] run"):
        long_lr.choose_long_lr(_table([("Signed", 1.0, 0, 5.0, 0.0)]), {"Signed": 1.0})
    with pytest.raises(FlkitError, match=r"lr=1.0: seeds \[0\] run"):
        long_lr.choose_long_lr(_table([("Signed", 1.0, 0, 50.0, 1e-3)]), {"Signed": 1.0})
    with pytest.raises(FlkitError, match=r"lr \[3.0\] outside the grid"):
        long_lr.choose_long_lr(_table([("Signed", 3.0, 0, 50.0, 1e-3)]), {"Signed": 1.0})
    with pytest.raises(FlkitError, match=r"first lr 3.0 is not in the grid"):
        long_lr.choose_long_lr(_table([("Signed", 1.0, 0, 50.0, 1e-3)]), {"Signed": 3.0})
    with pytest.raises(FlkitError, match="accepted: at least"):
        long_lr.choose_long_lr(
            _table([("Signed", 1.0, 0, 5.0, 0.0)]).drop(columns=["seed"]), {"Signed": 1.0}
        )


def _fake_runs(monkeypatch, outcomes):
    """study.rounds_search replaced by a table lookup: (label, lr, seed) -> (above, flips);
    returns the list of runs made, in order."""
    made = []

    def fake(preset, grid, methods, task, seed, lr, settings, **kw):
        label = study.LABELS[methods[0]]
        made.append((label, float(lr), seed))
        above, flips = outcomes[(label, float(lr), seed)]
        return pd.DataFrame(
            [
                {
                    "method": label,
                    "lr": float(lr),
                    "rounds": grid[0],
                    "above_chance": above,
                    "flip_share": flips,
                }
            ]
        )

    monkeypatch.setattr(study, "rounds_search", fake)
    return made


def test_search_runs_in_the_rules_order_and_stops_where_it_has_its_answer(monkeypatch):
    from flkit.workbook import presets

    long = presets.load("04_hidenseek", "long")
    outcomes = {
        ("HideNseek", 10.0, 0): (28.9, 0.0),  # no flip: seed 1 of lr 10 is not run
        ("HideNseek", 0.001, 0): (1.0, 1e-3),
        ("HideNseek", 0.001, 1): (2.0, 1e-3),
        ("HideNseek", 0.01, 0): (30.0, 1e-3),
        ("HideNseek", 0.01, 1): (20.0, 1e-3),  # mean 25: passes, 0.1 onwards never run
        ("Signed", 1.0, 0): (40.0, 1e-4),
        ("Signed", 1.0, 1): (41.0, 1e-4),
    }
    made = _fake_runs(monkeypatch, outcomes)
    table = long_lr_runs.long_lr_search(long, methods=("hidenseek", "signed"), device="cpu")
    assert made == [
        ("HideNseek", 10.0, 0),
        ("HideNseek", 0.001, 0),
        ("HideNseek", 0.001, 1),
        ("HideNseek", 0.01, 0),
        ("HideNseek", 0.01, 1),
        ("Signed", 1.0, 0),
        ("Signed", 1.0, 1),
    ]
    lrs = {"HideNseek": 10.0, "Signed": 1.0}  # PRE_LONG_LR's, which the search starts from
    out = long_lr.choose_long_lr(table, lrs)
    assert out["HideNseek"]["lr"] == 0.01 and out["Signed"] == {
        "lr": 1.0,
        "passes": True,
        "tried": [1.0],
    }


def test_search_refuses_bad_input_before_any_run(monkeypatch):
    from flkit.workbook import presets

    long = presets.load("04_hidenseek", "long")
    made = _fake_runs(monkeypatch, {})
    for seeds in ([], [0, 0], [-1], [True]):
        with pytest.raises(FlkitError, match="accepted: distinct integers"):
            long_lr_runs.long_lr_search(long, seeds=seeds, device="cpu")
    with pytest.raises(FlkitError, match="unknown method of the long-lr search 'fedavg_split'"):
        long_lr_runs.long_lr_search(long, methods=("hidenseek", "fedavg_split"), device="cpu")
    with pytest.raises(FlkitError, match=r"learning rates \[0.0\].*finite numbers above 0"):
        long_lr_runs.long_lr_search(long, grid=(0.0, 1.0), device="cpu")
    assert made == []
