"""flkit.workbook.report: what a notebook records, how it is stored, and how seeds are summarised;
the report counts claims that hold / do not hold / are inconclusive apart, leaves the paper cell of
a claim without a source blank, and writes numbers for people (3 significant digits) through one
function for every paper."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from flkit.reproduce.render import CLAIMS_HEAD, write_reports  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402
from flkit.workbook import presets
from flkit.workbook.report import Report, versions
from flkit.workbook.results import (
    COLUMNS,
    claim_counts,
    format_value,
    load_results,
    readable,
    readable_text,
    summarize,
)

FIXTURE_PRESETS = Path(__file__).resolve().parent / "fixtures" / "presets"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("FLKIT_REPORT_DIR", "FLKIT_RUNS_DIR", "FLKIT_PRESET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURE_PRESETS))


def test_records_and_saves(tmp_path):
    r = Report("fixture_ok", "cpu", 3, out_dir=tmp_path, device="cpu")
    assert r.number("acc", np.float32(0.875), paper=97.1, unit="%", note="LeNet") == np.float32(
        0.875
    )
    r.number("loss", torch.tensor(0.25))
    r.number("count", np.int64(4), paper="≈ 4")
    r.claim("it works", np.bool_(True), evidence="acc 0.875", paper="Table 1")
    r.claim("unknown", None)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = r.figure(ax, "curve.png")  # an Axes and a name with .png both work
    plt.close(fig)
    assert path == tmp_path / "curve.png" and path.stat().st_size > 0
    res = json.loads((tmp_path / "results.json").read_text())  # autosaved
    assert res["notebook"] == "fixture_ok" and res["preset"] == "cpu" and res["seed"] == 3
    assert res["device"] == "cpu" and res["schema"] == 2
    assert res["commit"] and isinstance(res["dirty"], bool)
    assert {"python", "flkit", "torch", "numpy"} <= set(res["versions"])
    assert res["wall_time_s"] >= 0 and res["started"] and res["saved"]
    nums = {n["key"]: n for n in res["numbers"]}
    assert nums["acc"]["measured"] == pytest.approx(0.875) and nums["acc"]["paper"] == 97.1
    assert nums["loss"]["measured"] == 0.25 and nums["count"]["measured"] == 4
    assert nums["count"]["paper"] == "≈ 4"
    assert [c["holds"] for c in res["claims"]] == [True, None]
    assert [c["verdict"] for c in res["claims"]] == ["holds", "inconclusive"]
    assert res["figures"] == [{"name": "curve", "file": "curve.png"}]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_rerecording_replaces(tmp_path):
    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path)
    r.number("acc", 1.0)
    r.number("acc", 2.0)
    r.claim("c", False)
    r.claim("c", True)
    res = load_results(r.save())
    assert [n["measured"] for n in res["numbers"]] == [2.0]
    assert [c["holds"] for c in res["claims"]] == [True]


def test_smoke_verdicts_are_inconclusive(tmp_path):
    r = Report("fixture_ok", "smoke", 0, out_dir=tmp_path)
    assert r.claim("trained", True, evidence="acc 0.9") == "inconclusive"
    assert r.claim("not trained", False) == "inconclusive"
    assert r.claim("already open", None, evidence="no target reached") == "inconclusive"
    assert r.claim("from shapes", False, evidence="47x", judge_at_smoke=True) == "does not hold"
    c = {x["text"]: x for x in load_results(r.path)["claims"]}
    assert c["trained"]["holds"] is None and c["trained"]["evidence"] == "acc 0.9"
    assert c["trained"]["reason"] == "smoke preset: too short to judge; at face value it holds"
    assert c["not trained"]["reason"].endswith("at face value it does not hold")
    assert c["already open"]["reason"] == "smoke preset: too short to judge"  # no face value
    assert c["from shapes"] == {
        "text": "from shapes",
        "verdict": "does not hold",
        "holds": False,
        "face": False,
        "reason": "",
        "evidence": "47x",
        "paper": "",
        "regime": [],
        "test": "",
        "seeds": None,
        "judge_at_smoke": True,
        "face_reason": "",
    }
    # any other preset records the verdict as given
    r2 = Report("fixture_ok", "cpu", 0, out_dir=tmp_path / "cpu")
    assert r2.claim("trained", True, evidence="acc 0.9") == "holds"


def test_preset_object_is_recorded(tmp_path):
    cfg = presets.load("fixture_ok", "cpu", n=5)
    r = Report("fixture_ok.ipynb", cfg, 1, out_dir=tmp_path)
    res = load_results(r.save())
    assert res["notebook"] == "fixture_ok" and res["preset"] == "cpu"
    assert res["config"]["n"] == 5 and res["overrides"] == {"n": 5}


def test_non_finite_is_strict_json(tmp_path):
    r = Report("fixture_ok", "smoke", 0, out_dir=tmp_path)
    r.number("diverged", float("nan"))
    r.number("big", float("inf"))
    text = (tmp_path / "results.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert [n["measured"] for n in json.loads(text)["numbers"]] == ["NaN", "Infinity"]


def test_out_dir_resolution(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parent.parent  # the checkout: results never follow the cwd
    for cwd in (tmp_path, root / "notebooks"):
        monkeypatch.chdir(cwd)
        assert Report("nb", "smoke", 2).out_dir == root / "runs" / "nb" / "smoke-seed2"
    monkeypatch.setenv("FLKIT_RUNS_DIR", str(tmp_path / "r"))
    assert Report("nb", "cpu", 0).out_dir == tmp_path / "r" / "nb" / "cpu-seed0"
    monkeypatch.setenv("FLKIT_REPORT_DIR", str(tmp_path / "exact"))
    assert Report("nb", "cpu", 0).out_dir == tmp_path / "exact"
    assert Report("nb", "cpu", 0, out_dir=tmp_path / "arg").out_dir == tmp_path / "arg"


def test_preset_none_resolves_like_presets(tmp_path, monkeypatch):
    assert Report("fixture_ok", None, 0, out_dir=tmp_path).preset == "smoke"
    monkeypatch.setenv("FLKIT_PRESET", "paper")
    assert Report("fixture_ok", None, 0, out_dir=tmp_path).preset == "paper"


@pytest.mark.parametrize(
    "call,pattern",
    [
        (lambda r: r.number("", 1.0), "key"),
        (lambda r: r.number("x", "high"), "accepted: a number"),
        (lambda r: r.number("x", np.zeros(3)), "single number"),
        (lambda r: r.claim("x", "yes"), "verdict 'yes'; accepted: 'holds'"),
        (lambda r: r.claim("x", 1), "True, False or None"),
        (lambda r: r.figure(plt.figure(), "../escape"), "no folders"),
        (lambda r: r.figure(object(), "x"), "not a matplotlib"),
    ],
)
def test_bad_input(tmp_path, call, pattern):
    r = Report("fixture_ok", "smoke", 0, out_dir=tmp_path)
    with pytest.raises(FlkitError, match=pattern):
        call(r)
    plt.close("all")


def test_bad_seed():
    with pytest.raises(FlkitError, match="seed"):
        Report("nb", "smoke", 1.5)


def test_table_single_seed(tmp_path):
    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path)
    r.number("acc", 0.91234, paper=0.95, unit="%")
    r.claim("holds", True, evidence="0.91 vs 0.95", paper="Fig. 2")
    r.claim("fails", False)
    df = r.table()
    assert list(df.columns) == list(COLUMNS)
    assert df.loc["acc"].tolist() == ["0.95%", "0.912%", ""]  # 3 significant digits
    assert df.loc["holds"].tolist() == ["Fig. 2", "0.91 vs 0.95", "holds"]
    assert df.loc["fails", "verdict"] == "does not hold"
    assert "<table" in r._repr_html_()


def _res(seed, acc, holds):
    return {
        "seed": seed,
        "numbers": [{"key": "acc", "measured": acc, "paper": 0.9, "unit": "", "note": ""}],
        "claims": [{"text": "c", "holds": holds, "evidence": f"s{seed}", "paper": "T1"}],
    }


def test_summarize_across_seeds():
    rows = summarize([_res(0, 0.8, True), _res(1, 0.9, True), _res(2, 1.0, False)])
    num, claim = rows
    assert num["measured"] == "0.9 ± 0.1 (n=3)" and num["paper"] == "0.9"
    assert claim["holds"] == "does not hold (2 holds, 1 does not hold of 3 seeds)"
    assert claim["measured"] == "s0 (seed 0)"
    rows = summarize([_res(0, 0.8, None), _res(1, None, True)])
    assert rows[0]["measured"] == "0.8 (1 of 2 seeds)"
    assert rows[1]["holds"] == "inconclusive (1 holds, 1 inconclusive of 2 seeds)"


def test_a_note_shared_by_consecutive_numbers_is_written_once(tmp_path):
    line = "1 seed, target 95%: FedFV reaches it at round 62; dense up, STC down within 10 %."
    numbers = [
        {"key": "links, FedFV, rounds", "measured": 62, "note": line},
        {"key": "links, FedFV, oscillation", "measured": 0.5, "note": line},
        {"key": "links, STC-PA, rounds", "measured": None, "note": line},
        {"key": "final accuracy", "measured": 0.93, "note": "mean of the last 5"},
        {"key": "rounds to 95%", "measured": 70},
        {"key": "final accuracy, FedFV", "measured": 0.96, "note": "mean of the last 5"},
    ]
    rows = summarize([{"seed": 0, "numbers": numbers, "claims": []}])
    assert [r["item"] for r in rows] == [
        f"links, FedFV, rounds — {line}",
        "links, FedFV, oscillation — as the row above",
        "links, STC-PA, rounds — as the row above",
        "final accuracy — mean of the last 5",
        "rounds to 95%",
        "final accuracy, FedFV — mean of the last 5",  # the row above it has no note
    ]
    assert all(r["note"] == line for r in rows[:3])  # the raw note stays on every number
    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path, autosave=False)
    for n in numbers:
        r.number(n["key"], n["measured"], note=n.get("note", ""))
    assert r.table().index.tolist() == [row["item"] for row in rows]


def test_versions():
    v = versions()
    assert v["flkit"] and v["python"].count(".") == 2


# ------------------------------------------------- counts and number format (issue: report)
@pytest.mark.parametrize(
    "value, text",
    [
        (45.89166008395284, "45.9"),
        (0.6234, "0.623"),
        (-0.0299, "-0.0299"),
        (99.96, "100"),
        (123.4, "123"),
        (12345.6, "12346"),  # whole numbers keep every integer digit, no exponent
        (61706, "61706"),
        (2.5, "2.5"),
        (0.0, "0"),
    ],
)
def test_readable_keeps_three_significant_digits(value, text):
    assert readable(value) == text


def test_readable_text_rounds_only_long_decimals():
    text = "seed 0: FedAST 29.736402725994406, Sync-ST 14.133009357448726; p=0.10, resnet18 v1.2.3"
    assert readable_text(text) == "seed 0: FedAST 29.7, Sync-ST 14.1; p=0.10, resnet18 v1.2.3"
    assert readable_text("gain -187.04% at 0.95") == "gain -187% at 0.95"
    assert format_value(70.875, "%") == "70.9%" and format_value(46.81, "MiB") == "46.8 MiB"


def _fixture_report(out: Path, seed: int, verdicts) -> Report:
    r = Report("fixture_ok", "cpu", seed, out_dir=out / "fixture_ok" / f"seed{seed}")
    r.number("rounds to 95%", 45.89166008395284, unit="rounds")
    for i, holds in enumerate(verdicts):
        r.claim(f"claim {i}", holds, evidence=f"ours {45.89166008395284 + i} vs 40")
    r.claim("claim with a source", True, evidence="x", paper="Table 2")
    return r


def test_report_counts_one_claim_of_each_kind(tmp_path):
    r = _fixture_report(tmp_path, 0, [True, False, None])
    rows = summarize([r.to_dict()])
    assert claim_counts(rows) == {
        "holds": 2,
        "does not hold": 1,
        "outside regime": 0,
        "inconclusive": 1,
    }
    claim = {row["item"]: row for row in rows}
    assert claim["claim 0"]["paper"] == "" and claim["claim with a source"]["paper"] == "Table 2"
    assert claim["claim 1"]["measured"] == "ours 46.9 vs 40"  # rounded when recorded
    plan = {
        "out": tmp_path,
        "notebooks": ["fixture_ok"],
        "preset": "cpu",
        "seeds": [0],
        "jobs": 1,
        "overrides": {},
        "notebooks_dir": str(tmp_path),
    }
    info = {
        "notebook": "fixture_ok",
        "seed": 0,
        "status": "ok",
        "results": True,
        "wall_time_s": 3.0,
        "parameters": {"preset": "cpu", "seed": 0},
    }
    md = write_reports(plan, [info]).read_text()
    assert f"| {CLAIMS_HEAD} |" in md
    assert re.search(
        r"\| \[fixture_ok\]\(#fixture_ok\) \| ok \| 1/1 \| [^|]+ \| 2 / 1 / 0 / 1 \|", md
    )
    assert "| claim 0 | ✓ **holds** | ours 45.9 vs 40 | — |" in md  # no source: none shown
    assert "| claim with a source (Table 2) | ✓ **holds** | x | — |" in md
    assert (
        "| claim 2 | ? **inconclusive**: the run does not decide it (see the evidence) | "
        "ours 47.9 vs 40 | — |" in md
    )
    assert "| rounds to 95% |  | 45.9 rounds |" in md
    assert "45.89" not in md and "45.9" in (tmp_path / "report.html").read_text()


def test_counts_over_seeds():
    """All seeds hold -> holds; any seed against -> does not hold; otherwise inconclusive."""
    a = Report("fixture_ok", "cpu", 0, autosave=False)
    b = Report("fixture_ok", "cpu", 1, autosave=False)
    for text, va, vb in [
        ("both hold", True, True),
        ("one against", True, False),
        ("one undecided", True, None),
        ("none decided", None, None),
    ]:
        a.claim(text, va)
        b.claim(text, vb)
    rows = summarize([a.to_dict(), b.to_dict()])
    assert claim_counts(rows) == {
        "holds": 1,
        "does not hold": 1,
        "outside regime": 0,
        "inconclusive": 2,
    }


def test_a_long_table_shows_every_row_in_a_notebook(tmp_path):
    """pandas shows a frame of more than ``display.max_rows`` rows (60) as its first and last
    five; a notebook's table has one row per claim and per number, and must show them all."""
    import pandas as pd

    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path)
    for i in range(70):
        r.number(f"number {i:02d}", float(i))
    df = r.table()
    assert len(df) == 70 and pd.get_option("display.max_rows") < 70
    html = df._repr_html_()
    assert all(f"number {i:02d}" in html for i in range(70))
    # still a DataFrame for code: selections keep the whole display
    assert isinstance(df, pd.DataFrame)
    assert "number 69" in df[df["we measured"] != ""]._repr_html_()
