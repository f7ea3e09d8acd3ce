"""Notebook 04's tables as a reader sees them: each under its own caption, numbers unchanged."""

from __future__ import annotations

import pandas as pd
from styled_table import caption as _caption
from styled_table import cells as _cells

from flkit.papers.hidenseek import study


def test_accuracy_views_caption_each_table_and_keep_the_numbers():
    acc = pd.DataFrame(
        {
            "task": ["har", "har", "mnist", "mnist"],
            "method": ["FedAvg", "HideNseek", "FedAvg", "HideNseek"],
            "mean": [84.26, 84.149, 90.05, 67.61],
            "std": [1.0, 1.0, 1.0, 1.0],
            "count": [2, 2, 2, 2],
            "coverage": [float("nan"), 0.8712, float("nan"), 1.0],
        }
    )
    mean, cover = study.accuracy_views(acc)
    assert _caption(mean) == ["Table 1: final accuracy (%), mean over seeds"]
    assert _caption(cover)[0].startswith("Share of clients scored")
    # rows FedAvg, HideNseek; columns har, mnist; one decimal / two, a dash for "every client"
    assert _cells(mean) == ["84.3", "90.0", "84.1", "67.6"]
    assert _cells(cover) == ["–", "–", "0.87", "1.00"]
    assert "font-weight: bold" in mean.to_html()


def test_cost_views_caption_traffic_and_time():
    byt = pd.DataFrame(
        {
            "task": ["har", "har"],
            "method": ["FedAvg", "HideNseek"],
            "up_MiB": [2.878, 0.51334],
            "down_MiB": [2.878, 0.5133],
        }
    )
    tim = pd.DataFrame(
        {"task": ["har", "har"], "method": ["FedAvg", "HideNseek"], "total_s": [8.84, 21.75]}
    )
    traffic, time = study.cost_views(byt, tim)
    assert _caption(traffic)[0].startswith("Table 2: MiB per participating client per round")
    assert _caption(time)[0].startswith("Table 3: local-training seconds per run")
    assert _cells(traffic) == ["2.8780", "2.8780", "0.5133", "0.5133"]
    assert _cells(time) == ["8.8", "21.8"]
