"""Plumbing shared by the store's parts: sessions, user lookup, history, optimistic locking.

`StoreCore` owns the engine and the transactions; each part of the store (`store.labels`,
`store.queues`, ...) is a `Part` over the one core, so they share one connection pool, one
SQLite write lock and one `policy.Gate`.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    URL,
    ColumnElement,
    Connection,
    Engine,
    RowMapping,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DatabaseError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from labeling.store import policy
from labeling.store.engine import SqliteWriteLock, is_sqlite, read_engine, write_engine
from labeling.store.errors import (
    ConflictError,
    NotFoundError,
    StoreError,
    StoreStorageError,
    StoreUnavailableError,
)
from labeling.store.models import Base, HistoryRow, UserRow, utcnow


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def snapshot(row: Base | RowMapping) -> dict[str, Any]:
    """Column values of an ORM row or a Core result row, JSON-ready, for history."""
    if isinstance(row, Base):
        return {c.key: jsonable(getattr(row, c.key)) for c in row.__table__.columns}
    return {key: jsonable(value) for key, value in row.items()}


def conflict_message(who: str, when: datetime) -> str:
    return f"changed by {who} at {when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC, reload"


def unavailable(engine: Engine) -> StoreUnavailableError:
    """The error for a PostgreSQL server at ``engine``'s address that does not answer."""
    url = engine.url
    where = f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"
    return StoreUnavailableError(f"the annotation database at {where} is not answering")


# What the machine refused, by SQLite's result code (sqlite3's ``sqlite_errorname``, extended
# codes cut to their primary one) and by the OS error number; the words finish "cannot be
# written: ...".
_SQLITE_CAUSES: dict[str, str] = {
    "SQLITE_FULL": "its disk is full",
    "SQLITE_IOERR": "a disk I/O error (is the disk full or failing?)",
    "SQLITE_READONLY": "its file or file system is read-only",
    "SQLITE_CANTOPEN": "its file cannot be opened (a missing folder, no permission, or a "
                       "read-only file system)",
    "SQLITE_PERM": "permission denied",
    "SQLITE_BUSY": "another program keeps the file locked",
    "SQLITE_LOCKED": "another program keeps the file locked",
}
_OS_CAUSES: dict[int, str] = {
    errno.ENOSPC: "its disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "its file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EIO: "a disk I/O error (is the disk full or failing?)",
}
# PostgreSQL's SQLSTATEs for what its machine refused (class 53: insufficient resources).
_PG_CAUSES: dict[str, str] = {
    "53300": "the server has no connection left (max_connections or the role's limit)",
    "53100": "the server's disk is full",
    "53200": "the server is out of memory",
    "25006": "the server is read-only (a standby?)",
}


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite":
        return str(url.database or "")
    return f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def storage_error(url: URL, err: BaseException) -> StoreStorageError | None:
    """The one-line ``StoreStorageError`` for what the machine refused (``err``: a driver
    error wrapped by SQLAlchemy, or an ``OSError`` from the store's own files) in the store at
    ``url``, or None when ``err`` is something else."""
    cause: str | None = None
    if isinstance(err, OSError):
        cause = _OS_CAUSES.get(err.errno or 0)
        if cause is not None:
            cause = f"{cause} ({err.strerror or err})"
    elif isinstance(err, DatabaseError):
        orig = err.orig
        name = str(getattr(orig, "sqlite_errorname", "") or "")
        primary = "_".join(name.split("_")[:2])
        cause = _SQLITE_CAUSES.get(primary)
        sqlstate = str(getattr(orig, "sqlstate", "") or "")
        text = str(orig).lower()
        if sqlstate in _PG_CAUSES:
            cause = _PG_CAUSES[sqlstate]
        elif "too many clients" in text or "too many connections" in text or \
                "remaining connection slots are reserved" in text:
            cause = _PG_CAUSES["53300"]
        if cause is not None:
            detail = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
            cause = f"{cause} ({detail})" if detail and detail not in cause else cause
    if cause is None:
        return None
    what = "annotation store" if url.get_backend_name() == "sqlite" else "annotation database"
    return StoreStorageError(f"the {what} at {_where(url)} cannot be used: {cause}")


class StoreCore:
    """One engine per store, a fresh session per call: safe to share across threads."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._writer = write_engine(engine)
        #: Where reads connect (``read_engine``: no transaction round trips on PostgreSQL).
        self.reader = read_engine(engine)
        self._read_sessions = sessionmaker(self.reader, expire_on_commit=False)
        self._write_sessions = sessionmaker(self._writer, expire_on_commit=False)
        # SQLite has one write lock per file; see SqliteWriteLock for why writers queue on
        # our own lock first. PostgreSQL has row locks and needs none of this.
        self._sqlite_lock: SqliteWriteLock | None = None
        if is_sqlite(engine) and engine.url.database:
            self._sqlite_lock = SqliteWriteLock(engine.url.database)
        self._write_lock: AbstractContextManager[Any] = self._sqlite_lock or nullcontext()
        self.gate = policy.Gate(self._read)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()
        if self._sqlite_lock is not None:
            self._sqlite_lock.close()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._unreachable_said(), self._read_sessions() as session:
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A short write transaction: commits on success, rolls back on any exception."""
        with self._unreachable_said(), self._write_lock, \
                self._write_sessions.begin() as session:
            yield session

    @contextmanager
    def _write_conn(self) -> Iterator[Connection]:
        """Like `_write` without the ORM, for hot paths (a label save is ~3x cheaper)."""
        with self._unreachable_said(), self._write_lock, self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _unreachable_said(self) -> Iterator[None]:
        """What the environment refused becomes one line naming the store (never its
        password), so every page and command can say what is wrong instead of a driver
        traceback: a full disk, a read-only file system, no permission, a locked file or a
        PostgreSQL server out of connections is a ``StoreStorageError``; a PostgreSQL server
        that does not answer a ``StoreUnavailableError``. Either way the transaction was rolled
        back: nothing was half-saved. (Other SQLite errors are bugs and pass through.)"""
        try:
            yield
        except StoreError:
            raise
        except (DatabaseError, InterfaceError, OSError) as err:
            said = storage_error(self.engine.url, err)
            if said is not None:
                raise said from err
            if isinstance(err, OSError | DatabaseError) and not isinstance(
                    err, OperationalError | InterfaceError):
                raise
            if self.dialect != "postgresql" and not err.connection_invalidated:
                raise
            raise unavailable(self.engine) from err

    # -- users ------------------------------------------------------------------------------

    @staticmethod
    def _user_row(session: Session, name: str) -> UserRow:
        row = session.scalars(select(UserRow).where(UserRow.name == name)).first()
        if row is None:
            raise NotFoundError(f"unknown user {name!r}")
        return row

    def _upsert_users(self, session: Session, names: Iterable[str], role: str) -> dict[str, int]:
        """Ids of `names`, creating missing ones with `role`. A user another process created
        a moment ago is simply found: INSERT ... ON CONFLICT DO NOTHING, then SELECT (never an
        IntegrityError, on either backend). An existing user's role is left alone."""
        wanted = sorted(set(names))  # a fixed order, so concurrent inserts cannot deadlock
        if not wanted:
            return {}
        insert_ = pg_insert if self.dialect == "postgresql" else sqlite_insert
        session.execute(
            insert_(UserRow)
            .values([{"name": n, "role": role, "created_at": utcnow()} for n in wanted])
            .on_conflict_do_nothing(index_elements=["name"])
        )
        found = session.execute(select(UserRow.name, UserRow.id).where(UserRow.name.in_(wanted)))
        return {str(name): int(uid) for name, uid in found}

    @staticmethod
    def _user_names(session: Session) -> dict[int, str]:
        return {uid: name for uid, name in session.execute(select(UserRow.id, UserRow.name))}

    # -- history ----------------------------------------------------------------------------

    @staticmethod
    def _log(
        session: Session | Connection,
        *,
        entity: str,
        entity_id: str,
        action: str,
        actor: str | None,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> None:
        values = {
            "entity": entity,
            "entity_id": entity_id,
            "action": action,
            "actor": actor,
            "at": at or utcnow(),
            "before": dict(before) if before is not None else None,
            "after": dict(after) if after is not None else None,
            "reason": reason,
        }
        if isinstance(session, Session):
            session.add(HistoryRow(**values))
        else:
            session.execute(insert(HistoryRow).values(**values))

    # -- optimistic locking -----------------------------------------------------------------

    def _conflict_for(self, session: Session, row: Any) -> ConflictError:
        names = self._user_names(session)
        return ConflictError(conflict_message(names.get(row.decided_by, "?"), row.updated_at))

    def _locked_upsert_in(
        self,
        session: Session,
        model: Any,
        key: ColumnElement[bool],
        expected_version: int | None,
        values: dict[str, Any],
    ) -> tuple[dict[str, Any] | None, Any]:
        """Create (expected_version None) or update (version must match) a versioned row.

        The version is checked inside the UPDATE's WHERE clause, so two reviewers who were
        shown the same version cannot both win even if their requests interleave: the second
        UPDATE matches no row. On PostgreSQL the SELECT ... FOR UPDATE also makes the loser
        wait for the winner's commit, so the conflict message can name the winner.
        Returns (before snapshot or None, the row as now stored).
        """
        values = {**values, "updated_at": utcnow()}
        current = session.scalars(select(model).where(key).with_for_update()).first()
        if expected_version is None:
            if current is not None:
                # Someone created it after this reviewer loaded the page.
                raise self._conflict_for(session, current)
            row = model(**values, version=1)
            session.add(row)
            session.flush()  # a concurrent insert surfaces here as IntegrityError
            return None, row
        if current is None:
            raise ConflictError("no decision exists at that version any more, reload")
        before = snapshot(current)
        result = session.connection().execute(
            update(model.__table__)
            .where(key, model.__table__.c.version == expected_version)
            .values(**values, version=model.__table__.c.version + 1)
        )
        if result.rowcount != 1:
            session.expire(current)
            raise self._conflict_for(session, current)
        session.expire(current)
        return before, current


class Part:
    """One part of the store (labels, queues, audits...): a view over the shared core.

    The forwarding keeps each part's methods short (`self._read()`, `self._log(...)`) while
    the state (engine, locks, the gate) lives once, in the core.
    """

    def __init__(self, core: StoreCore) -> None:
        self._core = core
        self._gate = core.gate
        self._read = core._read
        self._write = core._write
        self._write_conn = core._write_conn
        self._upsert_users = core._upsert_users
        self._locked_upsert_in = core._locked_upsert_in
        self._user_row = core._user_row
        self._user_names = core._user_names
        self._log = core._log

    @property
    def dialect(self) -> str:
        return self._core.dialect
