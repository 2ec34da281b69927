"""Fixtures running the annotation-store tests on a SQLite file and on PostgreSQL (the
conftest of each folder that uses them imports them from here).

PostgreSQL: one freshly created database per test session (dropped at the end), so parallel
runs never collide. Inside it, `db_url` gives each test a new empty schema (selected through
`search_path`), and `store` reuses one migrated schema whose tables are truncated per test.
If the server is unreachable the PostgreSQL cases are skipped locally but fail under CI=true,
so CI can never go green without having tested PostgreSQL.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from labeling.store import Store, open_store
from labeling.store.models import Base
from tests.labeling.support import fresh_postgres_url
from tests.support import postgres_database as postgres_database_for
from tests.support import save_test_taxonomy

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """URL of a throwaway database created for this test session."""
    with postgres_database_for("faillab_test") as url:
        yield url


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend (nothing migrated yet)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'annotations.sqlite'}"
    return fresh_postgres_url(request.getfixturevalue("postgres_database"))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session; tests get a copy (much faster)."""
    path = tmp_path_factory.mktemp("template") / "annotations.sqlite"
    open_store(f"sqlite:///{path}").close()  # closing checkpoints the WAL into the main file
    return path


@pytest.fixture(scope="session")
def postgres_store_url(postgres_database: str) -> Iterator[str]:
    """A schema migrated to head once per session; each test starts from truncated tables."""
    url = fresh_postgres_url(postgres_database)
    open_store(url).close()
    yield url


def _truncate(url: str) -> None:
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            # TRUNCATE does not fire the row-level triggers guarding history, by design.
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated, empty store on each backend."""
    if request.param == "sqlite":
        target = tmp_path / "annotations.sqlite"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), target)
        url = f"sqlite:///{target}"
    else:
        url = request.getfixturevalue("postgres_store_url")
        _truncate(url)
    opened = open_store(url)
    save_test_taxonomy(opened)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def team(store: Store) -> Store:
    """The store with two annotators, a lead and an admin."""
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    store.users.add("lea", "lead")
    store.users.add("root", "admin")
    return store
