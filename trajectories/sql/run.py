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

import dataclasses
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from trajectories.sql.clock import at_reference_time
from trajectories.sql.engine_duckdb import duckdb_connect, run_duckdb, run_on_duckdb
from trajectories.sql.engine_sqlite import run_on_sqlite, run_sqlite, sqlite_connect
from trajectories.sql.guard import check_db_path, check_sql_text
from trajectories.sql.result import QueryFailed, QueryResult

__all__ = ["SQLITE_MAGIC", "ReadonlySession", "detect_engine", "open_readonly", "run_readonly"]

SQLITE_MAGIC = b"SQLite format 3\x00"


def detect_engine(db_path: Path) -> str:
    """``"sqlite"`` when the file starts with the SQLite magic header, else ``"duckdb"``."""
    with open(db_path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    return "sqlite" if head == SQLITE_MAGIC else "duckdb"


def run_readonly(
    db_path: Path, sql: str, *, timeout_s: float = 5.0, row_cap: int = 1000,
    now: str | None = None,
) -> QueryResult:
    """Run one read-only SELECT and return at most ``row_cap`` rows. A query that reads the
    clock runs at ``now`` (default: the benchmark's clock, ``trajectories.sql.clock``).

    Raises ``QueryRefused`` (not run), ``QueryTimeout`` (stopped) or ``QueryFailed`` (the
    database's own error). All three carry a one-line message.
    """
    path = check_db_path(db_path)
    sql, ran_at = at_reference_time(check_sql_text(sql), now)
    row_cap = max(int(row_cap), 0)
    if detect_engine(path) == "sqlite":
        result = run_sqlite(path, sql, timeout_s=timeout_s, row_cap=row_cap)
    else:
        result = run_duckdb(path, sql, timeout_s=timeout_s, row_cap=row_cap)
    return dataclasses.replace(result, ran_at=ran_at) if ran_at else result


class ReadonlySession:
    """Several guarded queries over one sandbox connection, for batch work in one thread.

    Opening a locked-down DuckDB connection costs tens of milliseconds, more than most EHR
    queries; the evidence finder runs hundreds of small ones. Every statement still passes the
    same guard, watchdog and row cap as ``run_readonly``; only the connection is shared. It is
    bound to the thread that opened it.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection | sqlite3.Connection) -> None:
        self._con = con
        self._thread = threading.get_ident()

    def run(self, sql: str, *, timeout_s: float = 5.0, row_cap: int = 1000,
            now: str | None = None) -> QueryResult:
        if threading.get_ident() != self._thread:
            raise QueryFailed("a sandbox session is used by the thread that opened it only")
        sql, ran_at = at_reference_time(check_sql_text(sql), now)
        row_cap = max(int(row_cap), 0)
        if isinstance(self._con, sqlite3.Connection):
            result = run_on_sqlite(self._con, sql, timeout_s=timeout_s, row_cap=row_cap)
        else:
            result = run_on_duckdb(self._con, sql, timeout_s=timeout_s, row_cap=row_cap)
        return dataclasses.replace(result, ran_at=ran_at) if ran_at else result


@contextmanager
def open_readonly(db_path: Path) -> Iterator[ReadonlySession]:
    """A ``ReadonlySession`` on ``db_path``, closed on leaving the block."""
    path = check_db_path(db_path)
    if detect_engine(path) == "sqlite":
        with sqlite_connect(path) as lite:
            yield ReadonlySession(lite)
    else:
        with duckdb_connect(path) as duck:
            yield ReadonlySession(duck)
