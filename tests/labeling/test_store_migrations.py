"""Schema migrations: fresh databases, upgrades that keep data, racing openers, model drift."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from labeling.store import StoreError, head_revision, make_engine, open_store, upgrade
from labeling.store.engine import current_revision
from labeling.store.models import Base

PREVIOUS = "0001_initial"


def test_empty_database_goes_to_head(db_url: str) -> None:
    store = open_store(db_url)
    try:
        assert current_revision(store.engine) == head_revision()
        tables = set(inspect(store.engine).get_table_names())
        assert {"users", "labels", "adjudications", "history", "audits", "prelabel_runs"} <= tables
        # Opening again is a no-op.
        open_store(db_url).close()
        assert current_revision(store.engine) == head_revision()
    finally:
        store.close()


def test_previous_revision_upgrades_with_data_kept(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, PREVIOUS)
        assert current_revision(engine) == PREVIOUS
        assert "prelabel_shown" not in {c["name"] for c in inspect(engine).get_columns("labels")}
        now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO users (name, role, created_at) VALUES ('old', 'annotator', :t)"),
                {"t": now},
            )
            conn.execute(
                text(
                    "INSERT INTO labels (trajectory_id, annotator_id, source, category,"
                    " taxonomy_version, created_at) VALUES ('traj-1', 1, 'human', 'bad_join',"
                    " 'v0', :t)"
                ),
                {"t": now},
            )
    finally:
        engine.dispose()

    store = open_store(db_url)
    try:
        assert current_revision(store.engine) == head_revision()
        [label] = store.labels.for_item("traj-1", viewer=None, blind=False)
        assert (label.annotator, label.category, label.taxonomy_version) == (
            "old",
            "bad_join",
            "v0",
        )
        assert label.prelabel_shown is False and label.seconds_on_item is None
        # New tables from the second revision are usable straight away.
        run_id = store.prelabels.start_run("heuristic", "heuristic", total=3)
        assert store.prelabels.get_run(run_id) is not None
    finally:
        store.close()


def test_concurrent_openers_do_not_race(db_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def opener() -> None:
        barrier.wait()
        try:
            open_store(db_url).close()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    engine = make_engine(db_url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_models_match_migrations(db_url: str) -> None:
    """The ORM models and the migration scripts describe the same schema."""
    store = open_store(db_url)
    try:
        with store.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
    finally:
        store.close()


def test_in_memory_sqlite_is_refused() -> None:
    with pytest.raises(StoreError, match="SQLite file"):
        make_engine("sqlite://")


def test_migrated_checks_accept_exactly_each_enums_values(db_url: str) -> None:
    # The migrations are frozen text and the models build their CHECKs from the enums: a value
    # added to an enum without a migration would be refused by every real database.
    from sqlalchemy.exc import IntegrityError

    from labeling.store.records import Role, Source

    store = open_store(db_url)
    now = datetime(2025, 1, 2, tzinfo=UTC)
    try:
        for i, role in enumerate(Role):
            with store.engine.begin() as conn:
                conn.execute(text("INSERT INTO users (name, role, created_at) "
                                  "VALUES (:n, :r, :t)"), {"n": f"u{i}", "r": role.value, "t": now})
        with pytest.raises(IntegrityError), store.engine.begin() as conn:
            conn.execute(text("INSERT INTO users (name, role, created_at) "
                              "VALUES ('x', 'superuser', :t)"), {"t": now})
        for source in Source:
            with store.engine.begin() as conn:
                conn.execute(text(
                    "INSERT INTO labels (trajectory_id, annotator_id, source, category,"
                    " taxonomy_version, created_at) VALUES ('t', 1, :s, 'c', 'v', :t)"),
                    {"s": source.value, "t": now})
        with pytest.raises(IntegrityError), store.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO labels (trajectory_id, annotator_id, source, category,"
                " taxonomy_version, created_at) VALUES ('t', 1, 'robot', 'c', 'v', :t)"),
                {"t": now})
    finally:
        store.close()
