"""The SQLite engine: a ``mode=ro`` connection with an authorizer that lets only reads through.

Opened through a ``mode=ro`` URI (``immutable=1`` when we cannot write to the location anyway,
so SQLite never tries to create journal files there), extension loading off, no attached
databases allowed, and an authorizer that only lets reads through. The common keyword check
(``guard.NEVER_READS``, after comments and empty statements) refuses statements the
authorizer never sees (``REINDEX``, ``EXPLAIN``) and gives the statement's own name as the
reason for the rest. Introspection pragmas that only read (``table_info`` and friends) are
allowed; every other pragma is refused. Functions that read or write files are refused by name.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trajectories.sql.guard import refuse_never_reads
from trajectories.sql.result import QueryFailed, QueryRefused, QueryResult, timeout_error
from trajectories.sql.watchdog import Watchdog

__all__ = [
    "SQLITE_MAX_VALUE_BYTES", "describe_sqlite", "run_on_sqlite", "run_sqlite", "sqlite_connect",
]

# SQLite has no memory limit per connection; capping value length stops the cheapest bombs.
SQLITE_MAX_VALUE_BYTES = 100_000_000


# Pragmas that only report on the schema, whatever argument they get.
_SQLITE_READ_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
}
# Functions that touch the file system or engine internals. Python's sqlite3 registers none
# of the CLI's file helpers, but deny them by name in case a build ships them.
_SQLITE_DENIED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"}


def _sqlite_action_names() -> dict[int, str]:
    names = {
        "SQLITE_CREATE_INDEX": "CREATE INDEX",
        "SQLITE_CREATE_TABLE": "CREATE TABLE",
        "SQLITE_CREATE_TEMP_INDEX": "CREATE TEMP INDEX",
        "SQLITE_CREATE_TEMP_TABLE": "CREATE TEMP TABLE",
        "SQLITE_CREATE_TEMP_TRIGGER": "CREATE TEMP TRIGGER",
        "SQLITE_CREATE_TEMP_VIEW": "CREATE TEMP VIEW",
        "SQLITE_CREATE_TRIGGER": "CREATE TRIGGER",
        "SQLITE_CREATE_VIEW": "CREATE VIEW",
        "SQLITE_DELETE": "DELETE",
        "SQLITE_DROP_INDEX": "DROP INDEX",
        "SQLITE_DROP_TABLE": "DROP TABLE",
        "SQLITE_DROP_TEMP_INDEX": "DROP TEMP INDEX",
        "SQLITE_DROP_TEMP_TABLE": "DROP TEMP TABLE",
        "SQLITE_DROP_TEMP_TRIGGER": "DROP TEMP TRIGGER",
        "SQLITE_DROP_TEMP_VIEW": "DROP TEMP VIEW",
        "SQLITE_DROP_TRIGGER": "DROP TRIGGER",
        "SQLITE_DROP_VIEW": "DROP VIEW",
        "SQLITE_INSERT": "INSERT",
        "SQLITE_PRAGMA": "PRAGMA",
        "SQLITE_TRANSACTION": "a transaction statement",
        "SQLITE_UPDATE": "UPDATE",
        "SQLITE_ATTACH": "ATTACH",
        "SQLITE_DETACH": "DETACH",
        "SQLITE_ALTER_TABLE": "ALTER TABLE",
        "SQLITE_REINDEX": "REINDEX",
        "SQLITE_ANALYZE": "ANALYZE",
        "SQLITE_CREATE_VTABLE": "CREATE VIRTUAL TABLE",
        "SQLITE_DROP_VTABLE": "DROP VIRTUAL TABLE",
        "SQLITE_SAVEPOINT": "SAVEPOINT",
    }
    return {getattr(sqlite3, k): v for k, v in names.items() if hasattr(sqlite3, k)}


_SQLITE_ACTIONS = _sqlite_action_names()


class _SqliteAuthorizer:
    """Allows reads only and remembers why it denied the first thing it denied."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def _deny(self, reason: str) -> int:
        if self.reason is None:
            self.reason = reason
        return sqlite3.SQLITE_DENY

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in _SQLITE_DENIED_FUNCTIONS:
                return self._deny(f"refused: function {name}() is not allowed (read-only sandbox)")
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _SQLITE_READ_PRAGMAS:
                return sqlite3.SQLITE_OK
            return self._deny(f"refused: PRAGMA {name} is not allowed (read-only sandbox)")
        if (
            action == sqlite3.SQLITE_UPDATE
            and (arg1 or "").lower() == "sqlite_master"
            and (db == "main")
        ):
            # SQLite reports this while it sets up an eponymous pragma table such as
            # pragma_table_info(); an actual write to the schema table is impossible here
            # (read-only open, writable_schema refused).
            return sqlite3.SQLITE_OK
        what = _SQLITE_ACTIONS.get(action, f"action {action}")
        return self._deny(f"refused: {what} is not allowed (read-only sandbox)")


def _sqlite_uri(path: Path) -> str:
    resolved = path.resolve()
    uri = resolved.as_uri() + "?mode=ro"
    # Even a mode=ro reader of a WAL-mode database creates -wal and -shm files next to it, and
    # in a read-only location it cannot open the file at all. In both cases tell SQLite the
    # file never changes, so it reads the main file only. The price (changes still sitting in
    # someone else's WAL are not seen) is fine for a static EHR reference database.
    read_only_place = not os.access(resolved, os.W_OK) or not os.access(resolved.parent, os.W_OK)
    if read_only_place or _sqlite_is_wal(resolved):
        uri += "&immutable=1"
    return uri


def _sqlite_is_wal(path: Path) -> bool:
    # Header bytes 18 and 19 are the write/read format versions: 2 means WAL mode.
    with open(path, "rb") as fh:
        header = fh.read(20)
    return len(header) == 20 and (header[18] == 2 or header[19] == 2)


@contextmanager
def sqlite_connect(path: Path) -> Iterator[sqlite3.Connection]:
    try:
        con = sqlite3.connect(_sqlite_uri(path), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise QueryFailed(f"cannot open database: {exc}") from None
    try:
        if hasattr(con, "enable_load_extension"):
            con.enable_load_extension(False)
        if hasattr(con, "setlimit"):
            con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_VALUE_BYTES)
        yield con
    finally:
        con.close()


def run_sqlite(path: Path, sql: str, *, timeout_s: float, row_cap: int) -> QueryResult:
    _refuse_by_keyword(sql)
    with sqlite_connect(path) as con:
        return run_on_sqlite(con, sql, timeout_s=timeout_s, row_cap=row_cap)


def _refuse_by_keyword(sql: str) -> None:
    # PRAGMA is not in the list: the authorizer lets read-only introspection pragmas through.
    refuse_never_reads(sql)


def run_on_sqlite(con: sqlite3.Connection, sql: str, *, timeout_s: float,
                  row_cap: int) -> QueryResult:
    """One guarded statement on a connection opened by ``sqlite_connect``.

    A fresh authorizer and progress handler replace the previous statement's, so every
    statement is checked and timed on its own.
    """
    _refuse_by_keyword(sql)
    authorizer = _SqliteAuthorizer()
    con.set_authorizer(authorizer)
    deadline = time.monotonic() + max(float(timeout_s), 0.0)
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    start = time.perf_counter()
    watchdog = Watchdog(timeout_s, con.interrupt)
    try:
        with watchdog:
            cur = con.execute(sql)
            columns = [d[0] for d in (cur.description or [])]
            fetched = cur.fetchmany(row_cap + 1) if cur.description else []
    except sqlite3.ProgrammingError as exc:
        if "one statement" in str(exc):
            raise QueryRefused("refused: only one statement is allowed") from None
        raise QueryFailed(str(exc)) from None
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        if authorizer.reason is not None:
            raise QueryRefused(authorizer.reason) from None
        if watchdog.fired or time.monotonic() > deadline or "interrupted" in str(exc):
            raise timeout_error(timeout_s) from None
        raise QueryFailed(str(exc)) from None
    return QueryResult.from_fetch(columns, fetched, row_cap, start)


def describe_sqlite(path: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    with sqlite_connect(path) as con:
        try:
            names = [
                r[0]
                for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            for name in names:
                cols = con.execute(
                    "SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (name,)
                ).fetchall()
                out[name] = [(str(c), str(t or "")) for c, t in cols]
        except sqlite3.Error as exc:
            raise QueryFailed(str(exc)) from None
    return out
