"""Progress bars in one style (tqdm: a widget in Jupyter, text in a terminal).

A bar's counters show at most 3 significant digits (``47.1/400``, ``1.2k/5k``); its label never
wraps inside a word; an inner bar (``leave=False``) disappears when its work is done, while an outer
one stays. A run that stops early because it reached its target ends with :func:`finish`, which
fills the bar first: tqdm paints a bar closed before its total red (an error), and in a notebook
leaves it on the page even with ``leave=False``.
"""

from __future__ import annotations

__all__ = ["bar", "finish"]


def bar(total=None, desc: str = "", unit: str = "it", leave: bool = False, initial=0, **kw):
    """A tqdm bar over ``total`` (None: a counter without a bar)."""
    from tqdm.auto import tqdm

    b = tqdm(
        total=total,
        desc=desc,
        unit=unit,
        leave=leave,
        initial=initial,
        unit_scale=True,  # counters as 47.1, 400, 1.23k: at most 3 significant digits
        **kw,
    )
    container = getattr(b, "container", None)  # the notebook widget: label, bar, counters
    if container is not None:
        label = container.children[0]
        label.layout.flex = "0 0 auto"  # the label keeps its width: it never wraps mid-word
    return b


def finish(b, done: bool = True) -> None:
    """Close ``b``; ``done`` (the work ended as planned, e.g. a run stopped at its target) fills
    it first so it ends as finished, not as failed."""
    if b is None:
        return
    if done and b.total:
        b.n = b.total
        b.refresh()
    b.close()
