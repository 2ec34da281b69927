"""The SQL sandbox refuses, stops or fails hostile SQL and never writes a file."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support import EHRSQL_SQLITE, require_shared
from trajectories.sql import (
    QueryFailed,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SandboxError,
    describe_tables,
    detect_engine,
    run_readonly,
    tables_in_sql,
)


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under root with its content hash and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (
                hashlib.sha256(p.read_bytes()).hexdigest(),
                st.st_mtime_ns,
            )
    return out


def _assert_one_line(exc: SandboxError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text


# --------------------------------------------------------------------------- hostile SQL, DuckDB


def _duck_hostile(tmp: Path) -> list[tuple[str, type[SandboxError], str]]:
    return [
        ("SELECT * FROM read_csv('/etc/passwd')", QueryFailed, "disabled by configuration"),
        ("SELECT * FROM read_text('/etc/passwd')", QueryFailed, "disabled by configuration"),
        ("SELECT * FROM glob('/etc/*')", QueryFailed, "disabled by configuration"),
        (f"SELECT * FROM read_parquet('{tmp}/x.parquet')", QueryFailed, "disabled"),
        ("SELECT * FROM read_json('https://example.com/x.json')", QueryFailed, "disabled"),
        (f"COPY (SELECT 1) TO '{tmp}/x.csv'", QueryRefused, "COPY"),
        (f"COPY patients TO '{tmp}/x.parquet' (FORMAT parquet)", QueryRefused, "COPY"),
        (f"EXPORT DATABASE '{tmp}/dump'", QueryRefused, "EXPORT"),
        (f"ATTACH '{tmp}/other.duckdb'", QueryRefused, "ATTACH"),
        (f"ATTACH '{tmp}/other.duckdb' AS o; CREATE TABLE o.t AS SELECT 1", QueryRefused, "one"),
        ("DETACH ehr", QueryRefused, "DETACH"),
        ("INSTALL httpfs", QueryRefused, "INSTALL"),
        ("LOAD httpfs", QueryRefused, "LOAD"),
        ("PRAGMA database_list", QueryRefused, "PRAGMA"),
        ("PRAGMA enable_profiling", QueryRefused, "PRAGMA"),
        ("SET threads=1", QueryRefused, "SET"),
        ("SET enable_external_access=true", QueryRefused, "SET"),
        ("RESET enable_external_access", QueryRefused, "RESET"),
        ("CALL pragma_version()", QueryRefused, "CALL"),
        ("CHECKPOINT", QueryRefused, "CHECKPOINT"),
        ("INSERT INTO patients VALUES (9, 'F', 1)", QueryRefused, "INSERT"),
        ("UPDATE patients SET anchor_age = 0", QueryRefused, "UPDATE"),
        ("DELETE FROM patients", QueryRefused, "DELETE"),
        ("CREATE TABLE t AS SELECT 1", QueryRefused, "CREATE"),
        ("CREATE TEMP TABLE t AS SELECT 1", QueryRefused, "CREATE"),
        ("DROP TABLE patients", QueryRefused, "DROP"),
        ("WITH x AS (SELECT 1) INSERT INTO patients SELECT 9, 'F', 1", QueryRefused, "INSERT"),
        ("SELECT 1; DROP TABLE patients", QueryRefused, "only one statement"),
        ("EXPLAIN ANALYZE SELECT 1", QueryRefused, "EXPLAIN"),
        ("BEGIN TRANSACTION", QueryRefused, "not allowed"),
        (f"SELECT * FROM query('COPY (SELECT 1) TO ''{tmp}/q.csv''')", QueryFailed, "SELECT"),
        (f"SELECT * FROM query('ATTACH ''{tmp}/q.duckdb''')", QueryFailed, "SELECT"),
        ("SELECT * FROM duckdb_secrets()", QueryFailed, "disabled"),
        ("SELECT * FROM sqlite_scan('/etc/x.db', 't')", QueryFailed, "extension"),
    ]


def test_duckdb_hostile_sql_is_refused_or_fails_and_writes_nothing(
    tmp_path: Path, duck_db: Path
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    before_db = _snapshot(tmp_path)
    for sql, expected, fragment in _duck_hostile(target):
        with pytest.raises(expected) as info:
            run_readonly(duck_db, sql)
        _assert_one_line(info.value)
        assert fragment.lower() in str(info.value).lower(), (sql, str(info.value))
        if expected is QueryRefused:
            assert str(info.value).startswith("refused:"), sql
    assert _snapshot(tmp_path) == before_db
    assert list(target.iterdir()) == []


def test_duckdb_refusal_message_is_the_documented_shape(duck_db: Path, tmp_path: Path) -> None:
    with pytest.raises(QueryRefused) as info:
        run_readonly(duck_db, f"ATTACH '{tmp_path}/other.duckdb'")
    assert str(info.value) == "refused: ATTACH is not allowed (read-only sandbox)"


def test_duckdb_runaway_cross_join_times_out(duck_db: Path, tmp_path: Path) -> None:
    before = _snapshot(tmp_path)
    start = time.monotonic()
    with pytest.raises(QueryTimeout) as info:
        run_readonly(
            duck_db,
            "SELECT count(*) FROM range(100000000) a, range(100000000) b",
            timeout_s=1,
        )
    # Generous bound: it proves the query was stopped rather than hung, on a busy 2-core CI too.
    assert time.monotonic() - start < 30.0
    assert str(info.value) == "stopped: exceeded 1.0 s"
    assert _snapshot(tmp_path) == before


def test_duckdb_connection_is_locked_down(duck_db: Path) -> None:
    settings = [
        "enable_external_access",
        "autoinstall_known_extensions",
        "autoload_known_extensions",
        "lock_configuration",
        "temp_directory",
    ]
    sql = "SELECT " + ", ".join(f"current_setting('{s}')" for s in settings)
    values = run_readonly(duck_db, sql).rows[0]
    assert dict(zip(settings, values, strict=True)) == {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "lock_configuration": True,
        "temp_directory": "",
    }


def test_duckdb_big_sort_is_stopped_and_writes_nothing(duck_db: Path, tmp_path: Path) -> None:
    before = _snapshot(tmp_path)
    with pytest.raises((QueryTimeout, QueryFailed)):
        run_readonly(
            duck_db,
            "SELECT range, md5(range::VARCHAR) AS h FROM range(400000000) ORDER BY h",
            timeout_s=1,
        )
    # No <db>.tmp spill directory or any other file appeared.
    assert _snapshot(tmp_path) == before


def test_duckdb_introspection_selects_are_allowed(duck_db: Path) -> None:
    result = run_readonly(duck_db, "DESCRIBE patients")
    assert [r[0] for r in result.rows] == ["subject_id", "gender", "anchor_age"]
    result = run_readonly(duck_db, "FROM patients SELECT count(*)")
    assert result.rows == [(5,)]


# --------------------------------------------------------------------------- hostile SQL, SQLite


def _lite_hostile(tmp: Path) -> list[tuple[str, type[SandboxError], str]]:
    return [
        (f"ATTACH DATABASE '{tmp}/other.db' AS o", QueryRefused, "ATTACH"),
        ("DETACH DATABASE main", QueryRefused, "DETACH"),
        ("PRAGMA writable_schema = 1", QueryRefused, "writable_schema"),
        ("PRAGMA journal_mode = WAL", QueryRefused, "journal_mode"),
        ("PRAGMA query_only = 0", QueryRefused, "query_only"),
        ("INSERT INTO patients VALUES (9, 'F', 1)", QueryRefused, "INSERT"),
        ("REPLACE INTO patients VALUES (9, 'F', 1)", QueryRefused, "REPLACE"),
        ("UPDATE patients SET anchor_age = 0", QueryRefused, "UPDATE"),
        ("DELETE FROM patients", QueryRefused, "DELETE"),
        ("CREATE TABLE t (a)", QueryRefused, "CREATE"),
        ("CREATE TEMP TABLE t (a)", QueryRefused, "CREATE"),
        ("DROP TABLE patients", QueryRefused, "DROP"),
        ("WITH x AS (SELECT 1) INSERT INTO patients SELECT 9, 'F', 1", QueryRefused, "INSERT"),
        ("SELECT 1; DROP TABLE patients", QueryRefused, "only one statement"),
        ("SELECT load_extension('/tmp/evil.so')", QueryRefused, "load_extension"),
        (f"VACUUM INTO '{tmp}/copy.db'", QueryRefused, "VACUUM"),
        ("REINDEX", QueryRefused, "REINDEX"),
        ("ANALYZE", QueryRefused, "ANALYZE"),
        ("BEGIN IMMEDIATE", QueryRefused, "BEGIN"),
        ("SAVEPOINT s", QueryRefused, "SAVEPOINT"),
        ("INSTALL httpfs", QueryRefused, "INSTALL"),
        (f"COPY (SELECT 1) TO '{tmp}/x.csv'", QueryRefused, "COPY"),
        ("SELECT * FROM read_csv('/etc/passwd')", QueryFailed, "no such table"),
    ]


def test_sqlite_hostile_sql_is_refused_and_writes_nothing(tmp_path: Path, lite_db: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    before = _snapshot(tmp_path)
    for sql, expected, fragment in _lite_hostile(target):
        with pytest.raises(expected) as info:
            run_readonly(lite_db, sql)
        _assert_one_line(info.value)
        assert fragment.lower() in str(info.value).lower(), (sql, str(info.value))
    assert _snapshot(tmp_path) == before
    assert list(target.iterdir()) == []


def test_sqlite_recursive_cte_runaway_times_out(tmp_path: Path, lite_db: Path) -> None:
    before = _snapshot(tmp_path)
    start = time.monotonic()
    with pytest.raises(QueryTimeout) as info:
        run_readonly(
            lite_db,
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT count(*) FROM r",
            timeout_s=1,
        )
    # Generous bound: it proves the query was stopped rather than hung, on a busy 2-core CI too.
    assert time.monotonic() - start < 30.0
    assert str(info.value) == "stopped: exceeded 1.0 s"
    assert _snapshot(tmp_path) == before


def test_sqlite_read_only_pragmas_are_allowed(lite_db: Path) -> None:
    result = run_readonly(lite_db, "PRAGMA table_info(patients)")
    assert [r[1] for r in result.rows] == ["subject_id", "gender", "anchor_age"]
    result = run_readonly(lite_db, "SELECT name FROM pragma_table_info('admissions')")
    assert [r[0] for r in result.rows] == ["hadm_id", "subject_id", "kind"]


def test_sqlite_wal_database_in_read_only_directory_gains_no_side_files(tmp_path: Path) -> None:
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    path = ro_dir / "ehr.sqlite"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("CREATE TABLE patients (subject_id INTEGER)")
    con.execute("INSERT INTO patients VALUES (1), (2)")
    con.commit()
    con.close()
    for side in ro_dir.glob("ehr.sqlite-*"):
        side.unlink()
    path.chmod(0o444)
    ro_dir.chmod(0o555)
    try:
        before = _snapshot(ro_dir)
        assert run_readonly(path, "SELECT count(*) FROM patients").rows == [(2,)]
        assert _snapshot(ro_dir) == before
    finally:
        ro_dir.chmod(0o755)


# --------------------------------------------------------------------------- normal behaviour


@pytest.mark.parametrize("which", ["duck", "lite"])
def test_select_returns_correct_rows(which: str, duck_db: Path, lite_db: Path) -> None:
    db = duck_db if which == "duck" else lite_db
    result = run_readonly(
        db,
        "SELECT p.subject_id, count(a.hadm_id) AS n FROM patients p "
        "LEFT JOIN admissions a ON a.subject_id = p.subject_id "
        "GROUP BY p.subject_id ORDER BY p.subject_id",
    )
    assert result.columns == ["subject_id", "n"]
    assert result.rows == [(1, 2), (2, 0), (3, 1), (4, 0), (5, 0)]
    assert result.truncated is False
    assert result.elapsed_ms >= 0


@pytest.mark.parametrize("which", ["duck", "lite"])
def test_row_cap_truncates(which: str, duck_db: Path, lite_db: Path) -> None:
    db = duck_db if which == "duck" else lite_db
    capped = run_readonly(db, "SELECT subject_id FROM patients ORDER BY subject_id", row_cap=3)
    assert capped.rows == [(1,), (2,), (3,)]
    assert capped.truncated is True
    exact = run_readonly(db, "SELECT subject_id FROM patients ORDER BY subject_id", row_cap=5)
    assert len(exact.rows) == 5
    assert exact.truncated is False


def test_duckdb_huge_result_is_streamed_not_materialised(duck_db: Path) -> None:
    start = time.monotonic()
    result = run_readonly(duck_db, "SELECT * FROM range(3000000000)", row_cap=10, timeout_s=5)
    assert len(result.rows) == 10 and result.truncated
    # Generous bound: it proves the query was stopped rather than hung, on a busy 2-core CI too.
    assert time.monotonic() - start < 30.0


@pytest.mark.parametrize("which", ["duck", "lite"])
@pytest.mark.parametrize(
    "sql", ["SELECT * FROM no_such_table", "SELECT nope FROM patients", "SELEC 1", "SELECT ("]
)
def test_errors_are_query_failed_on_one_line(
    which: str, sql: str, duck_db: Path, lite_db: Path
) -> None:
    db = duck_db if which == "duck" else lite_db
    with pytest.raises(QueryFailed) as info:
        run_readonly(db, sql)
    _assert_one_line(info.value)


def test_empty_and_missing(duck_db: Path, tmp_path: Path) -> None:
    with pytest.raises(QueryRefused):
        run_readonly(duck_db, "   -- nothing here\n")
    with pytest.raises(QueryFailed):
        run_readonly(tmp_path / "absent.duckdb", "SELECT 1")
    assert not (tmp_path / "absent.duckdb").exists()


def test_engine_detection(duck_db: Path, lite_db: Path) -> None:
    assert detect_engine(duck_db) == "duckdb"
    assert detect_engine(lite_db) == "sqlite"


def test_concurrent_calls_are_independent(duck_db: Path, lite_db: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> int:
        db = duck_db if i % 2 else lite_db
        row = run_readonly(db, "SELECT count(*) FROM patients").rows[0]
        return int(row[0])

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(one, range(40))) == [5] * 40


# --------------------------------------------------------------------------- QueryResult


def test_result_text_and_json() -> None:
    import datetime as dt
    import decimal

    result = QueryResult(
        columns=["id", "when", "amount", "note", "blob", "x"],
        rows=[
            (
                1,
                dt.datetime(2130, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
                decimal.Decimal("1.50"),
                "a\nb",
                b"\x00\x01",
                None,
            ),
            (2, dt.date(2130, 1, 3), decimal.Decimal("NaN"), "x" * 100, b"", float("inf")),
        ],
        truncated=True,
        elapsed_ms=1.25,
    )
    text = result.to_text(max_col_width=20)
    lines = text.splitlines()
    assert lines[0].split(" | ")[0].strip() == "id"
    assert "NULL" in lines[2] and "a\\nb" in lines[2]
    assert len(lines) == 5 and "more rows exist" in lines[-1]
    payload = json.loads(result.to_json())
    assert payload["rows"][0] == [1, "2130-01-02 03:04:05+00:00", 1.5, "a\nb", "base64:AAE=", None]
    assert payload["rows"][1][2] == "NaN" and payload["rows"][1][5] == "inf"
    json.dumps(result.json_rows(), allow_nan=False)


# --------------------------------------------------------------------------- schema helpers


@pytest.mark.parametrize("which", ["duck", "lite"])
def test_describe_tables(which: str, duck_db: Path, lite_db: Path) -> None:
    db = duck_db if which == "duck" else lite_db
    everything = describe_tables(db, None)
    assert set(everything) == {"patients", "admissions"}
    some = describe_tables(db, ["PATIENTS", "missing"])
    assert list(some) == ["patients"]
    names = [c for c, _ in some["patients"]]
    assert names == ["subject_id", "gender", "anchor_age"]
    assert some["patients"][0][1].upper().startswith("INT")


def test_tables_in_sql() -> None:
    sql = (
        "WITH recent AS (SELECT * FROM admissions WHERE admittime > '2130-01-01') "
        "SELECT p.gender, count(*) FROM patients p JOIN recent r USING (subject_id) "
        "WHERE p.subject_id IN (SELECT subject_id FROM mimiciv_icu.icustays) GROUP BY 1"
    )
    assert tables_in_sql(sql) == ["admissions", "patients", "mimiciv_icu.icustays"]
    assert tables_in_sql("SELECT * FROM read_csv('/etc/passwd')") == []
    # Garbage, hostile or non-SELECT input never raises.
    for junk in ["", "   ", "((((", "'; DROP TABLE x; --", "\x00\x01", "SELECT " * 5000, "ö ∑"]:
        assert isinstance(tables_in_sql(junk), list)
    assert tables_in_sql("INSERT INTO foo SELECT * FROM bar") == ["bar"]


# --------------------------------------------------------------------------- real EHRSQL database


def test_real_ehrsql_sqlite() -> None:
    require_shared(EHRSQL_SQLITE)
    stat_before = EHRSQL_SQLITE.stat()
    siblings_before = sorted(os.listdir(EHRSQL_SQLITE.parent))
    result = run_readonly(
        EHRSQL_SQLITE, "SELECT count(*), count(DISTINCT subject_id) FROM patients"
    )
    total, distinct = result.rows[0]
    assert total > 0 and total == distinct
    rows = run_readonly(EHRSQL_SQLITE, "SELECT subject_id, gender FROM patients", row_cap=5)
    assert len(rows.rows) == 5 and rows.truncated
    assert "subject_id" in [c for c, _ in describe_tables(EHRSQL_SQLITE, ["patients"])["patients"]]
    with pytest.raises(QueryRefused):
        run_readonly(EHRSQL_SQLITE, "DELETE FROM patients")
    stat_after = EHRSQL_SQLITE.stat()
    assert (stat_after.st_size, stat_after.st_mtime_ns) == (
        stat_before.st_size,
        stat_before.st_mtime_ns,
    )
    assert sorted(os.listdir(EHRSQL_SQLITE.parent)) == siblings_before


# --------------------------------------------------------------------------- sessions


def test_session_keeps_every_guard_between_queries(
    tmp_path: Path, duck_db: Path, lite_db: Path
) -> None:
    """One connection for many queries: hostile SQL is still refused, timed out or failed, and
    the queries before and after it answer normally."""
    from trajectories.sql import open_readonly

    target = tmp_path / "target"
    target.mkdir()
    before = _snapshot(tmp_path)
    cases = [(duck_db, _duck_hostile(target)), (lite_db, _lite_hostile(target))]
    runaway = {
        duck_db: "SELECT count(*) FROM range(100000000) a, range(100000000) b",
        lite_db: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT count(*) FROM r",
    }
    for db, hostile in cases:
        with open_readonly(db) as session:
            assert session.run("SELECT count(*) FROM patients").rows == [(5,)]
            for sql, expected, _fragment in hostile:
                with pytest.raises(expected):
                    session.run(sql)
                assert session.run("SELECT count(*) FROM admissions").rows == [(3,)]
            with pytest.raises(QueryTimeout):
                session.run(runaway[db], timeout_s=0.5)
            capped = session.run("SELECT subject_id FROM patients ORDER BY 1", row_cap=2)
            assert capped.rows == [(1,), (2,)] and capped.truncated
    assert _snapshot(tmp_path) == before
