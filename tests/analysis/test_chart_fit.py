"""Chart sizing from labels: long run names wrap and stay distinct, margins hold them."""

from __future__ import annotations

import re

import pandas as pd

from analysis import charts
from analysis.chart_fit import WRAP_CHARS, display_labels, text_size, wrap_label

LONG = "m-" + "x" * 40 + "-{t}-" + "y" * 50  # about 100 characters, differing in the middle


def _lines(label: str) -> list[str]:
    return [re.sub(r"<[^>]*>", "", line) for line in label.split("<br>")]


def test_long_names_wrap_and_names_differing_in_the_middle_stay_distinct() -> None:
    names = [LONG.format(t="t0.0"), LONG.format(t="t0.6")]
    labels = display_labels(names)
    assert len(set(labels)) == 2
    for label in labels:
        assert all(len(line) <= WRAP_CHARS for line in _lines(label))
    # A name short enough is left alone.
    assert wrap_label("gpt-4o") == "gpt-4o"


def test_heatmap_margins_hold_its_longest_row_label() -> None:
    names = [LONG.format(t="t0.0"), LONG.format(t="t0.6")]
    grid = pd.DataFrame({"run": names, "model": ["m", "m"],
                         "Demographics/patient": [0.5, 0.25],
                         "Demographics/population": [0.75, None]})
    fig = charts.success_heatmap(grid)
    rows = list(fig.data[0].y)
    assert len(set(rows)) == 2
    widest = max(text_size(r)[0] for r in rows)
    assert fig.layout.margin.l >= widest
    assert fig.layout.width > fig.layout.margin.l + fig.layout.margin.r
    # The full name stays in the hover text.
    assert names[0][:30] in fig.data[0].customdata[0][0].replace("<br>", "")
