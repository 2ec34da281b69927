"""Exports that cannot hurt: CSV formula injection through every CSV writer, terminal escapes
in CLI text output, and ``--output`` paths that never overwrite the store or the workspace."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis.export import to_csv
from faillab.cli import main
from faillab_core.settings import Settings
from faillab_core.textsafe import csv_cell, csv_frame, terminal_text
from labeling.store import open_store
from taxonomy import default_taxonomy
from tests.support import make_trajectory
from trajectories.workspace import Workspace

HOSTILE_RUN = "=HYPERLINK(\"http://x.invalid\",\"run\")\x1b[2J\x1b]0;pwned\x07"
HOSTILE_MODEL = "+1+1\x1b[31m\u202e"
# Formulas first, then text a spreadsheet would not run (one of them split by CR LF).
NOTES = ["=HYPERLINK(\"http://x.invalid\")", "+1+1", "@SUM(1,1)", "-3", "\tx",
         "\rstarts with a carriage return", "plain", "  two\r\nlines, spaced  "]
FORMULA = tuple("=+-@\t\r")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"FAILLAB_DATABASE_URL": ""})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace whose run and model names are hostile, with hostile label notes."""
    root = tmp_path / "ws"
    src = tmp_path / "hostile.jsonl"
    lines = []
    for i in range(len(NOTES)):
        rec = make_trajectory(final_answer=7).model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"t{i}"
        lines.append(json.dumps(rec))
    src.write_text("\n".join(lines) + "\n")
    code, _, err = invoke("import", str(src), "--workspace", str(root), "--run", HOSTILE_RUN,
                          "--model", HOSTILE_MODEL, "--json")
    assert code == 0, err
    ids = [r["id"] for r in Workspace(root).list()]
    tax = default_taxonomy()
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    try:
        store.users.add("=evil")
        for tid, note in zip(ids, NOTES, strict=True):
            store.labels.add(tid, "sql_logic_error", annotator="=evil", note=note,
                             taxonomy_version=tax.version, first_error_step=2)
    finally:
        store.close()
    return root


def _no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA), cell


def test_helper_rule() -> None:
    assert [csv_cell(n) for n in NOTES] == ["'" + n for n in NOTES[:6]] + NOTES[6:]
    assert csv_cell("\rcr") == "'\rcr" and csv_cell("a=b") == "a=b"
    assert csv_cell(-3) == -3 and csv_cell(-0.5) == -0.5 and csv_cell(None) is None
    frame = csv_frame(pd.DataFrame({"n": [-1, 2], "s": ["-1", "ok"]}, index=["=a", "b"]))
    assert frame["n"].tolist() == [-1, 2] and frame["s"].tolist() == ["'-1", "ok"]
    assert list(frame.index) == ["'=a", "b"]
    rows = list(csv.reader(io.StringIO(to_csv(pd.DataFrame({"rate": [-0.25], "x": ["@a"]})))))
    assert rows == [["rate", "x"], ["-0.25", "'@a"]]
    # A carriage return inside a cell (a run name, a note) still reads back as one record.
    text = to_csv(pd.DataFrame({"n": [1, 2], "s": ["a\rb", "c\r\nd"]}))
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["n", "s"], ["1", "a\rb"],
                                                                ["2", "c\r\nd"]]


def test_labels_export_csv_neutralises_notes_and_names(ws: Path) -> None:
    code, out, err = invoke("labels", "export", "--workspace", str(ws))
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    # (the test runner folds CR LF to LF in captured output; files keep it, see the round trip)
    assert sorted(r["note"] for r in rows) == sorted(
        ("'" + n if n.startswith(FORMULA) else n).replace("\r\n", "\n") for n in NOTES)
    assert {r["annotator"] for r in rows} == {"'=evil"}
    assert {r["first_error_step"] for r in rows} == {"2"}
    _no_formula([[v for k, v in r.items() if k != "first_error_step"] for r in rows])
    # JSON keeps the exact text.
    code, out, _ = invoke("labels", "export", "--format", "jsonl", "--workspace", str(ws))
    assert sorted(json.loads(line)["note"] for line in out.splitlines()) == sorted(NOTES)


def test_stats_csv_neutralises_run_and_model_names(ws: Path, tmp_path: Path) -> None:
    code, out, err = invoke("stats", "success", "--format", "csv", "--workspace", str(ws))
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    cells = {cell for row in rows for cell in row}
    assert any(c.startswith("'=HYPERLINK") for c in cells), rows
    assert any(c.startswith("'+1+1") for c in cells), rows
    _no_formula(rows)
    out_dir = tmp_path / "tables"
    code, _, err = invoke("stats", "all", "--format", "csv", "--output", str(out_dir),
                          "--workspace", str(ws))
    assert code == 0, err
    for file in out_dir.glob("*.csv"):
        body = list(csv.reader(io.StringIO(file.read_text())))
        _no_formula([[c for c in row if not _is_number(c)] for row in body])


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_terminal_text_strips_escapes() -> None:
    assert terminal_text("a\x1b[31mred\x1b[0m\x1b]0;title\x07\x07b\u202ec\td\n") == "aredbc\td\n"
    assert terminal_text("x\ny\r\n", keep_newlines=False) == "x y "
    assert terminal_text("\x9b2J\x00ok\x7f") == "ok"


def test_list_summary_stats_print_no_control_characters(ws: Path) -> None:
    for args in (["list"], ["summary"], ["stats", "success"], ["stats", "success", "--format",
                                                               "latex"]):
        code, out, err = invoke(*args, "--workspace", str(ws))
        assert code == 0, err
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out, args
    code, out, _ = invoke("list", "--workspace", str(ws))
    assert "=HYPERLINK" in out and "+1+1" in out  # the text is kept, only controls go
    code, out, _ = invoke("list", "--json", "--workspace", str(ws))
    assert "\x1b" not in out  # json.dumps escapes it...
    stored = {r["run"] for r in Workspace(ws).list()}
    assert {r["run"] for r in json.loads(out)} == stored  # ...and keeps it exact
    assert any("\x07" in run for run in stored)


def test_output_refuses_store_and_workspace(ws: Path) -> None:
    store = ws / "annotations.sqlite"
    before = store.read_bytes()
    for target in (store, ws / "x.csv", ws / "trajectories" / "labels.csv"):
        code, _, err = invoke("labels", "export", "--output", str(target), "--workspace", str(ws))
        assert code == 1 and len(err.strip().splitlines()) == 1 and "error:" in err, err
    assert store.read_bytes() == before
    assert not (ws / "x.csv").exists()
    code, _, err = invoke("stats", "success", "--output", str(ws / "s.md"), "--workspace",
                          str(ws))
    assert code == 1 and "inside the workspace" in err
    code, _, err = invoke("audit", "report", "--output", str(store), "--workspace", str(ws))
    assert code == 1 and "annotation store" in err
    assert store.read_bytes() == before


def test_output_folder_and_format(ws: Path, tmp_path: Path) -> None:
    nested = tmp_path / "missing" / "deeper" / "labels.jsonl"
    code, _, err = invoke("labels", "export", "--output", str(nested), "--workspace", str(ws))
    assert code == 0, err
    assert len([json.loads(line) for line in nested.read_text().splitlines()]) == len(NOTES)
    as_json = tmp_path / "labels.json"
    assert invoke("labels", "export", "--output", str(as_json), "--workspace", str(ws))[0] == 0
    assert len(json.loads(as_json.read_text())) == len(NOTES)
    code, _, err = invoke("labels", "export", "--format", "csv", "--output",
                          str(tmp_path / "y.jsonl"), "--workspace", str(ws))
    assert code == 1 and "--format is csv" in err and not (tmp_path / "y.jsonl").exists()
    blocker = tmp_path / "afile"
    blocker.write_text("keep")
    code, _, err = invoke("labels", "export", "--output", str(blocker / "x.csv"),
                          "--workspace", str(ws))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert blocker.read_text() == "keep"
    code, _, err = invoke("stats", "success", "--output", str(tmp_path / "t.csv"),
                          "--workspace", str(ws))
    assert code == 0, err
    assert next(csv.reader(io.StringIO((tmp_path / "t.csv").read_text())))  # CSV, not md
    assert not (tmp_path / "t.csv").read_text().startswith("|")


def test_neutralised_csv_imports_back_as_typed(ws: Path, tmp_path: Path) -> None:
    exported = tmp_path / "labels.csv"
    code, _, err = invoke("labels", "export", "--output", str(exported), "--workspace", str(ws))
    assert code == 0, err
    assert "'=HYPERLINK" in exported.read_text()
    (ws / "annotations.sqlite").unlink()
    code, _, err = invoke("labels", "import", str(exported), "--workspace", str(ws))
    assert code == 0, err
    store = open_store(Settings.from_env({}, workspace=ws).annotations_url())
    try:
        # Notes come back exactly as typed: tabs, surrounding spaces and carriage returns too.
        assert sorted(lab.note or "" for lab in store.labels.all()) == sorted(NOTES)
        assert {lab.annotator for lab in store.labels.all()} == {"=evil"}
    finally:
        store.close()
