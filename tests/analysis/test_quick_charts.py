"""analysis.quick_charts: the Statistics page's light HTML charts and tables."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.quick_charts import (
    CHART_CLASS,
    TABLE_CLASS,
    Bar,
    bar_chart,
    heat_table,
    html_table,
    quick_chart,
)
from analysis.sources import Inputs, compute_all, load_frame
from analysis.tables import TABLES
from trajectories.workspace import Workspace

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def tags(html: str) -> set[str]:
    return {t.lower() for t in re.findall(r"<\s*([a-zA-Z]+)", html)}


@pytest.fixture(scope="module")
def demo_tables(demo_workspace: Path) -> dict[str, pd.DataFrame]:
    frame = load_frame(Workspace(demo_workspace))
    failed = frame[frame["success"] == False]  # noqa: E712 (nullable booleans)
    labels = pd.DataFrame({
        "trajectory_id": failed["id"].astype(str).head(12).tolist(),
        "category": ["SQL Logic Error", "Answer Format Error"] * 6,
        "provenance": ["human_single"] * 8 + ["llm_only"] * 4,
    })
    pairs = pd.DataFrame({
        "trajectory_id": labels["trajectory_id"].head(8),
        "llm_category": ["SQL Logic Error"] * 8,
        "human_category": labels["category"].head(8),
    })
    return compute_all(Inputs(frame, labels, pairs))


def test_every_table_has_a_quick_chart_with_its_numbers(
    demo_tables: dict[str, pd.DataFrame],
) -> None:
    for name in TABLES:
        html = quick_chart(name, demo_tables[name], note="Labels: the note")
        assert f'class="{CHART_CLASS}"' in html and f'data-chart="{name}"' in html, name
        assert "Labels: the note" in html, name
        assert ">no data<" not in html, name
    success = demo_tables["success"]
    html = quick_chart("success", success)
    for run, rate in zip(success["run"], success["overall"], strict=True):
        assert str(run) in html and f">{rate:.2f}<" in html
    taxonomy = demo_tables["taxonomy"]
    html = quick_chart("taxonomy", taxonomy)
    row = taxonomy.iloc[0]
    assert f"{row['share']:.1%} [{row['ci_low']:.1%}, {row['ci_high']:.1%}]" in html
    assert f"({int(row['count'])}/{int(row['n'])})" in html


def test_hostile_names_stay_text() -> None:
    success = pd.DataFrame({"run": [HOSTILE], "model": ["m"], "n": [3], "overall": [0.5],
                            "Labs/patient": [0.25]})
    taxonomy = pd.DataFrame({"model": [HOSTILE], "category": [HOSTILE], "count": [1],
                             "n": [2], "share": [0.5], "ci_low": [0.1], "ci_high": [0.9]})
    for html in (quick_chart("success", success, note=HOSTILE),
                 quick_chart("taxonomy", taxonomy, note=HOSTILE),
                 html_table(taxonomy)):
        assert "img" not in tags(html) and "script" not in tags(html)
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_a_missing_number_reads_as_unknown_never_as_a_rate() -> None:
    html = heat_table("t", "title", ["run a"], ["x", "y"], [[None, float("nan")]])
    assert html.count('title="unknown (no data)"') == 2
    assert "0.00" not in html
    table = html_table(pd.DataFrame({"run": ["a"], "rate": [float("nan")]}))
    assert ">–<" in table and "nan" not in table.lower()


def test_intent_scope_columns_sit_under_one_heading_per_intent() -> None:
    long_run = "mimic_iv-tool-calling-gemini-2.0-flash-0.0_range_0--1_user-gpt-4o-mini-llm_04"
    html = heat_table("success", "title", [long_run, "short"],
                      ["overall", "Labs/patient", "Labs/population", "Vitals/patient"],
                      [[0.5, 0.4, 0.6, None], [0.1, 0.2, 0.3, 0.4]])
    head = html[html.index("<thead>"):html.index("</thead>")]
    rows = head.split("</tr>")[:2]
    assert re.findall(r'colspan="(\d)"[^>]*>(\w+)<', rows[0]) == [("2", "Labs"), ("1", "Vitals")]
    assert re.search(r'rowspan="2"[^>]*>overall<', rows[0])
    assert re.findall(r">(patient|population)<", rows[1]) == ["patient", "population", "patient"]
    # The long run name wraps in a box of its own; a short one is plain text.
    assert f"overflow-wrap:anywhere\">{long_run}</div>" in html
    assert ">short</th>" in html
    # Columns without "intent/scope" keep a single header row.
    plain = heat_table("t", "title", ["a"], ["x", "y"], [[0.1, 0.2]])
    assert "colspan" not in plain and plain.count("<tr>") == 2


def test_empty_tables_say_no_data() -> None:
    for name in TABLES:
        assert ">no data<" in quick_chart(name, pd.DataFrame(columns=["run", "model", "scope",
                                                                     "intent", "k", "by",
                                                                     "category"])), name


def test_bars_scale_to_the_longest_and_draw_intervals() -> None:
    html = bar_chart("b", "title", [("g", [Bar("s1", 2.0, "2"), Bar("s2", 4.0, "4",
                                                                     low=3.0, high=5.0)])])
    widths = re.findall(r"width:([\d.]+)%;height:100%", html)
    assert widths == ["40.0", "80.0"]  # scaled to the interval's top (5)
    assert "left:60.0%;width:40.0%" in html  # the interval 3..5
    assert "s1" in html and "s2" in html  # two series: a legend


def test_html_table_shows_the_first_rows_and_says_how_many_more() -> None:
    table = pd.DataFrame({"k": range(150), "rate": [i / 150 for i in range(150)]})
    html = html_table(table, max_rows=100)
    assert f'class="{TABLE_CLASS}"' in html
    assert html.count("<tr>") == 101  # header + 100 rows
    assert "50 more rows" in html
    assert ">1,000<" in html_table(pd.DataFrame({"n": [1000]}))
