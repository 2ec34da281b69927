"""The DuckDB engine: a locked-down read-only connection and exactly one SELECT per call.

The file is opened ``read_only`` with external access (files, network, secrets), extension
auto-install/auto-load and spilling to a temp directory all disabled, and the configuration
locked so a query cannot switch any of that back on. The SQL is parsed first and exactly one
statement of type SELECT is allowed. That includes ``WITH``, ``VALUES``, FROM-first queries and
``DESCRIBE``/``SHOW``/``SUMMARIZE`` (DuckDB parses all of them as SELECT). ``EXPLAIN`` is
refused: it can wrap any statement and ``EXPLAIN ANALYZE`` executes it. ``PIVOT`` is refused as
well because DuckDB expands it into several statements.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from trajectories.sql.guard import first_keyword, refusal, refuse_never_reads
from trajectories.sql.result import QueryFailed, QueryRefused, QueryResult, timeout_error
from trajectories.sql.watchdog import Watchdog

__all__ = ["DUCKDB_MAX_THREADS", "DUCKDB_MEMORY_LIMIT", "describe_duckdb", "duckdb_connect",
           "run_duckdb", "run_on_duckdb"]

# Resource bounds. Spilling is disabled (empty temp directory) because it would write files
# next to the database; the memory limit makes big queries fail instead.
DUCKDB_MEMORY_LIMIT = "2GB"
DUCKDB_MAX_THREADS = 4


def _duckdb_config() -> dict[str, Any]:
    # lock_configuration must come last: once set, no further option may change.
    return {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_unsigned_extensions": False,
        "temp_directory": "",
        "memory_limit": DUCKDB_MEMORY_LIMIT,
        "threads": max(1, min(DUCKDB_MAX_THREADS, os.cpu_count() or 1)),
        "lock_configuration": True,
    }


@contextmanager
def duckdb_connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = duckdb.connect(str(path), read_only=True, config=_duckdb_config())
    except duckdb.Error as exc:
        hint = ""
        if "different configuration" in str(exc):
            # DuckDB shares one database instance per file within a process, so a connection
            # opened elsewhere in this process with other settings blocks ours.
            hint = " (the file is already open in this process with other settings)"
        raise QueryFailed(f"cannot open database{hint}: {exc}") from None
    try:
        # Queries run on a cursor, not on the connection itself: the Python client switches
        # the progress bar on for a connection it opens (a query over two seconds then drew
        # it on the process's stdout, the sandbox worker's being the caller's terminal or
        # log), and the locked configuration refuses to switch it off again, while a cursor
        # starts from DuckDB's defaults, bar off. (A second connection to the same file
        # shares the locked database, so setting it before the lock is no way either.)
        cursor = con.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
    finally:
        con.close()


def _duckdb_single_select(sql: str) -> str:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        # A statement DuckDB does not know (REINDEX) is refused for what it is, as on
        # SQLite, rather than failing as a syntax error.
        refuse_never_reads(sql)
        raise QueryFailed(str(exc)) from None
    if not statements:
        raise QueryRefused("refused: no SQL statement given")
    if len(statements) > 1:
        raise QueryRefused(f"refused: only one statement is allowed (found {len(statements)})")
    stmt = statements[0]
    if stmt.type != duckdb.StatementType.SELECT:
        # The first word names the statement best (INSTALL and LOAD share a type, as do SET,
        # RESET and USE); after WITH the type is the better name (WITH ... INSERT).
        keyword = first_keyword(stmt.query)
        if keyword in ("", "WITH"):
            keyword = stmt.type.name
        raise refusal(keyword)
    if first_keyword(sql) == "PRAGMA":
        # Some DuckDB versions rewrite a PRAGMA into a SELECT of its table function
        # (``PRAGMA database_list`` -> ``SELECT * FROM pragma_database_list``): the statement
        # as written decides, whatever type the parser gives its rewrite.
        raise refusal("PRAGMA")
    return stmt.query


def run_duckdb(path: Path, sql: str, *, timeout_s: float, row_cap: int) -> QueryResult:
    with duckdb_connect(path) as con:
        return run_on_duckdb(con, sql, timeout_s=timeout_s, row_cap=row_cap)


def run_on_duckdb(
    con: duckdb.DuckDBPyConnection, sql: str, *, timeout_s: float, row_cap: int
) -> QueryResult:
    """One guarded SELECT on a connection opened by ``duckdb_connect`` (read-only, locked)."""
    query = _duckdb_single_select(sql)
    start = time.perf_counter()
    watchdog = Watchdog(timeout_s, con.interrupt)
    try:
        with watchdog:
            cur = con.execute(query)
            columns = [d[0] for d in (cur.description or [])]
            # DuckDB streams results, so fetching one extra row tells us about truncation
            # without materialising the rest.
            fetched = cur.fetchmany(row_cap + 1)
    except duckdb.InterruptException:
        raise timeout_error(timeout_s) from None
    except duckdb.Error as exc:
        if watchdog.fired:
            raise timeout_error(timeout_s) from None
        raise QueryFailed(str(exc)) from None
    return QueryResult.from_fetch(columns, fetched, row_cap, start)


def describe_duckdb(path: Path) -> dict[str, list[tuple[str, str]]]:
    with duckdb_connect(path) as con:
        try:
            records = con.execute(
                "SELECT table_schema, table_name, column_name, data_type "
                "FROM information_schema.columns "
                "WHERE table_catalog = current_database() "
                "ORDER BY table_schema, table_name, ordinal_position"
            ).fetchall()
        except duckdb.Error as exc:
            raise QueryFailed(str(exc)) from None
    out: dict[str, list[tuple[str, str]]] = {}
    for schema, table, column, dtype in records:
        key = table if schema == "main" else f"{schema}.{table}"
        out.setdefault(key, []).append((str(column), str(dtype)))
    return out
