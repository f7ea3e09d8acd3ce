"""Headline figures draw the paper's own reported values beside ours, at exactly the values its
paper folder's numbers.py quotes, labelled as the paper's."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from flkit.utils import FlkitError  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _staleness_hist():
    """Two methods, rounds 0..10 evaluated every 5, tau 2: our curves end at round 10."""
    rows = []
    for m, acc in (("unweighted", 0.3), ("gi_staleness", 0.5)):
        for r in (0, 5, 10):
            rows.append(
                {"method": m, "round": r, "tau": 2, "affected_accuracy": acc, "test_accuracy": 0.8}
            )
    return pd.DataFrame(rows)


def test_staleness_fig11_draws_table9_finals_in_each_methods_colour():
    from flkit.papers.staleness import figures

    fig = figures.accuracy_curves(_staleness_hist())
    ax = fig.axes[0]
    stars = {ln.get_gid(): ln for ln in ax.lines if (ln.get_gid() or "").startswith("paper:")}
    # Table 9, MNIST column, as printed in the paper
    expected = {
        "unweighted": 57.4,
        "weighted": 39.2,
        "first_order": 57.4,
        "w_pred": 57.3,
        "asyn_tiers": 57.6,
        "gi_staleness": 61.2,
    }
    assert {g.removeprefix("paper:"): list(ln.get_ydata()) for g, ln in stars.items()} == {
        m: [v] for m, v in expected.items()
    }
    # right of our last round (10), all at one x
    assert {float(ln.get_xdata()[0]) for ln in stars.values()} == {11.0}
    ours = {ln.get_label(): ln.get_color() for ln in ax.lines if ln.get_label() in ("Unweighted",)}
    assert stars["paper:unweighted"].get_markeredgecolor() == ours["Unweighted"]
    labels = ax.get_legend_handles_labels()[1]
    assert sum("paper" in lab and "Table 9" in lab and "800 rounds" in lab for lab in labels) == 1


def test_staleness_fig11_other_column_and_bad_column():
    from flkit.papers.staleness import figures

    fig = figures.accuracy_curves(_staleness_hist(), paper_dataset="cifar10")
    ys = {ln.get_gid(): ln.get_ydata()[0] for ln in fig.axes[0].lines if ln.get_gid()}
    assert ys["paper:gi_staleness"] == 29.4 and ys["paper:weighted"] == 12.6
    fig = figures.accuracy_curves(_staleness_hist(), paper_dataset=None)
    assert not [ln for ln in fig.axes[0].lines if ln.get_gid()]
    with pytest.raises(FlkitError, match="paper_dataset 'svhn'.*mnist, fmnist, cifar10"):
        figures.accuracy_curves(_staleness_hist(), paper_dataset="svhn")


def test_fedast_fig2_states_the_papers_setting_and_gain_from_numbers():
    from types import SimpleNamespace

    from flkit.papers.fedast import figures

    hist = [
        {"task": "t0", "round": 1, "sim_time": 1.0, "accuracy": 0.2},
        {"task": "t0", "round": 2, "sim_time": 2.0, "accuracy": 0.5},
    ]
    res = SimpleNamespace(history=hist, tasks=["t0"], completion_time={})
    preset = {
        "fig2_M": 2,
        "fig2_methods": ["fedast_s", "sync_st"],
        "target": 0.45,
        "dataset": "synthetic",
    }
    fig = figures.sync_variants_figure(preset, {(2, "fedast_s", 0): res, (2, "sync_st", 0): res}, 0)
    notes = [t for t in fig.axes[0].texts if t.get_gid() == "paper"]
    assert len(notes) == 1
    # Sec. 5.2 / Fig. 2 caption: six CIFAR-10 tasks, k = 30; abstract: up to 46.0 %
    text = notes[0].get_text()
    assert text.startswith("paper: Fig. 2 = 6 CIFAR-10 tasks, k 30, no values printed")
    assert "up to 46.0 % faster than Sync-ST" in text
    # our own curves are still there, under our labels
    assert len([ln for ln in fig.axes[0].lines if ln.get_label().startswith("FedAST")]) == 1


def _fedast_het_run(level: float):
    """Two tasks evaluated at t = 0..40, flat at ``level`` (mnist) and ``level / 3`` (fmnist):
    curves across the whole time axis, so a legend inside the axes would cover one of them."""
    from types import SimpleNamespace

    hist = [
        {"task": t, "round": r, "sim_time": float(r), "accuracy": acc}
        for t, acc in (("mnist", level), ("fmnist", level / 3))
        for r in range(0, 41, 4)
    ]
    return SimpleNamespace(history=hist, tasks=["mnist", "fmnist"], completion_time={})


@pytest.mark.parametrize("which", ["nobuffer", "heterogeneous"])
def test_fedast_het_figures_legend_covers_no_axes(which):
    """Figs. 4 and 6 list every curve and target once, in a legend outside the axes (inside, it
    sat over the upper curves, where the fastest task reaches its target)."""
    from flkit.papers.fedast import figures

    preset = {"het_targets_main": [0.83, 0.72]}
    a, b = _fedast_het_run(0.9), _fedast_het_run(0.6)
    if which == "nobuffer":
        fig = figures.nobuffer_figure(preset, a, b)
    else:
        fig = figures.heterogeneous_figure(preset, {("fedast_d", 0): a, ("sync_st", 0): b}, 0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [x.get_legend() for x in fig.axes if x.get_legend() is not None]
    assert len(legends) == 1
    texts = [t.get_text() for t in legends[0].get_texts()]
    # two methods x two tasks, then the two targets
    assert len(texts) == 6 and texts[-2:] == ["target mnist 0.83", "target fmnist 0.72"]
    box = legends[0].get_window_extent(renderer)
    for x in fig.axes:
        assert not box.overlaps(x.get_window_extent(renderer))
    # the legend stays on the figure
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)


def test_fedast_fig14_legend_covers_no_axes():
    """Fig. 14's eight curves (two methods x four tasks) are named in a legend below both panels
    (inside, it sat over the curves of the slower tasks); Fig. 13 keeps its own two-entry
    legend."""
    import pandas as pd

    from flkit.papers.fedast import figures

    def run(level):
        hist = [
            {"task": t, "round": r, "sim_time": float(r), "accuracy": 0.5, "test_loss": level * i}
            for i, t in enumerate(("mnist", "fmnist", "cifar10", "shakespeare"), start=1)
            for r in range(0, 41, 4)
        ]
        tasks = ["mnist", "fmnist", "cifar10", "shakespeare"]
        return SimpleNamespace(history=hist, tasks=tasks, completion_time={})

    act = pd.DataFrame(
        [
            {"label": m, "active": a, "seed": s, "final_test_loss": 0.6 + 0.1 * s + a / 500}
            for m in ("FedAST", "FedAST-NoBuffer")
            for a in (12, 96)
            for s in (0, 1)
        ]
    )
    fig = figures.test_loss_figure(act, run(1.0), run(0.8))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert len(fig.legends) == 1 and fig.axes[1].get_legend() is None
    assert len(fig.legends[0].get_texts()) == 8
    box = fig.legends[0].get_window_extent(renderer)
    for x in fig.axes:
        assert not box.overlaps(x.get_window_extent(renderer))
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "FedAST",
        "FedAST-NoBuffer",
    ]


def test_feddip_accuracy_vs_round_says_no_paper_values_and_its_setting():
    from types import SimpleNamespace

    from flkit.papers.feddip import figures

    h = pd.DataFrame({"round": [0, 1], "test_accuracy": [0.1, 0.3]})
    res = {
        ("fedavg", 0.0, 0): SimpleNamespace(history=h),
        ("feddip", 0.9, 0): SimpleNamespace(history=h),
    }
    fig = figures.accuracy_vs_round(res, 0.9)
    ax = fig.axes[0]
    notes = [t.get_text() for t in ax.texts if t.get_gid() == "paper"]
    # the official scripts: T 1000, N 50, K 5, L 5; the paper's accuracies were not retrieved
    assert notes == [
        "paper: no accuracy of its own replotted (its result tables are not in our copy);\n"
        "its code runs 1000 rounds, 50 clients, 5 per round, 5 local epochs"
    ]
    assert [list(ln.get_ydata()) for ln in ax.lines] == [[10.0, 30.0], [10.0, 30.0]]
    fig = figures.accuracy_vs_round(res, 0.9, paper_note=False)
    assert not fig.axes[0].texts


def test_staleness_fig11_legend_covers_no_panel():
    """The legend lists every method and the paper's stars once, and sits outside both panels
    (inside the left one it hid the early rounds, where the stale clients' lag starts)."""
    from flkit.papers.staleness import figures

    fig = figures.accuracy_curves(_staleness_hist())
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [a.get_legend() for a in fig.axes if a.get_legend() is not None]
    assert len(legends) == 1
    texts = [t.get_text() for t in legends[0].get_texts()]
    assert texts[:2] == ["Unweighted", "Ours (GI)"] and "Table 9" in texts[2]
    box = legends[0].get_window_extent(renderer)
    for a in fig.axes:
        assert not box.overlaps(a.get_window_extent(renderer)), a.get_ylabel()
