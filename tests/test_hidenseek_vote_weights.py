"""Notebook 04's baseline levers: the rules (vote weights of FedMask and Signed, BNNAvg's
real-valued learning rate) on hand-built tables, the drivers' run sequences with the engine
replaced (so nothing trains), the Params options reaching the runs' configs, and bad input."""

from types import SimpleNamespace

import pandas as pd
import pytest

from flkit import methods
from flkit.papers.hidenseek import baseline_lever_runs as lever_runs
from flkit.papers.hidenseek import baseline_levers as levers
from flkit.papers.hidenseek import study
from flkit.utils import FlkitError
from flkit.workbook import presets

GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
PASS = (25.0, 1e-4)  # 25 points above chance, a flip in every round from round 3
LOW = (15.0, 1e-4)  # flips, but below 20 points above chance
FROZEN = (35.0, 0.0)  # far above chance, but some round flips nothing


def _row(task, lr, cell, method="FedMask", rounds=None, **extra):
    rounds = rounds or (25 if task == "har" else 60)
    a, f = cell
    return {
        "task": task,
        "method": method,
        "lr": lr,
        "rounds": rounds,
        "above_chance": a,
        "flip_share": f,
        **extra,
    }


def _vote_table(har, mnist, method="FedMask", normalize="all"):
    """har / mnist: [(lr, cell)] in the order run."""
    rows = [_row("har", lr, c, method, normalize=normalize) for lr, c in har]
    rows += [_row("mnist_a1", lr, c, method, normalize=normalize) for lr, c in mnist]
    return pd.DataFrame(rows)


def _har_up_to(lr_pass):
    """HAR rows ascending, failing up to ``lr_pass``, which passes."""
    return [(lr, PASS if lr == lr_pass else LOW) for lr in GRID if lr <= lr_pass]


def test_grids_are_the_pre_registered_ones():
    assert levers.VOTE_WEIGHT_GRID == GRID
    assert levers.BNNAVG_LATENT_GRID == (10.0, 100.0) and levers.BNNAVG_REAL_LR == 1.0
    assert levers.VOTE_WEIGHT_HAR_ROUNDS == presets.load("04_hidenseek", "cpu")["har_rounds"]
    assert levers.MNIST_LR_ROUNDS == 60


def test_adopted_when_har_and_mnist_pass_at_the_har_lr():
    table = _vote_table(_har_up_to(10.0), [(10.0, PASS)])
    out = levers.choose_vote_weights(table, "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 10.0, 10.0)
    assert "adopts normalize='all'" in out["reason"]
    # the label works as well as the method key
    assert levers.choose_vote_weights(table, "FedMask") == out


def test_not_adopted_when_no_har_lr_passes():
    har = [(lr, FROZEN if lr == 1.0 else LOW) for lr in GRID]
    out = levers.choose_vote_weights(_vote_table(har, [], method="Signed"), "signed")
    assert out["adopt"] is False and out["lr_har"] is None and out["lr_mnist"] is None
    assert "no lr" in out["reason"] and "keeps normalize='sampled'" in out["reason"]


def test_har_passes_but_mnist_fails_everywhere():
    mnist = [(10.0, FROZEN)] + [(lr, LOW) for lr in GRID if lr != 10.0]
    out = levers.choose_vote_weights(_vote_table(_har_up_to(10.0), mnist), "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (False, 10.0, None)
    assert "no lr passes on MNIST at round 60" in out["reason"]


def test_mnist_takes_the_first_passing_lr_after_the_har_lr_fails():
    # (a)'s lr 10 fails on MNIST; the grid ascending without it: 0.001 ... 1 fail, 100 passes
    mnist = [(10.0, LOW)] + [(lr, LOW) for lr in GRID if lr < 10.0] + [(100.0, PASS)]
    out = levers.choose_vote_weights(_vote_table(_har_up_to(10.0), mnist), "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 10.0, 100.0)
    # a smaller lr than (a)'s may pass: 10 fails, 0.001 and 0.01 fail, 0.1 passes
    mnist = [(10.0, FROZEN), (0.001, LOW), (0.01, LOW), (0.1, PASS)]
    out = levers.choose_vote_weights(_vote_table(_har_up_to(10.0), mnist), "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 10.0, 0.1)


def test_other_methods_tasks_and_rounds_play_no_part():
    table = _vote_table(_har_up_to(1.0), [(1.0, PASS)])
    noise = pd.DataFrame(
        [
            _row("har", 0.001, PASS, "Signed", normalize="all"),  # another method
            _row("mnist_a1", 1.0, LOW, rounds=90, normalize="all"),  # another reading
            _row("mnist_a0.1", 1.0, LOW, rounds=60, normalize="all"),  # another task
        ]
    )
    out = levers.choose_vote_weights(pd.concat([table, noise], ignore_index=True), "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 1.0, 1.0)


def test_vote_table_with_a_gap_in_the_sequence_is_refused():
    har = [(lr, c) for lr, c in _har_up_to(10.0) if lr != 0.01]  # 0.01 never ran
    with pytest.raises(FlkitError, match=r"on har at round 25: no run at lr=0.01"):
        levers.choose_vote_weights(_vote_table(har, [(10.0, PASS)]), "fedmask")
    # HAR passed at 10, so the MNIST step must start there
    with pytest.raises(FlkitError, match=r"on mnist_a1 at round 60: no run at lr=10.0"):
        levers.choose_vote_weights(_vote_table(_har_up_to(10.0), [(0.001, PASS)]), "fedmask")
    # a failing walk must have tried every lr before "none passes"
    with pytest.raises(FlkitError, match=r"no run at lr=100.0"):
        levers.choose_vote_weights(_vote_table([(lr, LOW) for lr in GRID[:5]], []), "fedmask")


def test_bad_vote_tables_and_methods_are_refused():
    good = _vote_table(_har_up_to(10.0), [(10.0, PASS)])
    with pytest.raises(FlkitError, match=r"unknown method 'hidenseek'.*accepted: \['fedmask'"):
        levers.choose_vote_weights(good, "hidenseek")
    with pytest.raises(FlkitError, match=r"accepted: at least \[.*'normalize'"):
        levers.choose_vote_weights(good.drop(columns=["normalize"]), "fedmask")
    sampled = _vote_table(_har_up_to(10.0), [(10.0, PASS)], normalize="sampled")
    with pytest.raises(FlkitError, match=r"normalize \['sampled'\].*accepted: only"):
        levers.choose_vote_weights(sampled, "fedmask")
    with pytest.raises(FlkitError, match=r"lr \[5.0\] outside the grid"):
        levers.choose_vote_weights(_vote_table(_har_up_to(10.0) + [(5.0, LOW)], []), "fedmask")
    twice = _vote_table(_har_up_to(10.0) + [(10.0, PASS)], [(10.0, PASS)])
    with pytest.raises(FlkitError, match=r"\[10.0\] run more than once"):
        levers.choose_vote_weights(twice, "fedmask")
    for grid in [(0.0, 1.0), (-1.0,), (), (float("nan"),)]:
        with pytest.raises(FlkitError, match="accepted: a non-empty list of finite numbers above"):
            levers.choose_vote_weights(good, "fedmask", grid=grid)


def _bnn_table(cells, real_lr=1.0):
    return pd.DataFrame([_row("mnist_a1", lr, c, "BNNAvg", real_lr=real_lr) for lr, c in cells])


def test_bnnavg_rule_takes_the_smallest_passing_latent_lr():
    out = levers.choose_bnnavg_real_lr(_bnn_table([(10.0, PASS)]))
    assert (out["adopt"], out["lr_mnist"], out["real_lr"]) == (True, 10.0, 1.0)
    out = levers.choose_bnnavg_real_lr(_bnn_table([(10.0, FROZEN), (100.0, PASS)]))
    assert (out["adopt"], out["lr_mnist"], out["real_lr"]) == (True, 100.0, 1.0)
    out = levers.choose_bnnavg_real_lr(_bnn_table([(10.0, LOW), (100.0, FROZEN)]))
    assert (out["adopt"], out["lr_mnist"], out["real_lr"]) == (False, None, None)
    assert "keeps its lr without real_lr" in out["reason"]


def test_bad_bnnavg_tables_are_refused():
    with pytest.raises(FlkitError, match=r"real_lr \[10.0\]; accepted: only real_lr=1.0"):
        levers.choose_bnnavg_real_lr(_bnn_table([(10.0, PASS)], real_lr=10.0))
    with pytest.raises(FlkitError, match=r"no run at lr=10.0"):
        levers.choose_bnnavg_real_lr(_bnn_table([(100.0, PASS)]))
    with pytest.raises(FlkitError, match=r"lr \[1.0\] outside the grid"):
        levers.choose_bnnavg_real_lr(_bnn_table([(1.0, PASS), (10.0, PASS)]))
    with pytest.raises(FlkitError, match=r"accepted: at least \[.*'real_lr'"):
        levers.choose_bnnavg_real_lr(_bnn_table([(10.0, PASS)]).drop(columns=["real_lr"]))


# --------------------------------------------------------------------------- drivers
def _fake_run(calls, passes):
    """The engine replaced: a run passes iff (dataset, lr) is in ``passes`` (25 points above
    chance, flips 1e-3 from round 3), else it ends 5 points above chance."""
    chance = {"har": 100 / 6, "mnist": 10.0}

    def fake(cfg, out_dir=None, progress=False):
        calls.append((cfg, out_dir))
        ok = (cfg.dataset, cfg.lr) in passes
        acc = (chance[cfg.dataset] + (25.0 if ok else 5.0)) / 100
        rounds = list(range(1, cfg.rounds + 1))
        h = pd.DataFrame(
            {
                "round": rounds,
                "test_accuracy": [acc if r % 2 == 0 or r == cfg.rounds else None for r in rounds],
                "flip_share": [0.5 if r < 3 else 1e-3 for r in rounds],
                "train_seconds": [1.0] * len(rounds),
            }
        )
        return SimpleNamespace(config=cfg, history=h)

    return fake


@pytest.fixture
def cpu():
    return presets.load("04_hidenseek", "cpu")


def _seq(calls):
    return [(c.dataset, c.lr) for c, _ in calls]


def test_vote_weight_search_runs_har_ascending_then_mnist_from_the_har_lr(monkeypatch, cpu):
    calls = []
    passes = {("har", 10.0), ("har", 100.0), ("mnist", 100.0)}
    monkeypatch.setattr(study, "run", _fake_run(calls, passes))
    table = lever_runs.vote_weight_search(cpu, "fedmask", device="cpu", out_dir="/tmp/x")
    assert _seq(calls) == [("har", lr) for lr in GRID[:5]] + [
        ("mnist", lr) for lr in (10.0, 0.001, 0.01, 0.1, 1.0, 100.0)
    ]
    for cfg, out_dir in calls:
        assert out_dir == "/tmp/x" and cfg.seed == 0 and cfg.method == "fedmask"
        assert cfg.method_params["normalize"] == "all"
        assert cfg.method_params["writeback"] == "linear"  # the notebook's other options stay
        if cfg.dataset == "har":
            assert (cfg.rounds, cfg.num_clients, cfg.clients_per_round) == (25, 30, 3)
        else:
            assert (cfg.rounds, cfg.num_clients, cfg.clients_per_round) == (60, 40, 4)
            assert cfg.partition_kwargs["alpha"] == 1.0
    assert set(table.normalize) == {"all"} and set(table.method) == {"FedMask"}
    assert list(table.task) == ["har"] * 5 + ["mnist_a1"] * 6
    assert table.above_chance.tolist() == pytest.approx([5.0] * 4 + [25.0] + [5.0] * 5 + [25.0])
    out = levers.choose_vote_weights(table, "fedmask")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 10.0, 100.0)


def test_vote_weight_search_stops_at_the_first_pass_and_skips_mnist_without_a_har_lr(
    monkeypatch, cpu
):
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls, {("har", 1.0), ("mnist", 1.0)}))
    table = lever_runs.vote_weight_search(cpu, "signed")
    assert _seq(calls) == [("har", lr) for lr in GRID[:4]] + [("mnist", 1.0)]
    out = levers.choose_vote_weights(table, "signed")
    assert (out["adopt"], out["lr_har"], out["lr_mnist"]) == (True, 1.0, 1.0)
    calls.clear()
    monkeypatch.setattr(study, "run", _fake_run(calls, {("mnist", 1.0)}))
    table = lever_runs.vote_weight_search(cpu, "signed")
    assert _seq(calls) == [("har", lr) for lr in GRID]  # no HAR pass: MNIST is never run
    assert levers.choose_vote_weights(table, "signed")["adopt"] is False


def test_bnnavg_search_runs_10_then_100_with_real_lr_1(monkeypatch, cpu):
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls, {("mnist", 100.0)}))
    table = lever_runs.bnnavg_real_lr_search(cpu)
    assert _seq(calls) == [("mnist", 10.0), ("mnist", 100.0)]
    for cfg, _ in calls:
        assert cfg.method == "bnnavg" and cfg.rounds == 60 and cfg.clients_per_round == 4
        assert cfg.method_params["real_lr"] == 1.0 and cfg.method_params["normalize"] == "all"
    assert set(table.real_lr) == {1.0}
    out = levers.choose_bnnavg_real_lr(table)
    assert (out["adopt"], out["lr_mnist"], out["real_lr"]) == (True, 100.0, 1.0)
    calls.clear()
    monkeypatch.setattr(study, "run", _fake_run(calls, {("mnist", 10.0)}))
    lever_runs.bnnavg_real_lr_search(cpu)
    assert _seq(calls) == [("mnist", 10.0)]


def _no_run(*args, **kwargs):
    raise AssertionError("the search trained before checking its input")


def test_bad_input_is_refused_before_any_run(monkeypatch, cpu):
    monkeypatch.setattr(study, "run", _no_run)
    with pytest.raises(FlkitError, match=r"unknown method of the vote-weights search 'hidenseek'"):
        lever_runs.vote_weight_search(cpu, "hidenseek")
    with pytest.raises(FlkitError, match="accepted: a non-empty list of finite numbers above 0"):
        lever_runs.vote_weight_search(cpu, "fedmask", grid=(1.0, 0.0))
    with pytest.raises(FlkitError, match="accepted: a non-empty list of finite numbers above 0"):
        lever_runs.bnnavg_real_lr_search(cpu, grid=(-10.0,))
    with pytest.raises(FlkitError, match=r"real_lr=0.0 is outside the accepted range"):
        lever_runs.bnnavg_real_lr_search(cpu, real_lr=0.0)
    # an option one of the methods does not take: refused before the first method runs
    with pytest.raises(FlkitError, match=r"unknown parameter\(s\) \['real_lr'\] for method "):
        study.rounds_search(
            cpu, grid=(60,), methods=("bnnavg", "fedmask"), method_params={"real_lr": 1.0}
        )
    with pytest.raises(FlkitError, match=r"unknown normalize 'every'; accepted: sampled, all"):
        study.score_lr_grid(cpu, methods=("signed",), method_params={"normalize": "every"})
    with pytest.raises(FlkitError, match=r"sets 'lr'; accepted: options of the method's"):
        study.rounds_search(cpu, grid=(60,), methods=("fedmask",), method_params={"lr": 1.0})
    with pytest.raises(FlkitError, match=r"lr=0.0 .*accepted range"):
        study.rounds_search(cpu, grid=(60,), methods=("fedmask",), lr=0.0)


def test_overrides_reach_the_methods_params(monkeypatch, cpu):
    for method in ("fedmask", "signed"):
        cfg = study.config(cpu, "mnist_a1", method, 0, normalize="all")
        hp = methods.get(method).Params.build(method, cfg.method_params)
        assert (hp.normalize, hp.writeback, hp.score_clients) == ("all", "linear", "trained")
        # the settings the searches ran with leave normalize to the Params' default
        plain = study.config(cpu, "mnist_a1", method, 0, settings=study.PRE_LEVER)
        assert methods.get(method).Params.build(method, plain.method_params).normalize == (
            "sampled"
        )
    cfg = study.config(cpu, "mnist_a1", "bnnavg", 0, lr=10.0, real_lr=1.0)
    hp = methods.get("bnnavg").Params.build("bnnavg", cfg.method_params)
    assert (cfg.lr, hp.real_lr, hp.normalize) == (10.0, 1.0, "all")
    # through the search drivers
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls, set()))
    all_votes = {"normalize": "all"}
    grid = study.score_lr_grid(cpu, methods=("fedmask",), grid=(1.0,), method_params=all_votes)
    assert calls[-1][0].method_params["normalize"] == "all" and len(grid) == 1
    rows = study.rounds_search(
        cpu, grid=(30, 60), methods=("bnnavg",), lr=10.0, method_params={"real_lr": 1.0}
    )
    assert calls[-1][0].method_params["real_lr"] == 1.0 and calls[-1][0].lr == 10.0
    assert list(rows.real_lr) == [1.0, 1.0] and list(rows["rounds"]) == [30, 60]
    # without overrides the rows are as before: no option columns
    assert "normalize" not in study.rounds_search(cpu, grid=(60,), methods=("signed",)).columns


def test_recorded_levers_give_the_recorded_outcome():
    """The recorded runs, read by the rules: FedMask and Signed adopt `normalize="all"` (lrs 10 and
    1 on HAR and MNIST), BNNAvg's `real_lr` is not adopted; and the README's table of the runs
    gives the recorded numbers."""
    import re
    from pathlib import Path

    votes = pd.DataFrame(levers.VOTE_WEIGHT_SEARCH)
    fedmask = levers.choose_vote_weights(votes, "fedmask")
    signed = levers.choose_vote_weights(votes, "signed")
    bnn = levers.choose_bnnavg_real_lr(pd.DataFrame(levers.BNNAVG_REAL_LR_SEARCH))
    assert (fedmask["adopt"], fedmask["lr_har"], fedmask["lr_mnist"]) == (True, 10.0, 10.0)
    assert (signed["adopt"], signed["lr_har"], signed["lr_mnist"]) == (True, 1.0, 1.0)
    assert bnn["adopt"] is False and bnn["lr_mnist"] is None
    readme = (Path(levers.__file__).with_name("README.md")).read_text(encoding="utf-8")
    table = readme[readme.index("**The two levers, run**") :]
    table = table[: table.index("**Weighting the votes")]
    rows = levers.VOTE_WEIGHT_SEARCH + levers.BNNAVG_REAL_LR_SEARCH
    last_fail = {}  # the README names a method's failing HAR lrs by their range and its last run
    for row in rows:
        if row["task"] == "har" and not row["flip_share"]:
            last_fail[row["method"]] = row
    shown = [r for r in rows if r["task"] != "har" or r["flip_share"]] + list(last_fail.values())
    for row in shown:
        cell = f"{row['accuracy']:g} / {row['above_chance']:g}".replace("-", "−")
        assert cell in table, (row, cell)
        if row["flip_share"]:
            assert f"{row['flip_share']:.2e}".replace("e-0", "e-") in table, row
    assert re.search(r"FedMask.*adopted, lr 10 \|", table) and re.search(
        r"Signed.*adopted, lr 1 \|", table
    )
    assert "| not adopted |" in table
