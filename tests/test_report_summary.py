"""The report says how many claims hold, do not hold and are inconclusive (separately), leaves the
paper cell of a claim without a source blank, and writes numbers for people (3 significant
digits), through one formatting function for every paper."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flkit.report import Report
from flkit.reproduce.render import CLAIMS_HEAD, write_reports
from flkit.results import claim_counts, format_value, readable, readable_text, summarize

FIXTURE_PRESETS = Path(__file__).resolve().parent / "fixtures" / "presets"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("FLKIT_REPORT_DIR", "FLKIT_RUNS_DIR", "FLKIT_PRESET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURE_PRESETS))


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
    assert claim_counts(rows) == {"holds": 2, "does not hold": 1, "inconclusive": 1}
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
    assert re.search(r"\| \[fixture_ok\]\(#fixture_ok\) \| ok \| 1/1 \| [^|]+ \| 2 / 1 / 1 \|", md)
    assert "| claim 0 |  | ours 45.9 vs 40 | yes |" in md  # no paper source: blank, not "claim"
    assert "| claim 2 |  | ours 47.9 vs 40 | inconclusive |" in md
    assert "| rounds to 95% |  | 45.9 rounds |  |" in md
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
    assert claim_counts(rows) == {"holds": 1, "does not hold": 1, "inconclusive": 2}
