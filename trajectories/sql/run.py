"""``run_readonly``: one read-only SELECT against a DuckDB or SQLite file, in this process.

Every call opens its own connection, so no connection is ever shared between threads, and the
connection is closed before returning. Both engines get a watchdog thread that interrupts the
query after ``timeout_s`` (SQLite also gets a progress handler) and fetch at most ``row_cap``
rows.

Known limit: a single scalar call that builds a huge value (e.g. ``repeat('x', 2e9)``) cannot be
interrupted inside the engine or while Python converts it; memory is bounded only for DuckDB.
:mod:`trajectories.sql.isolation` runs the same function in a worker process for that reason.
"""

from __future__ import annotations

from pathlib import Path

from trajectories.sql.engine_duckdb import run_duckdb
from trajectories.sql.engine_sqlite import run_sqlite
from trajectories.sql.guard import check_db_path, check_sql_text
from trajectories.sql.result import QueryResult

__all__ = ["SQLITE_MAGIC", "detect_engine", "run_readonly"]

SQLITE_MAGIC = b"SQLite format 3\x00"


def detect_engine(db_path: Path) -> str:
    """``"sqlite"`` when the file starts with the SQLite magic header, else ``"duckdb"``."""
    with open(db_path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    return "sqlite" if head == SQLITE_MAGIC else "duckdb"


def run_readonly(
    db_path: Path, sql: str, *, timeout_s: float = 5.0, row_cap: int = 1000
) -> QueryResult:
    """Run one read-only SELECT and return at most ``row_cap`` rows.

    Raises ``QueryRefused`` (not run), ``QueryTimeout`` (stopped) or ``QueryFailed`` (the
    database's own error). All three carry a one-line message.
    """
    path = check_db_path(db_path)
    check_sql_text(sql)
    row_cap = max(int(row_cap), 0)
    if detect_engine(path) == "sqlite":
        return run_sqlite(path, sql, timeout_s=timeout_s, row_cap=row_cap)
    return run_duckdb(path, sql, timeout_s=timeout_s, row_cap=row_cap)
