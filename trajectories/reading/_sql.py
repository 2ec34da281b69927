"""Is this text a SQL statement? The one rule every importer, signal and evidence reader uses.

A text is SQL when it starts with a statement keyword (``SELECT``, ``WITH``, ``PRAGMA``,
``CREATE``...) and either sqlglot parses it into SQL statements, or it is a statement that
failed to parse: a second clause keyword (``FROM``, ``WHERE``, ``JOIN``...) and SQL punctuation
(``SELECT COUNT(* FROM patients`` is still the agent's SQL step, with its syntax error). Prose
that happens to start with "select" or "with" ("select the latest lab") is neither; a bare
word ("admissions", a table name passed to a schema tool) has no statement keyword. Whether
the statement may be run again is the sandbox's question (``trajectories.sql``), not this one:
an agent's ``CREATE TEMP TABLE`` is still a SQL step of its trajectory.

Parsing costs about 0.4 ms a query, so results are cached by text: harness logs repeat the
same queries across rollouts, and an import parses each distinct query once per worker.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any

#: Statement keywords SQL starts with, after comments, whitespace and opening parentheses.
STATEMENT_KEYWORDS = frozenset({
    "SELECT", "WITH", "VALUES", "TABLE", "FROM", "PRAGMA", "EXPLAIN", "DESCRIBE", "DESC",
    "SHOW", "SUMMARIZE", "CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "REPLACE",
    "ATTACH", "DETACH", "COPY", "SET", "BEGIN", "COMMIT", "ANALYZE", "VACUUM", "REINDEX",
})
#: Statements that only read (what a "query" is, and what the sandbox may run again).
READ_ONLY_KEYWORDS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "FROM", "PRAGMA",
                                "EXPLAIN", "DESCRIBE", "DESC", "SHOW", "SUMMARIZE"})
#: SQL longer than this is not parsed (no agent writes a megabyte query); it is not SQL here.
MAX_PARSED_CHARS = 100_000

_LEAD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$)|\()*", re.S)
_WORD = re.compile(r"[A-Za-z_]+")
#: Dialects tried in order: sqlglot's own reads most agent SQL; the others read what only
#: they spell (DuckDB's SHOW and SUMMARIZE, MySQL's EXPLAIN, T-SQL's TOP, SQLite's ATTACH).
_DIALECTS = (None, "sqlite", "duckdb", "postgres", "mysql", "tsql")

# sqlglot warns on every text it falls back to a generic command for; that is an answer here.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def leading_keyword(text: str) -> str:
    """The first word after comments, whitespace and opening parentheses, upper-cased."""
    start = _LEAD.match(text)
    word = _WORD.match(text, start.end() if start else 0)
    return word.group(0).upper() if word else ""


#: Line breaks an agent wrote as escapes (``\n`` inside a JSON string it escaped twice).
_ESCAPED_BREAKS = re.compile(r"\\[nrt]")


@functools.lru_cache(maxsize=16384)
def is_sql(text: str) -> bool:
    """True when ``text`` is one or more SQL statements (the module's rule). Line breaks
    written as ``\n`` escapes read as line breaks: an agent that escaped its JSON twice
    still wrote SQL."""
    if not text or len(text) > MAX_PARSED_CHARS or leading_keyword(text) not in STATEMENT_KEYWORDS:
        return False
    if "\\" in text and _ESCAPED_BREAKS.search(text):
        text = _ESCAPED_BREAKS.sub(" ", text)
    import sqlglot  # here: importers that never meet a candidate do not pay for it
    from sqlglot.errors import SqlglotError

    statement_types = _statement_types()
    for dialect in _DIALECTS:
        try:
            statements = [s for s in sqlglot.parse(text, read=dialect) if s is not None]
        except (SqlglotError, ValueError, RecursionError):
            continue
        # A generic Command is sqlglot giving up on the text ("create a chart of labs"), and
        # a bare expression ("admissions") is no statement: neither is SQL here.
        if statements and all(isinstance(s, statement_types) for s in statements):
            return True
    return _broken_statement(text)


#: Clause keywords a statement has after its first word (WITH is left out: prose uses it).
_CLAUSE = re.compile(r"\b(?:FROM|WHERE|JOIN|GROUP\s+BY|ORDER\s+BY|HAVING|LIMIT|INTO|UNION|"
                     r"VALUES)\b", re.I)
_PUNCTUATION = re.compile(r"[*=(),;<>]")
_VERB = re.compile(r"\b(?:SELECT|INSERT|UPDATE|DELETE|CREATE)\b", re.I)


def _broken_statement(text: str) -> bool:
    """A statement that failed to parse: a verb (SELECT, INSERT...), a clause keyword after
    the first word, and SQL punctuation (prose has the words, rarely the ``*``, ``=`` and
    parentheses too)."""
    body = text[_LEAD.match(text).end():]  # type: ignore[union-attr]
    return bool(_VERB.search(body)) and bool(_CLAUSE.search(body, 1)) \
        and bool(_PUNCTUATION.search(body))


@functools.cache
def _statement_types() -> tuple[type, ...]:
    from sqlglot import exp

    names = ("Query", "Pragma", "Describe", "Show", "Summarize", "Create", "Insert", "Update",
             "Delete", "Drop", "Alter", "Set", "Analyze", "Attach", "Detach", "Copy",
             "Transaction", "Commit", "Rollback", "Merge")
    # getattr: sqlglot adds and renames expression classes between releases.
    return tuple(t for t in (getattr(exp, n, None) for n in names) if isinstance(t, type))


def is_read_only_query(text: str) -> bool:
    """True when ``text`` is SQL whose first statement only reads (SELECT, WITH, PRAGMA...).
    The sandbox checks every statement again before it runs anything."""
    return leading_keyword(text) in READ_ONLY_KEYWORDS and is_sql(text)


def sql_argument(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(argument name, SQL)`` of the first string argument that is SQL, whatever the tool or
    the argument is called (``query``, ``sql_query``, ``statement``...); None when none is."""
    for key, value in arguments.items():
        if isinstance(value, str) and is_sql(value):
            return str(key), value
    return None
