"""Notebook 04's regime rules on hand-built inputs: FedMask's gap to HideNseek, coverage, the
per-method table, and the searches' rules (score learning rate, `long` rounds) that read the
indicators alone."""

import pandas as pd
import pytest

from flkit.papers.hidenseek import regime, searches
from flkit.utils import FlkitError


def _acc(hs, fm):
    return pd.DataFrame(
        {
            "task": ["har", "har", "femnist", "femnist"],
            "method": ["HideNseek", "FedMask", "HideNseek", "FedMask"],
            "mean": [hs[0], fm[0], hs[1], fm[1]],
        }
    )


def _runs(flips, coverage):
    rows = []
    for method in ("HideNseek", "FedMask"):
        for rnd, f in enumerate(flips, start=1):
            rows.append(
                {
                    "task": "har",
                    "method": method,
                    "seed": 0,
                    "round": rnd,
                    "flip_share": f,
                    "coverage": coverage[rnd - 1],
                }
            )
    return pd.DataFrame(rows)


def test_fedmask_gap_and_coverage_rules():
    runs = _runs([0.3, 0.1, 0.02, 0.04], [0.1, 0.5, 0.7, 0.8])
    # gaps: HAR 80 - 70 = 10, FEMNIST 60 - 10 = 50 (FedMask not the paper's working baseline)
    ours = regime.measure(runs, _acc((80.0, 60.0), (70.0, 10.0)))
    assert ours["fedmask_gap"] == pytest.approx(50.0)
    assert ours["coverage"] == pytest.approx(0.8)  # the last round's
    assert ours["flip_share"] == pytest.approx(0.02)  # the smaller of rounds 3 and 4
    inside = {r.indicator.key: r.inside for r in regime.readings(ours)}
    assert inside == {
        "flip_share": True,
        "above_chance": False,  # FedMask on FEMNIST: 10 - 100/62 < 20 points
        "fedmask_gap": False,
        "coverage": True,
    }
    ok = regime.measure(runs, _acc((80.0, 60.0), (70.0, 58.0)))
    assert ok["fedmask_gap"] == pytest.approx(10.0) and regime.in_regime(ok)
    low = regime.measure(runs.assign(coverage=0.5), _acc((80.0, 60.0), (70.0, 58.0)))
    assert not regime.in_regime(low)  # half the clients scored
    for name in ("beats_baselines", "more_clients_no_help"):
        assert set(regime.CLAIMS[name]) == set(regime.INDICATORS)


def test_per_method_table():
    tab = regime.per_method(
        _runs([0.3, 0.1, 0.02, 0.04], [0.1, 0.5, 0.7, 0.8]), _acc((80, 60), (70, 10))
    )
    row = tab[tab.method == "FedMask"].iloc[0]
    assert row.flip_share == pytest.approx(0.02) and row.coverage == pytest.approx(0.8)
    assert row.above_chance == pytest.approx(70 - 100 / 6)


def test_score_lr_is_the_smallest_that_keeps_learning():
    grid = pd.DataFrame(
        {
            "method": ["fedmask"] * 4 + ["bnnavg"] * 2,
            "lr": [0.001, 0.1, 10.0, 100.0, 0.01, 1.0],
            "flip_share": [0.0, 0.0, 0.001, 0.01, 0.0, 0.0],
            # lr 100 ends higher, but lr 10 already meets both rules: 10 is chosen
            "above_chance": [-5.0, 1.0, 30.0, 60.0, 50.0, 2.0],
        }
    )
    assert searches.choose_score_lr(grid) == {"bnnavg": None, "fedmask": 10.0}
    with pytest.raises(FlkitError, match="accepted: at least"):
        searches.choose_score_lr(grid.drop(columns=["flip_share"]))


def _tables(act_coverage):
    methods = ["FedAvg", "BNNAvg", "FedMask", "Signed", "HideNseek"]
    tasks = ["har", "femnist", "mnist_a0.1", "mnist_a1"]
    personal = ("FedMask", "Signed", "HideNseek")
    acc = pd.DataFrame(
        [
            {
                "task": t,
                "method": m,
                "mean": 50.0 + i,
                "std": 1.0,
                "count": 2,
                "coverage": 0.9 if m in personal else float("nan"),
            }
            for t in tasks
            for i, m in enumerate(methods)
        ]
    )
    runs = pd.DataFrame(
        [
            {"task": t, "method": m, "seed": 0, "round": r, "flip_share": 0.01, "coverage": 0.9}
            for t in tasks
            for m in methods
            for r in range(1, 5)
        ]
    )
    act = pd.DataFrame(
        [
            {"active": a, "method": m, "mean": 60.0, "std": 0.0, "count": 2, "coverage": c}
            for a, c in ((2, act_coverage), (8, 0.9))
            for m in ("HideNseek", "FedMask")
        ]
    )
    return runs, acc, act


def test_table4_claim_reads_the_coverage_of_its_own_runs():
    from flkit.papers.hidenseek import record
    from flkit.workbook import presets
    from flkit.workbook.report import Report

    preset = presets.load("04_hidenseek", "cpu")
    methods = ["FedAvg", "BNNAvg", "FedMask", "Signed", "HideNseek"]
    byt = pd.DataFrame(
        [
            {"task": "har", "method": m, "up_MiB": v, "down_MiB": v}
            for m, v in zip(methods, [4, 1, 0.5, 0.5, 0.3])
        ]
    )
    tim = pd.DataFrame(
        [
            {"task": "har", "method": m, "per_round_s": v, "total_s": 10 * v}
            for m, v in zip(methods, [1, 2, 4, 4, 3])
        ]
    )
    kr = pd.DataFrame(
        [
            {"task": t, "keep_ratio": k, "mean": 60.0, "std": 0.0, "count": 2, "coverage": 0.9}
            for t in ("mnist_a0.1", "mnist_a1")
            for k in (0.2, 0.8)
        ]
    )
    claim = "More active clients do not help HideNseek"
    for cover, outside in ((0.5, True), (0.9, False)):
        runs, acc, act = _tables(cover)
        report = Report("04_hidenseek", preset, 0, device="cpu")
        out = record.record_claims(report, preset, runs, acc, byt, tim, kr, act)
        verdict = out.set_index("claim").at[claim, "verdict"]
        assert (verdict == "outside regime") is outside


def test_plateau_rise_is_the_fitted_rise_over_the_last_rounds():
    rounds = list(range(2, 42, 2))
    # a straight line of 0.3 points per round: 5 rounds rise 1.5 points, whatever came before
    early = [10.0] * 10  # rounds 2-20 lie outside the 20-round window ending at 40
    late = [50 + 0.3 * r for r in rounds[10:]]
    assert regime.plateau_rise(rounds, early + late) == pytest.approx(1.5)
    # a zigzag around a flat line has slope 0 when it is symmetric
    flat = [80.0, 82.0, 80.0, 82.0, 81.0, 81.0, 82.0, 80.0, 82.0, 80.0]
    assert regime.plateau_rise(rounds[10:], flat) == pytest.approx(0.0, abs=1e-12)
    assert regime.plateau_rise([38, 40], [80.0, 81.0]) is None  # two points: no fit
    with pytest.raises(FlkitError, match="one per round"):
        regime.plateau_rise([2, 4, 6], [1.0, 2.0])


def _search(rows):
    cols = ("method", "rounds", "above_chance", "flip_share", "rise5")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_long_rounds_are_the_fewest_in_regime_not_the_best_scoring():
    good = [("HideNseek", 25.0, 1e-3), ("FedMask", 21.0, 1e-4), ("Signed", 20.0, 1e-5)]
    rows = [("FedAvg", 30, 60.0, None, 3.0), ("FedAvg", 60, 70.0, None, 0.9)]
    rows += [("FedAvg", 90, 75.0, None, 0.2)]
    for r in (30, 60, 90):
        # every method ends higher at 90, but 60 already meets the rule
        rows += [(m, r, a + r / 10, f, None) for m, a, f in good]
        rows += [("BNNAvg", r, 22.0, 1e-4, None)]
    out = searches.choose_long_rounds(_search(rows))
    assert out["rounds"] == 60 and out["meets_rule"]
    assert out["unmet"][30] == ["FedAvg rise5"]  # 3 points over 5 rounds: still climbing
    # Signed stops flipping from 60 on, BNNAvg is below 20 points everywhere: nothing qualifies
    bad = _search(rows).copy()
    bad.loc[(bad.method == "Signed") & (bad.rounds >= 60), "flip_share"] = 0.0
    bad.loc[bad.method == "BNNAvg", "above_chance"] = 15.0
    out = searches.choose_long_rounds(bad)
    assert out["rounds"] == 90 and not out["meets_rule"]
    assert out["unmet"][60] == ["Signed flip_share", "BNNAvg above_chance"]
    # a supermask method missing from the table cannot be in regime
    out = searches.choose_long_rounds(_search(rows)[lambda t: t.method != "FedMask"])
    assert not out["meets_rule"] and "FedMask above_chance" in out["unmet"][60]
    with pytest.raises(FlkitError, match="accepted: at least"):
        searches.choose_long_rounds(_search(rows).drop(columns=["rise5"]))


def test_long_preset_is_cpu_with_the_rounds_the_search_chose():
    from flkit.workbook import presets

    assert "long" in presets.available("04_hidenseek")
    cpu, long = (presets.load("04_hidenseek", n) for n in ("cpu", "long"))
    assert {k for k in cpu if cpu[k] != long[k]} == {"mnist_rounds"}
    chosen = searches.choose_long_rounds()  # the recorded search
    assert (
        long["mnist_rounds"] == chosen["rounds"] and chosen["rounds"] in searches.LONG_ROUNDS_GRID
    )
    assert {r["rounds"] for r in searches.LONG_SEARCH} == set(searches.LONG_ROUNDS_GRID)


def test_rounds_search_refuses_a_round_that_is_never_evaluated():
    from flkit.papers.hidenseek import study
    from flkit.workbook import presets

    cpu = presets.load("04_hidenseek", "cpu")  # eval_every = 2: round 31 has no evaluation
    with pytest.raises(FlkitError, match=r"rounds \[31\].*eval_every=2"):
        study.rounds_search(cpu, grid=(31, 90))


def _lr_search(rows):
    cols = ("method", "lr", "rounds", "above_chance", "flip_share")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_task_score_lr_keeps_a_passing_current_lr_else_the_smallest_passing_one():
    rows = [
        # HideNseek: the current lr 10 passes at 60 (it fails at 90: not read)
        ("HideNseek", 10.0, 60, 36.8, 7.8e-4),
        ("HideNseek", 10.0, 90, 11.8, 0.0),
        # FedMask: current 100 fails (12.6 points); 1 and 10 pass: the smaller, 1, is taken
        ("FedMask", 0.1, 60, 25.0, 0.0),
        ("FedMask", 1.0, 60, 21.0, 1e-5),
        ("FedMask", 10.0, 60, 40.0, 1e-3),
        ("FedMask", 100.0, 60, 12.6, 4.9e-5),
        # Signed: high enough at 1 but frozen (no flip in some round), nothing passes
        ("Signed", 1.0, 60, 22.8, 0.0),
        ("Signed", 10.0, 60, 14.1, 0.0),
    ]
    current = {"HideNseek": 10.0, "FedMask": 100.0, "Signed": 10.0, "BNNAvg": 1.0}
    out = searches.choose_task_score_lr(_lr_search(rows), current)
    assert out == {
        "HideNseek": {"lr": 10.0, "passes": True},
        "FedMask": {"lr": 1.0, "passes": True},
        "Signed": {"lr": 10.0, "passes": False},
        "BNNAvg": {"lr": 1.0, "passes": False},  # never searched: keeps its lr, out of regime
    }
    # read at 90 instead, HideNseek's only row fails there
    assert not searches.choose_task_score_lr(_lr_search(rows), current, rounds=90)["HideNseek"][
        "passes"
    ]
    with pytest.raises(FlkitError, match=r"rounds=45.*accepted: \[60, 90\]"):
        searches.choose_task_score_lr(_lr_search(rows), current, rounds=45)
    with pytest.raises(FlkitError, match="accepted: at least"):
        searches.choose_task_score_lr(_lr_search(rows).drop(columns=["lr"]), current)


def test_mnist_runs_take_the_score_lr_the_recorded_search_chose():
    from flkit.papers.hidenseek import settings, study
    from flkit.workbook import presets

    cpu = presets.load("04_hidenseek", "cpu")
    table = pd.DataFrame(searches.MNIST_LR_SEARCH)
    # the lrs the searches ran with, before the baseline levers (settings.PRE_LEVER)
    pre = settings.PRE_LEVER
    current = {study.LABELS[m]: pre.lr[m] for m in ("hidenseek", "fedmask", "signed", "bnnavg")}
    chosen = searches.choose_task_score_lr(table, current)
    # by hand: the search found no passing lr for the three baselines and HideNseek's passes, so
    # the searches' MNIST runs are at the HAR lrs (and FedAvg at the paper's 0.001)
    har = {
        "fedavg_split": 0.001,
        "hidenseek": 10.0,
        "fedmask": 100.0,
        "signed": 10.0,
        "bnnavg": 1.0,
    }
    for method, lr in har.items():
        assert study.config(cpu, "mnist_a1", method, 0, settings=pre).lr == lr
        assert study.config(cpu, "har", method, 0, settings=pre).lr == lr
    for method, label in study.LABELS.items():
        if label in chosen:  # and the searches' MNIST runs follow the rule, not a copy of it
            assert settings.PRE_LEVER_MNIST_LR[method] == chosen[label]["lr"]
    # the recorded finding: no lr of the grid gives FedMask, Signed or BNNAvg both 20 points above
    # chance and a flip in every round on MNIST at 60 rounds; HideNseek's passes
    assert {k for k, v in chosen.items() if v["passes"]} == {"HideNseek"}
    searched = {(r["method"], r["lr"]) for r in searches.MNIST_LR_SEARCH if r["rounds"] == 60}
    for label in ("FedMask", "Signed", "BNNAvg"):
        assert {lr for m, lr in searched if m == label} == set(searches.SCORE_LR_GRID)


def test_each_accuracy_claim_reads_the_regime_of_the_tasks_it_compares():
    """FEMNIST, which no claim compares, is frozen and at chance; MNIST alpha = 0.1 has FedMask
    at chance. Only the narrowing-lead claim (alpha 0.1 against 1) is outside regime; measured
    over every task, every accuracy claim was."""
    from flkit.papers.hidenseek import record
    from flkit.workbook import presets
    from flkit.workbook.report import Report

    preset = presets.load("04_hidenseek", "cpu")
    runs, acc, act = _tables(0.9)
    supermask = acc.method.isin(regime.SUPERMASK)
    acc.loc[(acc.task == "femnist") & supermask, "mean"] = 2.0
    acc.loc[(acc.task == "mnist_a0.1") & (acc.method == "FedMask"), "mean"] = 10.5
    runs.loc[runs.task == "femnist", "flip_share"] = 0.0
    methods = ["FedAvg", "BNNAvg", "FedMask", "Signed", "HideNseek"]
    byt = pd.DataFrame(
        [{"task": "har", "method": m, "up_MiB": 1.0, "down_MiB": 1.0} for m in methods]
    )
    tim = pd.DataFrame(
        [{"task": "har", "method": m, "per_round_s": 1.0, "total_s": 10.0} for m in methods]
    )
    kr = pd.DataFrame(
        [
            {"task": t, "keep_ratio": k, "mean": 60.0, "std": 0.0, "count": 2, "coverage": 0.9}
            for t in ("mnist_a0.1", "mnist_a1")
            for k in (0.2, 0.8)
        ]
    )
    report = Report("04_hidenseek", preset, 0, device="cpu")
    out = record.record_claims(report, preset, runs, acc, byt, tim, kr, act)
    verdicts = out.set_index("claim").verdict
    outside = {c for c, v in verdicts.items() if v == "outside regime"}
    assert outside == {"HideNseek's lead narrows at alpha = 0.1"}
    assert record.claim_tasks(preset, kr) == {
        "beats_baselines": ["har", "mnist_a1"],
        "margin_narrows": ["mnist_a0.1", "mnist_a1"],
        "small_keep_ratio_harmless": ["mnist_a1"],
        "more_clients_no_help": ["mnist_a1"],
    }
    # the same indicators over every task: FEMNIST's frozen, near-chance runs are out
    every = regime.measure(runs, acc)
    assert every["flip_share"] == 0.0 and every["above_chance"] == pytest.approx(2 - 100 / 62)
    mild = regime.measure(runs, acc, ["har", "mnist_a1"])
    assert mild["flip_share"] == pytest.approx(0.01)
    assert mild["above_chance"] == pytest.approx(51.0 - 100 / 6)  # BNNAvg on HAR
    with pytest.raises(FlkitError, match=r"tasks \['emnist'\].*accepted"):
        regime.measure(runs, acc, ["har", "emnist"])
    with pytest.raises(FlkitError, match="non-empty"):
        regime.measure(runs, acc, [])
