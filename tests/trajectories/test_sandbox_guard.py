"""The sandbox's statement check: a refused statement is refused for what it is, however it is
prefixed (empty statements, comments, whitespace), on both engines, in this process and in
the isolated worker; and a sandbox query never draws DuckDB's progress bar."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trajectories.sql import QueryRefused, run_isolated, run_readonly

#: Ways to put something before a statement that both engines skip.
PREFIXES = ["", ";", "; ;", ";;;\n", "/* a comment */ ", "-- a comment\n", " \n\t",
            "; /* x */ ; -- y\n ", "/**/;"]
#: Statements that are never a read, with the name the refusal must give.
NEVER_READS = [("REINDEX", "REINDEX"), ("reindex patients", "REINDEX"),
               ("ANALYZE", "ANALYZE"), ("analyze patients", "ANALYZE"),
               ("VACUUM", "VACUUM"), ("VACUUM INTO '/tmp/faillab-vacuum.db'", "VACUUM"),
               ("EXPLAIN SELECT 1", "EXPLAIN"), ("INSERT INTO patients VALUES (9, 'F', 1)",
                                                 "INSERT"),
               ("DROP TABLE patients", "DROP")]


@pytest.fixture(params=["sqlite", "duckdb"])
def ehr(request: pytest.FixtureRequest, lite_db: Path, duck_db: Path) -> Path:
    return lite_db if request.param == "sqlite" else duck_db


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(("statement", "name"), NEVER_READS)
def test_never_reads_are_refused_by_name_however_prefixed(
        ehr: Path, prefix: str, statement: str, name: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        run_readonly(ehr, prefix + statement)
    assert str(refused.value) == f"refused: {name} is not allowed (read-only sandbox)"


@pytest.mark.parametrize("sql", [";", "; ;", "/* only a comment */", "-- nothing\n;", "((;"])
def test_no_statement_at_all_is_refused_alike(ehr: Path, sql: str) -> None:
    with pytest.raises(QueryRefused, match=r"^refused: no SQL statement given$"):
        run_readonly(ehr, sql)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_read_after_the_same_prefixes_still_runs(ehr: Path, prefix: str) -> None:
    result = run_readonly(ehr, prefix + "SELECT count(*) FROM patients")
    assert result.rows == [(5,)]


def test_the_isolated_worker_refuses_alike(lite_db: Path, duck_db: Path) -> None:
    """The worker runs the same check (the app and the CLI query through it)."""
    for db in (lite_db, duck_db):
        for sql, name in ((";REINDEX", "REINDEX"), ("; ;ANALYZE", "ANALYZE"),
                          ("/* x */ ;VACUUM", "VACUUM")):
            with pytest.raises(QueryRefused) as refused:
                run_isolated(db, sql, timeout_s=30.0)
            assert str(refused.value) == f"refused: {name} is not allowed (read-only sandbox)"


PROGRESS_PROBE = """
import sys
from pathlib import Path
from trajectories.sql import QueryTimeout, run_isolated, run_readonly

# Runs until the timeout stops it, longer than the two seconds after which DuckDB starts
# drawing its progress bar.
SQL = "SELECT count(*) FROM range(100000000000) r WHERE r.range % 7 = 3"
for run in (run_isolated, run_readonly):
    try:
        run(Path(sys.argv[1]), SQL, timeout_s=3.0)
    except QueryTimeout:
        pass
    else:
        raise SystemExit("the query was expected to run until the timeout")
"""


@pytest.mark.slow
def test_duckdb_draws_no_progress_bar(duck_db: Path) -> None:
    """Neither the worker nor an in-process query writes anything to stdout or stderr (a
    query over two seconds drew DuckDB's bar on the worker's stdout, the caller's
    terminal or log)."""
    probe = subprocess.run([sys.executable, "-c", PROGRESS_PROBE, str(duck_db)],
                           capture_output=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout == b"" and probe.stderr == b""
