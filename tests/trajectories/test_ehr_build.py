"""Building a DuckDB EHR database from MIMIC-IV CSV files."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import duckdb
import pytest

from tests.support import MIMIC_DEMO, require_shared
from trajectories.ehr_build import MimicBuildError, build_duckdb_from_mimic, find_mimic_csvs
from trajectories.sql import run_readonly


def _csv_rows(path: Path) -> int:
    with gzip.open(path, "rt", newline="") as fh:
        return sum(1 for _ in csv.reader(fh)) - 1


def _write_gz(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    with gzip.open(path, "wt", newline="") as fh:
        fh.write(buf.getvalue())


def test_build_from_demo_matches_csv_counts(tmp_path: Path) -> None:
    require_shared(MIMIC_DEMO / "hosp" / "patients.csv.gz")
    out = tmp_path / "ehr" / "mimic.duckdb"
    messages: list[str] = []
    built = build_duckdb_from_mimic(
        MIMIC_DEMO,
        out,
        tables=["patients", "admissions", "d_labitems", "icustays"],
        progress=messages.append,
    )
    assert built == ["patients", "admissions", "d_labitems", "icustays"]
    assert messages and any("patients" in m for m in messages)
    for table in built:
        module = "icu" if table == "icustays" else "hosp"
        expected = _csv_rows(MIMIC_DEMO / module / f"{table}.csv.gz")
        got = run_readonly(out, f"SELECT count(*) FROM {table}").rows[0][0]
        assert got == expected, table
    assert run_readonly(out, "SELECT count(*) FROM patients").rows == [(100,)]
    # Only the database itself is left in the destination directory.
    assert sorted(p.name for p in out.parent.iterdir()) == ["mimic.duckdb"]


def test_build_replaces_existing_database_atomically(tmp_path: Path) -> None:
    require_shared(MIMIC_DEMO / "hosp" / "patients.csv.gz")
    out = tmp_path / "mimic.duckdb"
    build_duckdb_from_mimic(MIMIC_DEMO, out, tables=["patients"])
    build_duckdb_from_mimic(MIMIC_DEMO, out, tables=["d_labitems"])
    con = duckdb.connect(str(out), read_only=True)
    try:
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
    assert names == {"d_labitems"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mimic.duckdb"]


def test_code_columns_keep_leading_zeros(tmp_path: Path) -> None:
    src = tmp_path / "mimic"
    _write_gz(
        src / "hosp" / "diagnoses_icd.csv.gz",
        ["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"],
        [["1", "10", "1", "0389", "9"], ["1", "10", "2", "4019", "9"]],
    )
    _write_gz(
        src / "icu" / "icustays.csv.gz", ["subject_id", "stay_id", "los"], [["1", "5", "1.5"]]
    )
    out = tmp_path / "out.duckdb"
    assert build_duckdb_from_mimic(src, out) == ["diagnoses_icd", "icustays"]
    rows = run_readonly(out, "SELECT icd_code FROM diagnoses_icd ORDER BY seq_num").rows
    assert rows == [("0389",), ("4019",)]
    assert run_readonly(out, "SELECT los FROM icustays").rows == [(1.5,)]


def test_empty_directory_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "hosp").mkdir(parents=True)
    out = tmp_path / "out.duckdb"
    with pytest.raises(MimicBuildError) as info:
        build_duckdb_from_mimic(empty, out)
    assert "no MIMIC-IV CSV files" in str(info.value)
    assert "\n" not in str(info.value)
    assert not out.exists()
    with pytest.raises(MimicBuildError):
        build_duckdb_from_mimic(tmp_path / "does-not-exist", out)


def test_unknown_table_and_broken_csv_leave_nothing(tmp_path: Path) -> None:
    src = tmp_path / "mimic"
    _write_gz(src / "hosp" / "patients.csv.gz", ["subject_id"], [["1"]])
    (src / "hosp" / "broken.csv.gz").write_bytes(b"this is not gzip")
    out_dir = tmp_path / "out"
    out = out_dir / "ehr.duckdb"
    with pytest.raises(MimicBuildError, match="admissions"):
        build_duckdb_from_mimic(src, out, tables=["admissions"])
    with pytest.raises(MimicBuildError):
        build_duckdb_from_mimic(src, out, tables=["broken"])
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_find_mimic_csvs_prefers_gz_and_ignores_other_files(tmp_path: Path) -> None:
    _write_gz(tmp_path / "hosp" / "patients.csv.gz", ["subject_id"], [["1"]])
    (tmp_path / "hosp" / "patients.csv").write_text("subject_id\n1\n")
    (tmp_path / "hosp" / "README.txt").write_text("hi")
    (tmp_path / "icu" / "d_items.csv").parent.mkdir(parents=True)
    (tmp_path / "icu" / "d_items.csv").write_text("itemid\n1\n")
    found = find_mimic_csvs(tmp_path)
    assert found == {
        "patients": tmp_path / "hosp" / "patients.csv.gz",
        "d_items": tmp_path / "icu" / "d_items.csv",
    }
