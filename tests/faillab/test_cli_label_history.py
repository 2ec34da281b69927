"""`faillab labels export|import` with the history (undone and replaced labels kept), and CSV
cells that start with a line feed or with quotes: guarded on export, as typed after import."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from faillab_core.settings import Settings
from faillab_core.textsafe import csv_cell, csv_uncell
from labeling.store import Store, open_store
from taxonomy import default_taxonomy
from trajectories.workspace import Workspace

# A note starting with a line feed before a formula is the reported case; the quoted ones
# must come back with exactly the quotes they were typed with.
NOTES = ["\n=1+1", "\r=1+1", "\r\n=SUM(A1:A9)", "'=not a formula", "''@twice", "'", "it's",
         "plain"]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"FAILLAB_DATABASE_URL": ""})
    return result.exit_code, result.stdout, result.stderr


def store_of(ws: Path) -> Store:
    return open_store(Settings.from_env({}, workspace=ws).annotations_url())


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return root


def _ids(ws: Path, n: int) -> list[str]:
    return [r["id"] for r in Workspace(ws).list(failed=True, limit=n)]


def _export(ws: Path, *flags: str) -> list[dict[str, str]]:
    code, out, err = invoke("labels", "export", "--no-prelabels", *flags, "--workspace", str(ws))
    assert code == 0, err
    return list(csv.DictReader(io.StringIO(out)))


def test_line_feed_and_quoted_cells_are_guarded_and_read_back_as_typed() -> None:
    assert csv_cell("\n=1+1") == "'\n=1+1"
    assert csv_cell("'=x") == "''=x" and csv_cell("it's") == "it's" and csv_cell("'") == "'"
    for note in NOTES:
        assert csv_uncell(csv_cell(note)) == note


def test_export_guards_a_leading_line_feed_and_import_restores_every_note(
    ws: Path, tmp_path: Path
) -> None:
    tax = default_taxonomy()
    store = store_of(ws)
    try:
        store.users.add("ann")
        for tid, note in zip(_ids(ws, len(NOTES)), NOTES, strict=True):
            store.labels.add(tid, "sql_logic_error", annotator="ann", note=note,
                             taxonomy_version=tax.version)
    finally:
        store.close()
    exported = tmp_path / "labels.csv"
    code, _, err = invoke("labels", "export", "--no-prelabels", "--output", str(exported),
                          "--workspace", str(ws))
    assert code == 0, err
    with exported.open(newline="") as handle:
        notes = [row["note"] for row in csv.DictReader(handle)]
    # No cell a spreadsheet would run: every formula (after a line break too) is quoted.
    assert notes[:3] == ["'\n=1+1", "'\r=1+1", "'\r\n=SUM(A1:A9)"]
    assert all(not n.startswith(("=", "+", "-", "@", "\t", "\r", "\n")) for n in notes)
    (ws / "annotations.sqlite").unlink()
    code, _, err = invoke("labels", "import", str(exported), "--workspace", str(ws))
    assert code == 0, err
    store = store_of(ws)
    try:
        assert sorted(lab.note or "" for lab in store.labels.all()) == sorted(NOTES)
    finally:
        store.close()


def test_export_has_the_undone_label_and_no_history_leaves_it_out(
    ws: Path, tmp_path: Path
) -> None:
    tax = default_taxonomy()
    [tid] = _ids(ws, 1)
    store = store_of(ws)
    try:
        store.users.add("ann")
        store.labels.add(tid, "sql_logic_error", annotator="ann", taxonomy_version=tax.version,
                         note="keyed by mistake")
        store.labels.retract_latest(tid, annotator="ann")  # Undo on the Annotate page
        store.labels.add(tid, "stuck_in_loop", annotator="ann", taxonomy_version=tax.version)
    finally:
        store.close()
    undone, current = _export(ws)
    assert (undone["trajectory_id"], undone["category"], undone["note"]) == (
        tid, "sql_logic_error", "keyed by mistake")
    assert undone["retracted_by"] == "ann" and undone["retracted_at"]
    assert undone["superseded_by"] == current["label_id"]
    assert current["category"] == "stuck_in_loop" and current["retracted_at"] == ""
    assert [r["category"] for r in _export(ws, "--no-history")] == ["stuck_in_loop"]

    # Imported elsewhere, the undone label is kept undone: it counts nowhere there either.
    exported = tmp_path / "labels.jsonl"
    code, _, err = invoke("labels", "export", "--output", str(exported), "--workspace", str(ws))
    assert code == 0, err
    target = tmp_path / "other"
    shutil.copytree(ws, target)
    (target / "annotations.sqlite").unlink()
    code, _, err = invoke("labels", "import", str(exported), "--workspace", str(target))
    assert code == 0, err
    copy = store_of(target)
    try:
        assert [lab.category for lab in copy.labels.all() if lab.source == "human"] == [
            "stuck_in_loop"]
        assert [lab.note for lab, _, _ in copy.labels.retracted(tid)] == ["keyed by mistake"]
    finally:
        copy.close()


def test_import_refuses_a_retraction_it_cannot_be_sure_of(ws: Path, tmp_path: Path) -> None:
    [tid] = _ids(ws, 1)
    path = tmp_path / "bad.csv"
    path.write_text("trajectory_id,annotator,source,category,retracted_at,retracted_by\n"
                    f"{tid},ann,human,stuck_in_loop,,ann\n")
    code, _, err = invoke("labels", "import", str(path), "--workspace", str(ws))
    assert code == 1 and "row 1: retracted_by is given without retracted_at" in err
    path.write_text("trajectory_id,annotator,source,category,retracted_at\n"
                    f"{tid},ann,human,stuck_in_loop,yesterday\n")
    code, _, err = invoke("labels", "import", str(path), "--workspace", str(ws))
    assert code == 1 and "retracted_at is not an ISO timestamp" in err
    assert len(err.strip().splitlines()) == 1
