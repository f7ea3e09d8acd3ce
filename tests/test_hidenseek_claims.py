"""Claim verdicts of notebook 04 (flkit.papers.hidenseek.claims) on hand-built result tables."""

import pandas as pd

from flkit.papers.hidenseek import claims
from flkit.papers.hidenseek.exercise import check

METHODS = ("FedAvg", "BNNAvg", "FedMask", "Signed", "HideNseek")


def _acc(rows):
    return pd.DataFrame(
        [{"task": t, "method": m, "mean": v} for t, d in rows.items() for m, v in d.items()]
    )


def test_beats_baselines_and_margin():
    acc = _acc(
        {
            "har": dict(zip(METHODS, (90, 40, 50, 55, 80))),
            "mnist_a1": dict(zip(METHODS, (95, 60, 70, 65, 90))),
            "mnist_a0.1": dict(zip(METHODS, (80, 30, 70, 60, 75))),
        }
    )
    above, below, _ = claims.beats_baselines(acc, ["har", "mnist_a1"])
    assert above and below
    above, _, _ = claims.beats_baselines(
        acc, ["har", "mnist_a1"], margin=25
    )  # lead is 20 on mnist_a1
    assert not above
    ok, ev = claims.margin_narrows(acc)  # +5 at 0.1, +20 at 1
    assert ok and "+5.0" in ev


def test_traffic_and_time_order():
    byt = pd.DataFrame(
        {
            "task": "har",
            "method": METHODS,
            "up_MiB": [4.0, 1.0, 0.7, 0.7, 0.5],
            "down_MiB": [4.0, 1.0, 1.0, 1.0, 0.5],
        }
    )
    assert claims.traffic_order(byt)[0]
    byt.loc[byt.method == "HideNseek", "down_MiB"] = 1.2  # total still lower, download not
    assert not claims.traffic_order(byt)[0]
    tim = pd.DataFrame({"task": "har", "method": METHODS, "per_round_s": [1.0, 2.0, 3.0, 3.5, 1.5]})
    assert claims.time_order(tim)[0]
    tim.loc[tim.method == "HideNseek", "per_round_s"] = 0.9
    assert not claims.time_order(tim)[0]


def test_keep_ratio_and_active_clients():
    kr = pd.DataFrame(
        {"task": ["mnist_a1", "mnist_a1"], "keep_ratio": [0.2, 0.8], "mean": [88.5, 90.0]}
    )
    assert claims.small_keep_ratio_harmless(kr, ["mnist_a1"])[0]
    assert not claims.small_keep_ratio_harmless(kr, ["mnist_a1"], max_drop=1.0)[0]
    act = pd.DataFrame(
        {
            "active": [2, 8, 2, 8],
            "method": ["HideNseek", "HideNseek", "FedMask", "FedMask"],
            "mean": [90.0, 88.0, 50.0, 55.0],
        }
    )
    assert claims.more_clients_no_help(act)[0]
    act.loc[1, "mean"] = 92.0  # +2 points with more clients
    assert not claims.more_clients_no_help(act)[0]


def test_exercise_checker_verdicts(capsys):
    def stub(signs, weights, eps):
        raise NotImplementedError

    def unclipped(signs, weights, eps):
        w = weights / weights.sum()
        return (w.view(-1, *[1] * (signs.dim() - 1)) * signs).sum(0).atanh()

    def right(signs, weights, eps):
        w = weights / weights.sum()
        return (
            (w.view(-1, *[1] * (signs.dim() - 1)) * signs).sum(0).clamp(-1 + eps, 1 - eps).atanh()
        )

    assert check(stub).startswith("not attempted yet")
    assert "clip" in check(unclipped) and "not right yet" in check(unclipped)
    assert check(right).endswith("right: every case agrees with the library")
