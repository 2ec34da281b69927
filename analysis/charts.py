"""Plotly figure builders, one per analysis table. Pure: frames in, figures out.

Each builder takes the DataFrame returned by the matching analysis function, so the UI, the
CLI and notebooks render identical charts.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.chart_fit import Fit, apply, display_labels, layout_for, text_size, wrap_label
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


def _row_name(run: str, model: str) -> str:
    # Run names usually contain their model's name already; repeating it doubles the label.
    return run if model == run or model in run else f"{run} ({model})"


def success_heatmap(grid: pd.DataFrame, title: str = "Success rate by intent x scope") -> go.Figure:
    """Heatmap of ``success_grid`` cells (rows = runs), annotated with the rates.

    The columns carry a two-level axis, scope under its intent, as the page's table and the
    LaTeX export group them (EHR-Complex Table 3)."""
    cells = [c for c in grid.columns if "/" in str(c)]
    if grid.empty or not cells:
        return _empty(title)
    z = grid[cells].astype(float).to_numpy()
    names = [_row_name(str(r), str(m)) for r, m in zip(grid["run"], grid["model"], strict=True)]
    rows = display_labels(names)
    parts = [str(c).split("/", 1) for c in cells]
    intents = display_labels([p[0] for p in parts], width=16, max_lines=2)
    scopes = display_labels([p[1] for p in parts], width=16, max_lines=2)
    text = [["" if pd.isna(v) else f"{v:.2f}" for v in row] for row in z]
    full = [[f"{name}<br>{wrap_label(cell, 60, None)}" for cell in cells]
            for name in display_labels(names, 60, max_lines=None)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[intents, scopes],
            y=rows,
            text=text,
            texttemplate="%{text}",
            customdata=full,
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
            colorbar={"title": {"text": "SR"}},
            hovertemplate="%{customdata}: %{z:.3f}<extra></extra>",
        )
    )
    per_intent = max(len(cells) / max(len(set(intents)), 1), 1.0)
    slot = max(44.0, max(text_size(i)[0] for i in intents) / per_intent + 8)
    fit = Fit(x_labels=scopes, y_labels=rows, colorbar=True, min_slot_px=slot, x_levels=2)
    fig.update_layout(title=title, yaxis_autorange="reversed")
    return apply(fig, fit)


def _names(values: pd.Series | list[str]) -> dict[str, str]:
    """Each distinct value -> its display label (wrapped, distinct), in order of appearance."""
    distinct = list(dict.fromkeys(str(v) for v in values))
    return dict(zip(distinct, display_labels(distinct), strict=True))


def _hover_name(name: str) -> str:
    return wrap_label(name, 60, None)


def passk_lines(
    passk: pd.DataFrame, scope: str = ALL, intent: str = ALL, title: str | None = None
) -> go.Figure:
    """Pass^k (left) and Pass@k (right) against k, one line per run.

    Pass^k is only comparable between runs sampled at the same temperature, so each legend
    entry says its run's temperature when the table has it."""
    title = title or f"Pass^k / Pass@k (scope={scope}, intent={intent})"
    sel = passk[(passk["scope"] == scope) & (passk["intent"] == intent)]
    if sel.empty:
        return _empty(title)
    full: dict[str, str] = {}
    for run, part in sel.groupby("run", sort=False):
        temp = part["temperature"].iloc[0] if "temperature" in part.columns else None
        full[str(run)] = str(run) if "temperature" not in part.columns else (
            f"{run} (T={'?' if pd.isna(temp) else f'{float(temp):g}'})")
    legend = dict(zip(full, display_labels(list(full.values())), strict=True))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Pass^k", "Pass@k"), shared_yaxes=True)
    for run, part in sel.groupby("run", sort=False):
        part = part.sort_values("k")
        for col, metric in ((1, "pass_hat_k"), (2, "pass_at_k")):
            fig.add_trace(
                go.Scatter(
                    x=part["k"],
                    y=part[metric],
                    mode="lines+markers",
                    name=legend[str(run)],
                    legendgroup=str(run),
                    showlegend=col == 1,
                    meta=_hover_name(full[str(run)]),
                    hovertemplate="%{meta}<br>k=%{x}: %{y:.3f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="k", dtick=1)
    fig.update_yaxes(title_text="rate", range=[0, 1], row=1, col=1)
    fig.update_layout(title=title)
    return apply(fig, Fit(legend=list(legend.values()), columns=2, x_title=True, y_title=True))


def turn_budget_lines(sr: pd.DataFrame, title: str = "SR(T): success within T turns") -> go.Figure:
    """SR(T) against the turn budget T, one line per run (``success_by_turn_budget``)."""
    if sr.empty:
        return _empty(title)
    legend = _names(sr["run"])
    fig = go.Figure()
    for run, part in sr.groupby("run", sort=False):
        fig.add_trace(
            go.Scatter(x=part["budget"], y=part["sr"], mode="lines+markers",
                       name=legend[str(run)], meta=_hover_name(str(run)),
                       hovertemplate="%{meta}<br>T=%{x}: %{y:.3f}<extra></extra>")
        )
    fig.update_layout(
        title=title, xaxis_title="turn budget T", yaxis_title="SR(T)", yaxis_range=[0, 1]
    )
    return apply(fig, Fit(legend=list(legend.values()), x_title=True, y_title=True))


def turns_bars(
    turns: pd.DataFrame, title: str = "Mean turns on commonly solved tasks"
) -> go.Figure:
    """Grouped bars of mean turns per run, one bar group per scope (``turns_table``)."""
    if turns.empty:
        return _empty(title)
    runs = _names(turns["run"])
    scopes = _names(turns["scope"])
    fig = go.Figure()
    for scope, part in turns.groupby("scope", sort=False):
        fig.add_trace(go.Bar(
            x=[runs[str(r)] for r in part["run"]], y=part["mean_turns"],
            name=scopes[str(scope)], customdata=[_hover_name(str(r)) for r in part["run"]],
            hovertemplate="%{customdata}: %{y:.2f}<extra>%{fullData.name}</extra>"))
    fig.update_layout(title=title, barmode="group", yaxis_title="mean turns")
    fit = Fit(x_labels=list(runs.values()), legend=list(scopes.values()), y_title=True,
              min_slot_px=18.0 * len(scopes))
    return apply(fig, fit)


def _category_bars(table: pd.DataFrame, value: str, title: str, y_title: str,
                   interval: bool) -> go.Figure:
    """Bars per failure category, one series per model (share with Wilson bars, or turns)."""
    categories = _names(table["category"])
    models = _names(table["model"])
    fig = go.Figure()
    for model, part in table.groupby("model", sort=False):
        bar = go.Bar(x=[categories[str(c)] for c in part["category"]], y=part[value],
                     name=models[str(model)], meta=_hover_name(str(model)))
        if interval:
            bar.update(
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (part["ci_high"] - part["share"]).to_numpy(),
                    "arrayminus": (part["share"] - part["ci_low"]).to_numpy(),
                },
                customdata=part[["count", "n"]].to_numpy(),
                hovertemplate="%{meta}<br>%{x}: %{y:.1%} (%{customdata[0]}/%{customdata[1]})"
                              "<extra></extra>",
            )
        else:
            bar.update(hovertemplate="%{meta}<br>%{x}: %{y:.2f}<extra></extra>")
        fig.add_trace(bar)
    fig.update_layout(title=title, barmode="group", yaxis_title=y_title)
    fit = Fit(x_labels=list(categories.values()), legend=list(models.values()), y_title=True,
              min_slot_px=16.0 * len(models))
    return apply(fig, fit)


def failure_bars(
    dist: pd.DataFrame, title: str = "Failure categories (95% Wilson CI)"
) -> go.Figure:
    """Share per category, one bar series per model, asymmetric Wilson error bars."""
    if dist.empty:
        return _empty(title)
    fig = _category_bars(dist, "share", title, "share of failures", interval=True)
    fig.update_layout(yaxis_tickformat=".0%")
    return fig


def turns_per_category_bars(
    tpc: pd.DataFrame, title: str = "Mean turns per failure category"
) -> go.Figure:
    if tpc.empty:
        return _empty(title)
    return _category_bars(tpc, "mean_turns", title, "mean turns", interval=False)


def robustness_bars(rob: pd.DataFrame, by: str = "intent", title: str | None = None) -> go.Figure:
    """Clean vs Noise success grouped by intent (or noise type), one subplot row per run."""
    title = title or f"Clean vs Noise success by {by}"
    sel = rob[rob["by"] == by]
    if sel.empty:
        return _empty(title)
    runs = list(dict.fromkeys(sel["run"].astype(str)))
    run_titles = display_labels(runs, width=60)
    groups = _names(sel["group"])
    fit = Fit(x_labels=list(groups.values()), legend=["clean", "noise"], panels=len(runs),
              panel_titles=run_titles, min_slot_px=40.0)
    size = layout_for(fit)
    fig = make_subplots(
        rows=len(runs),
        cols=1,
        shared_xaxes=True,
        subplot_titles=run_titles,
        vertical_spacing=size.vertical_spacing,
    )
    colours = {"clean": "#4C78A8", "noise": "#E45756"}
    for i, run in enumerate(runs, start=1):
        part = sel[sel["run"].astype(str) == run]
        for variant in ("clean", "noise"):
            fig.add_trace(
                go.Bar(
                    x=[groups[str(g)] for g in part["group"]],
                    y=part[variant],
                    name=variant,
                    legendgroup=variant,
                    marker_color=colours[variant],
                    showlegend=i == 1,
                    meta=_hover_name(run),
                    customdata=part[["n_pairs", "drop"]].to_numpy(),
                    hovertemplate=(
                        "%{meta}<br>%{x}: %{y:.3f}<br>pairs %{customdata[0]}, drop "
                        "%{customdata[1]:.3f}<extra></extra>"
                    ),
                ),
                row=i,
                col=1,
            )
    fig.update_layout(title=title, barmode="group")
    fig.update_yaxes(range=[0, 1])
    return apply(fig, fit, size)


def labeller_bars(agreement: pd.DataFrame, title: str = "LLM pre-labeller vs human") -> go.Figure:
    """Precision / recall / override rate per category (``labeller_agreement``)."""
    per_cat = agreement[~agreement["category"].astype(str).str.startswith("(")]
    if per_cat.empty:
        return _empty(title)
    categories = _names(per_cat["category"])
    metrics = ("precision", "recall", "override_rate")
    fig = go.Figure()
    for metric in metrics:
        fig.add_trace(go.Bar(x=[categories[str(c)] for c in per_cat["category"]],
                             y=per_cat[metric], name=metric))
    overall = agreement[agreement["category"] == "(overall)"]
    if not overall.empty:
        title = f"{title} (kappa = {float(overall['kappa'].iloc[0]):.2f})"
    fig.update_layout(title=title, barmode="group", yaxis_range=[0, 1])
    fit = Fit(x_labels=list(categories.values()), legend=list(metrics),
              min_slot_px=16.0 * len(metrics))
    return apply(fig, fit)


def provenance_pie(table: pd.DataFrame, title: str = "Final labels by provenance") -> go.Figure:
    """Final labels by provenance: a pie of the counts (the categories are few and a share)."""
    present = table[table["count"] > 0] if not table.empty and "count" in table else table
    fig = go.Figure()
    if present.empty:
        fig.update_layout(title=f"{title} (no labels)")
        return fig
    fig.add_trace(
        go.Pie(labels=present["provenance"], values=present["count"], sort=False, hole=0.3)
    )
    fig.update_layout(title=title)
    return fig
