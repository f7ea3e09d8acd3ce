"""Interactive demos (flkit.workbook.widgets.Demo and every notebook's demo): a slider move, made
the way the browser makes it (setting the widget's value), leaves exactly one new picture in the
demo's one image and nothing stale (no other output, no figure left open for the inline backend to
show in a later cell); the static copy a batch run records is the demo's first state."""

from __future__ import annotations

import base64
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

W = pytest.importorskip("ipywidgets")

from IPython.utils.capture import capture_output  # noqa: E402

from flkit.data import DataNotFoundError  # noqa: E402
from flkit.utils import FlkitError  # noqa: E402
from flkit.workbook import presets, widgets  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
PRESETS = ("smoke", "cpu", "paper")


@pytest.fixture(autouse=True)
def own_run_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLKIT_RUNS", str(tmp_path / "cache"))
    plt.close("all")
    yield
    plt.close("all")


def images(widget) -> list:
    """Every Image widget in a widget tree."""
    found = [widget] if isinstance(widget, W.Image) else []
    for child in getattr(widget, "children", ()):
        found += images(child)
    return found


def check_move(demo: widgets.Demo, name: str, value, same_as_fresh_drawing: bool = True):
    """Move control ``name`` to ``value`` as the browser does and check what the reader sees."""
    first = bytes(demo.image.value)
    assert first.startswith(PNG)
    bundle = demo._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]) == first  # the static copy is the first state
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert images(demo.widget) == [demo.image]  # one figure, in one place
    assert demo.controls[name].value != value
    with capture_output() as cap:
        demo.controls[name].value = value
    assert demo.controls[name].value == value
    assert cap.outputs == [] and cap.stdout == "" and cap.stderr == ""  # nothing else shown
    assert plt.get_fignums() == []  # no figure left for the inline backend to dump later
    new = bytes(demo.image.value)
    assert new.startswith(PNG) and new != first  # one new picture replaced the old one
    assert images(demo.widget) == [demo.image]
    if same_as_fresh_drawing:  # ... and it is the picture of the new setting
        assert new == widgets.to_png(demo.draw(**demo.values()), demo.dpi)
    assert demo.seconds is not None and demo.cpu_seconds is not None
    return new


# ------------------------------------------------------------------ flkit.workbook.widgets


def _line(a):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, a])
    return fig


def test_demo_move_cache_and_threads():
    calls, threads_seen = [], []

    def draw(a):
        calls.append(a)
        threads_seen.append(torch.get_num_threads())
        return _line(a)

    threads = torch.get_num_threads()
    demo = widgets.Demo(draw, a=W.IntSlider(value=1, min=0, max=3))
    check_move(demo, "a", 2, same_as_fresh_drawing=False)
    assert threads_seen == [1, 1]  # the demo draws on one thread ...
    assert torch.get_num_threads() == threads  # ... and gives the others back afterwards
    assert bytes(demo.image.value) == widgets.to_png(_line(2), demo.dpi)
    n = len(calls)
    demo.controls["a"].value = 1  # drawn before: served from the cache
    assert len(calls) == n and bytes(demo.image.value) == widgets.to_png(_line(1), demo.dpi)


def test_demo_constrain_draws_once_per_move():
    calls = []

    def cap(controls):
        controls["lo"].max = controls["hi"].value

    def draw(lo, hi):
        calls.append((lo, hi))
        return _line(hi - lo)

    demo = widgets.Demo(
        draw,
        constrain=cap,
        lo=W.IntSlider(value=3, min=0, max=5),
        hi=W.IntSlider(value=5, min=0, max=10),
    )
    calls.clear()
    demo.controls["hi"].value = 2  # caps lo at 2 (a second value change), one drawing
    assert calls == [(2, 2)]


def test_demo_precompute_and_settings():
    calls = []

    def draw(a, b):
        calls.append((a, b))
        return _line(a)

    demo = widgets.Demo(
        draw,
        a=W.IntSlider(value=0, min=0, max=4, step=2),
        b=W.ToggleButtons(options=[("one", 1), ("two", 2)], value=1),
    )
    assert demo.settings() == [
        {"a": a, "b": b} for a in (0, 2, 4) for b in (1, 2)
    ]  # every combination, hand-listed
    assert demo.precompute() == 5  # the first state was drawn already
    calls.clear()
    demo.controls["a"].value = 4
    demo.controls["b"].value = 2
    assert calls == []  # moves only look pictures up
    assert bytes(demo.image.value) == widgets.to_png(_line(4), demo.dpi)
    with pytest.raises(FlkitError, match=r"6 settings to precompute; accepted: at most"):
        demo.precompute(max_settings=5)


def test_demo_refuses_what_it_cannot_do():
    with pytest.raises(FlkitError, match="at least one control"):
        widgets.Demo(_line)
    with pytest.raises(FlkitError, match=r"cache=-1"):
        widgets.Demo(_line, cache=-1, a=W.IntSlider())
    with pytest.raises(FlkitError, match=r"threads=0"):
        widgets.Demo(_line, threads=0, a=W.IntSlider())
    with pytest.raises(FlkitError, match=r"returned 'oops'.*matplotlib Figure"):
        widgets.Demo(lambda a: "oops", a=W.IntSlider())
    demo = widgets.Demo(_line, a=W.FloatSlider(value=1.0))
    with pytest.raises(FlkitError, match=r"control 'a' \(FloatSlider\) has no finite set"):
        demo.settings()


def test_log_stops():
    assert widgets.log_stops(0.1, 0.01, 100.0) == [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100]
    assert widgets.log_stops(0.05, 0.001, 1.0) == [0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.3, 1]
    assert widgets.log_stops(2.0, 1.0, 100.0, per_decade=1) == [1, 2, 10, 100]
    with pytest.raises(FlkitError, match=r"low=0, high=1"):
        widgets.log_stops(0.5, 0, 1)


def test_to_png_stacks_figures_top_to_bottom():
    from io import BytesIO

    from PIL import Image

    one = Image.open(BytesIO(widgets.to_png(_line(1), 50)))
    two = Image.open(BytesIO(widgets.to_png([_line(1), _line(2)], 50)))
    assert two.size == (one.width, 2 * one.height)
    assert plt.get_fignums() == []


# ------------------------------------------------------------------------------ the notebooks


def test_00_alpha_explorer():
    from flkit.papers.fl_primer import study as primer

    labels = torch.arange(10).repeat(100)
    demo = primer.alpha_explorer(labels, 10, 20, seed=0, alpha=0.1)
    assert demo.controls["alpha"].value == pytest.approx(0.1)
    check_move(demo, "alpha", 10.0)


def test_01_fig1_demo():
    from flkit.papers.stc_projection.demo import fig1_demo

    update = torch.randn(30, 40, generator=torch.Generator().manual_seed(0))
    demo = fig1_demo(update, p=0.1)
    check_move(demo, "p", 0.01)


def test_02_feddip_demo_caps_s0_at_s_p():
    from flkit.papers.feddip.demo import demo_widget

    w = torch.linspace(-1, 1, 200).reshape(10, 20)
    fake = {"layer": "w", "dense_acc": 0.9}

    def pruned_accuracy(demo, s_p):  # magnitude mask by hand: keep the largest (1 - s_p)
        keep = w.abs() >= w.abs().flatten().kthvalue(max(1, int(s_p * w.numel()))).values
        return 0.5, {"w": keep}

    demo = demo_widget(fake, pruned_accuracy, 20, 0.0, 0.8, 1e-3, 5)
    check_move(demo, "s_p", 0.5)
    assert demo.controls["s0"].max == 0.5  # s0 can never exceed s_p


@pytest.mark.parametrize("preset", PRESETS)
def test_03_sliders_start_at_the_first_setting_at_every_preset(preset):
    """ipywidgets clamps a value outside its slider's range silently (the demo once started at
    R = 6 while its text and figure said R = 8 at smoke)."""
    from flkit.papers.fedast.demo import START, controls

    loaded = presets.load("03_fedast", preset)
    sliders = controls(loaded)
    assert {k: w.value for k, w in sliders.items()} == START
    assert (
        sliders["tasks"].max >= loaded["demo_max_tasks"] or sliders["tasks"].max == START["tasks"]
    )


def test_03_fedast_demo():
    from flkit.papers.fedast.demo import demo_widget

    demo = demo_widget(presets.load("03_fedast", "smoke"), seed=0, precompute=False)
    check_move(demo, "requests", 4)


@pytest.mark.parametrize("preset", PRESETS)
def test_04_slider_holds_keep_ratio(preset):
    loaded = presets.load("04_hidenseek", preset)
    ratios = sorted({*map(float, loaded["demo_ratios"]), float(loaded["keep_ratio"])})
    assert float(loaded["keep_ratio"]) in ratios


def test_04_hidenseek_demo():
    from flkit.papers.hidenseek.demo import demo_widget

    loaded = presets.load("04_hidenseek", "smoke")
    demo = demo_widget(loaded, seed=0, precompute=False)
    assert demo.controls["p_r"].value == pytest.approx(loaded["keep_ratio"])
    other = next(r for r in demo.controls["p_r"].options if r != demo.controls["p_r"].value)
    check_move(demo, "p_r", other)
    check_move(demo, "rule", "mean")


def test_05_staleness_values():
    from flkit.papers.staleness.demo import staleness_values

    assert staleness_values(20, 50) == [1, 5, 10, 20, 40]
    assert staleness_values(2, 5) == [1, 2, 4]
    assert staleness_values(40, 30) == [1, 7, 15, 30]  # tau beyond the rounds: the last round


@pytest.mark.slow
def test_05_staleness_demo():
    from flkit.papers.staleness import estimation
    from flkit.papers.staleness.demo import demo_widget

    loaded = presets.load("05_staleness", "smoke")
    try:
        tr = estimation.Trajectory(loaded, 0)
    except DataNotFoundError:
        if os.environ.get("FLKIT_REQUIRE_DATA") == "1":
            raise
        pytest.skip("MNIST not found (set FLKIT_DATA)")
    demo = demo_widget(loaded, tr, precompute=False)
    check_move(demo, "client", 1, same_as_fresh_drawing=False)
