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
    "check_db_path",
    "check_sql_text",
    "first_keyword",
    "refusal",
]

# Longest SQL text we accept; anything longer is not a question about an EHR.
MAX_SQL_CHARS = 200_000

_COMMENT_OR_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))", re.S)


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
    if not sql.strip():
        raise QueryRefused("refused: no SQL statement given")
    return sql


def first_keyword(sql: str) -> str:
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


def refusal(keyword: str) -> QueryRefused:
    return QueryRefused(
        f"refused: {keyword or 'this statement'} is not allowed (read-only sandbox)"
    )
