"""Re-importing a file a newer importer reads differently replaces that file's old rows in one
publish, says which old id became which new one, and never touches other files' rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import (
    REAL_TRAJECTORIES,
    ids_by_position,
    import_with_older_importer,
    require_shared,
    stored_ids,
    strip_provenance,
    write_native_run,
)
from trajectories.workspace import Workspace


def test_reimport_replaces_the_files_old_rows(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 5)
    other = write_native_run(tmp_path / "b.jsonl", 3, run="r2")
    # Positions 3 and 4: only a.jsonl has them (b.jsonl reads the same by both importers).
    import_with_older_importer(ws, [src, other], monkeypatch, changed={3, 4})
    old = ids_by_position(ws, src)
    others = ids_by_position(ws, other)
    old_parts = {p.name for p in ws.part_files()}

    report = ws.import_files([src, other])

    new = ids_by_position(ws, src)
    assert (report.imported, report.replaced, report.duplicates) == (2, 2, 3 + 3)
    assert report.rekeyed == {old[3]: new[3], old[4]: new[4]}
    assert report.orphaned == []
    # Unchanged records keep their ids; the two read differently have new ones.
    assert [new[i] == old[i] for i in range(5)] == [True, True, True, False, False]
    assert stored_ids(ws) == sorted(new + ids_by_position(ws, other))
    assert ws.summary()["trajectories"] == 8
    assert ws.get(old[3]) is None and ws.get(new[3]) is not None
    # The other file was read the same way by both importers: its rows are untouched.
    assert ids_by_position(ws, other) == others
    # The rewritten parts are retired (kept for readers still on them), not deleted.
    manifest = json.loads((ws.parts_dir / "manifest.json").read_text())
    assert old_parts & set(manifest["retired"])
    assert not old_parts & set(manifest["parts"])
    assert all((ws.parts_dir / name).exists() for name in old_parts)


def test_reimport_again_is_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 4)
    import_with_older_importer(ws, [src], monkeypatch, changed={0})
    ws.import_files([src])
    parts = ws.part_files()
    again = ws.import_files([src])
    assert (again.imported, again.replaced, again.duplicates) == (0, 0, 4)
    assert ws.part_files() == parts


def test_same_bytes_under_another_name_are_not_replaced(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 3)
    import_with_older_importer(ws, [src], monkeypatch, changed={0})
    before = stored_ids(ws)
    copy = Path(shutil.copy(src, tmp_path / "copy.jsonl"))
    report = ws.import_files([copy])
    assert report.replaced == 0 and report.rekeyed == {}
    # The copy's differently read record is new; the original file's rows all stay.
    assert set(before) <= set(stored_ids(ws)) and report.imported == 1


def test_record_now_rejected_is_retired_and_reported(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 3)
    src.write_text(src.read_text() + "{broken\n")
    import_with_older_importer(ws, [src], monkeypatch, changed=set(), accept_bad=True)
    old = ids_by_position(ws, src)
    assert len(old) == 4
    report = ws.import_files([src], skip_invalid=True)
    assert report.rejected == 1 and report.replaced == 1
    assert report.orphaned == [old[3]] and report.rekeyed == {}
    assert stored_ids(ws) == sorted(old[:3])


def test_reimport_that_fails_changes_nothing(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 3)
    src.write_text(src.read_text() + "{broken\n")
    import_with_older_importer(ws, [src], monkeypatch, changed={0}, accept_bad=True)
    before, parts = stored_ids(ws), ws.part_files()
    with pytest.raises(Exception, match="line 4"):
        ws.import_files([src])
    assert stored_ids(ws) == before and ws.part_files() == parts


def test_rows_without_provenance_are_replaced_by_path(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace from before provenance: the file's old rows are found by the path they
    were imported from (these bytes being a known source) and paired by run, task, rollout."""
    ws = Workspace(tmp_path / "ws")
    src = write_native_run(tmp_path / "a.jsonl", 4)
    other = write_native_run(tmp_path / "b.jsonl", 2, run="r2")
    import_with_older_importer(ws, [src, other], monkeypatch, changed={2})
    old = ids_by_position(ws, src)
    others = ids_by_position(ws, other)
    strip_provenance(ws)
    assert "source_sha" not in pq.read_schema(ws.part_files()[0]).names
    assert ws.summary()["trajectories"] == 6  # old parts still read

    report = ws.import_files([src])
    new = ids_by_position(ws, src)
    assert report.replaced == 1 and report.rekeyed == {old[2]: new[2]}
    assert [new[i] == old[i] for i in range(4)] == [True, True, False, True]
    assert stored_ids(ws) == sorted(new + others)


def test_real_runs_reimported_by_a_newer_importer(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[2:4]  # 40 records each
    ws = Workspace(tmp_path / "ws")
    import_with_older_importer(ws, files, monkeypatch, changed={0, 7})
    total = ws.summary()["trajectories"]
    report = ws.import_files(files, workers=2)
    assert report.replaced == 4 and len(report.rekeyed) == 4 and report.imported == 4
    assert ws.summary()["trajectories"] == total
    # Every record is stored once, with this import's provenance.
    keys = ws.connect().execute(
        "SELECT count(DISTINCT import_key), count(*) FILTER (WHERE source_sha IS NULL) "
        "FROM parts").fetchone()
    assert keys == (2, 0)
