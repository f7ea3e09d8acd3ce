"""The reproduce report read top-down (flkit.reproduce.sections): claims first with verdict,
evidence and regime; numbers grouped as tables (methods x settings) with one note per table; the
HTML shows each verdict with an Okabe-Ito colour, a symbol and the word (never colour alone)."""

from __future__ import annotations

from flkit.reproduce import sections
from flkit.workbook import verdict as vd
from flkit.workbook.report import Report
from flkit.workbook.results import summarize

NOTE = "mean of 2 seed(s); paper's table not recoverable"


def _rows(tmp_path):
    r = Report("fixture", "cpu", 0, out_dir=tmp_path, autosave=False)
    for method, accs in (("DPF", (70.1, 68.0)), ("FedDIP", (71.0, 69.5))):
        for s, acc in zip((0.8, 0.9), accs):
            r.number(f"fmnist: final top-1 accuracy, {method}, s = {s:g}", acc, unit="%", note=NOTE)
    r.number("dense FedAvg accuracy", 71.6, paper=90, unit="%", note="40 rounds")
    share = vd.Indicator("share", "FedAvg share", 0.985, vd.at_least(0.75))
    r.claim(
        "FedDIP is close to dense",
        False,
        evidence="gap 2.1",
        paper="Sec. VI",
        regime=[share.read(0.3)],
    )
    return summarize([r.to_dict()])


def test_numbers_form_one_table_with_one_note(tmp_path):
    tables, rest = sections.number_groups(_rows(tmp_path))
    assert len(tables) == 1 and [r["key"] for r in rest] == ["dense FedAvg accuracy"]
    t = tables[0]
    assert (t["title"], t["unit"], t["note"]) == ("fmnist: final top-1 accuracy", "%", NOTE)
    assert t["rows"] == ["DPF", "FedDIP"] and t["columns"] == ["s = 0.8", "s = 0.9"]
    assert t["cells"][("FedDIP", "s = 0.9")] == "69.5%"
    md = "\n".join(sections.numbers_md(_rows(tmp_path)))
    assert md.count(NOTE) == 1  # one note per table, not one per row
    assert "| | s = 0.8 | s = 0.9 |\n|---|---|---|\n| DPF | 70.1% | 68% |" in md
    assert "| dense FedAvg accuracy | 90% | 71.6% |" in md and "*40 rounds*" in md


def test_claims_lead_with_verdict_evidence_and_regime(tmp_path):
    md = "\n".join(sections.claims_md(_rows(tmp_path)))
    assert md.startswith("### Claims\n\n| claim | verdict | evidence | regime |")
    assert (
        "| FedDIP is close to dense (Sec. VI) | ◇ **outside regime**: FedAvg share: ours 0.3, "
        "paper 0.985 (rule ≥ 0.75); at face value it does not hold | gap 2.1 | "
        "FedAvg share: ours 0.3, paper 0.985, rule ≥ 0.75 → OUT |" in md
    )


def test_html_verdicts_have_colour_symbol_and_word(tmp_path):
    html = "\n".join(sections.claims_html(_rows(tmp_path)))
    colour, symbol = vd.STYLE[vd.OUTSIDE_REGIME]
    assert f"background:{colour}'>{symbol} outside regime</span>" in html
    colours = [vd.STYLE[v][0] for v in vd.VERDICTS]
    symbols = [vd.STYLE[v][1] for v in vd.VERDICTS]
    assert len(set(colours)) == 4 and len(set(symbols)) == 4
    # Okabe-Ito: bluish green, vermillion, blue; grey for the undecided
    assert colours == ["#009E73", "#D55E00", "#0072B2", "#6E6E6E"]
