"""Notebook 04's MNIST clients-per-round rule on hand-built tables, the m = 4 rows read from the
recorded searches, and the search driver's wiring (with the engine replaced, so nothing trains)."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from flkit.papers.hidenseek import searches, settings, study
from flkit.utils import FlkitError
from flkit.workbook import presets

COLS = ("method", "clients_per_round", "rounds", "above_chance", "flip_share")
METHODS = ("HideNseek", "FedMask", "Signed", "BNNAvg")
#: each supermask method's MNIST score lr as the clients search ran it (before the baseline
#: levers), keyed by label as the recorded tables are
MNIST_LRS = {study.LABELS[m]: lr for m, lr in settings.PRE_LEVER_MNIST_LR.items()}


def _table(cells, rounds=60):
    """cells: {m: {label: (above_chance, flip_share)}} -> a search table read at ``rounds``."""
    rows = [
        dict(zip(COLS, (label, m, rounds, a, f)))
        for m, per in cells.items()
        for label, (a, f) in per.items()
    ]
    return pd.DataFrame(rows)


PASS = (25.0, 1e-4)  # 25 points above chance, a flip in every round from round 3


def _all(cell):
    return {label: cell for label in METHODS}


def test_smallest_m_at_which_all_four_pass_is_chosen():
    cells = {4: {**_all(PASS), "Signed": (14.1, 0.0)}, 8: _all(PASS), 16: _all(PASS)}
    out = searches.choose_mnist_clients(_table(cells))
    assert out["clients_per_round"] == 8 and out["passes"] is True
    assert out["per_m"][4] == {"HideNseek": True, "FedMask": True, "Signed": False, "BNNAvg": True}
    assert all(out["per_m"][16].values())


def test_one_method_failing_at_8_moves_the_choice_to_16():
    cells = {
        4: _all((5.0, 1e-4)),
        8: {**_all(PASS), "BNNAvg": (19.9, 1e-4)},  # just below 20 points
        16: _all(PASS),
    }
    # a dense row that fails plays no part in the rule
    table = pd.concat([_table(cells), _table({8: {"FedAvg": (0.0, None)}})], ignore_index=True)
    out = searches.choose_mnist_clients(table)
    assert out["clients_per_round"] == 16 and out["passes"] is True
    assert out["per_m"][8]["BNNAvg"] is False and out["per_m"][8]["HideNseek"] is True


def test_no_passing_m_keeps_4_and_a_frozen_mask_fails():
    cells = {
        4: _all((5.0, 1e-4)),
        8: {**_all(PASS), "FedMask": (40.0, 0.0)},  # far above chance, but some round flips none
        16: {**_all(PASS), "HideNseek": (30.0, None)},  # flips not recorded: not a pass
    }
    out = searches.choose_mnist_clients(_table(cells))
    assert out == {
        "clients_per_round": 4,
        "passes": False,
        "per_m": {
            4: dict.fromkeys(METHODS, False),
            8: {"HideNseek": True, "FedMask": False, "Signed": True, "BNNAvg": True},
            16: {"HideNseek": False, "FedMask": True, "Signed": True, "BNNAvg": True},
        },
    }


def test_the_rule_reads_its_own_round_only():
    good = _table({4: _all(PASS), 8: _all(PASS), 16: _all(PASS)}, rounds=60)
    frozen = _table({m: _all((30.0, 0.0)) for m in (4, 8, 16)}, rounds=90)
    both = pd.concat([good, frozen], ignore_index=True)
    out = searches.choose_mnist_clients(both)  # read at 60: the preset's 4 already passes
    assert out["clients_per_round"] == 4 and out["passes"] is True
    late = searches.choose_mnist_clients(both, rounds=90)
    assert late["clients_per_round"] == 4 and late["passes"] is False


def test_bad_tables_are_refused_naming_the_value():
    full = {4: _all(PASS), 8: _all(PASS), 16: _all(PASS)}
    with pytest.raises(FlkitError, match="accepted: at least"):
        searches.choose_mnist_clients(_table(full).drop(columns=["flip_share"]))
    with pytest.raises(FlkitError, match=r"rounds=45.*accepted: \[60\]"):
        searches.choose_mnist_clients(_table(full), rounds=45)
    with pytest.raises(
        FlkitError, match=r"missing \[16\].*accepted: exactly the grid \[4, 8, 16\]"
    ):
        searches.choose_mnist_clients(_table({4: _all(PASS), 8: _all(PASS)}))
    with pytest.raises(FlkitError, match=r"outside the grid \[32\]"):
        searches.choose_mnist_clients(_table({**full, 32: _all(PASS)}))
    no_signed = {**full, 8: {k: v for k, v in _all(PASS).items() if k != "Signed"}}
    with pytest.raises(FlkitError, match=r"clients_per_round=8.*\['Signed'\] missing"):
        searches.choose_mnist_clients(_table(no_signed))
    twice = pd.concat([_table(full), _table({16: {"HideNseek": PASS}})], ignore_index=True)
    with pytest.raises(FlkitError, match=r"clients_per_round=16.*\['HideNseek'\] more than once"):
        searches.choose_mnist_clients(twice)


def test_rows_at_4_are_the_recorded_runs_at_each_methods_mnist_lr():
    rows = {r["method"]: r for r in searches.mnist_clients_rows_at_4(MNIST_LRS)}
    assert set(rows) == set(METHODS)
    assert {r["clients_per_round"] for r in rows.values()} == {4}
    assert {r["rounds"] for r in rows.values()} == {60}
    # by hand from the recorded tables: FedMask at lr 100 read at 60 rounds ends 22.6 %, 12.6
    # points above chance, smallest flip share 4.9e-05; HideNseek at lr 10: 46.8 %, 7.8e-04
    fm, hs = rows["FedMask"], rows["HideNseek"]
    assert (fm["lr"], fm["accuracy"], fm["above_chance"], fm["flip_share"]) == (
        100.0,
        22.6,
        12.6,
        4.9e-05,
    )
    assert (hs["lr"], hs["accuracy"], hs["flip_share"]) == (10.0, 46.8, 7.8e-04)
    # the m = 4 reading: only HideNseek passes (FedMask, Signed, BNNAvg below 20 points)
    cells = {m: _all(PASS) for m in (8, 16)}
    table = pd.concat([pd.DataFrame(list(rows.values())), _table(cells)], ignore_index=True)
    out = searches.choose_mnist_clients(table)
    assert out["per_m"][4] == {
        "HideNseek": True,
        "FedMask": False,
        "Signed": False,
        "BNNAvg": False,
    }
    assert out["clients_per_round"] == 8
    with pytest.raises(FlkitError, match=r"FedMask at lr=0.5.*accepted: an lr of the recorded"):
        searches.mnist_clients_rows_at_4({label: 0.5 for label in METHODS} | {"HideNseek": 10.0})
    with pytest.raises(FlkitError, match="no MNIST score lr for 'BNNAvg'"):
        searches.mnist_clients_rows_at_4({"HideNseek": 10.0, "FedMask": 100.0, "Signed": 10.0})


def _no_run(*args, **kwargs):
    raise AssertionError("the search trained before checking its grid")


@pytest.mark.parametrize("grid", [(8, 41), (0,), (8.0,), ()])
def test_clients_search_refuses_a_bad_m_before_any_run(monkeypatch, grid):
    monkeypatch.setattr(study, "run", _no_run)
    cpu = presets.load("04_hidenseek", "cpu")  # 40 MNIST clients
    with pytest.raises(FlkitError, match="accepted: a non-empty list of integers from 1 to"):
        study.clients_search(cpu, grid=grid)


def _fake_run(calls):
    def fake(cfg, out_dir=None, progress=False):
        calls.append(cfg)
        rounds = list(range(1, cfg.rounds + 1))
        h = pd.DataFrame(
            {
                "round": rounds,
                # evaluated every 2nd round; the accuracy grows with the cohort so that rows differ
                "test_accuracy": [
                    (0.1 + 0.01 * cfg.clients_per_round) if r % 2 == 0 else None for r in rounds
                ],
                "flip_share": [0.5 if r < 3 else 1e-3 for r in rounds],
                "train_seconds": [1.0] * len(rounds),
            }
        )
        return SimpleNamespace(config=cfg, history=h)

    return fake


def test_clients_search_runs_each_supermask_method_for_60_rounds_at_each_m(monkeypatch):
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls))
    cpu = presets.load("04_hidenseek", "cpu")
    table = study.clients_search(cpu)
    assert len(calls) == 8  # 4 methods x m in (8, 16), nothing else
    assert {(c.method, c.clients_per_round) for c in calls} == {
        (m, k) for m in ("hidenseek", "fedmask", "signed", "bnnavg") for k in (8, 16)
    }
    for c in calls:
        assert c.rounds == 60 and c.num_clients == 40 and c.seed == 0
        assert c.dataset == "mnist" and c.partition_kwargs["alpha"] == 1.0
        assert c.lr == settings.PRE_LEVER_MNIST_LR[c.method]
    assert list(table.clients_per_round) == [8] * 4 + [16] * 4
    assert set(table["rounds"]) == {60}
    # m = 16: accuracy 0.1 + 0.16 = 26 %, 16 points above chance; flips 1e-3 from round 3
    at16 = table[table.clients_per_round == 16]
    assert at16.accuracy.tolist() == pytest.approx([26.0] * 4)
    assert at16.above_chance.tolist() == pytest.approx([16.0] * 4)
    assert at16.flip_share.tolist() == pytest.approx([1e-3] * 4)
    # the rule reads the driver's table with the recorded m = 4 rows
    both = pd.concat(
        [pd.DataFrame(searches.mnist_clients_rows_at_4(MNIST_LRS)), table], ignore_index=True
    )
    out = searches.choose_mnist_clients(both)
    assert out == {
        "clients_per_round": 4,
        "passes": False,
        "per_m": {
            4: {"HideNseek": True, "FedMask": False, "Signed": False, "BNNAvg": False},
            8: dict.fromkeys(METHODS, False),
            16: dict.fromkeys(METHODS, False),
        },
    }


def test_rounds_search_rows_carry_the_clients_per_round_that_ran(monkeypatch):
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls))
    cpu = presets.load("04_hidenseek", "cpu")
    plain = study.rounds_search(cpu, grid=(30, 60), methods=("fedmask",))
    assert set(plain.clients_per_round) == {4} and calls[-1].clients_per_round == 4
    wide = study.rounds_search(cpu, grid=(60,), methods=("fedmask",), clients_per_round=16)
    assert set(wide.clients_per_round) == {16} and calls[-1].clients_per_round == 16


def _recorded_table():
    """The rule's table as recorded: the m = 4 rows and the search's m = 8 and 16 rows."""
    return pd.DataFrame(searches.mnist_clients_rows_at_4(MNIST_LRS) + searches.MNIST_CLIENTS_SEARCH)


def test_recorded_clients_search_keeps_4_and_no_m_passes():
    rows = searches.MNIST_CLIENTS_SEARCH
    # one 60-round run per supermask method at m = 8 and 16, each at its MNIST score lr
    assert sorted((r["clients_per_round"], r["method"]) for r in rows) == sorted(
        (m, label) for m in (8, 16) for label in METHODS
    )
    assert {r["rounds"] for r in rows} == {searches.MNIST_LR_ROUNDS}
    assert all(r["lr"] == MNIST_LRS[r["method"]] for r in rows)
    # MNIST has 10 classes: chance is 10 %
    assert all(r["above_chance"] == pytest.approx(r["accuracy"] - 10.0) for r in rows)
    out = searches.choose_mnist_clients(_recorded_table())
    # by hand: HideNseek is 36.8 / 72.8 / 74.2 points above chance with flips > 0 at 4 / 8 / 16;
    # the best of the others is FedMask at m = 8, 19.0 points (below 20)
    assert out == {
        "clients_per_round": 4,
        "passes": False,
        "per_m": {
            m: {"HideNseek": True, "FedMask": False, "Signed": False, "BNNAvg": False}
            for m in (4, 8, 16)
        },
    }


def test_readme_clients_table_is_the_recorded_search():
    readme = (Path(searches.__file__).parent / "README.md").read_text(encoding="utf-8")
    part = readme[readme.index("- **MNIST clients per round**") :]
    part = part[: part.index("\n- **")]
    cells = {}
    for line in part.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 5 and cols[0] in METHODS:
            cells[cols[0]] = (float(cols[1]), [tuple(map(float, c.split(" / "))) for c in cols[2:]])
    assert set(cells) == set(METHODS)
    recorded = {
        (r["method"], r["clients_per_round"]): r for r in _recorded_table().to_dict("records")
    }
    for label, (lr, per_m) in cells.items():
        assert lr == MNIST_LRS[label]
        for m, (acc, flips) in zip(searches.MNIST_CLIENTS_GRID, per_m, strict=True):
            r = recorded[(label, m)]
            assert (acc, flips) == (r["accuracy"], r["flip_share"]), (label, m)


def test_passing_is_the_one_pass_test_by_hand():
    t = pd.DataFrame(
        {
            "above_chance": [20.0, 19.9, 35.0, 35.0, float("nan")],
            "flip_share": [1e-6, 1e-3, 0.0, float("nan"), 1e-3],
        }
    )
    assert searches.passing(t).tolist() == [True, False, False, False, False]
