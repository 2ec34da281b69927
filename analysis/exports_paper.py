"""One export path for `faillab stats` and the Statistics page: the same table, chart, caption,
subtitle and file bytes from both.

Both callers describe what they export with an ``ExportContext`` built by ``export_context``
(the runs, the label policy, the chart's slice) and ask ``export_file`` for the bytes, so a
file cannot differ between the command line and the page. The data formats (CSV, JSON,
Markdown) are the registry's table as computed, so they read back exactly; LaTeX is laid out
for a paper (booktabs float, caption, readable headers, short run labels with a legend, n
beside each rate of the success grid); the charts carry their own colour template, because
importing Streamlit makes its placeholder template (colours ``#000001``, ``#000002``, ...,
which only its browser front end replaces) plotly's default, and a PNG rendered from that
template is solid black.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from analysis.export import latex_escape, to_csv, to_json, to_latex, to_markdown, to_png
from analysis.sources import DESCRIPTIONS, TITLES, SourceError, chart_for
from analysis.success import cell_name, run_order, success_long
from analysis.tables import LABEL_POLICIES, TableOptions

FORMATS = ("json", "csv", "md", "latex", "html", "png")
SUFFIX = {"json": "json", "csv": "csv", "md": "md", "latex": "tex", "html": "html",
          "png": "png"}

#: Okabe and Ito's colour-blind-safe palette (blue, orange, green, vermillion, purple, sky
#: blue, yellow, black): series stay apart for every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")
PAPER_TEMPLATE = go.layout.Template(pio.templates["plotly_white"])
PAPER_TEMPLATE.layout.colorway = PALETTE
PAPER_TEMPLATE.layout.paper_bgcolor = "#FFFFFF"

#: Run names longer than this get short labels (R1, R2, ...) and a legend in the LaTeX table:
#: real run names are a hundred characters and would make a column of their own page width.
SHORT_RUN_CHARS = 16

#: What the label charts and tables count, whatever policy is chosen.
FIXED_LABEL_NOTES = {
    "provenance": "Labels: every final label by source (not filtered by the labels counted)",
    "labeller": "Labels: LLM pre-labels vs human-derived final labels (LLM-only left out)",
    "taxonomy_corrected": "Labels: every final label, LLM-only ones corrected by their checked "
                          "errors (not filtered by the labels counted)",
}
#: The tables whose counts follow the label policy, and how each policy is named on them.
POLICY_TABLES = frozenset({"taxonomy", "taxonomy_turns"})
POLICY_NAMES = {LABEL_POLICIES[0]: "human-confirmed only", LABEL_POLICIES[1]: "include LLM-only"}

#: Readable headers for the registry's column names (the rest: underscores become spaces).
COLUMN_NAMES = {
    "run": "Run", "model": "Model", "n": "n", "overall": "Overall", "macro_avg": "Macro avg.",
    "patient_mean": "Patient mean", "population_mean": "Population mean",
    "patient_population_gap": "Patient - population", "pass_hat_k": "Pass^k",
    "pass_at_k": "Pass@k", "n_tasks": "Tasks", "mean_turns": "Mean turns",
    "median_turns": "Median turns", "ci_low": "CI low", "ci_high": "CI high", "sr": "SR(T)",
    "budget": "T", "override_rate": "Override rate", "n_pairs": "Pairs",
}


def label_note(name: str, policy: str) -> str:
    """The line a label table's chart and caption carry, so an exported picture says what it
    counts ("" for the tables that read no labels)."""
    if name in POLICY_TABLES:
        chosen, default = POLICY_NAMES[policy], POLICY_NAMES[LABEL_POLICIES[0]]
        tail = " (the default)" if chosen == default else f" (default: {default})"
        return f"Labels: {chosen}{tail}"
    return FIXED_LABEL_NOTES.get(name, "")


@dataclass(frozen=True)
class ExportContext:
    """What an export says besides its table: the runs it covers, the label line, the chart's
    slice (Pass^k's scope and intent) and grouping (robustness), the LaTeX precision, and the
    trajectories behind each success-grid cell (``(run, "Intent/scope") -> n``)."""

    runs: tuple[str, ...] = ()
    note: str = ""
    slice_text: str = ""
    by: str = "intent"
    decimals: int = 3
    cell_n: Mapping[tuple[str, str], int] = field(default_factory=dict)


def export_context(name: str, frame: pd.DataFrame, options: TableOptions, *,
                   slice_text: str = "", by: str = "intent", decimals: int = 3
                   ) -> ExportContext:
    """The context of table ``name`` over the trajectory ``frame`` it was computed from."""
    runs = tuple(run_order(frame, options.runs))
    cell_n: dict[tuple[str, str], int] = {}
    if name == "success" and not frame.empty:
        long = success_long(frame, runs)
        cell_n = {(str(r), cell_name(str(i), str(s))): int(n) for r, i, s, n in
                  zip(long["run"], long["intent"], long["scope"], long["n"], strict=True)}
    return ExportContext(runs, label_note(name, options.label_policy), slice_text, by,
                         decimals, cell_n)


def run_labels(runs: Sequence[str]) -> dict[str, str]:
    """Each run -> the label a table shows: itself when every name is short, else R1, R2..."""
    if all(len(r) <= SHORT_RUN_CHARS for r in runs):
        return {r: r for r in runs}
    return {r: f"R{i}" for i, r in enumerate(runs, start=1)}


def caption(name: str, ctx: ExportContext) -> str:
    """What the table shows and over which runs, and which labels it counts."""
    title = TITLES.get(name, name)
    what = DESCRIPTIONS.get(name, "").rstrip(".")
    runs = f"{len(ctx.runs)} run{'s' if len(ctx.runs) != 1 else ''}"
    labels = run_labels(ctx.runs)
    if any(k != v for k, v in labels.items()):
        runs += f" ({labels[ctx.runs[0]]}" + (f"--{labels[ctx.runs[-1]]}" if len(ctx.runs) > 1
                                              else "") + ", named below the table)"
    elif ctx.runs:
        runs += f" ({', '.join(ctx.runs)})"
    parts = [f"{what or title}, over {runs}."]
    if name == "success" and ctx.cell_n:
        parts.append("Each cell: success rate (trajectories).")
    if ctx.note:
        parts.append(f"{ctx.note}.")
    return " ".join(parts)


def _readable(column: str) -> str:
    if "/" in column:  # an "Intent/scope" cell: the LaTeX header groups it under its intent
        return column
    text = COLUMN_NAMES.get(column)
    if text is not None:
        return text
    spaced = column.replace("_", " ")
    return spaced[:1].upper() + spaced[1:]


def _latex_frame(name: str, table: pd.DataFrame, ctx: ExportContext
                 ) -> tuple[pd.DataFrame, dict[str, str], str]:
    """The table as a paper shows it: short run labels, n beside each grid rate, the model
    column left out where the run's name already says it."""
    out = table.copy()
    legend: dict[str, str] = {}
    if "run" in out.columns:
        runs = list(dict.fromkeys([*ctx.runs, *out["run"].astype(str)]))
        labels = run_labels([r for r in runs if r in set(out["run"].astype(str))])
        if any(k != v for k, v in labels.items()):
            models = (dict(zip(out["run"].astype(str), out["model"].astype(str), strict=True))
                      if "model" in out.columns else {})
            legend = {labels[r]: r if models.get(r, r) in r else f"{r} ({models[r]})"
                      for r in labels}
            out["run"] = out["run"].astype(str).map(labels)
            if "model" in out.columns:
                out = out.drop(columns="model")
        elif "model" in out.columns and all(
                m in r for r, m in zip(out["run"].astype(str), out["model"].astype(str),
                                       strict=True)):
            out = out.drop(columns="model")
    if name == "success" and ctx.cell_n:
        run_of = table["run"].astype(str).tolist()
        for column in [c for c in table.columns if "/" in str(c)]:
            out[column] = [
                "--" if pd.isna(v) else
                f"{float(v):.{ctx.decimals}f} ({ctx.cell_n.get((run, str(column)), 0)})"
                for run, v in zip(run_of, table[column], strict=True)]
    # Numbers (and the grid's "rate (n)" cells) right-aligned, text left.
    align = "".join("r" if "/" in str(c) or (c != "run" and pd.api.types.is_numeric_dtype(
        table[c])) else "l" for c in out.columns)
    out.columns = [_readable(str(c)) for c in out.columns]
    return out, legend, align


def paper_latex(name: str, table: pd.DataFrame, ctx: ExportContext) -> str:
    """A booktabs ``table`` float: caption, label, the grid's intents over their scopes, short
    run labels and their legend under the tabular."""
    frame, legend, align = _latex_frame(name, table, ctx)
    tabular = to_latex(frame, decimals=ctx.decimals, align=align)
    lines = ["\\begin{table}[t]", "\\centering", "\\small",
             f"\\caption{{{latex_escape(caption(name, ctx))}}}",
             f"\\label{{tab:faillab-{name.replace('_', '-')}}}", tabular.rstrip("\n")]
    if legend:
        entries = "; ".join(f"{latex_escape(k)}: {latex_escape(v)}" for k, v in legend.items())
        lines += ["\\par\\smallskip", f"{{\\footnotesize\\raggedright Runs: {entries}.\\par}}"]
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def paper_figure(name: str, table: pd.DataFrame, ctx: ExportContext) -> go.Figure:
    """The table's chart, titled with its slice and label line, in the paper template."""
    from analysis.charts import robustness_bars

    if name == "robustness" and not table.empty:
        fig = robustness_bars(table, by=ctx.by)
    else:
        try:
            fig = chart_for(name, table)
        except SourceError:
            # Every registered table has a chart; anything else exports an empty figure
            # titled so, rather than a broken download.
            fig = go.Figure(layout={"title": "no chart for this table"})
    title = fig.layout.title.text or TITLES.get(name, name)
    if ctx.slice_text:
        title = f"{TITLES.get(name, name)} ({ctx.slice_text})"
    if ctx.note:
        title = f"{title}<br><sup>{ctx.note}</sup>"
    fig.update_layout(title={"text": title, "x": 0.01, "xanchor": "left"},
                      template=PAPER_TEMPLATE)
    if name == "success" and ctx.cell_n and fig.data:
        _heatmap_counts(fig, table, ctx)
    _colour_by_group(fig)
    return fig


def _colour_by_group(fig: go.Figure) -> None:
    """One colour per legend group: plotly colours trace by trace, so a run drawn in two
    panels (Pass^k and Pass@k) came out in two colours; traces that set their own keep it."""
    groups: dict[str, str] = {}
    for trace in fig.data:
        group = getattr(trace, "legendgroup", None)
        if trace.type != "scatter" or not group:
            continue
        colour = groups.setdefault(str(group), PALETTE[len(groups) % len(PALETTE)])
        trace.update(line={"color": colour}, marker={"color": colour})


def _heatmap_counts(fig: go.Figure, table: pd.DataFrame, ctx: ExportContext) -> None:
    """n under each rate, so 1.00 from one trajectory does not read as 1.00 from forty."""
    cells = [str(c) for c in table.columns if "/" in str(c)]
    runs = table["run"].astype(str).tolist()
    text = [["" if pd.isna(v) else f"{float(v):.2f}<br>n={ctx.cell_n.get((run, c), 0)}"
             for c, v in zip(cells, table.loc[i, cells], strict=True)]
            for i, run in zip(table.index, runs, strict=True)]
    fig.data[0].update(text=text, texttemplate="%{text}")


def export_file(name: str, table: pd.DataFrame, fmt: str, ctx: ExportContext) -> bytes:
    """The file ``fmt`` of table ``name``: what `faillab stats --format` writes and the
    Statistics page's Export menu downloads."""
    if fmt == "json":
        text = to_json(table)
    elif fmt == "csv":
        text = to_csv(table)
    elif fmt == "md":
        text = to_markdown(table, decimals=ctx.decimals)
    elif fmt == "latex":
        text = paper_latex(name, table, ctx)
    elif fmt == "html":
        # A fixed element id: plotly otherwise draws a random one, and two exports of one
        # chart would differ.
        text = str(paper_figure(name, table, ctx).to_html(
            include_plotlyjs=True, full_html=True, div_id=f"faillab-{name}"))
    elif fmt == "png":
        return to_png(paper_figure(name, table, ctx))
    else:
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def file_name(name: str, fmt: str) -> str:
    return f"{name}.{SUFFIX[fmt]}"


__all__ = ["FORMATS", "PALETTE", "ExportContext", "caption", "export_context", "export_file",
           "file_name", "label_note", "paper_figure", "paper_latex", "run_labels"]
