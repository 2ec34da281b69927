"""``faillab stats``: every table in every format parses back to the analysis numbers."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from collections import defaultdict
from math import comb
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.failures import category_display_name
from analysis.sources import compute_table, load_inputs, run_names
from analysis.tables import TABLES
from faillab.cli import main
from labeling.store import open_store
from taxonomy.model import default_taxonomy
from tests.support import ImportedWorkspace
from trajectories.workspace import Workspace

# LaTeX is laid out for a paper (readable names, run labels): tests/app/test_exports_cli_page.py
TEXT_FORMATS = ("json", "csv", "md")
CATEGORIES = ["sql_logic_error", "semantic_misunderstanding", "answer_format_error"]
VERSION = default_taxonomy().version


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["stats", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def labelled_ws(tmp_path_factory: pytest.TempPathFactory, demo_workspace: Path) -> Path:
    """A copy of the demo workspace with human and LLM labels on twelve failures."""
    root = tmp_path_factory.mktemp("stats") / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    failed = ws.query_df("SELECT id FROM trajectories WHERE NOT success ORDER BY id")["id"]
    store = open_store(ws.default_annotations_url)
    store.users.add("ann")
    for i, tid in enumerate(failed[:12]):
        store.labels.add(tid, CATEGORIES[i % 3], annotator="ann", taxonomy_version=VERSION)
        llm = CATEGORIES[i % 3] if i % 4 else CATEGORIES[(i + 1) % 3]
        store.labels.add(tid, llm, annotator=None, source="llm", taxonomy_version=VERSION)
    store.close()
    return root


def expected(root: Path, name: str, runs: list[str] | None = None) -> pd.DataFrame:
    ws = Workspace(root)
    store = open_store(ws.default_annotations_url)
    try:
        return compute_table(name, load_inputs(ws, store, runs), runs)
    finally:
        store.close()


# --- parsing the text formats back -------------------------------------------------------------

_LATEX_UNESCAPE = [
    (r"\textbackslash{}", "\\"), (r"\textasciitilde{}", "~"), (r"\textasciicircum{}", "^"),
    (r"\&", "&"), (r"\%", "%"), (r"\$", "$"), (r"\#", "#"), (r"\_", "_"), (r"\{", "{"),
    (r"\}", "}"),
]


def parse_markdown(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip()[1:-1].split(" | ")]
    return cells(lines[0]), [cells(ln) for ln in lines[2:]]


def parse_latex(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    assert lines[0].startswith("\\begin{tabular}") and "\\toprule" in lines
    assert "\\bottomrule" in lines and lines[-1] == "\\end{tabular}"
    top, mid, bottom = (lines.index(m) for m in ("\\toprule", "\\midrule", "\\bottomrule"))

    def cells(line: str) -> list[str]:
        assert line.endswith(r" \\")
        out = []
        for cell in line[: -len(r" \\")].split(" & "):
            for src, dst in _LATEX_UNESCAPE:
                cell = cell.replace(src, dst)
            out.append(cell.strip())
        return out

    header = lines[top + 1 : mid]
    if len(header) == 1:
        return cells(header[0]), [cells(ln) for ln in lines[mid + 1 : bottom]]
    # A two-level header (GROUP/SUB columns): the groups over their columns, then the rest.
    groups: list[str] = []
    for cell in header[0][: -len(r" \\")].split(" & "):
        spanned = re.fullmatch(r"\\multicolumn\{(\d+)\}\{c\}\{(.*)\}", cell.strip())
        groups += [spanned.group(2)] * int(spanned.group(1)) if spanned else [cell.strip()]
    below = cells(header[-1])
    assert len(groups) == len(below)
    names = [f"{g}/{b}" if g else b for g, b in zip(groups, below, strict=True)]
    return names, [cells(ln) for ln in lines[mid + 1 : bottom]]


def parse_csv(text: str) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def assert_cells_match(df: pd.DataFrame, header: list[str], rows: list[list[Any]],
                       tol: float, missing: tuple[Any, ...]) -> None:
    """Each parsed cell equals the frame's value: numbers within ``tol``, text exactly."""
    assert header == [str(c) for c in df.columns]
    assert len(rows) == len(df)
    for r, (row, (_, want)) in enumerate(zip(rows, df.iterrows(), strict=True)):
        assert len(row) == len(header)
        for col, got in zip(header, row, strict=True):
            value = want[col]
            where = f"row {r} column {col}: {got!r} vs {value!r}"
            if _missing(value):
                assert got in missing, where
            elif isinstance(value, bool):
                assert str(got).lower() == str(value).lower(), where
            elif isinstance(value, int | float) and not isinstance(value, bool):
                assert float(got) == pytest.approx(float(value), abs=tol, rel=1e-12), where
            else:
                assert str(got) == str(value), where


def check_format(fmt: str, text: str, df: pd.DataFrame) -> None:
    if fmt == "json":
        rows = json.loads(text)
        assert isinstance(rows, list)
        header = [str(c) for c in df.columns]
        if rows:
            assert all(list(r) == header for r in rows)
        assert_cells_match(df, header, [[r[c] for c in header] for r in rows], 1e-12, (None,))
    elif fmt == "csv":
        header, rows = parse_csv(text)
        assert_cells_match(df, header, rows, 1e-12, ("",))
    elif fmt == "md":
        header, rows = parse_markdown(text)
        assert_cells_match(df, header, rows, 0.0005 + 1e-9, ("",))
    else:
        header, rows = parse_latex(text)
        assert_cells_match(df, header, rows, 0.0005 + 1e-9, ("--",))


# --- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_every_table_every_format_round_trips(labelled_ws: Path, table: str, fmt: str) -> None:
    code, out, err = invoke(table, "--format", fmt, "--workspace", str(labelled_ws))
    assert code == 0, err
    want = expected(labelled_ws, table)
    assert not want.empty, f"{table} should have rows on the labelled demo workspace"
    check_format(fmt, out, want)


@pytest.mark.parametrize("table", list(TABLES))
def test_html_chart_is_self_contained(labelled_ws: Path, tmp_path: Path, table: str) -> None:
    out_file = tmp_path / f"{table}.html"
    code, _, err = invoke(table, "--format", "html", "--output", str(out_file),
                          "--workspace", str(labelled_ws))
    assert code == 0, err
    html = out_file.read_text()
    assert html.lstrip().lower().startswith(("<!doctype html>", "<html")) and "</html>" in html
    # plotly.js is embedded, not fetched from a CDN, so the file works offline.
    assert '<script src="http' not in html and len(html) > 1_000_000


def test_output_file_matches_stdout(labelled_ws: Path, tmp_path: Path) -> None:
    _, out, _ = invoke("success", "--format", "csv", "--workspace", str(labelled_ws))
    target = tmp_path / "sub" / "success.csv"
    code, _, err = invoke("success", "--format", "csv", "--output", str(target),
                          "--workspace", str(labelled_ws))
    assert code == 0 and "wrote" in err
    assert target.read_text() == out


def test_passk_rows(labelled_ws: Path) -> None:
    code, out, _ = invoke("passk", "--format", "json", "--workspace", str(labelled_ws))
    assert code == 0
    rows = json.loads(out)
    assert rows
    required = {"run", "scope", "intent", "k", "pass_hat_k", "pass_at_k", "n_tasks"}
    assert all(required <= set(r) for r in rows)
    agg = [r for r in rows if r["scope"] == "all" and r["intent"] == "all"]
    assert {r["run"] for r in agg} == set(run_names(Workspace(labelled_ws)))
    assert {r["k"] for r in agg} == {1, 2}  # the demo has two rollouts per task
    for r in agg:
        # Pass^k <= Pass^1 = Pass@1 <= Pass@k
        assert 0.0 <= r["pass_hat_k"] <= r["pass_at_k"] <= 1.0


def test_all_json_is_keyed_by_table(labelled_ws: Path) -> None:
    code, out, _ = invoke("all", "--format", "json", "--workspace", str(labelled_ws))
    assert code == 0
    data = json.loads(out)
    assert list(data) == list(TABLES)
    for name, rows in data.items():
        assert isinstance(rows, list)
        header = [str(c) for c in expected(labelled_ws, name).columns]
        assert_cells_match(expected(labelled_ws, name), header,
                           [[r[c] for c in header] for r in rows], 1e-12, (None,))


def test_all_markdown_and_latex_sections(labelled_ws: Path) -> None:
    _, md, _ = invoke("all", "--format", "md", "--workspace", str(labelled_ws))
    assert [ln[3:] for ln in md.splitlines() if ln.startswith("## ")] == list(TABLES)
    _, tex, _ = invoke("all", "--format", "latex", "--workspace", str(labelled_ws))
    assert tex.count("\\begin{tabular}") == len(TABLES)
    assert [ln[2:] for ln in tex.splitlines() if ln.startswith("% ")] == list(TABLES)


def test_all_html_and_csv_write_a_directory(labelled_ws: Path, tmp_path: Path) -> None:
    code, _, err = invoke("all", "--format", "html", "--workspace", str(labelled_ws))
    assert code == 1 and "--output DIR" in err and len(err.strip().splitlines()) == 1
    for fmt, suffix in (("html", "html"), ("csv", "csv")):
        out_dir = tmp_path / fmt
        code, _, err = invoke("all", "--format", fmt, "--output", str(out_dir),
                              "--workspace", str(labelled_ws))
        assert code == 0, err
        assert sorted(p.name for p in out_dir.iterdir()) == sorted(
            f"{n}.{suffix}" for n in TABLES
        )
    header, rows = parse_csv((tmp_path / "csv" / "robustness.csv").read_text())
    assert_cells_match(expected(labelled_ws, "robustness"), header, rows, 1e-12, ("",))


def test_png_charts_are_images_written_to_files(labelled_ws: Path, tmp_path: Path) -> None:
    import struct

    code, out, err = invoke("success", "--format", "png", "--workspace", str(labelled_ws))
    assert code == 1 and out == "" and "--output FILE.png" in err
    assert len(err.strip().splitlines()) == 1
    # The extension implies the format, as for the text formats.
    target = tmp_path / "charts" / "taxonomy.png"
    code, _, err = invoke("taxonomy", "--output", str(target), "--workspace", str(labelled_ws))
    assert code == 0, err
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert width >= 600 and height >= 300


def test_runs_filter(labelled_ws: Path) -> None:
    runs = run_names(Workspace(labelled_ws))[:2]
    code, out, _ = invoke("success", "--format", "json", "--runs", ",".join(runs),
                          "--workspace", str(labelled_ws))
    assert code == 0
    rows = json.loads(out)
    assert [r["run"] for r in rows] == runs
    check_format("json", out, expected(labelled_ws, "success", runs))
    # Label tables are restricted to the selected runs' trajectories too.
    _, out, _ = invoke("taxonomy", "--format", "json", "--runs", runs[0],
                       "--workspace", str(labelled_ws))
    check_format("json", out, expected(labelled_ws, "taxonomy", runs[:1]))


def test_labels_feed_taxonomy_counts(labelled_ws: Path) -> None:
    code, out, _ = invoke("taxonomy", "--format", "json", "--workspace", str(labelled_ws))
    assert code == 0
    counts: dict[str, int] = defaultdict(int)
    for row in json.loads(out):
        counts[row["category"]] += row["count"]
    assert dict(counts) == {category_display_name(c): 4 for c in CATEGORIES}


def test_labeller_agreement(labelled_ws: Path) -> None:
    code, out, _ = invoke("labeller", "--format", "json", "--workspace", str(labelled_ws))
    assert code == 0
    rows = {r["category"]: r for r in json.loads(out)}
    overall = rows["(overall)"]
    # The LLM disagrees on items 0, 4 and 8 of twelve.
    assert overall["support"] == 12
    assert overall["override_rate"] == pytest.approx(3 / 12)
    assert overall["kappa"] is not None and 0 < overall["kappa"] < 1
    for cat in CATEGORIES:
        assert {"precision", "recall", "override_rate"} <= set(rows[cat])


def test_label_tables_empty_without_a_store(demo_workspace: Path) -> None:
    code, out, _ = invoke("taxonomy", "--format", "json", "--workspace", str(demo_workspace))
    assert code == 0 and json.loads(out) == []
    # Reading statistics must not create an annotation store as a side effect.
    assert not (demo_workspace / "annotations.sqlite").exists()


def test_errors_are_one_line(demo_workspace: Path, tmp_path: Path) -> None:
    for args in (
        ("nope", "--workspace", str(demo_workspace)),
        ("success", "--runs", "no-such-run", "--workspace", str(demo_workspace)),
        ("success", "--workspace", str(tmp_path / "missing")),
    ):
        code, out, err = invoke(*args)
        assert code == 1 and out == ""
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def test_empty_workspace_gives_empty_tables(tmp_path: Path) -> None:
    Workspace(tmp_path / "ws").create()
    for table in TABLES:
        code, out, _ = invoke(table, "--format", "json", "--workspace", str(tmp_path / "ws"))
        assert code == 0 and json.loads(out) == [], table
    code, out, _ = invoke("all", "--format", "json", "--workspace", str(tmp_path / "ws"))
    assert json.loads(out) == {name: [] for name in TABLES}


# --- real tau-bench trajectories ---------------------------------------------------------------


def _pass_hat(outcomes: dict[Any, list[bool]], k: int) -> float:
    per_task = [comb(sum(v), k) / comb(len(v), k) for v in outcomes.values() if len(v) >= k]
    return sum(per_task) / len(per_task)


def test_real_taubench_passk_matches_rewards(real_trajectory_files: list[Path],
                                             real_workspace: ImportedWorkspace,
                                             tmp_path: Path) -> None:
    # The session's import of every real log (the same files), copied.
    shutil.copytree(real_workspace.root, tmp_path / "ws")
    ws = Workspace(tmp_path / "ws")
    report = real_workspace.report
    assert report.imported > 0
    code, out, err = invoke("passk", "--format", "json", "--workspace", str(ws.root))
    assert code == 0, err
    got = {(r["run"], r["k"]): r for r in json.loads(out)
           if r["scope"] == "all" and r["intent"] == "all"}
    sources = ws.query_df("SELECT DISTINCT run, source_file FROM trajectories")
    run_of = dict(zip(sources["source_file"], sources["run"], strict=True))
    assert set(run_of.values()) == {run for run, _ in got}

    # Rewards straight from the files: a rollout succeeds when its tau-bench reward is 1.
    by_run: dict[str, dict[Any, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for path in real_trajectory_files:
        for record in json.loads(path.read_text()):
            by_run[run_of[str(path)]][record["task_idx"]].append(record["reward"] == 1)
    for run, outcomes in by_run.items():
        max_n = max(len(v) for v in outcomes.values())
        for k in range(1, min(4, max_n) + 1):
            row = got[(run, k)]
            assert row["pass_hat_k"] == pytest.approx(_pass_hat(outcomes, k)), (run, k)
            assert row["n_tasks"] == sum(len(v) >= k for v in outcomes.values())


def test_labeller_with_offline_labellers(labelled_ws: Path) -> None:
    """The classifier's cross-validated figures on the confirmed labels, beside the heuristic
    and the finder on the same items; the same figures 'faillab evaluate --confirmed' gives."""
    code, out, err = invoke("labeller", "--offline-labellers", "--format", "json",
                            "--workspace", str(labelled_ws))
    assert code == 0, err
    both = json.loads(out)
    assert set(both) == {"labeller", "labeller_offline"}
    assert "(overall)" in {r["category"] for r in both["labeller"]}
    rows = {r["labeller"]: r for r in both["labeller_offline"]}
    assert [r["labeller"] for r in both["labeller_offline"]][:3] == [
        "classifier", "heuristic", "finder"]
    assert rows["classifier"]["validation"].startswith("grouped by task")
    result = CliRunner().invoke(main, ["evaluate", "--confirmed", "--json", "--workspace",
                                       str(labelled_ws)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    figures = json.loads(result.stdout)
    for name, row in rows.items():
        assert row["n"] == figures[name]["n"] == 12
        assert row["accuracy"] == pytest.approx(figures[name]["accuracy"])
        assert row["kappa"] == pytest.approx(figures[name]["kappa"], nan_ok=True)
    code, out, _ = invoke("labeller", "--offline-labellers", "--format", "md",
                          "--workspace", str(labelled_ws))
    assert code == 0 and "## labeller_offline" in out and "classifier" in out


def test_offline_labellers_refused_elsewhere_and_without_labels(labelled_ws: Path,
                                                                demo_workspace: Path) -> None:
    code, _, err = invoke("success", "--offline-labellers", "--workspace", str(labelled_ws))
    assert code == 1 and "goes with the 'labeller' table" in err
    code, _, err = invoke("labeller", "--offline-labellers", "--workspace", str(demo_workspace))
    assert code == 1 and "no annotation store" in err
    assert not (demo_workspace / "annotations.sqlite").exists()
