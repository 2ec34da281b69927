"""Each labeller's calibration laid out for people: the summary table (items checked, agreement,
mean raw confidence and calibrated probability, the calibration error raw and calibrated) and
the reliability curve. The numbers are computed in ``opinions.learn.calibration_store``; this
module only shapes them, so ``faillab stats labeller --calibration`` and the Agreement page show
the same frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

CALIBRATION_COLUMNS = ["labeller", "category", "measured_on", "checked", "agreement",
                       "mean_raw", "mean_calibrated", "ece_raw", "ece_calibrated"]
RELIABILITY_COLUMNS = ["labeller", "measured_on", "kind", "bin_low", "bin_high", "n",
                       "mean_predicted", "observed"]


def calibration_tables(summary: Sequence[dict[str, Any]], curve: Sequence[dict[str, Any]]
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, reliability) frames from ``calibration_report``'s rows; empty bins are left
    out of the reliability frame (they have no observed share to show)."""
    table = pd.DataFrame(list(summary), columns=CALIBRATION_COLUMNS)
    bins = pd.DataFrame(list(curve), columns=RELIABILITY_COLUMNS)
    bins = bins[bins["n"] > 0].reset_index(drop=True)
    return table, bins


def reliability_chart(bins: pd.DataFrame, labeller: str) -> go.Figure:
    """Observed agreement against the predicted probability per bin, the raw confidence and
    the calibrated probability as two lines beside the diagonal (perfect calibration); each
    point's size and hover say how many items the bin holds."""
    part = bins[bins["labeller"] == labeller]
    measured = str(part["measured_on"].iloc[0]) if len(part) else "no items"
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line={"dash": "dot", "color": "grey"}, hoverinfo="skip"))
    for key, part_kind in part.groupby("kind", sort=False):
        kind, n = str(key), part_kind["n"].to_numpy()
        fig.add_trace(go.Scatter(
            x=part_kind["mean_predicted"], y=part_kind["observed"], mode="lines+markers",
            name=f"{kind} confidence" if kind == "raw" else f"{kind} probability",
            marker={"size": [6 + min(int(k), 40) // 2 for k in n]},
            customdata=n, hovertemplate="predicted %{x:.2f}, people agreed %{y:.2f} "
                                        "(%{customdata} items)<extra></extra>"))
    fig.update_layout(title=f"{labeller}: reliability ({measured})",
                      xaxis_title="predicted probability of agreeing with people",
                      yaxis_title="share people agreed with", xaxis_range=[0, 1],
                      yaxis_range=[0, 1.02], height=380)
    return fig
