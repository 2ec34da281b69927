"""Light charts as plain HTML: shaded tables and bar rows, one per analysis table.

The Statistics page's first paint uses these instead of plotly: a plotly chart makes the browser
fetch and parse about 5 MB of scripts before it can draw anything, while these are a few dozen
elements with inline styles. The plotly figures (``analysis.charts``) stay the paper-ready
pictures, drawn on request and exported as HTML or PNG.

Pure: frames in, an HTML string out. Every piece of data (run, model, category names) is
escaped, so a hostile name shows as the literal text it is.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from analysis.failures import PROVENANCE_COLUMNS
from analysis.success import ALL

#: Every quick chart's outer element carries this class (the page and its tests find it by it).
CHART_CLASS = "faillab-quick-chart"
#: Series colours (bars of one group), in legend order.
PALETTE = ("#4C78A8", "#E45756", "#54A24B", "#F58518", "#B279A2", "#72B7B2", "#9D755D",
           "#EECA3B")
#: Shading of a cell from its value's low end to its high end (light to dark blue).
_LOW = (239, 243, 250)
_HIGH = (33, 76, 139)
_UNKNOWN = "–"
_FONT = "font-family:inherit;font-size:0.85rem;"


@dataclass(frozen=True)
class Bar:
    """One bar: its series (colour), length, the text beside it, optional interval."""

    series: str
    value: float | None
    text: str
    low: float | None = None
    high: float | None = None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def _shade(value: float | None, lo: float, hi: float) -> str:
    if value is None:
        return "background:#f3f3f3;color:#777;"
    t = 0.0 if hi <= lo else min(1.0, max(0.0, (value - lo) / (hi - lo)))
    rgb = tuple(round(a + (b - a) * t) for a, b in zip(_LOW, _HIGH, strict=True))
    text = "#ffffff" if t > 0.55 else "#1f2430"
    return f"background:rgb{rgb};color:{text};"


def _frame(name: str, title: str, note: str, body: str) -> str:
    sub = f'<div style="color:#555;font-size:0.8rem">{escape(note)}</div>' if note else ""
    return (
        f'<figure class="{CHART_CLASS}" data-chart="{escape(name)}" '
        f'style="margin:0 0 0.5rem 0;{_FONT}">'
        f'<figcaption style="margin-bottom:0.4rem"><div style="font-weight:600">'
        f"{escape(title)}</div>{sub}</figcaption>{body}</figure>"
    )


def _no_data(name: str, title: str, note: str) -> str:
    return _frame(name, title, note, '<div style="color:#777">no data</div>')


#: Longer text than this wraps in its cell (at most ``_WRAP_WIDTH`` wide): real run names are a
#: hundred characters without a space, and unwrapped they pushed every number of a table or
#: heat map past the right edge of the page.
_WRAP_AFTER = 40
_WRAP_WIDTH = "16rem"


def _text_cell(text: str) -> str:
    """Escaped cell text; a long one in a box that wraps it anywhere."""
    if len(text) <= _WRAP_AFTER:
        return escape(text)
    return (f'<div style="max-width:{_WRAP_WIDTH};min-width:10rem;white-space:normal;'
            f'overflow-wrap:anywhere">{escape(text)}</div>')


# The row names stay in view when a wide table scrolls sideways.
_STICKY = "position:sticky;left:0;background:#fff;z-index:1;"


def _grouped_head(columns: Sequence[str], cell: str) -> str:
    """Header rows: "intent/scope" columns under one heading per intent (EHR-Complex Table 3's
    layout, and half the width of "Demographics/population" in every column), others as they
    are."""
    parts = [str(c).split("/", 1) for c in columns]
    grouped = any(len(p) == 2 for p in parts)
    corner = f'<th rowspan="{2 if grouped else 1}" style="{cell}{_STICKY}"></th>'
    if not grouped:
        return "<tr>" + corner + "".join(
            f'<th style="{cell}font-weight:500">{escape(str(c))}</th>' for c in columns) + "</tr>"
    top: list[str] = [corner]
    bottom: list[str] = []
    index = 0
    while index < len(parts):
        part = parts[index]
        if len(part) == 1:
            top.append(f'<th rowspan="2" style="{cell}font-weight:500">{escape(part[0])}</th>')
            index += 1
            continue
        span = 1
        while (index + span < len(parts) and len(parts[index + span]) == 2
               and parts[index + span][0] == part[0]):
            span += 1
        top.append(f'<th colspan="{span}" style="{cell}text-align:center;font-weight:500;'
                   f'border-bottom:1px solid #ddd">{escape(part[0])}</th>')
        bottom.extend(f'<th style="{cell}font-weight:400;font-size:0.75rem">{escape(p[1])}</th>'
                      for p in parts[index:index + span])
        index += span
    return f"<tr>{''.join(top)}</tr><tr>{''.join(bottom)}</tr>"


def heat_table(
    name: str,
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[Any]],
    *,
    note: str = "",
    digits: int = 2,
    lo: float = 0.0,
    hi: float = 1.0,
) -> str:
    """A table whose cells are shaded by value; a missing value reads as unknown, unshaded."""
    if not rows or not columns:
        return _no_data(name, title, note)
    cell = "padding:0.15rem 0.3rem;text-align:right;white-space:nowrap;"
    head = _grouped_head(columns, cell)
    lines = []
    for label, row in zip(rows, values, strict=True):
        cells = []
        for raw in row:
            value = _number(raw)
            text = _UNKNOWN if value is None else f"{value:.{digits}f}"
            tip = ' title="unknown (no data)"' if value is None else ""
            cells.append(f'<td style="{cell}{_shade(value, lo, hi)}"{tip}>{text}</td>')
        lines.append(
            f'<tr><th style="{cell}{_STICKY}text-align:left;font-weight:500">'
            f"{_text_cell(str(label))}</th>" + "".join(cells) + "</tr>"
        )
    body = (
        '<div style="overflow-x:auto"><table style="border-collapse:collapse">'
        f"<thead>{head}</thead><tbody>{''.join(lines)}</tbody></table></div>"
    )
    return _frame(name, title, note, body)


def _legend(series: Sequence[str]) -> str:
    if len(series) < 2:
        return ""
    items = "".join(
        f'<span style="margin-right:0.9rem;white-space:nowrap">'
        f'<span style="display:inline-block;width:0.7rem;height:0.7rem;margin-right:0.25rem;'
        f'background:{PALETTE[i % len(PALETTE)]}"></span>{escape(s)}</span>'
        for i, s in enumerate(series)
    )
    return f'<div style="margin-bottom:0.3rem">{items}</div>'


def bar_chart(
    name: str,
    title: str,
    groups: Sequence[tuple[str, Sequence[Bar]]],
    *,
    note: str = "",
    scale_max: float | None = None,
) -> str:
    """Horizontal bars, one row per bar, grouped (a label per group), a colour per series."""
    bars = [b for _, group in groups for b in group]
    if not bars:
        return _no_data(name, title, note)
    series = list(dict.fromkeys(b.series for b in bars))
    top = scale_max or max(
        [v for b in bars for v in (b.value, b.high) if v is not None and v > 0] or [1.0]
    )
    rows = []
    for label, group in groups:
        rows.append(
            f'<div style="font-weight:500;margin-top:0.3rem">{escape(str(label))}</div>'
        )
        for bar in group:
            colour = PALETTE[series.index(bar.series) % len(PALETTE)]
            width = 0.0 if bar.value is None else max(0.0, min(100.0, 100 * bar.value / top))
            interval = ""
            if bar.low is not None and bar.high is not None:
                left = max(0.0, min(100.0, 100 * bar.low / top))
                right = max(left, min(100.0, 100 * bar.high / top))
                interval = (
                    f'<div style="position:absolute;left:{left:.1f}%;width:{right - left:.1f}%;'
                    'top:45%;height:10%;background:#222"></div>'
                )
            tip = escape(f"{bar.series}: {bar.text}")
            rows.append(
                f'<div style="display:flex;align-items:center;gap:0.5rem" title="{tip}">'
                f'<div style="flex:0 0 9rem;overflow:hidden;text-overflow:ellipsis;'
                f'white-space:nowrap;color:#444">{escape(bar.series)}</div>'
                '<div style="flex:1 1 auto;position:relative;height:0.8rem;background:#f0f0f0">'
                f'<div style="width:{width:.1f}%;height:100%;background:{colour}"></div>'
                f"{interval}</div>"
                f'<div style="flex:0 0 11rem;white-space:nowrap">{escape(bar.text)}</div>'
                "</div>"
            )
    return _frame(name, title, note, _legend(series) + "".join(rows))


# --- one picture per analysis table --------------------------------------------------------


def _pct(value: Any) -> str:
    number = _number(value)
    return _UNKNOWN if number is None else f"{number:.1%}"


def _num(value: Any, digits: int = 2) -> str:
    number = _number(value)
    return _UNKNOWN if number is None else f"{number:.{digits}f}"


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    # Dicts, not itertuples: a column named "count" would read as the tuple's method.
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _count(value: Any) -> str:
    number = _number(value)
    return _UNKNOWN if number is None else f"{round(number):,}"


def _run_label(run: Any, model: Any) -> str:
    return str(run) if str(run) == str(model) else f"{run} ({model})"


def success_grid_chart(table: pd.DataFrame, note: str = "") -> str:
    title = "Success rate by intent x scope"
    cells = [c for c in table.columns if "/" in str(c)]
    columns = ["overall", *cells] if "overall" in table.columns else cells
    rows = [_run_label(r, m) for r, m in zip(table["run"], table["model"], strict=True)] \
        if not table.empty else []
    values = table[columns].to_numpy().tolist() if rows else []
    return heat_table("success", title, rows, columns, values, note=note)


def passk_chart(table: pd.DataFrame, note: str = "") -> str:
    """Pass^k and Pass@k per run of one scope/intent slice (the page picks the slice)."""
    title = "Pass^k / Pass@k"
    if table.empty:
        return _no_data("passk", title, note)
    ks = sorted({int(k) for k in table["k"]})
    columns = [f"Pass^{k}" for k in ks] + [f"Pass@{k}" for k in ks]
    rows, values = [], []
    for run, part in table.groupby("run", sort=False):
        by_k = part.set_index("k")
        temp = _number(part["temperature"].iloc[0]) if "temperature" in part else None
        rows.append(f"{run} (T={'?' if temp is None else f'{temp:g}'})")
        values.append([by_k["pass_hat_k"].get(k) for k in ks]
                      + [by_k["pass_at_k"].get(k) for k in ks])
    return heat_table("passk", title, rows, columns, values, note=note)


def turn_budget_chart(table: pd.DataFrame, note: str = "") -> str:
    title = "SR(T): success within T turns"
    if table.empty:
        return _no_data("turn_budget", title, note)
    budgets = sorted({int(b) for b in table["budget"]})
    rows, values = [], []
    for run, part in table.groupby("run", sort=False):
        by_budget = part.set_index("budget")["sr"]
        rows.append(str(run))
        values.append([by_budget.get(b) for b in budgets])
    return heat_table("turn_budget", title, rows, [f"T={b}" for b in budgets], values,
                      note=note)


def turns_chart(table: pd.DataFrame, note: str = "") -> str:
    groups = [
        (str(run), [Bar(str(r["scope"]), _number(r["mean_turns"]), _num(r["mean_turns"], 1))
                    for r in _records(part)])
        for run, part in table.groupby("run", sort=False)
    ] if not table.empty else []
    return bar_chart("turns", "Mean turns on commonly solved tasks", groups, note=note)


def _share_text(r: dict[str, Any]) -> str:
    interval = f"[{_pct(r['ci_low'])}, {_pct(r['ci_high'])}]"
    return f"{_pct(r['share'])} {interval} ({_count(r['count'])}/{_count(r['n'])})"


def taxonomy_chart(table: pd.DataFrame, note: str = "") -> str:
    groups = [
        (str(category), [Bar(str(r["model"]), _number(r["share"]), _share_text(r),
                             _number(r["ci_low"]), _number(r["ci_high"]))
                         for r in _records(part)])
        for category, part in table.groupby("category", sort=False)
    ] if not table.empty else []
    return bar_chart("taxonomy", "Failure categories (share, 95% Wilson CI)", groups,
                     note=note, scale_max=1.0)


def taxonomy_corrected_chart(table: pd.DataFrame, note: str = "") -> str:
    """The corrected shares (analysis.corrected) as the taxonomy chart draws shares; an
    unknown share (machine labels nobody checked) shows as unknown, not as 0."""
    groups = [
        (str(category), [Bar(str(r["model"]), _number(r["share"]), _share_text(r),
                             _number(r["ci_low"]), _number(r["ci_high"]))
                         for r in _records(part)])
        for category, part in table.groupby("category", sort=False)
    ] if not table.empty else []
    return bar_chart("taxonomy_corrected", "Failure shares, machine labels corrected "
                     "(95% interval)", groups, note=note, scale_max=1.0)


def taxonomy_turns_chart(table: pd.DataFrame, note: str = "") -> str:
    groups = [
        (str(category), [Bar(str(r["model"]), _number(r["mean_turns"]),
                             _num(r["mean_turns"], 1)) for r in _records(part)])
        for category, part in table.groupby("category", sort=False)
    ] if not table.empty else []
    return bar_chart("taxonomy_turns", "Mean turns per failure category", groups, note=note)


def provenance_chart(table: pd.DataFrame, note: str = "") -> str:
    table = table.reindex(columns=PROVENANCE_COLUMNS)
    present = table[table["count"].fillna(0) > 0] if not table.empty else table
    bars = [Bar(str(r["provenance"]), _number(r["count"]),
                f"{_count(r['count'])} ({_pct(r['share'])})") for r in _records(present)]
    return bar_chart("provenance", "Final labels by provenance", [("", bars)] if bars else [],
                     note=note)


def robustness_chart(table: pd.DataFrame, by: str = "intent", note: str = "") -> str:
    title = f"Clean vs Noise success by {by}"
    sel = table[table["by"] == by] if not table.empty else table
    if sel.empty:
        return _no_data("robustness", title, note)
    group_names = list(dict.fromkeys(sel["group"].astype(str)))
    columns = [f"{g} {variant}" for g in group_names for variant in ("clean", "noise")]
    rows, values = [], []
    for run, part in sel.groupby("run", sort=False):
        by_group = part.assign(group=part["group"].astype(str)).set_index("group")
        rows.append(str(run))
        values.append([by_group[variant].get(g) for g in group_names
                       for variant in ("clean", "noise")])
    return heat_table("robustness", title, rows, columns, values, note=note)


def reliability_chart(table: pd.DataFrame, note: str = "") -> str:
    """RS(c) per run as a shaded table: the scores run from -100 x c to 100, so colour is
    capped at +-100 and the numbers carry the rest."""
    columns = ["RS(0)", "RS(5)", "RS(10)", "RS(N)"]
    rows = [_run_label(r["run"], r["model"]) for r in _records(table)]
    values = [[r[c] for c in columns] for r in _records(table)]
    return heat_table("reliability", "Reliability score (%)", rows, columns, values,
                      note=note, digits=1, lo=-100.0, hi=100.0)


def labeller_chart(table: pd.DataFrame, note: str = "") -> str:
    title = "LLM pre-labeller vs human"
    overall = table[table["category"] == "(overall)"] if not table.empty else table
    if not overall.empty and _number(overall["kappa"].iloc[0]) is not None:
        title = f"{title} (kappa = {float(overall['kappa'].iloc[0]):.2f})"
    per_cat = table[~table["category"].astype(str).str.startswith("(")] \
        if not table.empty else table
    metrics = ["precision", "recall", "override_rate"]
    rows = per_cat["category"].astype(str).tolist() if not per_cat.empty else []
    values = per_cat[metrics].to_numpy().tolist() if rows else []
    return heat_table("labeller", title, rows, metrics, values, note=note)


def quick_chart(name: str, table: pd.DataFrame, *, note: str = "", by: str = "intent") -> str:
    """The light picture of a computed table (``analysis.tables.TABLES``), as HTML."""
    if name == "success":
        return success_grid_chart(table, note)
    if name == "passk":
        # The page passes the slice the reader picked; a whole table shows its all/all slice.
        if {"scope", "intent"} <= set(table.columns) and \
                len(table[["scope", "intent"]].drop_duplicates()) > 1:
            table = table[(table["scope"] == ALL) & (table["intent"] == ALL)]
        return passk_chart(table, note)
    if name == "turn_budget":
        return turn_budget_chart(table, note)
    if name == "robustness":
        return robustness_chart(table, by, note)
    builders = {
        "turns": turns_chart,
        "taxonomy": taxonomy_chart,
        "taxonomy_corrected": taxonomy_corrected_chart,
        "taxonomy_turns": taxonomy_turns_chart,
        "provenance": provenance_chart,
        "labeller": labeller_chart,
        "reliability": reliability_chart,
    }
    if name not in builders:
        raise KeyError(f"no quick chart for table {name!r}")
    return builders[name](table, note)


#: Rows an HTML table shows; the rest are in the interactive table and the downloads.
TABLE_ROWS = 100
TABLE_CLASS = "faillab-quick-table"


def _cell_text(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        number = _number(value)
        if number is None:
            return _UNKNOWN
        if number.is_integer():
            return f"{number:,.0f}"
        return f"{number:.2e}" if abs(number) < 0.001 else f"{number:,.3f}"
    if value is None or value is pd.NA or value is pd.NaT:
        return _UNKNOWN
    return str(value)


def html_table(table: pd.DataFrame, max_rows: int = TABLE_ROWS) -> str:
    """A computed table as a plain HTML table (first ``max_rows`` rows; the caller offers the
    rest). A missing number reads as unknown ("–"), never as zero."""
    cell = "padding:0.15rem 0.5rem;border-bottom:1px solid #e6e6e6;white-space:nowrap;"
    head = "".join(f'<th style="{cell}text-align:left;font-weight:600">{escape(str(c))}</th>'
                   for c in table.columns)
    lines = []
    for row in table.head(max_rows).itertuples(index=False, name=None):
        cells = []
        for value in row:
            align = "right" if isinstance(value, numbers.Real) \
                and not isinstance(value, bool | np.bool_) else "left"
            text = _text_cell(_cell_text(value))
            cells.append(f'<td style="{cell}text-align:{align}">{text}</td>')
        lines.append(f"<tr>{''.join(cells)}</tr>")
    more = len(table) - max_rows
    tail = (f'<div style="color:#555;font-size:0.8rem">{more:,} more rows: open the interactive '
            "table or download the CSV.</div>") if more > 0 else ""
    return (
        f'<div class="{TABLE_CLASS}" style="overflow-x:auto;{_FONT}">'
        f'<table style="border-collapse:collapse"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(lines)}</tbody></table>{tail}</div>"
    )
