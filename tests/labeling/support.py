"""Helpers that labeling test modules import (conftest.py holds the fixtures)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from labeling.store import Store, open_store
from tests.support import save_test_taxonomy


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


def sqlite_store_with_annotator(folder: Path, name: str = "ana") -> Store:
    """A new SQLite annotation store in ``folder`` with the test taxonomy and one annotator."""
    store = open_store(f"sqlite:///{folder / 'a.sqlite'}")
    save_test_taxonomy(store)
    store.users.add(name)
    return store


def sqlite_ehr(path: Path, script: str) -> Path:
    """A tiny EHR database at ``path`` made by a SQL script, for evidence found by execution."""
    con = sqlite3.connect(path)
    try:
        con.executescript(script)
        con.commit()
    finally:
        con.close()
    return path
