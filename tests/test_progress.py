"""Progress bars (issue 17): a run that stops at its target ends its bar as finished, counters
show at most 3 significant digits, an inner bar goes away when done."""

from __future__ import annotations

import io

import pytest

from flkit import progress


def _text(b) -> str:
    return b.format_meter(**b.format_dict)


def test_counters_have_at_most_three_significant_digits():
    b = progress.bar(total=400.0, desc="FedAST", file=io.StringIO())
    b.n = 47.10635706118343
    text = _text(b)
    assert "47.1/400" in text and "47.106" not in text
    b.n = 1234
    b.total = 5000
    assert "1.23k/5.00k" in _text(b)
    progress.finish(b)


def test_finish_fills_a_bar_stopped_early():
    """tqdm's notebook bar turns red when closed below its total (tqdm.notebook.close: n < total
    means 'danger'); a run stopped at its target is a success."""
    b = progress.bar(total=400.0, file=io.StringIO())
    b.n = 47.1
    progress.finish(b)
    assert b.n == b.total
    failed = progress.bar(total=400.0, file=io.StringIO())
    failed.n = 47.1
    progress.finish(failed, done=False)  # an error: the bar keeps where it stopped
    assert failed.n == pytest.approx(47.1)
    progress.finish(None)  # no bar (progress off): nothing to do


@pytest.fixture
def notebook_bars(monkeypatch):
    """progress.bar as it is in Jupyter: tqdm.auto gives the widget bar."""
    pytest.importorskip("ipywidgets")
    import tqdm.auto
    from tqdm.notebook import tqdm_notebook

    monkeypatch.setattr(tqdm.auto, "tqdm", tqdm_notebook)


def test_notebook_bar_stopped_at_target_is_not_red_and_goes_away(notebook_bars):
    b = progress.bar(total=400.0, desc="FedAST (2 tasks, seed 0)", unit="t")
    label, widget = b.container.children[0], b.container.children[1]
    assert label.layout.flex == "0 0 auto"  # the label keeps its width: no wrap mid-word
    b.n = 47.1
    progress.finish(b)
    assert widget.bar_style != "danger"
    assert b.container.comm is None  # an inner bar (leave=False) is closed: gone from the page


def test_notebook_bar_of_a_failed_run_is_red(notebook_bars):
    b = progress.bar(total=400.0)
    b.n = 47.1
    progress.finish(b, done=False)
    assert b.container.children[1].bar_style == "danger"


def test_outer_bar_stays(notebook_bars):
    b = progress.bar(total=3, leave=True)
    b.update(3)
    progress.finish(b)
    assert b.container.children[1].bar_style == "success" and b.container.comm is not None
