"""The decision driver (flkit.workbook.decisions) on hand-made tables: both shapes, the order a
"first" rule reads, the fallback, what no choice means, the driver's runs, the table written
once, and the preset check that fails when a decided value is edited by hand. Every expected
choice is worked out by hand in the comments."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from flkit.utils import FlkitError
from flkit.workbook import decision_quotes, decision_runs, decisions
from flkit.workbook.decisions import Decision

PROV = {
    "commit": "abc",
    "date": "d",
    "machine": "m",
    "threads": 1,
    "preset": "cpu",
    "seeds": [0],
    "command": "c",
}


def _decision(tmp_path, **spec) -> Decision:
    base = {"text": "the rule", "presets": ["cpu"], "provenance": PROV}
    return Decision.from_toml("d", {**base, **spec}, tmp_path)


# ------------------------------------------------------------------------------ first that passes
def _first(tmp_path, **kw):
    return _decision(
        tmp_path,
        sets=["lr"],
        candidates={"lr": [0.001, 0.01, 0.1]},
        shape="first",
        **{
            "pass": [
                {"column": "above_chance", "op": "at least", "bound": 10},
                {"column": "flip", "op": "above", "bound": 0},
            ],
            **kw,
        },
    )


def test_first_takes_the_first_candidate_in_order_that_passes(tmp_path):
    d = _first(tmp_path)
    table = [
        {"lr": 0.001, "above_chance": 12.0, "flip": 0.0},  # flip not above 0
        {"lr": 0.01, "above_chance": 15.0, "flip": 1e-4},  # passes: the answer
        {"lr": 0.1, "above_chance": 40.0, "flip": 1e-3},  # better, but later
    ]
    out = decisions.decide(d, table)
    assert out.values == {"lr": 0.01} and out.passes
    assert out.candidates["passes"].tolist() == [False, True, True]
    assert out.candidates["chosen"].tolist() == [False, True, False]
    assert out.candidates["unmet"][0] == "flip > 0: 0"
    assert out.rows["passes"].tolist() == [False, True, True]
    # the runs stop at the answer: a later candidate may be missing
    assert decisions.decide(d, table[:2]).values == {"lr": 0.01}


def test_a_whole_number_column_with_a_missing_cell_shows_whole_numbers(tmp_path):
    # a stored search where one row leaves train_subset empty: pandas alone makes the column
    # reals, and the notebook's table would read 5000.0
    from flkit.workbook.tables import MISSING, captioned

    d = _first(tmp_path)
    table = [
        {"lr": 0.001, "above_chance": 12.0, "flip": 0.0, "train_subset": 5000},
        {"lr": 0.01, "above_chance": 15.0, "flip": 1e-4, "train_subset": None},
    ]
    rows = decisions.decide(d, table).rows
    assert rows["train_subset"].isna().tolist() == [False, True]
    assert rows["above_chance"].tolist() == [12.0, 15.0]  # reals stay reals
    shown = captioned(rows, "t").to_html()
    assert ">5000<" in shown and "5000.0" not in shown and f">{MISSING}<" in shown
    assert "<NA>" not in shown and "&lt;NA&gt;" not in shown


def test_first_refuses_a_missing_candidate_before_its_answer(tmp_path):
    d = _first(tmp_path)
    table = [{"lr": 0.01, "above_chance": 15.0, "flip": 1e-4}]  # 0.001 was never run
    with pytest.raises(FlkitError, match=r"no row for candidate lr 0.001, which the rule reads"):
        decisions.decide(d, table)


def test_an_empty_cell_fails_a_rule(tmp_path):
    d = _first(tmp_path, fallback="first")
    table = [
        {"lr": 0.001, "above_chance": None, "flip": 1.0},
        {"lr": 0.01, "above_chance": 11.0, "flip": float("nan")},
        {"lr": 0.1, "above_chance": 9.9, "flip": 1.0},
    ]
    out = decisions.decide(d, table)
    # none passes: the fallback, the first candidate, and not passing
    assert out.values == {"lr": 0.001} and not out.passes
    assert out.candidates["unmet"].tolist() == [
        "above_chance ≥ 10: empty",
        "flip > 0: empty",
        "above_chance ≥ 10: 9.9",
    ]
    assert "fallback (first)" in out.text()


def test_every_row_of_a_candidate_must_pass_and_where_selects_rows(tmp_path):
    """Candidate rounds 30 / 60 / 90, one row per method: FedAvg must be below 1 point of rise,
    every other method at least 10 above chance. 30: FedAvg rises 7 (fails); 60: B is at 4
    (fails); 90: both pass."""
    d = _decision(
        tmp_path,
        sets=["rounds"],
        candidates={"rounds": [30, 60, 90]},
        shape="first",
        match=["rounds"],
        **{
            "pass": [
                {"column": "rise", "op": "below", "bound": 1, "where": {"method": "FedAvg"}},
                {
                    "column": "above_chance",
                    "op": "at least",
                    "bound": 10,
                    "where": {"method": ["A", "B"]},
                },
            ]
        },
    )
    rows = []
    for r, rise, a, b in ((30, 7.0, 20, 20), (60, 0.5, 20, 4), (90, 0.3, 15, 12)):
        rows += [
            {"rounds": r, "method": "FedAvg", "rise": rise, "above_chance": None},
            {"rounds": r, "method": "A", "rise": None, "above_chance": a},
            {"rounds": r, "method": "B", "rise": None, "above_chance": b},
        ]
    out = decisions.decide(d, rows)
    assert out.values == {"rounds": 90}
    assert out.candidates["unmet"].tolist()[:2] == [
        "rise < 1 where method is FedAvg: 7",
        "above_chance ≥ 10 where method is ['A', 'B']: 4",
    ]
    # a row is judged on the rules that apply to it: FedAvg's empty above_chance is not read
    assert out.rows["passes"].tolist()[:3] == [False, True, True]
    # a rule whose rows are all absent is unmet, not met
    no_b = [r for r in rows if r["method"] != "B"]
    assert decisions.decide(d, no_b).values == {"rounds": 60}
    only_fedavg = [r for r in rows if r["method"] == "FedAvg"]
    out = decisions.decide(d, only_fedavg)
    assert out.values is None and out.candidates["unmet"][1].endswith(": no row")


def test_rows_filter_reads_one_part_of_a_table(tmp_path):
    d = _first(tmp_path, rows={"task": "mnist"})
    table = [
        {"task": "har", "lr": 0.001, "above_chance": 50.0, "flip": 1.0},  # not read
        {"task": "mnist", "lr": 0.001, "above_chance": 2.0, "flip": 1.0},
        {"task": "mnist", "lr": 0.01, "above_chance": 20.0, "flip": 1.0},
    ]
    assert decisions.decide(d, table).values == {"lr": 0.01}


def test_a_mean_rule_reads_the_mean_of_the_rows_it_applies_to(tmp_path):
    """Each lr run with two seeds: every seed must flip, and the mean over the seeds must be at
    least 20 points above chance. lr 1: (22.27 + 16.30) / 2 = 19.285, fails; lr 10: (25 + 16) / 2
    = 20.5, passes although seed 1 alone is below 20 (a rule on every row would fail it)."""

    def decision(of):
        return _decision(
            tmp_path,
            sets=["lr"],
            candidates={"lr": [1.0, 10.0]},
            shape="first",
            match=["lr"],
            **{
                "pass": [
                    {"column": "flip", "op": "above", "bound": 0},
                    {"column": "above_chance", "op": "at least", "bound": 20, "of": of},
                ]
            },
        )

    rows = [
        {"lr": 1.0, "seed": 0, "above_chance": 22.27, "flip": 1e-5},
        {"lr": 1.0, "seed": 1, "above_chance": 16.30, "flip": 2e-5},
        {"lr": 10.0, "seed": 0, "above_chance": 25.0, "flip": 1e-5},
        {"lr": 10.0, "seed": 1, "above_chance": 16.0, "flip": 1e-5},
    ]
    out = decisions.decide(decision("mean"), rows)
    assert out.values == {"lr": 10.0}
    assert out.candidates["unmet"][0] == "mean above_chance ≥ 20: 19.285"
    # a row is judged by the mean it enters: both of lr 10's rows pass, both of lr 1's fail
    assert out.rows["passes"].tolist() == [False, False, True, True]
    assert decisions.decide(decision("every"), rows).values is None
    # an empty cell makes the mean empty, and that fails
    gap = [dict(rows[0]), dict(rows[1]), dict(rows[2]), dict(rows[3], above_chance=None)]
    out = decisions.decide(decision("mean"), gap)
    assert out.values is None and out.candidates["unmet"][1] == "mean above_chance ≥ 20: empty"
    with pytest.raises(FlkitError, match=r"of 'median'; accepted: \['every', 'mean'\]"):
        decision("median")


# ------------------------------------------------------------------------------ best among passing
def _best(tmp_path, best, **kw):
    return _decision(
        tmp_path,
        sets={"lr": "lr", "tau": "tau"},
        candidates=[{"lr": 0.05, "tau": 40}, {"lr": 0.02, "tau": 40}, {"lr": 0.05, "tau": 20}],
        shape="best",
        best=best,
        **{"pass": [{"column": "rising", "op": "above", "bound": 0}], **kw},
    )


TABLE = [
    {"lr": 0.05, "tau": 40, "gap": 22.7, "rising": 24.9},
    {"lr": 0.02, "tau": 40, "gap": 6.9, "rising": 25.9},
    {"lr": 0.05, "tau": 20, "gap": 30.0, "rising": -1.0},  # the largest gap, but it fails
]


def test_best_takes_the_best_value_among_the_passing(tmp_path):
    out = decisions.decide(_best(tmp_path, {"column": "gap", "aim": "max"}), TABLE)
    assert out.values == {"lr": 0.05, "tau": 40}  # 22.7 > 6.9; 30.0 does not pass
    out = decisions.decide(_best(tmp_path, {"column": "gap", "aim": "min"}), TABLE)
    assert out.values == {"lr": 0.02, "tau": 40}
    # closest to 10: |6.9 - 10| = 3.1 < |22.7 - 10|
    out = decisions.decide(_best(tmp_path, {"column": "gap", "closest": 10}), TABLE)
    assert out.values == {"lr": 0.02, "tau": 40}


def test_best_breaks_ties_by_order_and_skips_an_empty_score(tmp_path):
    tied = [dict(r, gap=5.0, rising=1.0) for r in TABLE]
    out = decisions.decide(_best(tmp_path, {"column": "gap", "aim": "max"}), tied)
    assert out.values == {"lr": 0.05, "tau": 40}
    empty = [dict(TABLE[0], gap=None), *TABLE[1:]]
    out = decisions.decide(_best(tmp_path, {"column": "gap", "aim": "max"}), empty)
    assert out.values == {"lr": 0.02, "tau": 40}


def test_best_needs_one_row_per_candidate(tmp_path):
    d = _best(tmp_path, {"column": "gap", "aim": "max"})
    with pytest.raises(FlkitError, match=r"0 rows for candidate lr 0.05, tau 20; accepted: one"):
        decisions.decide(d, TABLE[:2])
    with pytest.raises(FlkitError, match=r"2 rows for candidate lr 0.05, tau 40"):
        decisions.decide(d, TABLE + [TABLE[0]])


def test_no_choice_is_unset_or_absent(tmp_path):
    failing = [dict(r, rising=-1.0) for r in TABLE]
    out = decisions.decide(_best(tmp_path, {"column": "gap", "aim": "max"}), failing)
    assert out.chosen is None and out.values is None and not out.passes
    assert out.text() == "No candidate meets the rule, so it sets nothing."
    d = _best(tmp_path, {"column": "gap", "aim": "max"}, without="absent")
    assert decisions.decide(d, failing).text().endswith("so there is no `cpu` preset.")


def test_fallback_must_meet_its_own_rules(tmp_path):
    """Cuts in order until the estimate is at most 100; if none, the last when at most 120."""
    d = _decision(
        tmp_path,
        sets=["width"],
        candidates=[{"cut": 1, "width": 100}, {"cut": 2, "width": 32}],
        match=["cut"],
        shape="first",
        fallback="last",
        without="absent",
        fallback_pass=[{"column": "minutes", "op": "at most", "bound": 120}],
        **{"pass": [{"column": "minutes", "op": "at most", "bound": 100}]},
    )
    out = decisions.decide(d, [{"cut": 1, "minutes": 185.0}, {"cut": 2, "minutes": 116.0}])
    assert out.values == {"width": 32} and not out.passes
    out = decisions.decide(d, [{"cut": 1, "minutes": 185.0}, {"cut": 2, "minutes": 121.0}])
    assert out.values is None
    out = decisions.decide(d, [{"cut": 1, "minutes": 99.0}])
    assert out.values == {"width": 100} and out.passes


def test_per_makes_one_choice_per_value_into_list_elements(tmp_path):
    """Per task, the highest level (of those listed, in order) the probe reached by t = 100:
    a reached 0.9 at 40 -> 0.9; b missed 0.8, reached 0.75 at 90 -> 0.75 (0.7 at 60 is later in
    the order). Each sets its element of `targets` (a's place 0, b's 1)."""
    d = _decision(
        tmp_path,
        sets={"targets[{i}]": "level"},
        per="task",
        candidates=[
            {"task": "a", "level": 0.9},
            {"task": "b", "level": 0.8},
            {"task": "b", "level": 0.75},
            {"task": "b", "level": 0.7},
        ],
        shape="first",
        **{"pass": [{"column": "at", "op": "at most", "bound": 100}]},
    )
    rows = [
        {"task": "a", "level": 0.9, "at": 40.0},
        {"task": "b", "level": 0.8, "at": None},
        {"task": "b", "level": 0.75, "at": 90.0},
    ]
    out = decisions.decide(d, rows)
    assert out.values == {"targets[0]": 0.9, "targets[1]": 0.75} and out.passes
    assert out.chosen == {"a": {"task": "a", "level": 0.9}, "b": {"task": "b", "level": 0.75}}
    assert out.text() == "a: level 0.9 meets the rule. b: level 0.75 meets the rule."
    assert out.rows["chosen"].tolist() == [True, False, True]
    # one value without a choice: the decision as a whole gives no values
    missed = [dict(r, at=None) if r["task"] == "b" else r for r in rows]
    with pytest.raises(FlkitError, match=r"no row for candidate level 0.7, which"):
        decisions.decide(d, missed)
    out = decisions.decide(d, [*missed, {"task": "b", "level": 0.7, "at": 200.0}])
    assert out.values is None and not out.passes
    asked = []
    done, rows_run = decision_runs.drive(d, lambda c: asked.append(c["level"]) or {"at": 50.0})
    assert asked == [0.9, 0.8] and done.values == {"targets[0]": 0.9, "targets[1]": 0.8}
    with pytest.raises(FlkitError, match=r"per='task', but candidate \[\{'level': 1\}\] has no"):
        _decision(tmp_path, sets=["level"], per="task", candidates=[{"level": 1}], shape="first")


def test_table_errors_are_named_before_any_choice(tmp_path):
    d = _first(tmp_path)
    with pytest.raises(FlkitError, match=r"the table lacks columns \['flip'\]"):
        decisions.decide(d, [{"lr": 0.001, "above_chance": 12.0}])
    with pytest.raises(FlkitError, match=r"the row \{'lr': 0.5\} matches 0 candidates"):
        decisions.decide(d, [{"lr": 0.5, "above_chance": 12.0, "flip": 1.0}])


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"shape": "any"}, r"shape='any'; accepted: \['first', 'best'\]"),
        ({"fallback": "middle"}, r"fallback='middle'; accepted"),
        ({"without": "gone"}, r"without='gone'; accepted"),
        ({"wat": 1}, r"unknown keys \['wat'\]"),
        ({"best": {"column": "gap", "aim": "max"}}, r"best is for shape 'best'"),
        ({"pass": [{"column": "x", "op": "within", "bound": 0.2}]}, r"op 'within'; accepted"),
        (
            {"pass": [{"column": "x", "op": "most", "bound": 1}]},
            r"op 'most'; accepted: \['at least'",
        ),
        ({"pass": [{"column": "x", "op": "above"}]}, r"accepted: a table with column, op, bound"),
        ({"sets": ["lr", "tau"]}, r"has no \['tau'\]; accepted: a value per key set"),
        ({"sets": ["lr x"]}, r"sets 'lr x' = 'lr x'; accepted: a preset key"),
        ({"provenance": {"commit": "x"}}, r"provenance lacks \['date', "),
    ],
)
def test_bad_decisions_are_refused(tmp_path, spec, match):
    base = {
        "text": "t",
        "presets": ["cpu"],
        "sets": ["lr"],
        "candidates": [{"lr": 0.1}],
        "shape": "first",
        "provenance": PROV,
    }
    with pytest.raises(FlkitError, match=match):
        Decision.from_toml("d", {**base, **spec}, tmp_path)


def test_best_shape_needs_its_column_and_aim(tmp_path):
    with pytest.raises(FlkitError, match=r"best=\{'column': 'gap'\}; accepted"):
        _best(tmp_path, {"column": "gap"})


# ------------------------------------------------------------------------------ the driver
def test_drive_stops_at_the_first_pass_and_resumes(tmp_path):
    d = _first(tmp_path)
    asked = []

    def measure(c):
        asked.append(c["lr"])
        return {"above_chance": 100 * c["lr"] + 9.5, "flip": 1.0}  # 9.6, 10.5, 19.5

    out, rows = decision_runs.drive(d, measure)
    assert asked == [0.001, 0.01] and out.values == {"lr": 0.01}
    assert rows == [
        {"lr": 0.001, "above_chance": pytest.approx(9.6), "flip": 1.0},
        {"lr": 0.01, "above_chance": pytest.approx(10.5), "flip": 1.0},
    ]
    asked.clear()
    again, _ = decision_runs.drive(d, measure, rows[:1])  # an interrupted drive: 0.001 is kept
    assert asked == [0.01] and again.values == {"lr": 0.01}


def test_drive_measures_every_candidate_of_a_best_rule(tmp_path):
    d = _best(tmp_path, {"column": "gap", "aim": "max"})
    by = {(r["lr"], r["tau"]): r for r in TABLE}
    asked = []

    def measure(c):
        asked.append((c["lr"], c["tau"]))
        return [{k: v for k, v in by[(c["lr"], c["tau"])].items() if k in ("gap", "rising")}]

    out, rows = decision_runs.drive(d, measure)
    assert asked == [(0.05, 40), (0.02, 40), (0.05, 20)] and out.values == {"lr": 0.05, "tau": 40}
    with pytest.raises(FlkitError, match=r"measure gave no row for lr 0.05, tau 40"):
        decision_runs.drive(d, lambda c: [])


def test_record_writes_once_and_reads_back(tmp_path):
    d = _first(tmp_path)
    rows = [
        {"lr": 0.001, "above_chance": 9.6, "flip": 0.0, "note": "a, b", "grid": [1, 2]},
        {"lr": 0.01, "above_chance": 10.5, "flip": None, "note": "", "grid": []},
    ]
    block = decision_runs.record(d, rows, PROV)
    assert block.splitlines()[0] == "[d.provenance]" and 'command = "c"' in block
    back = decisions.read_table(d)
    assert back[0] == rows[0]
    assert back[1] == {**rows[1], "note": None}  # an empty text cell reads as empty
    with pytest.raises(FlkitError, match=r"already has its recorded table .*written once"):
        decision_runs.record(d, rows, PROV)
    other = _first(tmp_path / "other")
    lacking = {k: v for k, v in PROV.items() if k not in ("seeds", "command")}
    with pytest.raises(FlkitError, match=r"provenance lacks \['seeds', 'command'\]"):
        decision_runs.record(other, rows, lacking)


def test_provenance_names_every_field():
    got = decision_runs.provenance("cpu", (0, 1), "python -m x")
    assert set(got) == set(decisions.PROVENANCE)
    assert got["seeds"] == [0, 1] and got["preset"] == "cpu" and got["threads"] >= 1


# ------------------------------------------------------------------------------ the preset check
def _paper(tmp_path, damping_cpu=0.5, long=False) -> Path:
    folder = tmp_path / "paper"
    (folder / "decisions").mkdir(parents=True)
    long_table = "\n[long]\ndamping = 0.5\n" if long else ""
    (folder / "preset.toml").write_text(
        textwrap.dedent(
            f"""\
            [meta]
            notebook = "99_x.ipynb"
            [smoke]
            damping = 0.5
            [cpu]
            damping = {damping_cpu}
            [paper]
            damping = 0.5
            """
        )
        + long_table
    )
    (folder / "decisions.toml").write_text(
        textwrap.dedent(
            """\
            [damping]
            text = "the damping of the grid with the smallest error"
            presets = ["smoke", "cpu", "paper"]
            sets = ["damping"]
            candidates = {damping = [0.0, 0.5, 1.0]}
            shape = "best"
            best = {column = "error", aim = "min"}
            [damping.provenance]
            commit = "x"
            date = "y"
            machine = "z"
            threads = 1
            preset = "cpu"
            seeds = [0]
            command = "hand-made"

            [long_iters]
            text = "no long unless the ratio is at most 0.38"
            presets = ["long"]
            sets = ["damping"]
            candidates = [{damping = 0.5}]
            shape = "first"
            without = "absent"
            pass = [{column = "ratio", op = "at most", bound = 0.38}]
            [long_iters.provenance]
            commit = "x"
            date = "y"
            machine = "z"
            threads = 1
            preset = "cpu"
            seeds = [0]
            command = "hand-made"
            """
        )
    )
    (folder / "decisions" / "damping.csv").write_text("damping,error\n0,1.0\n0.5,0.85\n1,1.1\n")
    (folder / "decisions" / "long_iters.csv").write_text("damping,ratio\n0.5,0.5\n")
    return folder


def test_check_agrees_with_the_preset_and_fails_on_a_hand_edit(tmp_path):
    ds = decisions.load(_paper(tmp_path))
    assert sorted(ds) == ["damping", "long_iters"]
    assert decisions.check(ds["damping"]) == [] and decisions.check(ds["long_iters"]) == []
    edited = decisions.load(_paper(tmp_path / "e", damping_cpu=0.25))
    assert decisions.check(edited["damping"]) == ["[cpu] damping = 0.25; the rule chose 0.5"]
    with_long = decisions.load(_paper(tmp_path / "l", long=True))
    assert decisions.check(with_long["long_iters"]) == ["[long] exists, but the rule chose nothing"]


def _chain(tmp_path, preset_lr: float, later_rows: str) -> dict:
    """Two decisions on one key, in this order: ``first_lr`` chooses 0.1 (the larger passes
    first), ``later_lr`` starts from it and chooses 1.0 when its table lets it."""
    folder = tmp_path / "chain"
    (folder / "decisions").mkdir(parents=True)
    (folder / "preset.toml").write_text(
        f'[meta]\nnotebook = "99_x.ipynb"\n[smoke]\nlr = {preset_lr}\n'
        f"[cpu]\nlr = {preset_lr}\n[paper]\nlr = {preset_lr}\n"
    )
    prov = "\n".join(f"{k} = {json.dumps(v)}" for k, v in PROV.items())
    spec = """
        [{name}]
        text = "t"
        presets = ["cpu"]
        sets = ["lr"]
        candidates = {{lr = {lrs}}}
        shape = "first"
        pass = [{{column = "ok", op = "above", bound = 0}}]
        [{name}.provenance]
        """
    text = "".join(
        textwrap.dedent(spec.format(name=n, lrs=lrs)) + prov + "\n"
        for n, lrs in (("first_lr", "[0.1]"), ("later_lr", "[0.1, 1.0]"))
    )
    (folder / "decisions.toml").write_text(text)
    (folder / "decisions" / "first_lr.csv").write_text("lr,ok\n0.1,1\n")
    (folder / "decisions" / "later_lr.csv").write_text(later_rows)
    return decisions.load(folder)


def test_check_leaves_a_key_to_the_later_decision_that_chose_it_again(tmp_path):
    moved = "lr,ok\n0.1,0\n1.0,1\n"  # 0.1 fails here, 1.0 passes: the later choice is 1.0
    ds = _chain(tmp_path / "a", 1.0, moved)
    assert decisions.check(ds["first_lr"]) == [] and decisions.check(ds["later_lr"]) == []
    # the earlier choice (0.1) edited into the preset is the later decision's error, once
    ds = _chain(tmp_path / "b", 0.1, moved)
    assert decisions.check(ds["first_lr"]) == []
    assert decisions.check(ds["later_lr"]) == ["[cpu] lr = 0.1; the rule chose 1.0"]
    # a later decision that chooses nothing replaces nothing: the earlier one is checked
    ds = _chain(tmp_path / "c", 1.0, "lr,ok\n0.1,0\n1.0,0\n")
    assert decisions.check(ds["first_lr"]) == ["[cpu] lr = 1.0; the rule chose 0.1"]
    assert decisions.check(ds["later_lr"]) == []


def test_quote_readme_fills_each_block_and_keeps_the_text_between(tmp_path):
    folder = _paper(tmp_path)
    readme = folder / "README.md"
    readme.write_text(
        "x\n<!-- decision: damping -->\nold\n<!-- /decision -->\nbetween\n"
        "<!-- decision: long_iters -->\n<!-- /decision -->\nend\n"
    )
    assert decision_quotes.quote_readme(folder) == ["damping", "long_iters"]
    assert decision_quotes.quote_readme(folder, write=True) == ["damping", "long_iters"]
    assert decision_quotes.quote_readme(folder) == []
    text = readme.read_text()
    assert text.startswith("x\n<!-- decision: damping -->\nRule: the damping of the grid with")
    assert "| 0.5 | 0.85 | yes | yes |" in text
    assert "damping 0.5 meets the rule.\n<!-- /decision -->\nbetween\n" in text
    assert (
        "No candidate meets the rule, so there is no `long` preset.\n<!-- /decision -->\nend"
        in text
    )
    readme.write_text("<!-- decision: nope -->\nx\n<!-- /decision -->\n")
    with pytest.raises(FlkitError, match=r"quotes decision 'nope'; accepted"):
        decision_quotes.quote_readme(folder)


def test_quote_readme_fills_an_empty_block_without_reaching_into_the_next(tmp_path):
    folder = _paper(tmp_path)
    empty_then_old = (
        "<!-- decision: damping -->\n<!-- /decision -->\n\nbetween\n\n"
        "<!-- decision: long_iters -->\nold\n<!-- /decision -->\n"
    )
    (folder / "README.md").write_text(empty_then_old)
    assert decision_quotes.quote_readme(folder, write=True) == ["damping", "long_iters"]
    text = (folder / "README.md").read_text()
    assert text.count("<!-- /decision -->") == 2 and "\nbetween\n" in text
    assert "Rule: the damping" in text and "Rule: no long unless" in text
    assert decision_quotes.quote_readme(folder) == []


def test_load_refuses_an_unknown_paper():
    with pytest.raises(FlkitError, match=r"paper 'nope' has no folder; accepted"):
        decisions.load("nope")
