"""Parse SQL once with sqlglot and say which tables it reads.

The one table extractor of the product (the sandbox's schema view, the pre-labeller's signals
and the evidence finder all use it). Agent SQL is often broken, so the behaviour on text that
does not parse is part of the contract: ``parse_sql`` returns None and ``tables_in_sql`` returns
an empty list. Nothing here raises on any input.
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp

from trajectories.sql.guard import MAX_SQL_CHARS

__all__ = ["DIALECTS", "parse_sql", "tables_in_sql"]

# The two engines the sandbox runs; SQLite first because EHRSQL's references are SQLite.
DIALECTS = ("sqlite", "duckdb")


@lru_cache(maxsize=4096)
def parse_sql(sql: str) -> exp.Expr | None:
    """The syntax tree of one statement, or None when it is empty, too long or unparseable.

    Cached because the same reference and agent queries are compared many times; callers must
    not modify the returned tree (``.copy()`` it first).
    """
    if not isinstance(sql, str) or not sql.strip() or len(sql) > MAX_SQL_CHARS or "\x00" in sql:
        return None
    for dialect in DIALECTS:
        try:
            trees = sqlglot.parse(sql, read=dialect)
        except (sqlglot.errors.SqlglotError, ValueError, RecursionError):
            continue
        statements = [t for t in trees if t is not None]
        if len(statements) == 1 and not isinstance(statements[0], exp.Command):
            return statements[0]
    return None


def tables_in_sql(sql: str) -> list[str]:
    """The tables an SQL statement reads, in order of first appearance, deduplicated.

    Schema-qualified names keep their schema (``mimiciv_icu.icustays``); CTE names and table
    functions (``read_csv(...)``) are left out. Unparseable text gives ``[]``.
    """
    return list(_tables(sql)) if isinstance(sql, str) else []


@lru_cache(maxsize=4096)
def _tables(sql: str) -> tuple[str, ...]:
    # Cached: walking a large tree costs more than parsing it, and agents repeat queries.
    tree = parse_sql(sql)
    if tree is None:
        return ()
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    # Tables written to are not read (INSERT INTO x SELECT ... FROM y reads y only).
    targets: set[int] = set()
    for node in tree.find_all(exp.Insert, exp.Create, exp.Update, exp.Delete):
        target = node.this.this if isinstance(node.this, exp.Schema) else node.this
        targets.add(id(target))
    out: list[str] = []
    seen: set[str] = set()
    found = list(tree.find_all(exp.Table))
    # The parser records where each identifier starts: sort by it for the order of the text.
    found.sort(key=lambda t: t.this.meta.get("start", 0) if isinstance(t.this, exp.Expr)
               else 0)
    for table in found:
        name = table.name
        if not name or not isinstance(table.this, exp.Identifier) or id(table) in targets:
            continue  # a table function, a subquery in table position or a written table
        full = f"{table.db}.{name}" if table.db else name
        if not table.db and name.lower() in ctes:
            continue
        if full.lower() not in seen:
            seen.add(full.lower())
            out.append(full)
    return tuple(out)
