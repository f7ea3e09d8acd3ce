"""The shared plotting helpers: the house-style block leaves the session's interactive mode alone
(issue 17: notebook 00 lost 3 of its 4 figures), round axes get whole-number ticks."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from flkit.utils import FlkitError  # noqa: E402
from flkit.workbook import plots


@pytest.fixture
def non_interactive():
    before = mpl.is_interactive()
    mpl.interactive(False)
    yield
    mpl.interactive(before)


def test_style_keeps_interactive_mode_switched_on_inside(non_interactive):
    """Jupyter's inline backend switches interactive mode on when the first figure of the session
    is made; when that happens inside the block, it must still be on afterwards."""
    size = mpl.rcParams["font.size"]
    with plots.style():
        mpl.interactive(True)  # what the backend's activation does
        assert mpl.rcParams["font.size"] == plots.STYLE["font.size"]
        mpl.rcParams["lines.linewidth"] = 9.0
    assert mpl.is_interactive()
    assert mpl.rcParams["font.size"] == size  # the style itself is undone
    assert mpl.rcParams["lines.linewidth"] != 9.0


def test_style_keeps_interactive_mode_after_an_error(non_interactive):
    with pytest.raises(RuntimeError), plots.style():
        mpl.interactive(True)
        raise RuntimeError("drawing failed")
    assert mpl.is_interactive()


def test_style_leaves_interactive_off_when_nothing_changed_it(non_interactive):
    with plots.style():
        pass
    assert not mpl.is_interactive()


@pytest.mark.parametrize("axis", ["x", "y", "both"])
def test_integer_ticks(axis):
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])  # default ticks: 1.0, 1.2, ... 2.0
    plots.integer_ticks(ax, axis)
    fig.canvas.draw()
    names = ("x", "y") if axis == "both" else (axis,)
    for name in ("x", "y"):
        lo, hi = getattr(ax, f"get_{name}lim")()
        ticks = [t for t in getattr(ax, f"get_{name}ticks")() if lo <= t <= hi]
        whole = all(float(t).is_integer() for t in ticks)
        assert whole == (name in names), (name, ticks)
    plt.close(fig)


def test_integer_ticks_bad_axis():
    fig, ax = plt.subplots()
    with pytest.raises(FlkitError, match=r"axis='z'.*'x', 'y', 'both'"):
        plots.integer_ticks(ax, "z")
    plt.close(fig)
