"""Checks every statement passes before any engine sees it, common to both engines.

Engine-specific guards live with their engine: DuckDB's single-SELECT check in
:mod:`trajectories.sql.engine_duckdb`, SQLite's authorizer in :mod:`trajectories.sql.engine_sqlite`.
"""

from __future__ import annotations

import re
from pathlib import Path

from trajectories.sql.result import QueryFailed, QueryRefused

__all__ = [
    "MAX_SQL_CHARS",
    "NEVER_READS",
    "check_db_path",
    "check_sql_text",
    "first_keyword",
    "refusal",
    "refuse_never_reads",
]

# Longest SQL text we accept; anything longer is not a question about an EHR.
MAX_SQL_CHARS = 200_000

_COMMENT_OR_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))", re.S)

# Statements that are never a read, refused by their first word on both engines before the
# engine sees them: the reason names the statement (SQLite's authorizer would name what the
# statement does first, e.g. INSERT for ANALYZE, ATTACH for VACUUM), and SQLite never asks
# its authorizer about some of them (REINDEX of a database without indexes, EXPLAIN).
NEVER_READS = frozenset({
    "ALTER", "ANALYZE", "ATTACH", "BEGIN", "CALL", "CHECKPOINT", "COMMIT", "COPY", "CREATE",
    "DELETE", "DETACH", "DROP", "END", "EXPLAIN", "EXPORT", "IMPORT", "INSERT", "INSTALL",
    "LOAD", "REINDEX", "RELEASE", "REPLACE", "RESET", "ROLLBACK", "SAVEPOINT", "SET",
    "UPDATE", "USE", "VACUUM",
})  # fmt: skip


def check_db_path(db_path: Path) -> Path:
    path = Path(db_path)
    if not path.is_file():
        raise QueryFailed(f"database file not found: {path}")
    return path


def check_sql_text(sql: str) -> str:
    if not isinstance(sql, str):
        raise QueryRefused("refused: SQL must be text")
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"refused: SQL is longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise QueryRefused("refused: SQL contains a NUL character")
    if _statement_start(sql) == len(sql):  # only whitespace, comments and empty statements
        raise QueryRefused("refused: no SQL statement given")
    return sql


def _statement_start(sql: str) -> int:
    """Where the first statement's first word is: after comments, whitespace, opening
    parentheses and empty statements (``;``, which both engines skip: ``; ;REINDEX`` runs
    REINDEX)."""
    pos = 0
    while pos < len(sql):
        m = _COMMENT_OR_SPACE.match(sql, pos)
        if m and m.end() > pos:
            pos = m.end()
            continue
        if sql[pos] in "(;":
            pos += 1
            continue
        break
    return pos


def first_keyword(sql: str) -> str:
    """The first word of the first statement (``_statement_start``), upper-cased."""
    pos = _statement_start(sql)
    word = re.match(r"[A-Za-z_]+", sql[pos:])
    return word.group(0).upper()[:24] if word else ""


def refusal(keyword: str) -> QueryRefused:
    return QueryRefused(
        f"refused: {keyword or 'this statement'} is not allowed (read-only sandbox)"
    )


def refuse_never_reads(sql: str) -> None:
    """Refuse SQL whose first statement starts with one of ``NEVER_READS``, naming it."""
    keyword = first_keyword(sql)
    if keyword in NEVER_READS:
        raise refusal(keyword)
