"""Every export format parses back to the same numbers (within the printed rounding)."""

from __future__ import annotations

import csv
import io
import json
import math
import pathlib
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from analysis.export import latex_escape, to_csv, to_html_chart, to_json, to_latex, to_markdown


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": ["gpt_4.1 & co", "kimi|k2 50%"],
            "n": np.array([120, 7], dtype=np.int64),
            "rate": [0.123456, np.nan],
            "gap": [-0.5, 1 / 3],
            "ok": [True, False],
        }
    )


def _num(text: str) -> float:
    return math.nan if text in ("", "--") else float(text)


def _close(a: float, b: float, tol: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol


def test_json_round_trip(table: pd.DataFrame) -> None:
    rows = json.loads(to_json(table))
    assert [list(r) for r in rows] == [list(table.columns)] * 2
    assert rows[0]["n"] == 120 and isinstance(rows[0]["n"], int)
    assert rows[0]["rate"] == pytest.approx(0.123456)
    assert rows[1]["rate"] is None
    assert rows[1]["gap"] == pytest.approx(1 / 3, abs=1e-15)
    assert rows[0]["ok"] is True
    assert rows[0]["run"] == "gpt_4.1 & co"
    assert "NaN" not in to_json(table)


def test_json_handles_nullable_and_inf() -> None:
    df = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": [np.inf, 2.0]})
    assert json.loads(to_json(df)) == [{"a": 1, "b": None}, {"a": None, "b": 2.0}]


def test_csv_round_trip(table: pd.DataFrame) -> None:
    rows = list(csv.reader(io.StringIO(to_csv(table))))
    assert rows[0] == list(table.columns)
    assert rows[1][0] == "gpt_4.1 & co"
    for r, (_, src) in zip(rows[1:], table.iterrows(), strict=True):
        assert int(r[1]) == src["n"]
        assert _close(_num(r[2]), src["rate"], 1e-12)
        assert _close(_num(r[3]), src["gap"], 1e-12)
    assert pd.read_csv(io.StringIO(to_csv(table)))["rate"].isna().tolist() == [False, True]


def _markdown_cells(text: str) -> list[list[str]]:
    lines = [ln for ln in text.strip().splitlines()]
    out = []
    for ln in lines:
        assert ln.startswith("| ") and ln.endswith(" |")
        cells = re.split(r"(?<!\\) \| ", ln[2:-2])
        out.append([c.replace("\\|", "|") for c in cells])
    return out


def test_markdown_round_trip(table: pd.DataFrame) -> None:
    cells = _markdown_cells(to_markdown(table, decimals=3))
    assert cells[0] == list(table.columns)
    assert cells[1][1] == "---:" and cells[1][0] == "---"
    body = cells[2:]
    assert body[1][0] == "kimi|k2 50%"
    for r, (_, src) in zip(body, table.iterrows(), strict=True):
        assert int(r[1]) == src["n"]
        assert _close(_num(r[2]), src["rate"], 5e-4)
        assert _close(_num(r[3]), src["gap"], 5e-4)
    assert body[0][2] == "0.123"


def _latex_cells(text: str) -> list[list[str]]:
    body = text.split("\\midrule\n")[1].split("\\bottomrule")[0]
    return [
        [c.strip() for c in re.split(r"(?<!\\)&", ln.rstrip().removesuffix("\\\\"))]
        for ln in body.strip().splitlines()
    ]


def test_latex_round_trip(table: pd.DataFrame) -> None:
    tex = to_latex(table, decimals=2, caption="Success 100% & more", label="tab:sr")
    for marker in ("\\toprule", "\\midrule", "\\bottomrule", "\\begin{tabular}{lrrrl}"):
        assert marker in tex
    assert "\\caption{Success 100\\% \\& more}" in tex and "\\label{tab:sr}" in tex
    header = tex.split("\\toprule\n")[1].split("\\\\")[0]
    assert "rate" in header and "gap" in header
    rows = _latex_cells(tex)
    assert rows[0][0] == "gpt\\_4.1 \\& co"
    assert rows[1][0] == "kimi|k2 50\\%"
    for r, (_, src) in zip(rows, table.iterrows(), strict=True):
        assert int(r[1]) == src["n"]
        assert _close(_num(r[2]), src["rate"], 5e-3)
        assert _close(_num(r[3]), src["gap"], 5e-3)
    assert rows[1][2] == "--"


def test_latex_groups_slash_columns_under_a_spanning_header() -> None:
    grid = pd.DataFrame({"run": ["r"], "overall": [0.5], "Labs/patient": [0.25],
                         "Labs/population": [0.75], "Cost/patient": [1.0], "macro_avg": [0.6]})
    lines = to_latex(grid, decimals=2).splitlines()
    assert lines[0].endswith("% needs \\usepackage{booktabs}")
    top, rule, below = lines[2:5]
    assert top == " &  & \\multicolumn{2}{c}{Labs} & Cost &  \\\\"
    assert rule == "\\cmidrule(lr){3-4} \\cmidrule(lr){5-5}"
    assert below == "run & overall & patient & population & patient & macro\\_avg \\\\"
    assert lines[5] == "\\midrule"
    # Every header row has one cell per column (a \multicolumn counts its span).
    spans = [int(n) for n in re.findall(r"\\multicolumn\{(\d+)\}", top)]
    assert top.count(" & ") + 1 - len(spans) + sum(spans) == len(grid.columns)


def test_latex_escape_all_specials() -> None:
    assert latex_escape("a\\b{c}~^#$") == (
        "a\\textbackslash{}b\\{c\\}\\textasciitilde{}\\textasciicircum{}\\#\\$"
    )
    plain = to_latex(pd.DataFrame({"x": [1.0]}))
    assert plain.startswith("\\begin{tabular}{r}") and "\\begin{table}" not in plain


def test_real_table_round_trips_through_every_format() -> None:
    from analysis.passk import pass_k

    df = pd.DataFrame(
        {
            "id": list("abcdef"),
            "run": "r",
            "model": "m",
            "task_id": ["1", "1", "1", "2", "2", "2"],
            "intent": "Labs",
            "scope": "patient",
            "temperature": 0.0,
            "success": [True, False, True, True, True, False],
        }
    )
    out = pass_k(df)
    rows = json.loads(to_json(out))
    csv_rows = list(csv.DictReader(io.StringIO(to_csv(out))))
    md = _markdown_cells(to_markdown(out))[2:]
    tex = _latex_cells(to_latex(out))
    col = list(out.columns).index("pass_hat_k")
    for i, value in enumerate(out["pass_hat_k"]):
        assert rows[i]["pass_hat_k"] == pytest.approx(value)
        assert float(csv_rows[i]["pass_hat_k"]) == pytest.approx(value)
        assert float(md[i][col]) == pytest.approx(value, abs=5e-4)
        assert float(tex[i][col]) == pytest.approx(value, abs=5e-4)


def test_html_chart_self_contained() -> None:
    fig = go.Figure(go.Bar(x=["a"], y=[1]))
    html = to_html_chart(fig)
    assert html.lstrip().lower().startswith("<html") or "<!doctype" in html[:100].lower()
    assert "</html>" in html
    # plotly.js is inlined (no CDN script tag) so the page works offline.
    assert re.search(r"<script[^>]*\bsrc=", html) is None
    assert len(html) > 1_000_000


def test_png_export_writes_a_real_png(tmp_path: pathlib.Path) -> None:
    import struct

    from analysis.export import to_png

    fig = go.Figure(go.Bar(x=["a", "b"], y=[3, 5]))
    fig.update_layout(width=400, height=300)
    data = to_png(fig, scale=1)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # The IHDR chunk carries the size the figure asked for.
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (400, 300)
    (tmp_path / "chart.png").write_bytes(data)


def test_chart_bundle_carries_plotly_js_once() -> None:
    import zipfile

    from analysis.export import PLOTLY_JS, charts_bundle, to_html_chart

    figs = {f"chart{i}": go.Figure(go.Bar(x=[1, 2], y=[i, i + 1])) for i in range(3)}
    data = charts_bundle(figs)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        assert sorted(names) == sorted([PLOTLY_JS, "chart0.html", "chart1.html", "chart2.html"])
        page = zf.read("chart1.html").decode()
        library = zf.read(PLOTLY_JS)
    assert f'src="{PLOTLY_JS}"' in page
    # Each page is small: the library is not inside it.
    assert len(page) < len(library) / 50
    assert len(data) < 3 * len(to_html_chart(figs["chart0"]))
