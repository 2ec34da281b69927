"""Engines, sessions and schema migrations.

SQLite is used the way it tolerates concurrency: WAL (readers never block the writer), a busy
timeout (writers queue instead of failing at once), and `BEGIN IMMEDIATE` for write
transactions. The last matters most: with a plain deferred BEGIN, two transactions that both
read and then write each hold a read lock and both try to upgrade it, and one of them fails with
"database is locked" no matter how long the timeout. Taking the write lock up front makes
writers queue on the busy timeout instead; `SqliteWriteLock` makes that queue fair.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.pool import ConnectionPoolEntry

from faillab_core.locks import LockBusyError, MachineLock
from labeling.store.errors import StoreError

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
SQLITE_BUSY_TIMEOUT_S = 10.0
_BUSY = "the annotation database is busy; try again"
# Execution option marking a connection that will write; see `write_engine`.
WRITE_OPTION = "faillab_write"
# Arbitrary constant identifying "the faillab migration lock" among PostgreSQL advisory locks.
_PG_MIGRATION_LOCK_KEY = 0x6661_696C_6C61_62


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str) -> Engine:
    """An engine for a SQLite file or a PostgreSQL server, tuned for many short transactions.

    The application's default is `sqlite:///<workspace>/annotations.sqlite` (built by the
    caller) or `FAILLAB_DATABASE_URL` for PostgreSQL.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # No pool_pre_ping: it costs a round trip per transaction. After a server restart the
        # first call fails once, SQLAlchemy invalidates the pool, and the next call reconnects;
        # pool_recycle keeps idle connections from outliving server-side timeouts.
        return create_engine(parsed, pool_recycle=1800, pool_size=10, max_overflow=20)

    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        # Every pooled connection would see its own empty in-memory database.
        raise StoreError("the annotation store needs a SQLite file, not an in-memory database")
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        parsed,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
        pool_size=10,
        max_overflow=20,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Take BEGIN away from the sqlite3 module (it would emit a deferred BEGIN only before
        # DML); the "begin" listener below emits the right kind of BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            # Off by default in SQLite, per connection; without it FKs are decoration.
            cursor.execute("PRAGMA foreign_keys = ON")
            # In WAL mode NORMAL is still durable against application crashes, and much faster.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


class SqliteWriteLock:
    """Queues this store's SQLite writers: threads on a mutex, processes on a lock file.

    SQLite's busy handler polls with sleeps of up to 100 ms and is unfair: under steady
    contention (20 threads, or the UI next to a pre-labelling worker) a writer can keep losing
    until its busy timeout expires and it fails with "database is locked". Waiting on the
    machine's write lock for this database (``faillab_core.locks``: a mutex, then an OS file
    lock) hands the lock over as soon as it is free, so SQLite's own lock is almost never
    contended.
    """

    def __init__(self, database: str, timeout_s: float = SQLITE_BUSY_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._lock = MachineLock(f"{database}-writelock", busy_message=_BUSY)

    def __enter__(self) -> None:
        try:
            self._lock.acquire(self._timeout_s)
        except LockBusyError:
            raise StoreError(_BUSY) from None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def close(self) -> None:
        self._lock.close()


def write_engine(engine: Engine) -> Engine:
    """The same engine (same pool) with connections flagged as writers.

    On SQLite that turns their BEGIN into BEGIN IMMEDIATE; on PostgreSQL the flag is inert.
    """
    return engine.execution_options(**{WRITE_OPTION: True})


def read_engine(engine: Engine) -> Engine:
    """The same engine (same pool) for reads. On PostgreSQL its connections are in autocommit:
    at the default READ COMMITTED every statement takes its own snapshot anyway, so a read
    transaction only added a BEGIN and a ROLLBACK round trip around the statements (psycopg
    sends each on its own), a third or more of a short read's trips. SQLite keeps its BEGIN,
    which pins one snapshot for the read in WAL mode."""
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config built in code: no alembic.ini needs to ship with the package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        # ConfigParser treats % as interpolation; URL-encoded passwords contain it.
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise StoreError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision`, safely when several processes open the store at once.

    The whole upgrade runs in one transaction that first takes a lock: an advisory lock on
    PostgreSQL, the database write lock (BEGIN IMMEDIATE) on SQLite. A second opener waits,
    then finds the schema already current and does nothing. Both backends run DDL
    transactionally, so a failed migration leaves the previous revision intact.
    """
    if revision == "head" and current_revision(engine) == head_revision():
        return  # the common case: no lock, no write transaction
    cfg = alembic_config()
    with write_engine(engine).begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY}
            )
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    log.info("annotation store at revision %s", current_revision(engine))
