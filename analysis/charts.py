"""Plotly figure builders, one per analysis table. Pure: frames in, figures out.

Each builder takes the DataFrame returned by the matching analysis function, so the UI, the
CLI and notebooks render identical charts.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.success import ALL


def _empty(title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        annotations=[
            {
                "text": "no data",
                "showarrow": False,
                "x": 0.5,
                "y": 0.5,
                "xref": "paper",
                "yref": "paper",
            }
        ],
    )
    return fig


def success_heatmap(grid: pd.DataFrame, title: str = "Success rate by intent x scope") -> go.Figure:
    """Heatmap of ``success_grid`` cells (rows = runs), annotated with the rates."""
    cells = [c for c in grid.columns if "/" in str(c)]
    if grid.empty or not cells:
        return _empty(title)
    z = grid[cells].astype(float).to_numpy()
    labels = [
        f"{r}" if r == m else f"{r} ({m})" for r, m in zip(grid["run"], grid["model"], strict=True)
    ]
    text = [["" if pd.isna(v) else f"{v:.2f}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cells,
            y=labels,
            text=text,
            texttemplate="%{text}",
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
            colorbar={"title": "SR"},
            hovertemplate="%{y}<br>%{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(title=title, xaxis_tickangle=-45, yaxis_autorange="reversed")
    return fig


def passk_lines(
    passk: pd.DataFrame, scope: str = ALL, intent: str = ALL, title: str | None = None
) -> go.Figure:
    """Pass^k (left) and Pass@k (right) against k, one line per run."""
    title = title or f"Pass^k / Pass@k (scope={scope}, intent={intent})"
    sel = passk[(passk["scope"] == scope) & (passk["intent"] == intent)]
    if sel.empty:
        return _empty(title)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Pass^k", "Pass@k"), shared_yaxes=True)
    for run, part in sel.groupby("run", sort=False):
        part = part.sort_values("k")
        for col, metric in ((1, "pass_hat_k"), (2, "pass_at_k")):
            fig.add_trace(
                go.Scatter(
                    x=part["k"],
                    y=part[metric],
                    mode="lines+markers",
                    name=str(run),
                    legendgroup=str(run),
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="k", dtick=1)
    fig.update_yaxes(title_text="rate", range=[0, 1], row=1, col=1)
    fig.update_layout(title=title)
    return fig


def turn_budget_lines(sr: pd.DataFrame, title: str = "SR(T): success within T turns") -> go.Figure:
    """SR(T) against the turn budget T, one line per run (``success_by_turn_budget``)."""
    if sr.empty:
        return _empty(title)
    fig = go.Figure()
    for run, part in sr.groupby("run", sort=False):
        fig.add_trace(
            go.Scatter(x=part["budget"], y=part["sr"], mode="lines+markers", name=str(run))
        )
    fig.update_layout(
        title=title, xaxis_title="turn budget T", yaxis_title="SR(T)", yaxis_range=[0, 1]
    )
    return fig


def turns_bars(
    turns: pd.DataFrame, title: str = "Mean turns on commonly solved tasks"
) -> go.Figure:
    """Grouped bars of mean turns per run, one bar group per scope (``turns_table``)."""
    if turns.empty:
        return _empty(title)
    fig = go.Figure()
    for scope, part in turns.groupby("scope", sort=False):
        fig.add_trace(go.Bar(x=part["run"], y=part["mean_turns"], name=str(scope)))
    fig.update_layout(title=title, barmode="group", yaxis_title="mean turns")
    return fig


def failure_bars(
    dist: pd.DataFrame, title: str = "Failure categories (95% Wilson CI)"
) -> go.Figure:
    """Share per category, one bar series per model, asymmetric Wilson error bars."""
    if dist.empty:
        return _empty(title)
    fig = go.Figure()
    for model, part in dist.groupby("model", sort=False):
        fig.add_trace(
            go.Bar(
                x=part["category"],
                y=part["share"],
                name=str(model),
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (part["ci_high"] - part["share"]).to_numpy(),
                    "arrayminus": (part["share"] - part["ci_low"]).to_numpy(),
                },
                customdata=part[["count", "n"]].to_numpy(),
                hovertemplate="%{x}: %{y:.1%} (%{customdata[0]}/%{customdata[1]})<extra></extra>",
            )
        )
    fig.update_layout(
        title=title, barmode="group", yaxis_title="share of failures", yaxis_tickformat=".0%"
    )
    return fig


def turns_per_category_bars(
    tpc: pd.DataFrame, title: str = "Mean turns per failure category"
) -> go.Figure:
    if tpc.empty:
        return _empty(title)
    fig = go.Figure()
    for model, part in tpc.groupby("model", sort=False):
        fig.add_trace(go.Bar(x=part["category"], y=part["mean_turns"], name=str(model)))
    fig.update_layout(title=title, barmode="group", yaxis_title="mean turns")
    return fig


def robustness_bars(rob: pd.DataFrame, by: str = "intent", title: str | None = None) -> go.Figure:
    """Clean vs Noise success grouped by intent (or noise type), one subplot row per run."""
    title = title or f"Clean vs Noise success by {by}"
    sel = rob[rob["by"] == by]
    if sel.empty:
        return _empty(title)
    runs = list(dict.fromkeys(sel["run"]))
    fig = make_subplots(
        rows=len(runs),
        cols=1,
        shared_xaxes=True,
        subplot_titles=runs,
        vertical_spacing=min(0.08, 0.3 / max(len(runs), 1)),
    )
    colours = {"clean": "#4C78A8", "noise": "#E45756"}
    for i, run in enumerate(runs, start=1):
        part = sel[sel["run"] == run]
        for variant in ("clean", "noise"):
            fig.add_trace(
                go.Bar(
                    x=part["group"],
                    y=part[variant],
                    name=variant,
                    legendgroup=variant,
                    marker_color=colours[variant],
                    showlegend=i == 1,
                    customdata=part[["n_pairs", "drop"]].to_numpy(),
                    hovertemplate=(
                        "%{x}: %{y:.3f}<br>pairs %{customdata[0]}, drop %{customdata[1]:.3f}"
                        "<extra></extra>"
                    ),
                ),
                row=i,
                col=1,
            )
    fig.update_layout(title=title, barmode="group", height=max(350, 260 * len(runs)))
    fig.update_yaxes(range=[0, 1])
    return fig


def labeller_bars(agreement: pd.DataFrame, title: str = "LLM pre-labeller vs human") -> go.Figure:
    """Precision / recall / override rate per category (``labeller_agreement``)."""
    per_cat = agreement[~agreement["category"].astype(str).str.startswith("(")]
    if per_cat.empty:
        return _empty(title)
    fig = go.Figure()
    for metric in ("precision", "recall", "override_rate"):
        fig.add_trace(go.Bar(x=per_cat["category"], y=per_cat[metric], name=metric))
    overall = agreement[agreement["category"] == "(overall)"]
    if not overall.empty:
        title = f"{title} (kappa = {float(overall['kappa'].iloc[0]):.2f})"
    fig.update_layout(title=title, barmode="group", yaxis_range=[0, 1])
    return fig


#: Table name (see ``analysis.tables.TABLES``) -> chart builder.
CHARTS: dict[str, Callable[..., go.Figure]] = {
    "success": success_heatmap,
    "passk": passk_lines,
    "turns": turns_bars,
    "turn_budget": turn_budget_lines,
    "taxonomy": failure_bars,
    "taxonomy_turns": turns_per_category_bars,
    "robustness": robustness_bars,
    "labeller": labeller_bars,
}
