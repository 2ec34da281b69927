"""One Statistics chart: a light HTML picture first, the plotly figure only on request.

A plotly chart makes the browser fetch and parse about 5 MB of scripts before it draws, which
was most of the page's first visit; the HTML picture (``analysis.quick_charts``) shows the same
numbers at once. The exports (HTML, PNG) are the plotly figures, built when a button is clicked.
"""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from faillab.app.widgets.downloads import chart_downloads

INTERACTIVE_HELP = (
    "Draw this chart with plotly: hover, zoom, and the camera icon saves a PNG. "
    "The first interactive chart loads plotly's scripts (about 5 MB), so it takes a moment."
)


def chart_panel(quick_html: str, figure: Callable[[], go.Figure | None], key: str) -> None:
    """The HTML picture and, when its toggle is on, the interactive plotly chart below it."""
    st.html(quick_html)
    if st.toggle("Interactive chart", key=f"{key}_interactive", help=INTERACTIVE_HELP):
        fig = figure()
        if fig is None:
            st.info("This table has no interactive chart.")
        else:
            st.plotly_chart(fig, key=key)


def figure_downloads(figure: Callable[[], go.Figure | None], name: str, key: str) -> None:
    """The chart's HTML and PNG downloads; the figure is built only when one is clicked."""

    def build() -> go.Figure:
        fig = figure()
        # A table without a chart gets no buttons (below), so this is never reached with None.
        return fig if fig is not None else go.Figure()

    chart_downloads(build, name, key)
