"""Regime indicators of notebook 01 (flkit.papers.stc_projection.regime) on hand-made histories
whose rounds to each target and variances are known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from flkit.papers.stc_projection import claims, regime, tables
from flkit.papers.stc_projection.regime import REGIME
from flkit.utils import FlkitError

ROUNDS = 10


def _history(first_90, first_95, var):
    """Accuracy 0.5 until round first_90 - 1, 0.9 from first_90, 0.95 from first_95 (None: never);
    across-client variance `var` (a fraction², so var * 1e4 in %²) in every round."""
    acc = []
    for r in range(1, ROUNDS + 1):
        a = 0.5
        if first_90 is not None and r >= first_90:
            a = 0.9
        if first_95 is not None and r >= first_95:
            a = 0.95
        acc.append(a)
    return pd.DataFrame(
        {
            "round": range(1, ROUNDS + 1),
            "client_acc_mean": acc,
            "client_acc_var": [var] * ROUNDS,
            "bytes_up": [1000.0] * ROUNDS,
            "bytes_down": [1000.0] * ROUNDS,
        }
    )


def _results(seeds=(0,), **override):
    cfg = SimpleNamespace(clients_per_round=10, dataset="mnist")
    spec = {  # method: (round to 90 %, round to 95 %, variance)
        "fedavg": (3, 9, 0.02),
        "stc": (4, None, 0.03),
        "stc_pa": (2, 5, 0.01),
        **override,
    }
    return {
        (m, s): SimpleNamespace(history=_history(*spec[m]), config=cfg) for s in seeds for m in spec
    }


def test_fedavg_share_is_the_smallest_over_seeds_and_not_reached_is_outside():
    tab = _summary([("fedavg", 0, 197), ("fedavg", 1, 160)])
    assert regime.measure(tab) == {"fedavg_share": pytest.approx(0.8)}  # 160 / 200
    assert regime.REGIME.inside(regime.measure(tab))  # 0.8 >= 0.75 in both seeds
    assert not regime.REGIME.inside({"fedavg_share": 0.7})  # 140 of 200 in one seed
    never = _summary([("fedavg", 0, 197), ("fedavg", 1, None)])
    assert regime.measure(never)["fedavg_share"] is None
    (r,) = regime.REGIME.readings(regime.measure(never), "rounds")
    assert r.inside is False and r.indicator.paper == 0.985  # never reached: outside, not unknown
    # 95 % by round 9 of 10 is in; by round 3 of 10 (the 90 % target) is out
    assert regime.REGIME.inside(regime.measure(tables.summary(_results(), 0.95)))
    assert not regime.REGIME.inside(regime.measure(tables.summary(_results(), 0.9)))


def test_the_regime_has_one_indicator_with_its_source_and_no_stc_ratio():
    """STC's place against FedAvg is Table 2's result, not a setting: it is a claim of its own and
    no claim reads it as a regime indicator."""
    assert list(regime.REGIME.all) == ["fedavg_share"]
    share = regime.REGIME.indicators["fedavg_share"]
    assert share.source_kind == "ours" and "197" in share.source
    assert share.rule.text() == "≥ 0.75" and not share.diagnostic
    assert set(regime.REGIME.claims) == {
        "stc_before_fedavg",
        "rounds",
        "variance",
        "stc_oscillates_more_than_fedavg",
        "stc_pa_oscillates_less_than_stc",
    }
    for rule in regime.REGIME.claims.values():
        assert rule.indicators == ("fedavg_share",) and rule.tasks == ("mnist",)
    assert regime.REGIME.claims["stc_before_fedavg"].methods == ("fedavg", "stc")


def test_measure_refuses_a_table_that_is_not_a_summary():
    with pytest.raises(FlkitError, match="tables.summary"):
        regime.measure(pd.DataFrame({"method": ["fedavg"], "seed": [0]}))


def test_calibration_row_gives_what_the_rule_reads(monkeypatch):
    """FedAvg reaches 95 % at round 3 of 4 (share 0.75), STC at round 4 (ratio 4 / 3); in the
    second half (rounds 3-4) STC moves 4 points, FedAvg 1: an oscillation gap of 3."""
    from types import SimpleNamespace

    from flkit.papers.stc_projection import study
    from flkit.workbook import presets

    curves = {"fedavg": [0.90, 0.93, 0.95, 0.96], "stc": [0.88, 0.91, 0.94, 0.98]}
    seen = []

    def fake_run(cfg, out_dir=None, progress=False):
        seen.append((cfg.method, cfg.clients_per_round, cfg.rounds))
        acc = curves[cfg.method]
        return SimpleNamespace(
            history=pd.DataFrame({"round": [1, 2, 3, 4], "client_acc_mean": acc})
        )

    monkeypatch.setattr(study, "run", fake_run)
    smoke = dict(presets.load("01_stc_projection", "smoke"))
    row = study.calibration_row(
        {**smoke, "mnist_target": 0.95}, {"clients_per_round": 2, "rounds": 4}
    )
    assert seen == [("fedavg", 2, 4), ("stc", 2, 4)]
    assert (row["fedavg_rounds"], row["stc_rounds"], row["run_rounds"]) == (3, 4, 4)
    assert row["fedavg_share"] == 0.75 and row["stc_ratio"] == pytest.approx(4 / 3)
    assert row["oscillation_gap"] == pytest.approx(4.0 - 1.0)


# --------------------------------------------------------------------------- STC against FedAvg
def _summary(rows, run=200, target=0.95):
    """A hand-built ``tables.summary`` table: rows (method, seed, rounds to the target)."""
    return pd.DataFrame(rows, columns=["method", "seed", "rounds_to_target"]).assign(
        rounds=run, target=target, variance=10.0
    )


def test_stc_trailing_fedavg_leaves_the_projection_claims_in_regime(tmp_path):
    """The bug: STC trailing FedAvg (or never reaching the target) made the three claims that
    compare STC-PA with STC "outside regime". FedAvg's share alone decides now."""
    from flkit.workbook.report import Report

    tab = _summary([("fedavg", 0, 180), ("stc", 0, None), ("stc_pa", 0, 170)], run=200).assign(
        oscillation=[1.0, 2.0, 1.5], factor_up=47.0, factor_down=47.0
    )
    r = Report("01_stc_projection", "cpu", 0, out_dir=tmp_path)
    df = claims.record(r, tab, "mnist", ours=regime.measure(tab), rules=REGIME)
    assert "outside regime" not in df.verdict.tolist()


# --------------------------------------------------------------------------- re-judging rules v1
def _v1_claim(text, verdict, face, rows):
    return {
        "text": text,
        "paper": "Table 2",
        "verdict": verdict,
        "reason": "",
        "evidence": "",
        "per_seed": {"0": verdict},
        "face": {"0": face},
        "regime": rows,
    }


def test_the_v1_map_recovers_the_published_long_entry_and_rejudges_it():
    """A rules-v1 entry as `long` published it (FedAvg's share 0.765, STC's ratio not measured):
    the map names every indicator it recorded, and the three claims the ratio set aside are
    judged at face value."""
    import json
    import sys
    from pathlib import Path

    from flkit.reproduce import rejudge

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tools"))
    from recover_measurements import recover

    share = {
        "indicator": "FedAvg: share of the run's rounds spent reaching the target (smallest "
        "over seeds)",
        "ours": [0.765],
        "inside": True,
    }
    ratio = {
        "indicator": "STC / FedAvg: rounds to the target (largest over seeds; not measured when "
        "STC or FedAvg never reaches it in a seed)",
        "ours": [None],
        "inside": False,
    }
    entry = {
        "notebook": "01_stc_projection",
        "preset": "long",
        "seeds": [0],
        "claims": [
            _v1_claim(
                "MNIST: STC / STC-PA per-round traffic ≈ 45× below FedAvg", "holds", True, []
            ),
            _v1_claim(
                "MNIST: STC-PA reaches 95% in fewer rounds than STC and no later than FedAvg",
                "outside regime",
                False,
                [share, ratio],
            ),
            _v1_claim(
                "MNIST: STC-PA has the lowest across-client accuracy variance",
                "outside regime",
                False,
                [share, ratio],
            ),
            _v1_claim(
                "MNIST: STC oscillates more than FedAvg (non-IID, 2 shards)",
                "does not hold",
                False,
                [share],
            ),
            _v1_claim(
                "MNIST: STC-PA oscillates less than STC (non-IID, 2 shards)",
                "outside regime",
                True,
                [share, ratio],
            ),
        ],
    }
    mp = json.loads((root / "tools" / "v1_maps" / "01_stc_projection.json").read_text("utf-8"))
    new = rejudge.rejudge_entry(recover(entry, mp["claims"], mp["indicators"]))
    assert [c["verdict"] for c in new["claims"]] == [
        "holds",
        "does not hold",
        "does not hold",
        "does not hold",
        "holds",
    ]
    assert [c.get("previous_verdict") for c in new["claims"]] == [
        None,
        "outside regime",
        "outside regime",
        None,
        "outside regime",
    ]
    assert rejudge.verdict_changes([entry], [new]) == [
        "01_stc_projection long: MNIST: STC-PA reaches 95% in fewer rounds than STC and no later "
        "than FedAvg: outside regime -> does not hold",
        "01_stc_projection long: MNIST: STC-PA has the lowest across-client accuracy variance: "
        "outside regime -> does not hold",
        "01_stc_projection long: MNIST: STC-PA oscillates less than STC (non-IID, 2 shards): "
        "outside regime -> holds",
    ]
    # FedAvg's share below 0.75 sets every one of them aside again
    low = json.loads(json.dumps(entry).replace("0.765", "0.7"))
    out = rejudge.rejudge_entry(recover(low, mp["claims"], mp["indicators"]))
    assert [c["verdict"] for c in out["claims"]][1:] == ["outside regime"] * 4
