"""One export path: `faillab stats --format F --output FILE` and the Statistics page's Export
menu give the same bytes for every table and format (the page once wrote a bare-named LaTeX
table with a float the CLI lacked, and a black PNG where the CLI's was in colour)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from analysis.exports_paper import PALETTE, ExportContext, export_context, export_file
from analysis.sources import STATISTICS, TableOptions
from faillab.cli import main

TEXT_FORMATS = ("json", "csv", "md", "latex", "html")
SUFFIX = {"json": "json", "csv": "csv", "md": "md", "latex": "tex", "html": "html",
          "png": "png"}


@pytest.fixture(scope="module")
def prelabelled(prelabelled_demo_workspace: Path, tmp_path_factory: pytest.TempPathFactory,
                ) -> Path:
    root = tmp_path_factory.mktemp("exports-agree") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)
    return root


@pytest.fixture(scope="module")
def page(prelabelled: Path) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions]:
    """Every table as the Statistics page computes it (its cached frame, labels and tables,
    every run selected, LLM-only labels included so the label tables have rows)."""
    from faillab.app.viewer import viewer_of
    from faillab.app.widgets import stats_data
    from faillab.app.widgets.stats_options import LABEL_SCOPES
    from trajectories.workspace import Workspace

    url = f"sqlite:///{prelabelled / 'annotations.sqlite'}"
    viewer = viewer_of(None)
    frame, signature = stats_data.statistics_frame(
        "verdict", stats_data.verdicts_for(url, viewer), Workspace(prelabelled))
    runs, _, _ = stats_data.filter_options(signature, frame)
    labels, pairs = stats_data.labels_for(url, viewer)
    options = TableOptions(tuple(runs), stats_data.policy_for(LABEL_SCOPES[1]))
    tables = dict(stats_data.tables_for(signature, tuple(runs), None, None,
                                        stats_data.labels_token(labels, pairs), frame, labels,
                                        pairs, options))
    return tables, frame[frame["run"].isin(runs)], options


def _page_file(page: tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions], name: str,
               fmt: str) -> bytes:
    tables, selected, options = page
    context: ExportContext = export_context(name, selected, options)
    return export_file(name, tables[name], fmt, context)


def _cli_file(root: Path, tmp: Path, name: str, fmt: str) -> bytes:
    target = tmp / f"{name}.{SUFFIX[fmt]}"
    result = CliRunner().invoke(main, ["stats", name, "--format", fmt, "--labels", "all",
                                       "--workspace", str(root), "--output", str(target)])
    assert result.exit_code == 0, result.stderr
    return target.read_bytes()


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("name", list(STATISTICS))
def test_every_table_and_format_is_the_same_file_from_the_cli_and_the_page(
        prelabelled: Path, page: tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions],
        tmp_path: Path, name: str, fmt: str) -> None:
    cli = _cli_file(prelabelled, tmp_path, name, fmt)
    assert cli == _page_file(page, name, fmt)
    # Not two empty files agreeing: on the demo only the labeller table (no human label yet)
    # is empty.
    assert page[0][name].empty == (name == "labeller")


@pytest.mark.parametrize("name", ["taxonomy", "success"])
def test_the_png_is_the_same_image_from_both_and_in_colour(
        prelabelled: Path, page: tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions],
        tmp_path: Path, name: str) -> None:
    import streamlit  # noqa: F401  the page's process: importing it changes plotly's template

    from_page = _page_file(page, name, "png")
    assert _cli_file(prelabelled, tmp_path, name, "png") == from_page
    image = Image.open(io.BytesIO(from_page)).convert("RGB")
    colours = {rgb for _, rgb in image.getcolors(1 << 24) or []}
    if name == "taxonomy":
        # One bar series per model, in the colour-blind-safe palette: more than two colours.
        series = {tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in PALETTE[:-1]}
        assert len(series & colours) > 2
        assert (0, 0, 1) not in colours and (0, 0, 2) not in colours  # the page's old black
    # Every label inside the picture: the outer band is background only, nothing cut at it.
    width, height = image.size
    band = 4
    edge = [image.getpixel((x, y)) for x in range(width) for y in (*range(band),
                                                                   *range(height - band, height))]
    edge += [image.getpixel((x, y)) for y in range(height) for x in (*range(band),
                                                                     *range(width - band, width))]
    assert set(edge) == {(255, 255, 255)}


def test_latex_is_a_paper_table(page: tuple[dict[str, pd.DataFrame], pd.DataFrame,
                                            TableOptions]) -> None:
    tables, selected, _ = page
    tex = _page_file(page, "success", "latex").decode()
    assert tex.startswith("\\begin{table}[t]") and tex.rstrip().endswith("\\end{table}")
    assert "\\usepackage{booktabs}" in tex and "\\toprule" in tex and "\\caption{" in tex
    runs = list(dict.fromkeys(selected["run"].astype(str)))
    assert f"over {len(runs)} runs" in tex
    # Grouped headers by intent, readable names, and n beside every rate of the grid.
    assert "\\multicolumn{2}{c}{Labs}" in tex and "Macro avg." in tex
    assert "macro\\_avg" not in tex and "patient\\_population\\_gap" not in tex
    body = tex[tex.index("\\midrule"):tex.index("\\bottomrule")]
    first = body.splitlines()[1].split(" & ")
    grid = [c for c in tables["success"].columns if "/" in str(c)]
    assert sum(cell.strip().endswith(")") for cell in first) == sum(
        pd.notna(tables["success"].iloc[0][grid]))


def test_long_run_names_get_short_labels_and_a_legend(
        page: tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions]) -> None:
    tables, selected, options = page
    long = {r: f"{r}-" + "x" * 90 for r in tables["success"]["run"].astype(str)}
    table = tables["success"].assign(run=tables["success"]["run"].map(long))
    context = export_context("success", selected.assign(run=selected["run"].map(long)),
                             TableOptions(tuple(long.values()), options.label_policy))
    tex = export_file("success", table, "latex", context).decode()
    body = tex[tex.index("\\midrule"):tex.index("\\bottomrule")]
    assert "xxxxxxxx" not in body and body.splitlines()[1].startswith("R1 & ")
    legend = tex[tex.index("\\end{tabular}"):]
    assert all(name.replace("_", "\\_") in legend for name in long.values())


def test_a_run_keeps_one_colour_in_both_pass_k_panels_and_long_names_fit_their_lines(
        page: tuple[dict[str, pd.DataFrame], pd.DataFrame, TableOptions]) -> None:
    from analysis.chart_fit import MAX_LINES, wrap_label
    from analysis.exports_paper import paper_figure

    tables, selected, options = page
    fig = paper_figure("passk", tables["passk"], export_context("passk", selected, options))
    colours: dict[str, set[str]] = {}
    for trace in fig.data:
        colours.setdefault(str(trace.legendgroup), set()).add(str(trace.line.color))
    assert len(colours) > 2 and all(len(c) == 1 for c in colours.values())
    assert len({c.pop() for c in colours.values()}) == len(colours)
    # A hundred-character name wraps onto at most MAX_LINES lines (it took four, and the
    # legend's last entry ran past the picture).
    name = "run-tool-calling-sim-small/t0.6-range_0--1_user-gpt-4o-mini-llm_0427224609_valid_t"
    assert wrap_label(name + "emperature (T=0.6)").count("<br>") + 1 <= MAX_LINES
