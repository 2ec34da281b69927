"""Read-only SQL sandbox for re-running agent and reference SQL against an EHR database.

Agent SQL comes from LLM trajectories and is treated as hostile. The database is either a DuckDB
file or a SQLite file (chosen by the file header). Every call opens its own connection, so no
connection is ever shared between threads, and the connection is closed before returning.

Layers of defence, in order:

* DuckDB: the file is opened ``read_only`` with external access (files, network, secrets),
  extension auto-install/auto-load and spilling to a temp directory all disabled, and the
  configuration locked so a query cannot switch any of that back on. The SQL is parsed first and
  exactly one statement of type SELECT is allowed. That includes ``WITH``, ``VALUES``, FROM-first
  queries and ``DESCRIBE``/``SHOW``/``SUMMARIZE`` (DuckDB parses all of them as SELECT).
  ``EXPLAIN`` is refused: it can wrap any statement and ``EXPLAIN ANALYZE`` executes it.
  ``PIVOT`` is refused as well because DuckDB expands it into several statements.
* SQLite: opened through a ``mode=ro`` URI (``immutable=1`` when we cannot write to the
  location anyway, so SQLite never tries to create journal files there), extension loading off,
  no attached databases allowed, and an authorizer that only lets reads through. A cheap keyword
  check refuses statements the authorizer never sees (``REINDEX``, ``VACUUM``) and gives clearer
  reasons for the rest. Introspection pragmas that only read (``table_info`` and friends) are
  allowed; every other pragma is refused.
* Both: a watchdog thread interrupts the query after ``timeout_s`` (SQLite also gets a progress
  handler), and at most ``row_cap`` rows are fetched.

Known limit: a single scalar call that builds a huge value (e.g. ``repeat('x', 2e9)``) cannot be
interrupted inside the engine or while Python converts it; memory is bounded only for DuckDB.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

__all__ = [
    "QueryFailed",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "SandboxError",
    "describe_tables",
    "detect_engine",
    "run_readonly",
    "tables_in_sql",
]

SQLITE_MAGIC = b"SQLite format 3\x00"

# Resource bounds for DuckDB. Spilling is disabled (empty temp directory) because it would
# write files next to the database; the memory limit makes big queries fail instead.
DUCKDB_MEMORY_LIMIT = "2GB"
DUCKDB_MAX_THREADS = 4
# Longest SQL text we accept; anything longer is not a question about an EHR.
MAX_SQL_CHARS = 200_000
# SQLite has no memory limit per connection; capping value length stops the cheapest bombs.
SQLITE_MAX_VALUE_BYTES = 100_000_000
_ONE_LINE_MAX = 500


# --------------------------------------------------------------------------- results and errors


class SandboxError(Exception):
    """Base class: the message is always a single line fit for showing to a reviewer."""

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))

    @property
    def message(self) -> str:
        return str(self)


class QueryRefused(SandboxError):
    """The SQL was not run because the sandbox does not allow it."""


class QueryTimeout(SandboxError):
    """The query was stopped after exceeding its time budget."""


class QueryFailed(SandboxError):
    """The database itself rejected or failed the query (its own message, on one line)."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_ms: float

    def json_rows(self) -> list[list[Any]]:
        """Rows with every value converted to something ``json.dumps`` accepts (strict JSON)."""
        return [[_jsonable(v) for v in row] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "rows": self.json_rows(),
            "truncated": self.truncated,
            "elapsed_ms": self.elapsed_ms,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)

    def to_text(self, *, max_rows: int | None = None, max_col_width: int = 40) -> str:
        """A plain-text table with a header, a rule, the rows and a one-line footer."""
        shown = self.rows if max_rows is None else self.rows[: max(0, max_rows)]
        header = [_clip(str(c), max_col_width) for c in self.columns]
        body = [[_clip(_cell_text(v), max_col_width) for v in row] for row in shown]
        widths = [len(h) for h in header]
        for row in body:
            for i, cell in enumerate(row):
                if i < len(widths):
                    widths[i] = max(widths[i], len(cell))
        lines = []
        if header:
            lines.append(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
            lines.append("-+-".join("-" * w for w in widths))
        for row in body:
            lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))
        n = len(self.rows)
        footer = f"({n} row{'s' if n != 1 else ''}"
        if self.truncated:
            footer += f"; stopped at the row cap of {n}, more rows exist"
        if len(shown) < n:
            footer += f"; showing the first {len(shown)}"
        lines.append(footer + ")")
        return "\n".join(line.rstrip() for line in lines)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        # NaN and infinities are not valid JSON.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    return str(value)


def _cell_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return "x'" + raw[:32].hex() + ("…" if len(raw) > 32 else "") + "'"
    text = value if isinstance(value, str) else str(value)
    # Keep one row per line whatever the data holds.
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")


def _clip(text: str, width: int) -> str:
    width = max(width, 2)
    return text if len(text) <= width else text[: width - 1] + "…"


def _one_line(message: str) -> str:
    """Collapse an engine message into one line, dropping DuckDB's caret pointer lines."""
    parts = []
    for raw in str(message).splitlines():
        line = raw.strip()
        if not line or set(line) <= {"^", " "}:
            continue
        parts.append(line)
    text = re.sub(r"\s+", " ", " ".join(parts)).strip()
    if len(text) > _ONE_LINE_MAX:
        text = text[: _ONE_LINE_MAX - 1] + "…"
    return text or "unknown error"


# --------------------------------------------------------------------------- shared helpers


def detect_engine(db_path: Path) -> str:
    """``"sqlite"`` when the file starts with the SQLite magic header, else ``"duckdb"``."""
    with open(db_path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    return "sqlite" if head == SQLITE_MAGIC else "duckdb"


def _check_db_path(db_path: Path) -> Path:
    path = Path(db_path)
    if not path.is_file():
        raise QueryFailed(f"database file not found: {path}")
    return path


def _check_sql_text(sql: str) -> str:
    if not isinstance(sql, str):
        raise QueryRefused("refused: SQL must be text")
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"refused: SQL is longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise QueryRefused("refused: SQL contains a NUL character")
    if not sql.strip():
        raise QueryRefused("refused: no SQL statement given")
    return sql


_COMMENT_OR_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))", re.S)


def _first_keyword(sql: str) -> str:
    """The first word of the SQL after comments, whitespace and opening parentheses."""
    pos = 0
    while pos < len(sql):
        m = _COMMENT_OR_SPACE.match(sql, pos)
        if m and m.end() > pos:
            pos = m.end()
            continue
        if sql[pos] == "(":
            pos += 1
            continue
        break
    word = re.match(r"[A-Za-z_]+", sql[pos:])
    return word.group(0).upper()[:24] if word else ""


def _refusal(keyword: str) -> QueryRefused:
    return QueryRefused(
        f"refused: {keyword or 'this statement'} is not allowed (read-only sandbox)"
    )


class _Watchdog:
    """Calls ``interrupt`` once ``timeout_s`` has passed and keeps calling it until released.

    Repeating matters: an interrupt that lands just before the engine starts executing would
    otherwise be lost and the query would run unbounded.
    """

    def __init__(self, timeout_s: float, interrupt: Callable[[], None]) -> None:
        self._timeout_s = max(float(timeout_s), 0.0)
        self._interrupt = interrupt
        self._done = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="sql-sandbox-watchdog", daemon=True)

    def _run(self) -> None:
        if self._done.wait(self._timeout_s):
            return
        self.fired = True
        while True:
            try:
                self._interrupt()
            except Exception:
                # A closed connection just means the query is over.
                return
            if self._done.wait(0.05):
                return

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _timeout_error(timeout_s: float) -> QueryTimeout:
    return QueryTimeout(f"stopped: exceeded {float(timeout_s):.1f} s")


# --------------------------------------------------------------------------- public entry points


def run_readonly(
    db_path: Path, sql: str, *, timeout_s: float = 5.0, row_cap: int = 1000
) -> QueryResult:
    """Run one read-only SELECT and return at most ``row_cap`` rows.

    Raises ``QueryRefused`` (not run), ``QueryTimeout`` (stopped) or ``QueryFailed`` (the
    database's own error). All three carry a one-line message.
    """
    path = _check_db_path(db_path)
    _check_sql_text(sql)
    row_cap = max(int(row_cap), 0)
    if detect_engine(path) == "sqlite":
        return _run_sqlite(path, sql, timeout_s=timeout_s, row_cap=row_cap)
    return _run_duckdb(path, sql, timeout_s=timeout_s, row_cap=row_cap)


def describe_tables(
    db_path: Path, tables: list[str] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """Column names and declared types per table (and view).

    ``tables=None`` describes everything. Requested names match case-insensitively, either the
    key (``table`` for the main schema, ``schema.table`` otherwise) or the bare table name.
    Unknown names are simply absent from the result.
    """
    path = _check_db_path(db_path)
    sqlite = detect_engine(path) == "sqlite"
    found = _describe_sqlite(path) if sqlite else _describe_duckdb(path)
    if tables is None:
        return found
    wanted = {t.strip().strip('"`[]').lower() for t in tables if t and t.strip()}
    return {
        key: cols
        for key, cols in found.items()
        if key.lower() in wanted or key.rsplit(".", 1)[-1].lower() in wanted
    }


def tables_in_sql(sql: str) -> list[str]:
    """Best-effort list of the tables an SQL string reads, in order of first appearance.

    CTE names and table functions are left out. Uses DuckDB's parser when it can parse the
    text, otherwise a regex over FROM/JOIN. Never raises on garbage input.
    """
    if not isinstance(sql, str) or not sql.strip() or len(sql) > MAX_SQL_CHARS:
        return []
    try:
        parsed = _tables_via_parser(sql)
    except Exception:
        # Any parser trouble falls back to the regex.
        parsed = None
    names = parsed if parsed is not None else _tables_via_regex(sql)
    seen: set[str] = set()
    out = []
    for name in names:
        if name and name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
    return out


# --------------------------------------------------------------------------- DuckDB


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
def _duckdb_connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
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
        yield con
    finally:
        con.close()


def _duckdb_single_select(sql: str) -> str:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(str(exc)) from None
    if not statements:
        raise QueryRefused("refused: no SQL statement given")
    if len(statements) > 1:
        raise QueryRefused(f"refused: only one statement is allowed (found {len(statements)})")
    stmt = statements[0]
    if stmt.type != duckdb.StatementType.SELECT:
        # The first word names the statement best (INSTALL and LOAD share a type, as do SET,
        # RESET and USE); after WITH the type is the better name (WITH ... INSERT).
        keyword = _first_keyword(stmt.query)
        if keyword in ("", "WITH"):
            keyword = stmt.type.name
        raise _refusal(keyword)
    return stmt.query


def _run_duckdb(path: Path, sql: str, *, timeout_s: float, row_cap: int) -> QueryResult:
    query = _duckdb_single_select(sql)
    with _duckdb_connect(path) as con:
        start = time.perf_counter()
        watchdog = _Watchdog(timeout_s, con.interrupt)
        try:
            with watchdog:
                cur = con.execute(query)
                columns = [d[0] for d in (cur.description or [])]
                # DuckDB streams results, so fetching one extra row tells us about truncation
                # without materialising the rest.
                fetched = cur.fetchmany(row_cap + 1)
        except duckdb.InterruptException:
            raise _timeout_error(timeout_s) from None
        except duckdb.Error as exc:
            if watchdog.fired:
                raise _timeout_error(timeout_s) from None
            raise QueryFailed(str(exc)) from None
        elapsed_ms = (time.perf_counter() - start) * 1000.0
    truncated = len(fetched) > row_cap
    rows = [tuple(r) for r in fetched[:row_cap]]
    return QueryResult(columns=columns, rows=rows, truncated=truncated, elapsed_ms=elapsed_ms)


def _describe_duckdb(path: Path) -> dict[str, list[tuple[str, str]]]:
    with _duckdb_connect(path) as con:
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


# --------------------------------------------------------------------------- SQLite

# Statements that are never a read. Refusing them by their first word gives a clear reason
# and covers the ones the authorizer is not consulted about (REINDEX, VACUUM); DuckDB-only
# statements are listed so both engines answer alike. Anything else goes to SQLite, whose
# authorizer still refuses every non-read action.
_SQLITE_REFUSED_FIRST = {
    "ALTER", "ANALYZE", "ATTACH", "BEGIN", "CALL", "CHECKPOINT", "COMMIT", "COPY", "CREATE",
    "DELETE", "DETACH", "DROP", "END", "EXPLAIN", "EXPORT", "IMPORT", "INSERT", "INSTALL",
    "LOAD", "REINDEX", "RELEASE", "REPLACE", "RESET", "ROLLBACK", "SAVEPOINT", "SET",
    "UPDATE", "USE", "VACUUM",
}  # fmt: skip
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
def _sqlite_connect(path: Path) -> Iterator[sqlite3.Connection]:
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


def _run_sqlite(path: Path, sql: str, *, timeout_s: float, row_cap: int) -> QueryResult:
    keyword = _first_keyword(sql)
    # PRAGMA is not in the list: the authorizer lets read-only introspection pragmas through.
    if keyword in _SQLITE_REFUSED_FIRST:
        raise _refusal(keyword)
    with _sqlite_connect(path) as con:
        authorizer = _SqliteAuthorizer()
        con.set_authorizer(authorizer)
        deadline = time.monotonic() + max(float(timeout_s), 0.0)
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        start = time.perf_counter()
        watchdog = _Watchdog(timeout_s, con.interrupt)
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
                raise _timeout_error(timeout_s) from None
            raise QueryFailed(str(exc)) from None
        elapsed_ms = (time.perf_counter() - start) * 1000.0
    truncated = len(fetched) > row_cap
    rows = [tuple(r) for r in fetched[:row_cap]]
    return QueryResult(columns=columns, rows=rows, truncated=truncated, elapsed_ms=elapsed_ms)


def _describe_sqlite(path: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    with _sqlite_connect(path) as con:
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


# --------------------------------------------------------------------------- SQL table extraction

_parser_lock = threading.Lock()
_parser_con: duckdb.DuckDBPyConnection | None = None


def _parser_connection() -> duckdb.DuckDBPyConnection:
    global _parser_con
    if _parser_con is None:
        # Only ever used to parse text; locked down like the sandbox all the same.
        _parser_con = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "threads": 1,
                "lock_configuration": True,
            },
        )
    return _parser_con


def _tables_via_parser(sql: str) -> list[str] | None:
    with _parser_lock:
        con = _parser_connection()
        row = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()
    if not row or row[0] is None:
        return None
    tree = json.loads(row[0])
    if tree.get("error"):
        return None
    ctes: set[str] = set()
    tables: list[tuple[str, str]] = []
    _walk_tree(tree, ctes, tables)
    return [
        f"{schema}.{name}" if schema else name
        for schema, name in tables
        if schema or name.lower() not in ctes
    ]


def _walk_tree(node: Any, ctes: set[str], tables: list[tuple[str, str]]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE" and node.get("table_name"):
            tables.append((str(node.get("schema_name") or ""), str(node["table_name"])))
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map") or []:
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    ctes.add(entry["key"].lower())
        for value in node.values():
            _walk_tree(value, ctes, tables)
    elif isinstance(node, list):
        for item in node:
            _walk_tree(item, ctes, tables)


_IDENT = r'(?:"[^"]+"|`[^`]+`|\[[^\]]+\]|[A-Za-z_][\w$]*)'
_FROM_JOIN = re.compile(rf"\b(?:FROM|JOIN)\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)(\s*\()?", re.I)
_CTE_NAME = re.compile(
    rf"(?:\bWITH(?:\s+RECURSIVE)?|,)\s*({_IDENT})\s*(?:\([^)]*\)\s*)?AS\s*\(", re.I
)


def _strip_ident(text: str) -> str:
    return ".".join(part.strip().strip('"`[]') for part in text.split("."))


def _tables_via_regex(sql: str) -> list[str]:
    ctes = {_strip_ident(m.group(1)).lower() for m in _CTE_NAME.finditer(sql)}
    out = []
    for m in _FROM_JOIN.finditer(sql):
        if m.group(2):  # followed by "(": a table function, not a table
            continue
        name = _strip_ident(m.group(1))
        if name.lower() in ctes or name.upper() in {"SELECT", "LATERAL", "UNNEST"}:
            continue
        out.append(name)
    return out
