"""The reproduce report read top-down (flkit.reproduce.sections, written by render.write_reports):
on a hand-made results folder of two seeds, a notebook's section is exactly the expected Markdown:
claims first (verdict, evidence, regime beside the paper's value, a shared source once), then the
numbers as a methods x settings table (unit in the title, the paper's value beside ours, one note
per table), then the figures under the claim they support. The HTML shows each verdict with an
Okabe-Ito colour (blue, vermillion, orange, grey), a symbol and the word, never colour
alone, in black or white text, whichever reads better on it."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from flkit.reproduce import sections
from flkit.reproduce.render import write_reports
from flkit.utils import FlkitError
from flkit.workbook import verdict as vd
from flkit.workbook.report import Report

FIXTURE_PRESETS = Path(__file__).resolve().parent / "fixtures" / "presets"
NOTE = "paper's table not recoverable"
CLOSE = "FedDIP is close to dense"
BEATS = "FedDIP beats DPF at s = 0.9"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a1e1a4b70000000049454e44ae426082"
)
INKS = ["#fff", "#000", "#000", "#fff"]  # text on each verdict's colour, in VERDICTS order
# per seed: (DPF s=0.8, DPF s=0.9, FedDIP s=0.8, FedDIP s=0.9, drift IID, drift Dir)
VALUES = {0: (70.0, 60.0, 71.0, 68.0, 0.18, 0.44), 1: (72.0, 64.0, 71.0, 70.0, 0.20, 0.46)}

EXPECTED_SECTION = """\
<a id="fixture_ok"></a>

## fixture_ok: Fixture: one number, one claim, one figure

Status **ok** · notebook `fixture_ok.ipynb` · preset cpu · seeds 0, 1 · device cpu · \
run time seed 0: 3.0 s, seed 1: 4.0 s

Data used: not recorded

### Claims

| claim | verdict | evidence | regime |
|---|---|---|---|
| FedDIP is close to dense | ◇ **outside regime (2 outside regime of 2 seeds)**: at face value \
it does not hold | gap 2.1 (seed 0) | FedAvg share: ours 0.3, paper 0.985, rule ≥ 0.75 → OUT |
| FedDIP beats DPF at s = 0.9 | ✓ **holds (2 holds of 2 seeds)** | 68 vs 60 (seed 0) | — |

*Source in the paper, for every claim: Sec. VI.*

### Numbers

Numbers are mean ± std over 2 seeds.

**fmnist: final top-1 accuracy** (%)

| | s = 0.8 | s = 0.9 |
|---|---|---|
| DPF | 71 ± 1.4 | 62 ± 2.8 |
| FedDIP | 71 ± 0 | 69 ± 1.4 (paper 72.5) |

*paper's table not recoverable*

**Other numbers**

| | paper reports | we measured |
|---|---|---|
| LeNet-5 parameters | 61706 params | 61706 ± 0 params |

| | paper reports | we measured |
|---|---|---|
| client drift, IID |  | 0.19 ± 0.014 L2 |
| client drift, Dir(0.1) |  | 0.45 ± 0.014 L2 |

*mean over 5 clients*

### Figures

**FedDIP beats DPF at s = 0.9**: ✓ holds (2 holds of 2 seeds)

![accuracy_vs_round (seed 0)](fixture_ok/seed0/accuracy_vs_round.png)

**Other figures**

![drift (seed 0)](fixture_ok/seed0/drift.png)

"""


@pytest.fixture(autouse=True)
def fixture_presets(monkeypatch):
    for var in ("FLKIT_REPORT_DIR", "FLKIT_RUNS_DIR", "FLKIT_PRESET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FLKIT_PRESET_PATH", str(FIXTURE_PRESETS))


def _share(ours: float, inside: bool) -> dict:
    return {
        "key": "share",
        "indicator": "FedAvg share",
        "ours": ours,
        "per_seed": None,
        "paper": 0.985,
        "rule": "≥ 0.75",
        "unit": "",
        "inside": inside,
    }


def _results(seed: int) -> dict:
    """One seed's results.json, written by hand (no Report involved)."""
    dpf8, dpf9, dip8, dip9, iid, dirichlet = VALUES[seed]
    acc = "fmnist: final top-1 accuracy"

    def num(key, measured, paper=None, unit="%", note=NOTE):
        return {"key": key, "measured": measured, "paper": paper, "unit": unit, "note": note}

    drift = "mean over 5 clients"
    numbers = [
        num(f"{acc}, DPF, s = 0.8", dpf8),
        num(f"{acc}, DPF, s = 0.9", dpf9),
        num(f"{acc}, FedDIP, s = 0.8", dip8),
        num(f"{acc}, FedDIP, s = 0.9", dip9, paper=72.5),
        num("LeNet-5 parameters", 61706, paper=61706, unit="params", note=""),
        num("client drift, IID", iid, unit="L2", note=drift),
        num("client drift, Dir(0.1)", dirichlet, unit="L2", note=drift),
    ]
    claims = [
        {
            "text": CLOSE,
            "verdict": vd.OUTSIDE_REGIME,
            "holds": None,
            "face": False,
            "reason": "FedAvg share: ours 0.3, paper 0.985 (rule ≥ 0.75); at face value it does "
            "not hold",
            "evidence": "gap 2.1",
            "paper": "Sec. VI",
            "regime": [_share(0.3, False)],
        },
        {
            "text": BEATS,
            "verdict": vd.HOLDS,
            "holds": True,
            "face": True,
            "reason": "",
            "evidence": f"{dip9:g} vs {dpf9:g}",
            "paper": "Sec. VI",
            "regime": [],
        },
    ]
    figures = [
        {"name": "accuracy_vs_round", "file": "accuracy_vs_round.png", "claims": [BEATS]},
        {"name": "drift", "file": "drift.png"},
    ]
    return {"seed": seed, "device": "cpu", "numbers": numbers, "claims": claims, "figures": figures}


def _write_folder(out: Path):
    infos = []
    for seed, wall in ((0, 3.0), (1, 4.0)):
        d = out / "fixture_ok" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(_results(seed)), encoding="utf-8")
        for name in ("accuracy_vs_round", "drift"):
            (d / f"{name}.png").write_bytes(PNG)
        infos.append(
            {
                "notebook": "fixture_ok",
                "seed": seed,
                "status": "ok",
                "results": True,
                "wall_time_s": wall,
                "parameters": {"preset": "cpu", "seed": seed},
            }
        )
    plan = {
        "out": out,
        "notebooks": ["fixture_ok"],
        "preset": "cpu",
        "seeds": [0, 1],
        "jobs": 1,
        "overrides": {},
        "notebooks_dir": str(out),
    }
    write_reports(plan, infos)
    return out


def test_section_of_a_hand_made_folder_is_exactly_the_expected_markdown(tmp_path):
    md = (_write_folder(tmp_path) / "report.md").read_text(encoding="utf-8")
    assert md[md.index('<a id="fixture_ok">') :] == EXPECTED_SECTION


def test_html_reads_in_the_same_order_with_labelled_verdicts(tmp_path):
    doc = (_write_folder(tmp_path) / "report.html").read_text(encoding="utf-8")
    part = doc[doc.index("<h2 id='fixture_ok'>") :]
    order = ["<h3>Claims</h3>", "<h3>Numbers</h3>", "<h3>Figures</h3>", "<b>Other figures</b>"]
    assert [part.index(x) for x in order] == sorted(part.index(x) for x in order)
    colour, symbol = vd.STYLE[vd.HOLDS]
    badge = f"<span class='verdict' style='background:{colour};color:#fff'>{symbol} holds</span>"
    assert f"<td>{badge} <span class='seeds'>2 holds of 2 seeds</span></td>" in part
    # the figure sits under the claim it supports, before the figures that support none
    assert (
        part.index(f"<p class='supports'><b>{BEATS}</b> {badge}</p>")
        < part.index("alt='accuracy_vs_round'")
        < part.index("<b>Other figures</b>")
        < part.index("alt='drift'")
    )
    # once per table, once per source
    assert part.count(html.escape(NOTE)) == 1 and part.count("Sec. VI") == 1
    assert "<tr><th>FedDIP</th><td>71 ± 0</td><td>69 ± 1.4 (paper 72.5)</td></tr>" in part
    # the legend names each verdict beside its colour and symbol, in the ink that reads on it
    for v, ink in zip(vd.VERDICTS, INKS):
        colour, symbol = vd.STYLE[v]
        label = f"<span class='verdict' style='background:{colour};color:{ink}'>{symbol} {v}</span>"
        assert label in doc


def test_verdict_styles_are_four_distinct_okabe_ito_colours_and_symbols():
    colours = [vd.STYLE[v][0] for v in vd.VERDICTS]
    symbols = [vd.STYLE[v][1] for v in vd.VERDICTS]
    assert len(set(symbols)) == 4
    # Okabe-Ito blue, vermillion, orange; a neutral grey for the undecided
    assert colours == ["#0072B2", "#D55E00", "#E69F00", "#6E6E6E"]
    # WCAG relative luminance by hand: blue 0.152, vermillion 0.222, orange 0.416, grey 0.156;
    # black wins where (L + 0.05) / 0.05 > 1.05 / (L + 0.05), i.e. L > 0.179
    assert [sections.ink(c) for c in colours] == INKS


def test_a_table_needs_two_rows_and_two_columns_with_one_note():
    def row(key, note=""):
        return {"kind": "number", "key": key, "item": key, "measured": "1", "paper": "",
                "unit": "", "note": note}  # fmt: skip

    one_column = [row("t, A, x"), row("t, B, x")]
    two_notes = [row("t, A, x", "a"), row("t, A, y", "a"), row("t, B, x", "b"), row("t, B, y", "b")]
    assert sections.number_groups(one_column)[0] == []
    assert sections.number_groups(two_notes)[0] == []  # each note's half has one row only
    tables, rest = sections.number_groups(two_notes[:2] + [row("t, B, x", "a")])
    assert rest == [] and tables[0]["cells"] == {("A", "x"): "1", ("A", "y"): "1", ("B", "x"): "1"}


def test_units_leave_the_cells_only_after_numbers():
    r = {"measured": "45.9 ± 1.2 s (n=3)", "paper": "40 s", "unit": "s"}
    assert sections._cell(r, "s", all_seeds_said=True) == "45.9 ± 1.2 (paper 40)"
    # "(2 of 3 seeds)": a word starting with the unit's letter is not a unit
    r = {"measured": "45.9 s (2 of 3 seeds)", "paper": "", "unit": "s"}
    assert sections._cell(r, "s", all_seeds_said=True) == "45.9 (2 of 3 seeds)"


def test_figure_records_the_claims_it_supports(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path, autosave=False)
    fig, _ = plt.subplots()
    r.figure(fig, "curve", claims=BEATS)
    r.figure(fig, "plain")
    plt.close(fig)
    assert r.to_dict()["figures"] == [
        {"name": "curve", "file": "curve.png", "claims": [BEATS]},
        {"name": "plain", "file": "plain.png"},
    ]
    with pytest.raises(FlkitError, match="claims=3; accepted: the text of a claim"):
        r.figure(None, "bad", claims=[3])
    assert not (tmp_path / "bad.png").exists()  # refused before any work


def test_notebook_table_lists_claims_before_numbers(tmp_path):
    r = Report("fixture_ok", "cpu", 0, out_dir=tmp_path, autosave=False)
    r.number("acc", 0.9)
    r.claim("first claim", True)
    r.number("loss", 0.1)
    r.claim("second claim", False)
    df = r.table()
    assert list(df.index) == ["first claim", "second claim", "acc", "loss"]
    assert df["verdict"].tolist() == ["holds", "does not hold", "", ""]
