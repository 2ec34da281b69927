"""Exports of analysis tables and charts: JSON, CSV, Markdown, LaTeX (booktabs), HTML, PNG.

Markdown and LaTeX are written by hand so exports need no optional dependencies (tabulate,
jinja2) and the output is stable across pandas versions.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from faillab_core.textsafe import csv_frame, csv_frame_text

#: LaTeX text-mode escapes; backslash must be handled first or it would re-escape the others.
_LATEX_ESCAPES = [
    ("\\", r"\textbackslash{}"),
    ("&", r"\&"),
    ("%", r"\%"),
    ("$", r"\$"),
    ("#", r"\#"),
    ("_", r"\_"),
    ("{", r"\{"),
    ("}", r"\}"),
    ("~", r"\textasciitilde{}"),
    ("^", r"\textasciicircum{}"),
]


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and not math.isfinite(float(value))


def _plain(value: Any) -> Any:
    """JSON-ready Python scalar: numpy scalars unwrapped, NaN/NA/inf -> None."""
    if _is_missing(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def to_json(df: pd.DataFrame, indent: int | None = None) -> str:
    """A JSON list of row objects keyed by column name; missing values become ``null``."""
    columns = [str(c) for c in df.columns]
    rows = [
        {c: _plain(v) for c, v in zip(columns, row, strict=True)}
        for row in df.itertuples(index=False, name=None)
    ]
    # allow_nan=False guarantees strict JSON (no bare NaN tokens) if anything slipped through.
    return json.dumps(rows, indent=indent, allow_nan=False, default=str)


def to_csv(df: pd.DataFrame) -> str:
    """CSV with a header row, no index, ``\\n`` line endings and empty fields for missing values.

    Text cells that a spreadsheet would run as a formula are neutralised (see
    :mod:`faillab_core.textsafe`); numbers are written as numbers.
    """
    return csv_frame_text(csv_frame(df))


def _column_kind(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series.dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(series.dtype):
        return "int"
    if pd.api.types.is_float_dtype(series.dtype):
        return "float"
    return "text"


def _format_cell(value: Any, kind: str, decimals: int, missing: str) -> str:
    if _is_missing(value):
        return missing
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return f"{float(value):.{decimals}f}"
    if isinstance(value, float | np.floating):
        # Numbers inside object columns (e.g. mixed tables) still get the fixed precision.
        return f"{float(value):.{decimals}f}"
    return str(value)


def _formatted(df: pd.DataFrame, decimals: int, missing: str) -> tuple[list[list[str]], list[str]]:
    kinds = [_column_kind(df[c]) for c in df.columns]
    cols = [df[c].tolist() for c in df.columns]
    cells = [
        [_format_cell(v, k, decimals, missing) for v in col]
        for col, k in zip(cols, kinds, strict=True)
    ]
    rows = [list(r) for r in zip(*cells, strict=True)] if cells else []
    return rows, kinds


def to_markdown(df: pd.DataFrame, decimals: int = 3, missing: str = "") -> str:
    """GitHub pipe table; numbers right-aligned, floats to ``decimals`` places, ``|`` escaped."""
    rows, kinds = _formatted(df, decimals, missing)

    def esc(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(esc(str(c)) for c in df.columns) + " |"
    align = "| " + " | ".join("---:" if k in ("int", "float") else "---" for k in kinds) + " |"
    body = ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join([header, align, *body]) + "\n"


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters for text mode."""
    out = []
    for ch in text:
        for src, dst in _LATEX_ESCAPES:
            if ch == src:
                out.append(dst)
                break
        else:
            out.append(ch)
    return "".join(out)


def to_latex(
    df: pd.DataFrame,
    decimals: int = 3,
    caption: str | None = None,
    label: str | None = None,
    missing: str = "--",
    align: str | None = None,
) -> str:
    """Booktabs ``tabular`` (wrapped in a ``table`` float when a caption or label is given).

    Text is escaped, floats are fixed to ``decimals`` places and missing values print as
    ``--``. Columns named ``GROUP/SUB`` (the success grid's ``Labs/patient``) get a two-level
    header: the group spans its adjacent columns, the part after the slash sits below, as on
    the Statistics page. Needs ``\\usepackage{booktabs}``, which the first line says.
    ``align`` overrides the column spec (one letter a column; text cells stay escaped).
    """
    rows, kinds = _formatted(df, decimals, missing)
    spec = align or "".join("r" if k in ("int", "float") else "l" for k in kinds)
    lines = [
        f"\\begin{{tabular}}{{{spec}}} % needs \\usepackage{{booktabs}}",
        "\\toprule",
        *_latex_header([str(c) for c in df.columns]),
        "\\midrule",
        *[
            " & ".join(
                c if k in ("int", "float") else latex_escape(c)
                for c, k in zip(r, kinds, strict=True)
            )
            + r" \\"
            for r in rows
        ],
        "\\bottomrule",
        "\\end{tabular}",
    ]
    if caption is None and label is None:
        return "\n".join(lines) + "\n"
    wrapped = ["\\begin{table}[t]", "\\centering"]
    if caption is not None:
        wrapped.append(f"\\caption{{{latex_escape(caption)}}}")
    if label is not None:
        wrapped.append(f"\\label{{{label}}}")
    return "\n".join([*wrapped, *lines, "\\end{table}"]) + "\n"


def _latex_header(names: list[str]) -> list[str]:
    """One header row, or two under ``GROUP/SUB`` names: the groups over a ``\\cmidrule``
    each, the rest of each name below (columns without a group stand in the lower row)."""
    split = [n.split("/", 1) if "/" in n else None for n in names]
    if not any(split):
        return [" & ".join(latex_escape(n) for n in names) + r" \\"]
    top: list[str] = []
    rules: list[str] = []
    bottom: list[str] = []
    i = 0
    while i < len(names):
        part = split[i]
        if part is None:
            top.append("")
            bottom.append(latex_escape(names[i]))
            i += 1
            continue
        j = i
        while j < len(names) and (other := split[j]) is not None and other[0] == part[0]:
            bottom.append(latex_escape(other[1]))
            j += 1
        group = latex_escape(part[0])
        top.append(f"\\multicolumn{{{j - i}}}{{c}}{{{group}}}" if j - i > 1 else group)
        rules.append(f"\\cmidrule(lr){{{i + 1}-{j}}}")
        i = j
    return [" & ".join(top) + r" \\", " ".join(rules), " & ".join(bottom) + r" \\"]


#: Where kaleido looks for a browser when none is configured (Debian's chromium).
SYSTEM_CHROMIUM = Path("/usr/bin/chromium")
PLOTLY_JS = "plotly.min.js"
#: Renders tried before a PNG export fails (see ``to_png``).
PNG_ATTEMPTS = 3


def to_png(fig: go.Figure, *, scale: float = 2.0) -> bytes:
    """The chart as a PNG, rendered by kaleido in a headless chromium."""
    if "BROWSER_PATH" not in os.environ and SYSTEM_CHROMIUM.exists():
        # kaleido's browser finder honours BROWSER_PATH; point it at the system browser so it
        # never tries to fetch one of its own.
        os.environ["BROWSER_PATH"] = str(SYSTEM_CHROMIUM)
    for attempt in range(PNG_ATTEMPTS):
        try:
            return bytes(fig.to_image(format="png", scale=scale))
        except Exception as err:
            # On a loaded machine kaleido can ask its fresh tab to render before the tab's
            # own script has loaded ("kaleido_scopes is not defined"); the same figure then
            # renders on a new tab. Any other error is the figure's and is raised at once.
            if "is not defined" not in str(err) or attempt + 1 == PNG_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def charts_bundle(figs: Mapping[str, go.Figure]) -> bytes:
    """A ZIP of chart pages sharing one copy of plotly.js (viewable offline once unpacked).

    Each self-contained page would carry the whole library (about 4.8 MB); here every page
    points at the one `plotly.min.js` beside it.
    """
    from plotly.offline import get_plotlyjs

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(PLOTLY_JS, get_plotlyjs())
        for name, fig in figs.items():
            zf.writestr(f"{name}.html", fig.to_html(include_plotlyjs=PLOTLY_JS, full_html=True))
    return buf.getvalue()


def to_html_chart(fig: go.Figure) -> str:
    """A complete HTML page embedding plotly.js, viewable offline."""
    return str(fig.to_html(include_plotlyjs=True, full_html=True))


EXPORTERS = {
    "json": to_json,
    "csv": to_csv,
    "md": to_markdown,
    "tex": to_latex,
}
