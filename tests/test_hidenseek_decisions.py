"""Notebook 04's decisions (flkit/papers/hidenseek/decisions.toml): what each rule gives on its
recorded table, worked out by hand; the order the rules chain in (a rule that starts from the
rate so far starts from what the rules before it chose); the preset values every run reads; and
the measure that runs a rule's candidates (``study.decision_rows``) with the engine replaced, so
nothing trains. The preset check itself is tests/test_paper_decisions.py's."""

import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from flkit import methods
from flkit.papers.hidenseek import study
from flkit.utils import FlkitError
from flkit.workbook import decision_runs, decisions, presets

D = decisions.load("hidenseek")
NAMES = list(D)
SUPERMASK = ("hidenseek", "fedmask", "signed", "bnnavg")
GRID = [0.001, 0.01, 0.1, 1.0, 10.0, 100.0]
TASKS = ("har", "femnist", "mnist_a1", "mnist_a0.1")


def _lrs(name):
    return [c["lr"] for c in D[name].candidates]


def _before(name, key, preset="cpu"):
    """The value of ``key`` at ``preset`` that the decisions before ``name`` leave: the last
    that chose one."""
    value = None
    for n in NAMES[: NAMES.index(name)]:
        values = decisions.decide(D[n]).values
        if values and key in values and preset in D[n].presets:
            value = values[key]
    return value


def test_recorded_tables_give_the_choices_worked_out_by_hand():
    # (values, whether the choice meets the rule rather than being its fallback), by hand
    by_hand = {
        # HAR: the smallest passing lr; FedMask's 0.001 / 0.1 / 10 never flip from round 3,
        # Signed's 10 (48.3 points) and 100 both pass, BNNAvg's 10 ends 16.4 points above chance
        "har_score_lr_hidenseek": ({"hidenseek_lr": 10.0}, True),
        "har_score_lr_fedmask": ({"fedmask_lr": 100.0}, True),
        "har_score_lr_signed": ({"signed_lr": 10.0}, True),
        "har_score_lr_bnnavg": ({"bnnavg_lr": 1.0}, True),
        # 30: FedAvg rises 7.02; 60: Signed stops flipping; 90: HideNseek stops: the last
        "long_mnist_rounds": ({"mnist_rounds": 90}, False),
        # at 60 rounds HideNseek's 10 passes (36.8 points, 7.8e-4); no lr passes for the others
        "mnist_score_lr_hidenseek": ({"hidenseek_mnist_lr": 10.0}, True),
        "mnist_score_lr_fedmask": ({"fedmask_mnist_lr": 100.0}, False),
        "mnist_score_lr_signed": ({"signed_mnist_lr": 10.0}, False),
        "mnist_score_lr_bnnavg": ({"bnnavg_mnist_lr": 1.0}, False),
        # FedMask at m = 8 is the closest: 18.99 points
        "mnist_clients_per_round": ({"mnist_clients_per_round": 4}, False),
        # HAR: FedMask first passes at 10 (56.72 points), Signed at 1 (49.39); both pass on MNIST
        "vote_weights_har_fedmask": ({}, True),
        "vote_weights_fedmask": (
            {"fedmask_normalize": "all", "fedmask_lr": 10.0, "fedmask_mnist_lr": 10.0},
            True,
        ),
        "vote_weights_har_signed": ({}, True),
        "vote_weights_signed": (
            {"signed_normalize": "all", "signed_lr": 1.0, "signed_mnist_lr": 1.0},
            True,
        ),
        # 0 and -0.25 points above chance: nothing is adopted
        "bnnavg_real_lr": (None, False),
        # HideNseek at 1: (55.97 + 59.24) / 2 = 57.6; BNNAvg at 1: (22.27 + 16.30) / 2 = 19.285
        "long_mnist_lr_hidenseek": ({"hidenseek_mnist_lr": 1.0}, True),
        "long_mnist_lr_fedmask": ({"fedmask_mnist_lr": 10.0}, True),
        "long_mnist_lr_signed": ({"signed_mnist_lr": 1.0}, True),
        "long_mnist_lr_bnnavg": ({"bnnavg_mnist_lr": 1.0}, False),
    }
    assert list(by_hand) == NAMES  # the order the rules were taken in
    for name, (values, passes) in by_hand.items():
        out = decisions.decide(D[name])
        assert (out.values, out.passes) == (values, passes), name


def test_each_rule_starts_where_the_rules_before_it_left_off():
    for m in SUPERMASK:
        # HAR's choice first on MNIST, then the grid ascending without it
        har = _before(f"mnist_score_lr_{m}", f"{m}_lr")
        assert _lrs(f"mnist_score_lr_{m}") == [har] + [x for x in GRID if x != har], m
        # the rate every earlier rule left on MNIST first at `long`'s rounds
        now = _before(f"long_mnist_lr_{m}", f"{m}_mnist_lr")
        assert _lrs(f"long_mnist_lr_{m}") == [now] + [x for x in GRID if x != now], m
    for m in ("fedmask", "signed"):
        # the vote weights: HAR ascending, then MNIST from HAR's answer, which sets HAR's rate
        assert _lrs(f"vote_weights_har_{m}") == GRID
        har = decisions.decide(D[f"vote_weights_har_{m}"]).chosen["lr"]
        assert _lrs(f"vote_weights_{m}") == [har] + [x for x in GRID if x != har], m
        assert {c["har_lr"] for c in D[f"vote_weights_{m}"].candidates} == {har}
    # BNNAvg's MNIST rate at `long` starts from its HAR rate: its lever set nothing
    assert _before("long_mnist_lr_bnnavg", "bnnavg_mnist_lr") == 1.0


def test_m4_rows_of_the_clients_rule_are_the_other_tables_runs_at_round_60():
    cols = ["method", "lr", "rounds", "accuracy", "above_chance", "flip_share"]

    def rows(name):
        return pd.DataFrame(decisions.read_table(D[name]))

    clients = rows("mnist_clients_per_round")
    at4 = clients[clients.clients_per_round == 4][cols]
    assert sorted(at4.method) == sorted(["HideNseek", "FedMask", "Signed", "BNNAvg"])
    searched = pd.concat([rows("long_mnist_rounds"), rows("mnist_score_lr_fedmask")])
    for r in at4.to_dict("records"):
        same = searched[(searched.method == r["method"]) & (searched.lr == r["lr"])]
        # FedMask at 100 is in both tables: the score-rate search reproduced the rounds search
        found = same[same["rounds"] == 60][cols].to_dict("records")
        assert found and all(f == r for f in found), r["method"]


def test_a_value_edited_by_hand_is_named_by_the_rule_that_chose_it_last(tmp_path):
    folder = tmp_path / "hidenseek"
    shutil.copytree(decisions.PAPERS_DIR / "hidenseek", folder)
    text = (folder / "preset.toml").read_text()
    cpu, long = text.index("\n[cpu]"), text.index("\n[long]")
    # FedMask's MNIST rate put back at 100, the MNIST score-rate rule's (replaced) choice
    edited = text[cpu:long].replace("fedmask_mnist_lr = 10.0", "fedmask_mnist_lr = 100.0")
    (folder / "preset.toml").write_text(text[:cpu] + edited + text[long:])
    problems = {n: p for n, d in decisions.load(folder).items() if (p := decisions.check(d))}
    assert problems == {
        "long_mnist_lr_fedmask": ["[cpu] fedmask_mnist_lr = 100.0; the rule chose 10.0"]
    }


#: each method's learning rate on HAR and FEMNIST and on MNIST, as the published runs used them
RATES = {
    "fedavg_split": (0.001, 0.001),
    "hidenseek": (10.0, 1.0),
    "fedmask": (10.0, 10.0),
    "signed": (1.0, 1.0),
    "bnnavg": (1.0, 1.0),
}


def _hp(cfg):
    return methods.get(cfg.method).Params.build(cfg.method, cfg.method_params)


def test_every_run_takes_its_rate_and_options_from_the_preset():
    cpu = presets.load("04_hidenseek", "cpu")
    for m, (har, mnist) in RATES.items():
        for task in TASKS:
            assert study.config(cpu, task, m, 0).lr == (mnist if task.startswith("mnist") else har)
    for m in ("fedmask", "signed"):
        hp = _hp(study.config(cpu, "mnist_a1", m, 0))
        assert (hp.normalize, hp.writeback, hp.score_clients) == ("all", "linear", "trained")
    bnn = study.config(cpu, "mnist_a1", "bnnavg", 0)
    assert "real_lr" not in bnn.method_params and _hp(bnn).normalize == "all"
    # a preset value changes exactly the runs that read it
    over = presets.load(
        "04_hidenseek",
        "cpu",
        fedmask_mnist_lr=100.0,
        signed_normalize="sampled",
        bnnavg_real_lr=1.0,
    )
    assert study.config(over, "mnist_a1", "fedmask", 0).lr == 100.0
    assert study.config(over, "har", "fedmask", 0).lr == 10.0
    assert _hp(study.config(over, "har", "signed", 0)).normalize == "sampled"
    for task in TASKS:
        assert study.config(over, task, "bnnavg", 0).method_params["real_lr"] == 1.0
        assert study.config(over, task, "hidenseek", 0) == study.config(cpu, task, "hidenseek", 0)
    with pytest.raises(FlkitError, match=r"normalize 'none'; accepted: sampled, all"):
        study.config(
            presets.load("04_hidenseek", "cpu", signed_normalize="none"), "har", "signed", 0
        )
    with pytest.raises(FlkitError, match=r"'fedprox'.*accepted"):
        study.lr_of(cpu, "fedprox", "har")


def test_readme_table_of_what_the_notebook_runs_is_the_preset():
    readme = (Path(study.__file__).parent / "README.md").read_text(encoding="utf-8")
    part = readme[readme.index("### What the notebook runs") :]
    part = part[: part.index("FEMNIST was not searched")]
    rows = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in study.LABELS.values():
            rows[cells[0]] = cells
    assert set(rows) == set(study.LABELS.values())
    long = presets.load("04_hidenseek", "long")
    for method, label in study.LABELS.items():
        _, weights, lr_har, lr_mnist, _ = rows[label]
        assert float(lr_har) == study.lr_of(long, method, "har") == RATES[method][0], label
        assert float(lr_mnist) == study.lr_of(long, method, "mnist_a1") == RATES[method][1], label
        normalize = study.options_of(long, method).get("normalize")
        assert (weights == "all clients' samples") == (normalize == "all"), label
        assert (weights == "—") == (normalize is None), label


# ------------------------------------------------------------------ the measure, nothing trained
def _fake_run(calls, passes=lambda cfg: True):
    """A stand-in for study.run: an accuracy of 10 % + 1 point per client of the round, evaluated
    every 2nd round; 1e-3 of the mask flips in every round from round 3 when ``passes(cfg)``,
    else none."""

    def fake(cfg, out_dir=None, progress=False):
        calls.append(cfg)
        rounds = list(range(1, cfg.rounds + 1))
        acc = (0.5 if passes(cfg) else 0.1) + 0.01 * cfg.clients_per_round
        h = pd.DataFrame(
            {
                "round": rounds,
                "test_accuracy": [acc if r % 2 == 0 else None for r in rounds],
                "flip_share": [0.5 if r < 3 else (1e-3 if passes(cfg) else 0.0) for r in rounds],
                "train_seconds": [1.0] * len(rounds),
            }
        )
        return SimpleNamespace(config=cfg, history=h)

    return fake


def test_decision_rows_reads_one_run_per_method_and_seed_at_every_round(monkeypatch):
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls))
    cpu = presets.load("04_hidenseek", "cpu")
    rows = study.decision_rows(
        {**cpu, "mnist_clients_per_round": 8},
        methods=("fedmask", "bnnavg"),
        rounds=(30, 60),
        seeds=(0, 1),
    )
    # one 60-round run per (method, seed), read at 30 and 60
    assert [(c.method, c.seed, c.rounds) for c in calls] == [
        ("fedmask", 0, 60),
        ("fedmask", 1, 60),
        ("bnnavg", 0, 60),
        ("bnnavg", 1, 60),
    ]
    assert list(rows.rounds) == [30, 60] * 4 and list(rows.seed) == [0, 0, 1, 1] * 2
    assert set(rows.clients_per_round) == {8} and set(rows.lr) == {10.0, 1.0}
    # 50 % + 8 points: 48 points above MNIST's chance of 10 %; flips 1e-3 from round 3
    assert rows.above_chance.tolist() == pytest.approx([48.0] * 8)
    assert rows.flip_share.tolist() == pytest.approx([1e-3] * 8)
    assert rows.train_s.tolist() == pytest.approx([30.0, 60.0] * 4)
    assert rows.rise5.tolist() == pytest.approx([0.0] * 8, abs=1e-9)  # a flat curve
    assert set(rows.method) == {"FedMask", "BNNAvg"} and set(rows.task) == {"mnist_a1"}


def test_decision_rows_refuses_a_round_that_is_never_evaluated(monkeypatch):
    monkeypatch.setattr(study, "run", lambda *a, **k: pytest.fail("trained before checking"))
    cpu = presets.load("04_hidenseek", "cpu")  # eval_every = 2: round 31 has no evaluation
    with pytest.raises(FlkitError, match=r"rounds \[31\] are never evaluated.*eval_every=2"):
        study.decision_rows(cpu, rounds=(31, 90))


def test_drive_runs_a_rule_in_its_order_on_the_preset_values_it_tries(monkeypatch):
    """HideNseek's MNIST rate at `long`'s rounds, run again with an engine in which only lr 1
    learns: 10 first, then 0.001, 0.01, 0.1 fail, 1 passes and the drive stops there."""
    calls = []
    monkeypatch.setattr(study, "run", _fake_run(calls, passes=lambda cfg: cfg.lr == 1.0))
    long = presets.load("04_hidenseek", "long")
    d = D["long_mnist_lr_hidenseek"]

    def measure(candidate):
        at = {**long, **d.values(candidate)}
        return study.decision_rows(at, methods=["hidenseek"], seeds=(0, 1)).to_dict("records")

    out, rows = decision_runs.drive(d, measure)
    assert out.values == {"hidenseek_mnist_lr": 1.0} and out.passes
    assert [(c.lr, c.seed) for c in calls] == [
        (lr, s) for lr in (10.0, 0.001, 0.01, 0.1, 1.0) for s in (0, 1)
    ]
    assert {(c.rounds, c.clients_per_round, c.dataset) for c in calls} == {(90, 4, "mnist")}
    assert len(rows) == 10 and {r["method"] for r in rows} == {"HideNseek"}
