"""One Statistics chart and table: light HTML first, plotly and the data grid on request.

A plotly chart makes the browser fetch and parse about 5 MB of scripts before it draws, and the
interactive data grid another 1.6 MB: together most of the page's first visit. The HTML picture
and table (``analysis.quick_charts``) show the same numbers at once. The exports (HTML, PNG)
are the plotly figures, built when a button is clicked; CSV and LaTeX are the whole table.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.quick_charts import html_table

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


def table_panel(table: pd.DataFrame, key: str) -> None:
    """The table as HTML and, when its toggle is on, as the sortable data grid instead."""
    if st.toggle("Interactive table", key=f"{key}_interactive",
                 help="Sort, resize and search the table (loads the data grid's scripts)."):
        st.dataframe(table, hide_index=True, key=key)
    else:
        st.html(html_table(table))
