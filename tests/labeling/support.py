"""Helpers for the store tests that test modules import (conftest.py holds the fixtures)."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, make_url, text


def fresh_postgres_url(database_url: str) -> str:
    """A new empty schema in the session database, as a URL whose search_path points at it."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    finally:
        engine.dispose()
    url = make_url(database_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)
