"""What tables and columns a database has, read through the sandbox's own connections."""

from __future__ import annotations

from pathlib import Path

from trajectories.sql.engine_duckdb import describe_duckdb
from trajectories.sql.engine_sqlite import describe_sqlite
from trajectories.sql.guard import check_db_path
from trajectories.sql.run import detect_engine

__all__ = ["describe_tables"]


def describe_tables(
    db_path: Path, tables: list[str] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """Column names and declared types per table (and view).

    ``tables=None`` describes everything. Requested names match case-insensitively, either the
    key (``table`` for the main schema, ``schema.table`` otherwise) or the bare table name.
    Unknown names are simply absent from the result.
    """
    path = check_db_path(db_path)
    sqlite = detect_engine(path) == "sqlite"
    found = describe_sqlite(path) if sqlite else describe_duckdb(path)
    if tables is None:
        return found
    wanted = {t.strip().strip('"`[]').lower() for t in tables if t and t.strip()}
    return {
        key: cols
        for key, cols in found.items()
        if key.lower() in wanted or key.rsplit(".", 1)[-1].lower() in wanted
    }
