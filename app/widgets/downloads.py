"""Download buttons for the Statistics exports (CSV, LaTeX, chart HTML and PNG) and the charts'
ZIP.

File contents are produced by callables, which Streamlit only runs when the button is
clicked: a chart page embeds plotly.js (several MB), and building one per tab on every rerun
would make the page slow for nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.export import charts_bundle
from analysis.exports_paper import ExportContext, export_file

#: Static PNG export needs plotly's optional kaleido engine.
HAS_KALEIDO = importlib.util.find_spec("kaleido") is not None


def charts_bundle_download(figs: Callable[[], Mapping[str, go.Figure]], key: str) -> None:
    """Every chart of the page in one ZIP that carries plotly.js once (not once per chart)."""
    st.download_button(
        "All charts (ZIP, HTML sharing one plotly.js)",
        data=lambda: charts_bundle(figs()),
        file_name="faillab_charts.zip",
        mime="application/zip",
        key=key,
        on_click="ignore",
        icon=":material/folder_zip:",
    )


def export_downloads(name: str, table: pd.DataFrame, chart_table: pd.DataFrame,
                     context: ExportContext, key: str) -> None:
    """The Statistics tab's Export menu: CSV and LaTeX of the table, HTML and PNG of its chart,
    each the bytes `faillab stats --format ...` writes for the same selection (one export
    path, analysis.exports_paper); built only when clicked."""
    left, right = st.columns(2)
    buttons = (
        (left, "Table as CSV", table, "csv", f"{name}.csv", "text/csv", f"{key}_csv"),
        (right, "Table as LaTeX", table, "latex", f"{name}.tex", "application/x-tex",
         f"{key}_tex"),
        (left, "Chart as HTML", chart_table, "html", f"{name}_chart.html", "text/html",
         f"{key}_chart_html"),
        (right, "Chart as PNG", chart_table, "png", f"{name}_chart.png", "image/png",
         f"{key}_chart_png"),
    )
    for column, label, frame, fmt, file, mime, button_key in buttons:
        if fmt == "png" and not HAS_KALEIDO:
            column.caption("PNG export needs the optional kaleido package, which is not "
                           "installed; the camera icon in the chart's toolbar saves a PNG.")
            continue
        column.download_button(
            label, data=partial(export_file, name, frame, fmt, context), file_name=file,
            mime=mime, key=button_key, on_click="ignore", icon=":material/download:")
