"""Parallel import and compaction: the result never depends on how many workers read the
files, a bad record still fails the whole import, and compaction changes no row."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import trajectories.compaction as compaction_module
from tests.support import REAL_TRAJECTORIES, require_shared
from trajectories.importers import ImportProblem, read_file
from trajectories.workspace import Workspace


def _rows(ws: Workspace) -> list[tuple[Any, ...]]:
    return ws.connect().execute("SELECT * FROM parts ORDER BY id").fetchall()


def _inputs(tmp_path: Path) -> list[Path]:
    """The real harness runs, one of them twice under another name (every record a duplicate
    of an earlier file) and a JSONL file whose last record repeats its first."""
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for path in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json")):
        files.append(Path(shutil.copy(path, src / path.name)))
    # Same name in another folder: the same run, so the same ids.
    (src / "again").mkdir()
    # files[0] is stored before the import (a duplicate of stored rows), files[1] is not (a
    # duplicate of a row another worker staged in this very import).
    files += [Path(shutil.copy(f, src / "again" / f.name)) for f in files[:2]]
    records = json.loads(files[1].read_text("utf-8"))[:3]
    lines = src / "extra.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in [*records, records[0]]), "utf-8")
    files.append(lines)
    return files


def test_parallel_import_matches_single_process(tmp_path: Path) -> None:
    files = _inputs(tmp_path)
    single, parallel = Workspace(tmp_path / "one"), Workspace(tmp_path / "two")
    # Something stored before the import: its records are duplicates for both.
    first_single = single.import_files(files[:1], workers=1)
    first_parallel = parallel.import_files(files[:1], workers=1)
    a = single.import_files(files, workers=1)
    b = parallel.import_files(files, workers=2)
    assert first_single.as_json() == first_parallel.as_json()
    assert a.as_json() == b.as_json()
    assert a.duplicates >= first_single.imported + 1  # the stored file, its twin, the repeat
    rows_a, rows_b = _rows(single), _rows(parallel)
    assert rows_a == rows_b and len(rows_a) == first_single.imported + a.imported
    # The first file holding a record is its source, whatever worker read the twin.
    sources = {r[0]: r[-2] for r in rows_b}
    assert not any("again" in s for s in sources.values())


def test_parallel_import_fails_whole_on_a_bad_record(tmp_path: Path) -> None:
    files = _inputs(tmp_path)[:3]
    records = json.loads(files[2].read_text("utf-8"))
    records[1]["messages"] = "not a list"
    files[2].write_text(json.dumps(records), "utf-8")
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(ImportProblem) as err:
        ws.import_files(files, workers=2)
    assert err.value.path == str(files[2])
    assert err.value.location == "record 1" and err.value.field == "messages"
    assert not ws.part_files() and ws.summary()["trajectories"] == 0
    assert not list(ws.parts_dir.glob(".part-*")) and not list(ws.parts_dir.glob("part-*"))
    # Skipping invalid records gives the same report and rejects with any number of workers.
    one = Workspace(tmp_path / "one").import_files(files, workers=1, skip_invalid=True)
    two = Workspace(tmp_path / "two").import_files(files, workers=2, skip_invalid=True)
    assert one.as_json() == two.as_json() and one.rejected == 1
    assert [str(p) for p in one.problems] == [str(p) for p in two.problems]


def test_compaction_keeps_every_row_and_sorts_parts_by_id(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    files = _inputs(tmp_path)[:6]
    ws = Workspace(tmp_path / "ws")
    for path in files:
        ws.import_files([path], workers=1)
    before, parts_before = _rows(ws), ws.part_files()
    reader = ws.connect()  # a reader holding a view over the old parts
    monkeypatch.setattr(compaction_module, "COMPACT_ROWS", 100)
    result = ws.compact()
    assert result["merged_parts"] == len(parts_before) and result["rows"] == len(before)
    after_parts = ws.part_files()
    assert set(after_parts).isdisjoint(parts_before) and len(after_parts) == result["new_parts"]
    assert _rows(Workspace(ws.root)) == before
    # Compacted parts cover disjoint id ranges, in order.
    ranges = [pq.read_table(p, columns=["id"]).column("id").to_pylist()
              for p in after_parts]
    flat = [i for r in sorted(ranges) for i in r]
    assert flat == sorted(flat)
    # The old reader still answers (retired parts outlive it) and then sees the new parts.
    assert reader.execute("SELECT count(*) FROM parts").fetchone() == (len(before),)
    assert ws.get(before[0][0]) is not None


def test_import_compacts_when_small_parts_pile_up(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction_module, "COMPACT_AT_PARTS", 3)
    files = _inputs(tmp_path)[:6]
    ws = Workspace(tmp_path / "ws")
    for path in files[:4]:
        ws.import_files([path], workers=1)
    assert len(ws.part_files()) == 1  # the fourth part triggered compaction
    total = ws.summary()["trajectories"]
    report = ws.import_files(files, workers=2)
    assert report.imported == ws.summary()["trajectories"] - total


def test_fast_parser_never_changes_values(tmp_path: Path) -> None:
    """Integers beyond 64 bits stay integers (the fast parser would make them floats), so a
    record's content hash is the same whichever parser read it."""
    record = json.loads(sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[0]
                        .read_text("utf-8"))[0]
    record["cost"] = 2**70
    record["ratio"] = 0.0005821499999999999
    as_list, as_lines = tmp_path / "run.json", tmp_path / "jsonl" / "run.json"
    as_list.write_text(json.dumps([record]), "utf-8")
    as_lines.parent.mkdir()
    as_lines.write_text(json.dumps(record) + "\n", "utf-8")  # JSONL: the standard parser
    a = read_file(as_list).trajectories[0][1]
    b = read_file(as_lines).trajectories[0][1]
    assert a.model_extra and a.model_extra["source_record"]["cost"] == 2**70
    assert isinstance(a.model_extra["source_record"]["cost"], int)
    assert a.id == b.id


def test_reimport_skips_known_files_with_the_same_report(tmp_path: Path) -> None:
    files = _inputs(tmp_path)
    ws = Workspace(tmp_path / "ws")
    first = ws.import_files(files, workers=2)
    rows = _rows(ws)
    for workers in (1, 2):
        again = ws.import_files(files, workers=workers)
        assert (again.imported, again.duplicates) == (0, first.imported + first.duplicates)
    assert _rows(ws) == rows
    # A changed file (or the same bytes under another run name) is read again.
    records = json.loads(files[2].read_text("utf-8"))
    records[0]["reward"] = 1.0 - float(records[0]["reward"])
    files[2].write_text(json.dumps(records), "utf-8")
    renamed = Path(shutil.copy(files[3], tmp_path / "renamed-run.json"))
    changed = ws.import_files([files[2], renamed], workers=2)
    assert changed.imported == 1 + len(json.loads(renamed.read_text("utf-8")))
    assert changed.duplicates == len(records) - 1


def test_parts_are_visible_only_once_published(tmp_path: Path) -> None:
    """A part renamed into place by a writer that died before publishing it is never read,
    and the next writer deletes it."""
    files = _inputs(tmp_path)
    ws = Workspace(tmp_path / "ws")
    ws.import_files(files[:1], workers=1)
    visible = ws.part_files()
    orphan = ws.parts_dir / "part-20000101T000000-000000000000.parquet"
    shutil.copy(visible[0], orphan)
    assert ws.part_files() == visible
    assert ws.summary()["trajectories"] == Workspace(ws.root).summary()["trajectories"]
    assert Workspace(ws.root).connect().execute("SELECT count(*) FROM parts").fetchone() == (
        pq.ParquetFile(visible[0]).metadata.num_rows,)
    ws.import_files(files[1:2], workers=1)
    assert not orphan.exists()


def test_parallel_import_survives_a_main_script_without_a_guard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Streamlit runs each page as the process's __main__; workers must not re-run that script.
    import sys
    import types

    page = tmp_path / "page.py"
    page.write_text("raise SystemExit('a worker ran the main script')\n", "utf-8")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[:2]
    ws = Workspace(tmp_path / "ws")
    report = ws.import_files(files, workers=2)
    assert report.imported > 0
    assert sys.modules["__main__"] is main  # restored after the workers started


def test_a_worker_gives_freed_memory_back_once_it_holds_enough() -> None:
    from trajectories.import_workers import return_freed_memory

    def resident_mb() -> float:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf(
            "SC_PAGE_SIZE") / 2**20

    # Payload-sized buffers freed in the middle of the heap (one still held after them):
    # glibc keeps such pages resident until it is asked to trim.
    payloads = [os.urandom(25_000) for _ in range(8_000)]
    pinned = os.urandom(25_000)
    del payloads
    before = resident_mb()
    # Below the threshold the pages stay (the next file would fault them in again).
    assert return_freed_memory(above_mb=before + 1024) is False
    assert before - resident_mb() < 50
    assert return_freed_memory(above_mb=0) is True
    assert before - resident_mb() > 100
    assert len(pinned) == 25_000
