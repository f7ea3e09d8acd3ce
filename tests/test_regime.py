"""Every paper's regime.py on hand-built inputs: the indicators it measures (values known by
construction), the paper's values and the rule that says whether a run is in the paper's regime;
and the shared interface (paper_indicators, measure, readings, in_regime, CLAIMS)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from flkit import asyncfl
from flkit.utils import FlkitError
from flkit.workbook.regime import Regime
from flkit.workbook.verdict import Indicator, Reading

ROOT = Path(__file__).resolve().parent.parent
# every paper folder, the template included: a new paper cannot skip its regime.py
SLUGS = sorted(
    p.name for p in (ROOT / "flkit" / "papers").iterdir() if p.is_dir() and p.name != "__pycache__"
)
# a timing table (regime.timing_table's form) with the four-task mix's row: ours 8, paper 37.2
PAPER_FEDAST = pd.DataFrame(
    [{"experiment": "heterogeneous", "key": "updates_per_sync_round", "paper": 37.2, "ours": 8.0}]
)


def _mod(slug):
    return importlib.import_module(f"flkit.papers.{slug}.regime")


@pytest.mark.parametrize("slug", SLUGS)
def test_every_paper_has_the_interface(slug):
    """One Regime per paper, every threshold with a source; nothing of the old per-paper copies
    (paper_indicators, readings, in_regime, CLAIMS) left to drift."""
    assert len(SLUGS) >= 7
    m = _mod(slug)
    assert isinstance(m.REGIME, Regime), f"flkit/papers/{slug}/regime.py lacks REGIME"
    assert callable(m.measure)
    for name in ("paper_indicators", "readings", "in_regime", "CLAIMS"):
        assert not hasattr(m, name), f"flkit/papers/{slug}/regime.py still copies {name}"
    for key, ind in m.REGIME.all.items():
        assert isinstance(ind, Indicator) and ind.key == key
        assert ind.source_kind in ("paper", "computed", "ours"), (slug, key)
    assert m.REGIME.claims, slug


# ------------------------------------------------------------------------------ 00 primer
def test_primer_indicators_and_rule():
    from flkit.papers.fl_primer import regime

    counts = np.array(
        [[8, 2, 0], [1, 1, 2], [0, 0, 0]]
    )  # largest shares 0.8 and 0.5; empty left out
    assert regime.dominant_share(counts) == pytest.approx(0.65)
    final = pd.Series({"IID": 0.62, "Dir(0.1)": 0.40})
    ours = regime.measure(final, "IID", counts)
    assert ours == {"iid_accuracy": pytest.approx(62.0), "dominant_share": pytest.approx(0.65)}
    assert regime.in_regime(ours)
    assert not regime.in_regime({**ours, "iid_accuracy": 30.0})  # the IID run did not train
    assert not regime.in_regime({**ours, "dominant_share": 0.3})  # a mild split, not the paper's
    r = regime.readings(ours, ["iid_accuracy"])[0]
    assert (r.indicator.paper, r.ours, r.inside) == (99.0, pytest.approx(62.0), True)
    with pytest.raises(FlkitError, match="'IIX'"):
        regime.measure(final, "IIX", counts)


# 01 STC: tests/test_stc_projection_regime.py


# ------------------------------------------------------------------------------ 02 FedDIP
def _feddip_run(acc, sparsity):
    h = pd.DataFrame({"test_accuracy": [0.1, acc], "model_sparsity": [0.0, sparsity]})
    for c in ("cum_bytes_up", "cum_bytes_down"):
        h[c] = [1.0, 2.0]
    return SimpleNamespace(history=h, final=lambda col, h=h: float(h[col].iloc[-1]))


def test_feddip_dense_gap_and_shortfall(monkeypatch):
    from flkit.papers.feddip import regime, study

    monkeypatch.setattr(study, "_official", lambda r, d: 0.0)
    grid = {
        ("fedavg", 0.0, 0): _feddip_run(0.88, 0.0),
        ("fedavg", 0.0, 1): _feddip_run(0.86, 0.0),  # dense mean 87 %: 3 points below 90 %
        ("feddip", 0.9, 0): _feddip_run(0.80, 0.9),
        ("feddip", 0.95, 0): _feddip_run(0.70, 0.947),  # 0.003 short of 0.95
    }
    ours = regime.measure(grid, "fmnist_lenet5")
    assert ours["dense_gap"] == pytest.approx(3.0)
    assert ours["sparsity_shortfall"] == pytest.approx(0.003)
    assert ours["seed_noise"] == pytest.approx(100 * 0.02 / 2**0.5)  # FedAvg's two seeds
    fine = {**ours, "sparsity_shortfall": 1 / 61_470, "penalty_shrink": 0.7}
    fine.update(snip_start=0.2, feddst_start=0.2)  # fixed-mask starts: a fifth of the dense spread
    assert regime.in_regime(fine)  # 3 <= 3 points, one weight short, shrink >= half of 1.27
    assert not regime.in_regime(ours)  # 0.003 short of 0.95: 184 LeNet-5 weights
    assert not regime.in_regime({**fine, "dense_gap": 18.4})  # 71.6 % against a 90 % plateau
    assert not regime.in_regime({**fine, "sparsity_shortfall": 0.056})  # 0.894 for s_p = 0.95
    unknown = regime.measure(grid, "no_such_workload")["dense_gap"]
    assert unknown is None and regime.readings({"dense_gap": None})[0].inside is None


# ------------------------------------------------------------------------------ 03 FedAST
def _sim(n_updates, total_time, tasks=("a", "b"), rounds=0):
    return asyncfl.SimResult(
        "x",
        list(tasks),
        [],
        [{}] * n_updates,
        {t: 1.0 for t in tasks},
        total_time,
        {"rounds": rounds},
    )


def test_fedast_claims_read_the_mix_row_of_the_timing_table():
    from flkit.papers.fedast import regime

    # the heterogeneous claims read ours and the paper's from the same timing-only table
    assert regime.measure(PAPER_FEDAST) == {"updates_per_sync_round": pytest.approx(8.0)}
    assert not regime.in_regime(PAPER_FEDAST)  # 8 vs 37.2: far from the paper's
    inside = PAPER_FEDAST.assign(ours=33.0)  # within 20 % of 37.2 (29.76-44.64)
    assert regime.in_regime(inside)
    assert not regime.in_regime(PAPER_FEDAST.assign(ours=29.0))
    with pytest.raises(FlkitError, match="heterogeneous"):
        regime.measure(PAPER_FEDAST.assign(experiment="identical"))


def test_fedast_paper_setting_value():
    """The timing-only simulation of the paper's four-task mix: a Sync-ST round of about 16 time
    units (the slowest task's clients), so the paper's inferred completion time is a few dozen
    rounds."""
    from flkit.papers.fedast import regime

    p = regime.paper_setting(seed=0, horizon=300.0)
    assert 12 <= p["sync_round_length"] <= 20
    assert p["sync_rounds"] == pytest.approx(
        regime.NUMBERS["het4_sync_completion_time_inferred"] / p["sync_round_length"]
    )


# ------------------------------------------------------------------------------ 04 HideNseek
def test_hidenseek_indicators_by_hand():
    from flkit.papers.hidenseek import regime

    acc = pd.DataFrame(
        {
            "task": ["har", "har", "mnist_a1", "mnist_a1"],
            "method": ["HideNseek", "FedAvg", "HideNseek", "FedMask"],
            "mean": [78.0, 90.0, 30.5, 10.0],
        }
    )
    rows = []
    for method, flips in (("HideNseek", [0.5, 0.01, 0.02, 0.03]), ("FedMask", [0.1, 0, 0, 0])):
        for rnd, f in enumerate(flips, start=1):
            rows.append(
                {
                    "task": "mnist_a1",
                    "method": method,
                    "seed": 0,
                    "round": rnd,
                    "flip_share": f,
                    "coverage": 0.75,
                }
            )
    runs = pd.DataFrame(rows)
    ours = regime.measure(runs, acc)
    assert ours["above_chance"] == pytest.approx(0.0)  # FedMask at chance on MNIST
    assert ours["flip_share"] == 0.0  # FedMask froze after round 1
    assert ours["coverage"] == 0.75
    assert not regime.in_regime(ours)
    assert ours["fedmask_gap"] == pytest.approx(20.5)  # HideNseek - FedMask on MNIST
    working = acc.assign(mean=acc["mean"].where(acc.method != "FedMask", 35.0))
    ok = regime.measure(runs[runs.method == "HideNseek"].assign(coverage=1.0), working)
    assert ok["flip_share"] == pytest.approx(0.02) and ok["above_chance"] == pytest.approx(20.5)
    assert ok["fedmask_gap"] == pytest.approx(-4.5)
    assert regime.in_regime(ok)
    bare = regime.measure(runs.drop(columns=["flip_share", "coverage"]), acc)
    assert bare["flip_share"] is None and bare["coverage"] is None  # not recorded: unknown
    assert regime.chance("har") == pytest.approx(100 / 6)
    with pytest.raises(ValueError, match="cifar"):
        regime.chance("cifar")


# 05 staleness: tests/test_staleness_regime.py


# ------------------------------------------------------------------------------ template
def test_template_rule():
    from flkit.papers._template import regime

    ours = regime.measure(pd.Series([18.0, 20.0]), 20)
    assert ours == {"baseline_rounds_share": 0.9} and regime.in_regime(ours)
    assert regime.measure(pd.Series([18.0, np.nan]), 20)["baseline_rounds_share"] is None
    assert not regime.in_regime({"baseline_rounds_share": None})  # not reached: outside


def test_readings_refuse_an_undeclared_or_unmeasured_indicator():
    from flkit.papers.fl_primer import regime

    with pytest.raises(FlkitError, match="'noise'.*no paper value and rule"):
        regime.readings({"noise": 1.0})
    with pytest.raises(FlkitError, match="'dominant_share' was not measured"):
        regime.readings({"iid_accuracy": 90.0}, ["dominant_share"])
    assert all(isinstance(r, Reading) for r in regime.readings({"iid_accuracy": 90.0}))
