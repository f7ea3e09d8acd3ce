"""Report rows compare like with like: a paper number sits beside ours only when both measure the
same thing at the same setting, otherwise the row says in words what differs; every row with a
paper number carries its unit; numbers a notebook shows reach the report (notebooks 00, 04, 05).

The record functions are fed small hand-made tables (the shapes the studies return), so each
expectation below is computed by hand, not by the code under test."""

from __future__ import annotations

import pandas as pd
import pytest

from flkit.papers.fl_primer import record as primer_record
from flkit.papers.hidenseek import record as hs_record
from flkit.papers.staleness import record as st_record
from flkit.workbook import presets
from flkit.workbook.report import Report


def _report(tmp_path) -> Report:
    return Report("fixture", "cpu", 0, out_dir=tmp_path, autosave=False)


def _rows(report: Report) -> dict:
    return {n["key"]: n for n in report.numbers.values()}


def _units_where_paper(report: Report) -> None:
    missing = [
        n["key"] for n in report.numbers.values() if n["paper"] is not None and not n["unit"]
    ]
    assert not missing, f"rows with a paper number but no unit: {missing}"


def _staleness_acc() -> pd.DataFrame:
    return pd.DataFrame(
        {"acc": [70.0, 50.0, 60.0], "time": [float("nan"), 120.0, 100.0]},
        index=["unstale", "unweighted", "gi_staleness"],
    )


def test_staleness_accuracy_at_another_tau_leaves_the_paper_cell_empty(tmp_path):
    preset = presets.load("05_staleness", "cpu", tau=20, partition="dirichlet")
    assert preset["tau"] != 40  # the paper's Table 10 is at tau = 40
    r = _report(tmp_path)
    st_record.record_accuracy(r, preset, _staleness_acc())
    rows = _rows(r)
    unw = rows["affected-class accuracy, Unweighted"]
    assert unw["paper"] is None and unw["measured"] == 50.0 and unw["unit"] == "%"
    assert f"tau={preset['tau']}" in unw["note"] and "tau=40" in unw["note"]
    assert unw["note"].endswith(": 57.4")  # the paper's value, named with its own setting
    assert rows["Time, Unstale"]["measured"] is None  # no Time for the reference run


def test_staleness_accuracy_at_the_papers_setting_sits_beside_table_10(tmp_path):
    preset = presets.load("05_staleness", "cpu", tau=40, partition="dirichlet")  # alpha 0.1
    r = _report(tmp_path)
    st_record.record_accuracy(r, preset, _staleness_acc())
    rows = _rows(r)
    assert rows["affected-class accuracy, Unweighted"]["paper"] == 57.4  # Table 10, alpha 0.1
    assert rows["affected-class accuracy, Ours (GI)"]["paper"] == 61.2
    assert rows["Time, Unweighted"]["paper"] == 128
    assert rows["affected-class accuracy, Unstale"]["paper"] is None  # not in the paper's table
    _units_where_paper(r)
    one = presets.load("05_staleness", "cpu", tau=40, partition="one_class")
    r2 = _report(tmp_path / "one")
    st_record.record_accuracy(r2, one, _staleness_acc())
    unw = _rows(r2)["affected-class accuracy, Unweighted"]
    assert unw["paper"] is None and "one class per client" in unw["note"]  # not Table 10's data


def test_staleness_estimation_and_detection_pair_only_matching_settings(tmp_path):
    preset = presets.load("05_staleness", "cpu")
    r = _report(tmp_path)
    err = pd.DataFrame(
        {
            "tau": [5, 5, 5, 40, 40, 40],
            "estimator": ["stale", "1st-Order", "GI"] * 2,
            "cos": [0.2, 0.1, 0.1, 0.5, 0.4, 0.2],
            "l1": [0.0] * 6,
        }
    )
    st_record.record_estimation(r, preset, err)
    det = pd.DataFrame({"round": [0, 20, 45], "accuracy": [0.5, 0.75, 0.9]})
    st_record.record_detection(r, preset, det)
    rows = _rows(r)
    fo5 = rows["estimation error (cosine distance), 1st-Order, tau=5"]
    assert fo5["paper"] == 0.08 and "disaster-image" in fo5["note"]  # Table 1 at staleness 5
    assert rows["estimation error (cosine distance), 1st-Order, tau=40"]["paper"] is None
    assert rows["estimation error (cosine distance), GI, tau=5"]["paper"] is None
    # GI vs stale: 1 - 0.1/0.2 = 50 %, 1 - 0.2/0.5 = 60 % -> the largest cut is 60 %
    cut = rows["largest cut of the estimation error by GI vs the stale update"]
    assert cut["measured"] == pytest.approx(60.0) and cut["unit"] == "%"
    assert rows["uniqueness detection accuracy, round 20"]["paper"] == 74.6
    assert rows["uniqueness detection accuracy, round 45"]["paper"] is None
    assert rows["uniqueness detection accuracy, round 45"]["measured"] == 90.0
    _units_where_paper(r)


def test_staleness_switch_round_says_when_there_was_none(tmp_path):
    preset = presets.load("05_staleness", "cpu")
    r = _report(tmp_path)
    st_record.record_switching(r, preset, pd.DataFrame({"round": [5, 10], "gamma": [1.0, 1.0]}))
    name = "round the switch back is detected (E1 > E2)"
    row = _rows(r)[name]
    assert row["measured"] is None and f"no switch in {preset['rounds']} rounds" in row["note"]
    assert "round 155 of 800" in row["note"] and row["paper"] is None  # runs of other lengths
    r2 = _report(tmp_path)
    nan = float("nan")
    sw = pd.DataFrame({"round": [5, 10, 15], "gamma": [1, 1, 0.5], "switch_round": [nan, 52, 52]})
    st_record.record_switching(r2, preset, sw)
    assert _rows(r2)[name]["measured"] == 52 - preset["tau"]  # effective tau rounds later


def _active(counts) -> pd.DataFrame:
    hs = {counts[0]: 80.0, counts[1]: 78.0, counts[2]: 75.5}
    rows = [
        {
            "active": k,
            "method": m,
            "mean": v - (0 if m == "HideNseek" else 10),
            "std": 0,
            "count": 1,
        }
        for k, v in hs.items()
        for m in ("HideNseek", "FedMask")
    ]
    return pd.DataFrame(rows)


def test_hidenseek_active_drop_names_the_client_counts_when_they_differ(tmp_path):
    preset = presets.load("04_hidenseek", "cpu")
    counts = preset["active_clients"]
    r = _report(tmp_path)
    hs_record.record_active(r, preset, _active(counts))
    key = f"HideNseek accuracy drop from {counts[0]} to {counts[-1]} active clients, MNIST alpha=1"
    row = _rows(r)[key]
    assert row["measured"] == pytest.approx(4.5) and row["paper"] == 3.92  # 80 - 75.5
    assert row["unit"] == "points"
    assert "from 10 to 40 of 160" in row["note"] and f"{counts[0]} to {counts[-1]}" in row["note"]
    assert f"final accuracy, FedMask, MNIST alpha=1, {counts[1]} active clients" in _rows(r)
    r2 = _report(tmp_path)
    hs_record.record_active(r2, preset, _active([10, 20, 40]))
    note = _rows(r2)["HideNseek accuracy drop from 10 to 40 active clients, MNIST alpha=1"]["note"]
    assert "the paper's counts" in note


def test_hidenseek_cost_rows_carry_units_and_the_same_ratio(tmp_path):
    preset = presets.load("04_hidenseek", "cpu")
    byt = pd.DataFrame(
        {
            "task": ["har", "har"],
            "method": ["HideNseek", "FedMask"],
            "up_MiB": [0.5, 1.0],
            "down_MiB": [0.25, 1.0],
        }
    )
    tim = pd.DataFrame(
        {
            "task": ["har", "har"],
            "method": ["HideNseek", "FedMask"],
            "total_s": [6.0, 10.0],
            "per_round_s": [0.6, 1.0],
        }
    )
    r = _report(tmp_path)
    hs_record.record_cost(r, preset, byt, tim)
    rows = _rows(r)
    assert rows["traffic saving vs FedMask, har"]["measured"] == pytest.approx(62.5)  # 1-.75/2
    assert rows["training-time saving vs FedMask, har"]["measured"] == pytest.approx(40.0)
    assert "RTX 3090" in rows["training-time saving vs FedMask, har"]["note"]
    assert rows["traffic per client per round, HideNseek, har"]["measured"] == 0.75
    assert rows["traffic per client per round, HideNseek, har"]["unit"] == "MiB"
    _units_where_paper(r)


def test_hidenseek_femnist_gain_says_the_paper_used_emnist(tmp_path):
    preset = presets.load("04_hidenseek", "cpu")
    acc = pd.DataFrame(
        {
            "task": ["femnist", "femnist", "har", "har"],
            "method": ["HideNseek", "FedMask"] * 2,
            "mean": [60.0, 55.0, 90.0, 70.0],
            "std": [0.0] * 4,
            "count": [2] * 4,
        }
    )
    r = _report(tmp_path)
    hs_record.record_accuracy(r, preset, acc)
    rows = _rows(r)
    fem = rows["HideNseek - FedMask accuracy, femnist"]
    assert fem["measured"] == 5.0 and "paper on EMNIST" in fem["note"] and "320" in fem["note"]
    har = rows["HideNseek - FedMask accuracy, har"]
    assert har["measured"] == 20.0 and f"ours {preset['har_num_clients']} clients" in har["note"]
    assert rows["final accuracy, FedMask, har"]["measured"] == 70.0
    _units_where_paper(r)


def test_primer_rounds_to_target_says_when_not_reached(tmp_path):
    class _Run:
        def __init__(self, reached):
            self.reached = reached

        def rounds_to(self, target):
            return self.reached

    preset = presets.load("00_fl_primer", "smoke")
    curves = pd.DataFrame(
        {"run": ["a", "a", "b", "b"], "round": [1, 2, 1, 2], "test_accuracy": [0.5, 0.7, 0.9, 0.95]}
    )
    drift = pd.DataFrame(
        {"data": ["IID", "IID"], "dist_global": [1.0, 3.0], "dist_avg": [0.5, 1.5]}
    )
    drift_mu = pd.DataFrame({"mu": [0.0, 0.0], "dist_global": [2.0, 4.0], "dist_avg": [1, 1]})
    r = _report(tmp_path)
    primer_record.record_numbers(
        r, preset, curves, {"a": _Run(None), "b": _Run(1)}, drift, drift_mu
    )
    rows = _rows(r)
    assert rows["rounds to 90% test accuracy, a"]["measured"] is None
    assert (
        f"not reached in {preset['rounds']} rounds"
        in rows["rounds to 90% test accuracy, a"]["note"]
    )
    assert rows["rounds to 90% test accuracy, b"]["measured"] == 1
    assert rows["client drift from the global model, IID"]["measured"] == 2.0  # mean of 1, 3
    assert rows["client drift from the global model, FedProx mu=0"]["measured"] == 3.0
    assert "over 2 clients" in rows["client drift from the clients' average, IID"]["note"]
    last = preset["last"]  # mean of the last `last` evaluations, as a percentage
    want_a = 100 * sum([0.5, 0.7][-last:]) / len([0.5, 0.7][-last:])
    assert rows["final test accuracy, a"]["measured"] == pytest.approx(want_a)


def test_staleness_privacy_pairs_only_the_comparable_columns(tmp_path):
    preset = presets.load("05_staleness", "cpu")
    priv = pd.DataFrame(
        {
            "sparsification": [0.0, 0.95, "random noise"],
            "mse": [0.01, 0.1, 0.2],
            "psnr": [20.0, 10.0, 7.0],
            "classifier_acc": [0.5, 0.25, float("nan")],
            "label_recovery": [1.0, 0.5, float("nan")],
        }
    )
    r = _report(tmp_path)
    st_record.record_privacy(
        r, preset, priv, {"none": 1.0, "sparse95": 0.5, "sparse95_noise": None}
    )
    rows = _rows(r)
    acc = rows["recovered image classifier acc, sparsification 0.95"]
    assert acc["measured"] == 25.0 and acc["paper"] == 10.3  # Table 6, LeNet, 95 %
    mse = rows["recovered image mse, random noise"]
    assert mse["paper"] is None and "1.12" in mse["note"] and "pixel scale" in mse["note"]
    assert "recovered image classifier acc, random noise" not in rows  # no value: no row
    assert rows["label recovery, 95 % sparse"]["measured"] == 50.0
    assert rows["label recovery, 95 % sparse"]["paper"] == 66.7
    assert rows["label recovery, 95 % sparse + noise"]["measured"] is None
    _units_where_paper(r)


def test_staleness_gi_cost_rows_name_our_setting(tmp_path):
    preset = presets.load("05_staleness", "cpu")
    sparse = pd.DataFrame(
        {"sparsification": [0.0, 0.95], "computation_reduction": [0.0, 0.5], "error": [0.3, 0.4]}
    )
    warm = pd.DataFrame({"data_changed": [0.0, 0.3], "saved": [0.25, 0.1]})
    r = _report(tmp_path)
    st_record.record_gi_cost(r, preset, sparse, warm)
    rows = _rows(r)
    saved = rows["GI iterations saved by top-k masking, sparsification 0.95"]
    assert saved["measured"] == 50.0 and saved["paper"] == 80.0  # Table 4: 0.80 at 95 %
    assert f"{preset['est_size']} surrogate samples" in saved["note"]
    assert rows["GI iterations saved by warm start, 0% of the data changed"]["paper"] == 43.0
    assert rows["GI iterations saved by warm start, 30% of the data changed"]["paper"] is None
    _units_where_paper(r)


def test_staleness_sweep_pairs_table_11_only_at_its_alpha(tmp_path):
    cols = pd.MultiIndex.from_product([["tau=10", "tau=100"], ["acc", "time"]])
    table = pd.DataFrame([[70.0, 110.0, 40.0, 150.0]], index=["unweighted"], columns=cols)
    preset = presets.load("05_staleness", "cpu", tau=20, partition="dirichlet")  # Table 11's alpha
    r = _report(tmp_path)
    st_record.record_sweep(r, preset, "tau", table)
    rows = _rows(r)
    assert rows["affected-class accuracy, Unweighted, tau=10"]["paper"] == 72.6
    assert rows["Time, Unweighted, tau=100"]["paper"] == 142
    assert rows["Time, Unweighted, tau=100"]["measured"] == 150.0
    r2 = _report(tmp_path)
    st_record.record_sweep(
        r2, preset, "alpha", table.rename(columns={"tau=10": "alpha=1"}, level=0)
    )
    row = _rows(r2)["affected-class accuracy, Unweighted, alpha=1"]
    assert preset["tau"] != 40 and row["paper"] is None  # Table 10 is at tau = 40
    assert row["note"].endswith("at tau=40: 82.3")
    _units_where_paper(r)
