"""Interactive demos: controls (ipywidgets sliders, toggles) above one figure that every move of a
control redraws in place.

    demo = live.Demo(lambda p: figs.fig1(update, p), p=W.FloatLogSlider(value=0.1, ...))
    report.figure(demo.figure, "fig1_compression")   # the first state, as drawn
    demo                                              # last expression of the cell

One figure in one place: in a live kernel the figure is an Image widget below the controls, and a
move replaces its picture. The same output also carries the first state as a plain PNG, which is
what a frontend without widgets shows (papermill, nbval, exported HTML, the report's checks), so a
notebook needs no separate static copy. Each drawing is rendered to PNG and its matplotlib figure
closed at once: nothing is left open for the inline backend to show later in another cell.

``seconds`` (wall) and ``cpu_seconds`` (this process's CPU time) hold the cost of the last
redraw; :meth:`Demo.precompute` draws every setting of controls with a finite set of values ahead,
so that a move only looks its picture up. Pictures of settings already drawn are kept
(``cache`` of them), so going back to a setting is instant. A redraw runs torch on ``threads``
CPU threads (default 1): demos train tiny models, for which more threads only add contention (a
FedAST demo run took 4.0 s on 2 threads and 0.54 s on 1, 2 shared cores, 2026-11-23).
"""

from __future__ import annotations

import base64
import io
import time
from collections import OrderedDict
from collections.abc import Callable

from ..utils import FlkitError

__all__ = ["Demo", "to_png", "log_stops"]


def log_stops(value: float, low: float, high: float, per_decade: int = 2) -> list[float]:
    """Slider stops 1, 3, 10, 30, ... (``per_decade`` = 2; 1 gives powers of ten) from ``low``
    to ``high``, with ``value`` added: a short list every stop of which can be precomputed."""
    import math

    if not 0 < low <= high:
        raise FlkitError(f"low={low!r}, high={high!r}; accepted: 0 < low <= high")
    if per_decade not in (1, 2):
        raise FlkitError(f"per_decade={per_decade!r}; accepted: 1, 2")
    mantissas = (1.0, 3.0) if per_decade == 2 else (1.0,)
    stops = {
        float(f"{m * 10.0**e:.6g}")
        for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for m in mantissas
    }
    return sorted({v for v in stops if low <= v <= high} | {float(value)})


def to_png(figures, dpi: int = 90) -> bytes:
    """One PNG of a matplotlib Figure, or of several stacked top to bottom; the figures are
    closed afterwards (so no backend shows them again)."""
    import matplotlib.pyplot as plt

    figs = list(figures) if isinstance(figures, list | tuple) else [figures]
    if not figs or not all(hasattr(f, "savefig") for f in figs):
        raise FlkitError(
            f"a demo's draw function returned {figures!r}; accepted: a matplotlib Figure "
            "or a list of them"
        )
    pngs = []
    for f in figs:
        buf = io.BytesIO()
        f.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        plt.close(f)
        pngs.append(buf.getvalue())
    if len(pngs) == 1:
        return pngs[0]
    from PIL import Image

    images = [Image.open(io.BytesIO(p)).convert("RGB") for p in pngs]
    out = Image.new("RGB", (max(i.width for i in images), sum(i.height for i in images)), "white")
    y = 0
    for i in images:
        out.paste(i, (0, y))
        y += i.height
    buf = io.BytesIO()
    out.save(buf, format="png")
    return buf.getvalue()


class Demo:
    """``draw(**values)`` (returning a Figure or a list of them) shown below ``controls``.

    controls: name -> ipywidgets control with a ``value`` (the names are draw's keywords).
    constrain: optional ``constrain(controls)`` run before each drawing, e.g. to cap one
    slider's range at another's value; value changes it causes draw nothing extra.
    dpi: resolution of the PNG. cache: how many drawn settings to keep (0: none).
    threads: torch CPU threads while drawing (restored afterwards); None leaves them alone.
    """

    def __init__(
        self,
        draw: Callable,
        constrain: Callable | None = None,
        dpi: int = 90,
        cache: int = 64,
        threads: int | None = 1,
        **controls,
    ):
        if not controls:
            raise FlkitError("a Demo needs at least one control, e.g. p=ipywidgets.FloatSlider()")
        if not isinstance(cache, int) or cache < 0:
            raise FlkitError(f"cache={cache!r}; accepted: an integer >= 0")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise FlkitError(f"threads={threads!r}; accepted: None or an integer >= 1")
        self.draw, self.constrain, self.dpi, self.cache = draw, constrain, dpi, cache
        self.threads = threads
        self.controls = controls
        self.seconds: float | None = None
        self.cpu_seconds: float | None = None
        self.figure = None  # the matplotlib figure of the last drawing not served from the cache
        self.png = b""
        self._pngs: OrderedDict = OrderedDict()
        self._busy = False
        import ipywidgets

        self.image = ipywidgets.Image(format="png")
        self.widget = ipywidgets.VBox([ipywidgets.HBox(list(controls.values())), self.image])
        self.redraw()
        for w in controls.values():
            w.observe(self._on_change, names="value")

    def values(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    def redraw(self) -> bytes:
        """Draw the current setting into the image (as a control move does); returns the PNG."""
        t0, c0 = time.perf_counter(), time.process_time()
        self._busy = True
        try:
            if self.constrain is not None:
                self.constrain(self.controls)
            values = self.values()
            key = self._key(values)
            png = self._pngs.get(key)
            if png is None:
                figs = self._draw(values)
                png = to_png(figs, self.dpi)
                self.figure = figs
                if self.cache:
                    self._pngs[key] = png
                    while len(self._pngs) > self.cache:
                        self._pngs.popitem(last=False)
            else:
                self._pngs.move_to_end(key)
            self.png = png
            self.image.value = png
        finally:
            self._busy = False
        self.seconds = time.perf_counter() - t0
        self.cpu_seconds = time.process_time() - c0
        return png

    def settings(self) -> list[dict]:
        """Every combination of the controls' values (each control must have a finite set:
        options, or an integer slider's range); FlkitError naming a control that has none."""
        import itertools

        choices = {}
        for name, w in self.controls.items():
            if getattr(w, "options", None) is not None:
                opts = w.options
                choices[name] = [o[1] if isinstance(o, tuple) else o for o in opts]
            elif isinstance(w.value, int) and hasattr(w, "min") and hasattr(w, "step"):
                choices[name] = list(range(w.min, w.max + 1, w.step))
            else:
                raise FlkitError(
                    f"control {name!r} ({type(w).__name__}) has no finite set of values; "
                    "accepted for precompute: options (SelectionSlider, ToggleButtons, Dropdown) "
                    "or an IntSlider"
                )
        names = list(choices)
        return [dict(zip(names, combo)) for combo in itertools.product(*choices.values())]

    def precompute(self, max_settings: int = 64) -> int:
        """Draw every setting (:meth:`settings`) into the picture cache now; returns how many
        were drawn. FlkitError when there are more than ``max_settings`` (or than the cache
        holds)."""
        todo = self.settings()
        limit = min(max_settings, self.cache)
        if len(todo) > limit:
            raise FlkitError(
                f"{len(todo)} settings to precompute; accepted: at most max_settings="
                f"{max_settings} and cache={self.cache}"
            )
        drawn = 0
        for values in todo:
            key = self._key(values)
            if key not in self._pngs:
                self._pngs[key] = to_png(self._draw(values), self.dpi)
                drawn += 1
        return drawn

    @staticmethod
    def _key(values: dict) -> tuple:
        return tuple(sorted((k, repr(v)) for k, v in values.items()))

    def _draw(self, values: dict):
        if self.threads is None:
            return self.draw(**values)
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            return self.draw(**values)
        finally:
            torch.set_num_threads(before)

    def _on_change(self, change):
        if not self._busy:
            self.redraw()

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = dict(self.widget._repr_mimebundle_() or {})
        data["image/png"] = base64.b64encode(self.png).decode("ascii")
        data["text/plain"] = f"interactive demo ({', '.join(self.controls)}); static copy: PNG"
        return data
