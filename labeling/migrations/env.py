"""Alembic environment for the annotation store.

Normally run from `labeling.store.engine.upgrade`, which passes an open connection (already
holding the migration lock) in `config.attributes["connection"]`. Running the `alembic` CLI
with `-x`-less config works too if `sqlalchemy.url` is set.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from labeling.store.engine import make_engine
from labeling.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        # SQLite DDL is transactional even though Alembic's SQLite default says otherwise;
        # one transaction per upgrade keeps a failed migration from half-applying.
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url or pass a connection in config.attributes")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
