"""The benchmark's clock: a query that asks for "now" runs at the task's reference time (EHRSQL's
2100-12-31 23:59:00 by default) in every way the sandbox runs SQL, on SQLite and DuckDB."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from tests.support import EHRSQL_SQLITE, require_shared
from trajectories.sql import (
    BENCHMARK_NOW,
    QueryRefused,
    at_reference_time,
    open_readonly,
    reference_time_of,
    run_isolated,
    run_readonly,
)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clock")
    lite = root / "ehr.sqlite"
    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE admissions (subject_id INTEGER, admittime TEXT)")
    con.executemany("INSERT INTO admissions VALUES (?, ?)",
                    [(1, "2100-12-30 08:00:00"), (2, "2100-06-01 10:00:00"),
                     (3, "2099-12-31 09:00:00")])
    con.commit()
    con.close()
    duck = root / "ehr.duckdb"
    dcon = duckdb.connect(str(duck))
    dcon.execute("CREATE TABLE admissions (subject_id INTEGER, admittime TIMESTAMP)")
    dcon.execute("INSERT INTO admissions VALUES (1, '2100-12-30 08:00:00'), "
                 "(2, '2100-06-01 10:00:00'), (3, '2099-12-31 09:00:00')")
    dcon.close()
    return {"sqlite": lite, "duckdb": duck}


# "Admitted in the current year": finds 2 patients at the benchmark's time, none on the
# machine's clock (every admission lies in the 2100s).
_THIS_YEAR_SQLITE = ("SELECT count(*) FROM admissions WHERE strftime('%Y', admittime) = "
                     "strftime('%Y', current_time)")
_THIS_YEAR_DUCKDB = ("SELECT count(*) FROM admissions WHERE year(admittime) = "
                     "year(CAST(current_date AS DATE))")


def test_the_replacements_are_the_scorers_textual_ones() -> None:
    sql = ("SELECT datetime(current_time, '-1 year'), date(current_date), datetime('now'), "
           "NOW(), CURDATE(), CURTIME()")
    ran, at = at_reference_time(sql)
    assert at == BENCHMARK_NOW
    assert ran == ("SELECT datetime('2100-12-31 23:59:00', '-1 year'), date('2100-12-31'), "
                   "datetime('2100-12-31 23:59:00'), '2100-12-31 23:59:00', '2100-12-31', "
                   "'23:59:00'")
    # Near misses: spellings the scorer leaves to the engine stay as they are.
    for untouched in ("SELECT CURRENT_TIMESTAMP", "SELECT date('NOW')", "SELECT 1"):
        assert at_reference_time(untouched) == (untouched, None)


def test_a_task_names_its_own_time_and_nothing_else_gets_into_the_sql() -> None:
    assert reference_time_of({"reference_time": "2101-01-01 00:00:00"}) == "2101-01-01 00:00:00"
    assert reference_time_of({"question": "q"}) is None
    assert at_reference_time("SELECT current_date", "2101-01-01 00:00:00")[0] == \
        "SELECT '2101-01-01'"
    for bad in ("2100-12-31 23:59:00' OR '1", "2100-02-30 00:00:00", "tomorrow"):
        with pytest.raises(QueryRefused):
            at_reference_time("SELECT current_time", bad)
        with pytest.raises(QueryRefused):
            reference_time_of({"reference_time": bad})


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_every_way_of_running_sql_reads_the_benchmarks_clock(dbs: dict[str, Path],
                                                              engine: str) -> None:
    db = dbs[engine]
    sql = _THIS_YEAR_SQLITE if engine == "sqlite" else _THIS_YEAR_DUCKDB
    direct = run_readonly(db, sql)
    isolated = run_isolated(db, sql)
    with open_readonly(db) as session:
        batched = session.run(sql)
    for result in (direct, isolated, batched):
        assert result.rows == [(2,)]
        assert result.ran_at == BENCHMARK_NOW
        assert f"ran at {BENCHMARK_NOW}" in result.to_text()
        assert result.to_dict()["ran_at"] == BENCHMARK_NOW
    earlier = run_isolated(db, sql, now="2099-12-31 23:59:00")
    assert earlier.rows == [(1,)] and earlier.ran_at == "2099-12-31 23:59:00"
    plain = run_readonly(db, "SELECT count(*) FROM admissions")
    assert plain.ran_at is None and "ran at" not in plain.to_text()


def test_the_real_gold_sql_finds_its_rows_at_the_benchmarks_time() -> None:
    db = require_shared(EHRSQL_SQLITE)
    # An EHRSQL-2024 gold query of the "this year" kind: empty on the machine's clock.
    sql = ("SELECT COUNT(*) FROM admissions WHERE datetime(admissions.admittime, 'start of "
           "year') = datetime(current_time, 'start of year', '-0 year')")
    assert run_isolated(db, sql).rows[0][0] > 0


def test_a_workspace_names_its_own_clock(dbs: dict[str, Path], tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from faillab.cli import main

    ws = str(tmp_path / "ws")
    runner = CliRunner()
    used = runner.invoke(main, ["sandbox", "use", str(dbs["sqlite"]), "--workspace", ws,
                                "--reference-time", "2099-12-31 23:59:00"])
    assert used.exit_code == 0 and "its clock at 2099-12-31 23:59:00" in used.output
    ran = runner.invoke(main, ["sandbox", "query", _THIS_YEAR_SQLITE, "--workspace", ws,
                               "--json"])
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["rows"] == [[1]]
    assert json.loads(ran.stdout)["ran_at"] == "2099-12-31 23:59:00"
    # Near miss: a time that is no time is refused, and the workspace keeps its clock.
    bad = runner.invoke(main, ["sandbox", "use", str(dbs["sqlite"]), "--workspace", ws,
                               "--reference-time", "2099-12-31"])
    assert bad.exit_code != 0 and "YYYY-MM-DD HH:MM:SS" in bad.output
