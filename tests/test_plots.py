"""The house figure helpers (flkit.workbook.plots) and the figures built on them: a palette that
reads on white, one style cycle that never repeats colour and dash together, labelled targets and
paper numbers, coincident curves named, shared colour scales, readable log ticks."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from flkit.utils import FlkitError  # noqa: E402
from flkit.workbook import plots


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _contrast_on_white(hex_colour: str) -> float:
    """WCAG 2 contrast ratio of a colour against white, from its sRGB channels."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return 1.05 / (lum + 0.05)


def test_every_palette_colour_reads_on_white():
    # Okabe-Ito's yellow, the NoBuffer colour readers could not see, is the case this rejects
    assert _contrast_on_white("#F0E442") < 1.5
    for c in plots.COLORS:
        assert _contrast_on_white(c) >= 2.0, c
    assert "#F0E442" not in plots.COLORS


def test_style_cycle_is_stable_and_never_repeats_colour_with_dash():
    names = [f"series-{i}-{id(plots)}" for i in range(12)]
    styles = [plots.style_for(n) for n in names]
    pairs = {(s["color"], s["linestyle"]) for s in styles}
    assert len(pairs) == 12  # 6 colours x 4 dashes before any repeat
    assert plots.style_for(names[3]) == styles[3]  # same name, same look
    assert plots.color_for(names[5]) == styles[5]["color"]
    # markers thinned to about 12 on a 120-point line, with a per-series phase
    kw = plots.style_for(names[1], points=120)
    assert kw["markevery"][1] == 10


def test_coincident_by_hand():
    idx = [1, 2, 3]
    a = pd.Series([0.0, 1.0, 2.0], index=idx)
    b = pd.Series([0.0, 1.0, 2.004], index=idx)  # 0.004 <= 0.005 x range 2 = 0.01
    c = pd.Series([0.0, 1.0, 2.5], index=idx)
    pairs = plots.coincident({"a": a, "b": b, "c": c})
    assert [(x, y) for x, y, _ in pairs] == [("a", "b")]
    assert pairs[0][2] == pytest.approx(0.004)
    assert plots.coincident({"a": a, "b": b}, tol=0.001) == []
    assert "a and b coincide" in plots.coincident_text(pairs)
    # three equal curves make one group, not three pairs
    three = plots.coincident({"x": a, "y": a.copy(), "z": a.copy()})
    assert len(three) == 3
    assert plots.coincident_text(three, width=200).startswith("x, y and z coincide (max diff 0)")
    # a different x grid is not a coincidence
    assert plots.coincident({"a": a, "d": pd.Series([0.0, 1.0, 2.0], index=[1, 2, 4])}) == []


def test_paper_line_needs_exactly_one_coordinate():
    _, ax = plt.subplots()
    with pytest.raises(FlkitError, match="exactly one"):
        plots.paper_line(ax)
    with pytest.raises(FlkitError, match="exactly one"):
        plots.paper_line(ax, y=1.0, x=2.0)
    line = plots.paper_line(ax, y=0.95)
    assert line.get_label() == "paper" and line.get_linestyle() == "--"


def test_normalised_heat_maps_share_one_scale():
    labels = torch.arange(10).repeat(30)
    parts_even = [torch.arange(i, 300, 3) for i in range(3)]  # every class, 10 % each
    parts_skew = [torch.arange(0, 30), torch.arange(30, 60), torch.arange(60, 300)]  # one class
    _, (a1, a2) = plt.subplots(1, 2)
    plots.label_distribution(parts_even, labels, 10, ax=a1, normalize=True, colorbar=False)
    plots.label_distribution(parts_skew, labels, 10, ax=a2, normalize=True, colorbar=False)
    assert a1.images[0].get_clim() == (0.0, 1.0) == a2.images[0].get_clim()
    _, a3 = plt.subplots()
    plots.label_distribution(parts_even, labels, 10, ax=a3, vmax=50, colorbar=False)
    assert a3.images[0].get_clim() == (0.0, 50.0)


# ------------------------------------------------------------------ notebook 01 figures
def _run(acc, var=None):
    n = len(acc)
    h = pd.DataFrame(
        {
            "round": np.arange(1, n + 1),
            "client_acc_mean": acc,
            "client_acc_var": var if var is not None else np.linspace(0.01, 0.02, n),
        }
    )
    return SimpleNamespace(history=h)


def test_stc_curves_label_targets_paper_and_coincidence():
    from flkit.papers.stc_projection import figures as figs

    acc = np.linspace(0.1, 0.9, 20)
    res = {
        ("fedavg", 0): _run(acc),
        ("stc", 0): _run(acc.copy()),  # the same curve: must be said, not hidden
        ("stc_pa", 0): _run(acc * 0.5),
    }
    ax = figs.curves(
        res,
        target=0.9,
        paper_target=0.95,
        paper_rounds={"fedavg": 197, "stc": 15, "stc_pa": None},
    )
    labels = ax.get_legend_handles_labels()[1]
    assert "our target 90" in labels and "paper target 95" in labels
    assert "paper: STC at round 15" in labels  # within our 20 rounds: a marker
    notes = [t.get_text() for t in ax.texts]
    assert any("FedAvg 197" in t for t in notes)  # beyond round 20: written at the edge
    assert "FedAvg and STC coincide" in ax.get_legend().get_title().get_text()
    assert "STC-PA" not in ax.get_legend().get_title().get_text()
    # the three methods differ in colour or dash
    looks = {(line.get_color(), line.get_linestyle()) for line in ax.lines[:3]}
    assert len(looks) == 3


def test_ablation_plot_from_zero_with_stc_default_and_spread():
    from flkit.papers.stc_projection import figures as figs

    df = pd.DataFrame(
        {
            "setting": ["STC", "α=0.1, τ=1 (default)", "α=1, τ=1"] * 2,
            "seed": [0, 0, 0, 1, 1, 1],
            "rounds": 40,
            "final_acc": [88.0, 90.0, 89.0, 86.0, 92.0, 89.0],
            "variance": [30.0, 20.0, 25.0, 34.0, 22.0, 25.0],
        }
    )
    fig = figs.ablation_plot(df)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0.0
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "STC"
    assert "2 seeds" in fig._suptitle.get_text()
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([87.0, 91.0, 89.0])  # means over the two seeds
    # whiskers span min..max: STC 86..88
    segs = [c for c in ax.collections if hasattr(c, "get_segments")][0].get_segments()
    assert sorted(segs[0][:, 1].tolist()) == pytest.approx([86.0, 88.0])


# ------------------------------------------------------------------ notebook 03 figures
def test_fedast_sweep_plot_plain_log_ticks_and_missing_points_said():
    from flkit.papers.fedast import panels

    df = pd.DataFrame(
        {
            "buffer": [1, 2, 4, 8, 16] * 2,
            "task": ["mnist"] * 5 + ["fmnist"] * 5,
            "time": [100.0, np.nan, np.nan, np.nan, np.nan, 50.0, 60.0, 70.0, 80.0, 90.0],
        }
    )
    ax = panels.sweep_plot(
        df, "buffer", "time", hue="task", logx=True, missing="target not reached", paper_x=38 / 35
    )
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["1", "2", "4", "8", "16"]
    assert ax.xaxis.get_minor_ticks() == [] or not any(
        t.label1.get_text() for t in ax.xaxis.get_minor_ticks()
    )
    labels = ax.get_legend_handles_labels()[1]
    assert "mnist: target not reached at buffer = 2, 4, 8, 16" in labels
    assert "paper" in labels


def test_fedast_queue_timeline_title_counts_the_run_tasks():
    """The queue figure's title names the run's own number of tasks (the `cpu` mix has four)."""
    from flkit import asyncfl
    from flkit.papers.fedast import panels, study
    from flkit.workbook import presets

    pre = presets.load("03_fedast", "cpu")
    for n_tasks in (6, 1):
        cfg = study.fig2_config(pre, "fedast_s", n_tasks=n_tasks)
        res = asyncfl.timing_run(cfg, seed=0, horizon=10.0)
        title = panels.queue_timeline(res, t_max=10.0).get_title()
        want = f"requests of {n_tasks} task{'s' if n_tasks > 1 else ''},"
        assert want in title, title
        plt.close("all")


def test_fedast_staleness_hist_outlines_and_says_identical(monkeypatch):
    from flkit.papers.fedast import panels, tables

    # a fresh session's style registry: which styles two names get depends on how many names
    # earlier figures of the session registered (four line styles cycle), not on this panel
    monkeypatch.setattr(plots, "_NAMED", {})
    st = {
        "a": pd.DataFrame({"staleness": [0, 1, 1, 2, 3]}),
        "b": pd.DataFrame({"staleness": [0, 1, 1, 2, 3]}),
    }
    monkeypatch.setattr(tables, "staleness", lambda res: st[res])
    ax = panels.staleness_hist({"FedAST": "a", "NoBuffer": "b"})
    steps = [p for p in ax.patches if p.get_fill() is False]
    assert len(steps) == 2 and steps[0].get_linestyle() != steps[1].get_linestyle()
    assert "coincide" in ax.get_legend().get_title().get_text()


def test_fedast_het_bars_title_spread_and_paper_stars():
    from flkit.papers.fedast import panels

    df = pd.DataFrame(
        {
            "task": ["mnist", "fmnist"] * 4,
            "label": ["FedAST"] * 4 + ["Sync-ST"] * 4,
            "seed": [0, 0, 1, 1] * 2,
            "time": [90.0, 300.0, 110.0, 320.0, 300.0, 700.0, 340.0, 760.0],
        }
    )
    ax = panels.het_bars(df, paper={"FedAST": {"mnist": 98}, "Sync-ST": {"mnist": 360}})
    assert "2 seeds" in ax.get_title()
    assert [p.get_height() for p in ax.patches] == pytest.approx([100.0, 310.0, 320.0, 730.0])
    stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
    assert sorted(float(s.get_ydata()[0]) for s in stars) == [98.0, 360.0]
    assert ax.get_legend_handles_labels()[1].count("paper") == 1


def test_fedast_gain_bars_state_the_sign_convention():
    from flkit.papers.fedast import panels, tables

    df = pd.DataFrame(
        {
            "M": [2, 2, 4, 4],
            "method": ["sync_st", "fedast_d"] * 2,
            "seed": 0,
            "all_done": [100.0, 80.0, 200.0, 220.0],
        }
    )
    ax = panels.gain_bars(tables.gain_table(df), df, paper_note="paper: up to 46.0 %")
    title = ax.get_legend().get_title().get_text()
    assert "gain = (T_Sync-ST − T_FedAST) / T_Sync-ST;\n> 0: FedAST faster" in title
    assert "paper: up to 46.0 %" in title
    texts = [t.get_text() for t in ax.texts]
    assert texts[0].startswith("+20.0%") and texts[1].startswith("-10.0%")


def test_fedast_single_evaluation_run_is_labelled(monkeypatch):
    from flkit.papers.fedast import panels, tables

    cur = {
        "long": pd.DataFrame(
            {"sim_time": [1.0, 2.0, 3.0], "task": "t", "accuracy": [0.2, 0.4, 0.6]}
        ),
        "short": pd.DataFrame({"sim_time": [2.0], "task": "t", "accuracy": [0.5]}),
    }
    monkeypatch.setattr(tables, "curves", lambda res: cur[res])
    ax = panels.accuracy_curves({"A": "long", "B": "short"}, targets={"target": 0.45})
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["A", "B (1 evaluation)", "target 0.45"]
    assert ax.lines[1].get_marker() not in (None, "", "None")  # the lone point is visible
