"""Real SQL execution against the synthetic EHR, with the text an agent would see.

Every observation in a demo trajectory comes from here, so an analyst (or a test) can re-run a
step's SQL and get the identical text back.  Results are cached per distinct SQL string because
simulated agents repeat themselves a lot (that is half the point of the failure taxonomy).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from trajectories.sql.cells import json_cell

__all__ = [
    "MAX_ROWS_SHOWN",
    "DemoDatabase",
    "SqlResult",
    "answer_from_rows",
    "format_rows",
    "jsonable",
]

MAX_ROWS_SHOWN = 15
MAX_CELL_CHARS = 60


@dataclass(frozen=True)
class SqlResult:
    sql: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    error: str | None  # the engine's message, e.g. "Catalog Error: Table with name ..."
    error_type: str | None  # exception class name, e.g. "CatalogException"
    observation: str  # what the agent sees

    @property
    def answer(self) -> Any:
        """The rows as a JSON answer value (None for no rows / a single NULL)."""
        return None if self.error else answer_from_rows(self.rows)


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        text = repr(round(v, 6))
    elif isinstance(v, dt.datetime):
        text = v.strftime("%Y-%m-%d %H:%M:%S")
    else:
        text = str(v)
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 3] + "..."
    return text


def format_rows(columns: tuple[str, ...], rows: tuple[tuple[Any, ...], ...]) -> str:
    """A compact pipe table: header, at most ``MAX_ROWS_SHOWN`` rows, and a row count."""
    lines = [" | ".join(columns)]
    lines.extend(" | ".join(_cell(v) for v in row) for row in rows[:MAX_ROWS_SHOWN])
    n = len(rows)
    if n > MAX_ROWS_SHOWN:
        lines.append(f"... ({n} rows total, showing first {MAX_ROWS_SHOWN})")
    else:
        lines.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(lines)


def jsonable(v: Any) -> Any:
    """One SQL value as an answer cell: the product's one cell encoder, floats rounded to 6
    places so that a re-run on another machine gives the same answer."""
    out = json_cell(v)
    return round(out, 6) if isinstance(out, float) else out


def answer_from_rows(rows: tuple[tuple[Any, ...], ...] | list[tuple[Any, ...]]) -> Any:
    """Rows -> answer value: a list of rows (each a list), or None when there is no evidence
    (no rows, or one row of NULLs such as an aggregate over nothing)."""
    if not rows or (len(rows) == 1 and all(v is None for v in rows[0])):
        return None
    return [[jsonable(v) for v in row] for row in rows]


class DemoDatabase:
    """The demo generator's own read-only connection to the database it just built, plus a
    per-SQL result cache.

    Not a sandbox: the SQL run here is the generator's own (templates and their variants), never
    an agent's or a user's, so it needs none of :mod:`trajectories.sql`'s guards.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._con = duckdb.connect(str(self.path), read_only=True)
        # One thread: floating-point aggregates then sum in a fixed order, so repeated runs
        # give bit-identical results (and tiny queries run faster without scheduling).  Set
        # after connecting, not as connect config, so that other in-process connections to
        # the same file are not refused for a configuration mismatch.
        self._con.execute("SET threads TO 1")
        self._cache: dict[str, SqlResult] = {}

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> DemoDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, sql: str) -> SqlResult:
        hit = self._cache.get(sql)
        if hit is not None:
            return hit
        try:
            cur = self._con.execute(sql)
            columns = tuple(d[0] for d in cur.description or ())
            rows = tuple(tuple(r) for r in cur.fetchall())
            result = SqlResult(sql, columns, rows, None, None, format_rows(columns, rows))
        except duckdb.Error as exc:
            message = str(exc)
            result = SqlResult(sql, (), (), message, type(exc).__name__, f"Error: {message}")
        self._cache[sql] = result
        return result

    def schema(self, table: str) -> str:
        """Column listing for a get_schema tool call (read from the catalog, not hard-coded)."""
        rows = self._con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [table],
        ).fetchall()
        if not rows:
            return f"Error: table '{table}' not found"
        cols = ", ".join(f"{c} {t}" for c, t in rows)
        return f"{table}({cols})"

    def table_names(self) -> list[str]:
        res = self.run("SELECT table_name FROM information_schema.tables ORDER BY table_name")
        return [r[0] for r in res.rows]
