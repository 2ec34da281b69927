"""The `Store` and `open_store`, the one way the rest of the app gets a store."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, make_url, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import InterfaceError, OperationalError

from labeling.store.adjudication import Adjudications
from labeling.store.audit import Audits
from labeling.store.base import Part, StoreCore, storage_error, unavailable
from labeling.store.engine import make_engine, upgrade
from labeling.store.history import History
from labeling.store.invitations import Invitations
from labeling.store.labels import Labels
from labeling.store.models import TaxonomyVersionRow
from labeling.store.policy import Gate
from labeling.store.prelabels import Prelabels
from labeling.store.queues import Queues
from labeling.store.rekey import TrajectoryIds
from labeling.store.sessions import Sessions
from labeling.store.users import Users
from labeling.store.verdicts import Verdicts


class Taxonomies(Part):
    """`store.taxonomies`: copies of the taxonomy versions labels were made under."""

    def save(self, version: str, name: str, snapshot: dict[str, Any]) -> None:
        """Keep a copy of a taxonomy version; an existing version is never overwritten, so the
        rubric behind old labels stays what it was."""
        insert_ = pg_insert if self.dialect == "postgresql" else sqlite_insert
        with self._write() as s:  # an upsert: another process saving it too is no error
            s.execute(
                insert_(TaxonomyVersionRow)
                .values(version=version, name=name, snapshot=snapshot)
                .on_conflict_do_nothing(index_elements=["version"])
            )

    def get(self, version: str) -> dict[str, Any] | None:
        with self._read() as s:
            row = s.get(TaxonomyVersionRow, version)
            return dict(row.snapshot) if row is not None else None

    def versions(self) -> list[str]:
        with self._read() as s:
            return list(
                s.scalars(select(TaxonomyVersionRow.version).order_by(TaxonomyVersionRow.version))
            )


class Store:
    """Annotation store over SQLite or PostgreSQL, made of parts by concern.

    `users`, `sessions`, `invitations`, `labels`, `queues`, `adjudications`, `prelabels`,
    `audits`, `taxonomies`, `history`, `trajectory_ids` and `verdicts` share one engine (connection
    pool) and one `Gate`, the single place that validates and authorises writes and scopes
    reads (see `policy`).

    Synchronous and thread-safe: a fresh session and a short transaction per method call.
    Methods return plain frozen dataclasses or DataFrames, never ORM objects.
    """

    def __init__(self, engine: Engine) -> None:
        self._core = StoreCore(engine)
        self.engine = engine
        self.gate: Gate = self._core.gate
        self.users = Users(self._core)
        self.sessions = Sessions(self._core)
        self.invitations = Invitations(self._core)
        self.labels = Labels(self._core)
        self.queues = Queues(self._core)
        self.adjudications = Adjudications(self._core)
        self.prelabels = Prelabels(self._core)
        self.audits = Audits(self._core)
        self.taxonomies = Taxonomies(self._core)
        self.history = History(self._core)
        self.trajectory_ids = TrajectoryIds(self._core)
        self.verdicts = Verdicts(self._core)

    @property
    def dialect(self) -> str:
        return self._core.dialect

    def close(self) -> None:
        self._core.close()


def open_store(url: str) -> Store:
    """Open (creating or upgrading the schema as needed) the store at a SQLAlchemy URL.

    Safe to call from several processes at once; see `engine.upgrade`.
    """
    try:
        engine = make_engine(url)
    except OSError as err:  # the folder of a SQLite file cannot be created
        said = storage_error(make_url(url), err)
        if said is None:
            raise
        raise said from err
    try:
        _upgrade_when_unlocked(engine)
        store = Store(engine)
    except (OperationalError, InterfaceError, OSError) as err:
        engine.dispose()
        # A full disk, a read-only mount or a locked file while the schema is made or checked,
        # or the lock file that cannot be created: one line, as for every later call.
        said = storage_error(engine.url, err)
        if said is not None:
            raise said from err
        if isinstance(err, OSError) or engine.dialect.name != "postgresql":
            raise
        raise unavailable(engine) from err
    except BaseException:
        engine.dispose()
        raise
    return store


#: Attempts, and the wait before the next, when a new SQLite file is opened by several at once.
_LOCKED_RETRIES = (0.1, 0.3, 0.6, 1.0)


def _upgrade_when_unlocked(engine: Engine) -> None:
    """`upgrade`, tried again when SQLite says "database is locked" at once.

    While a new SQLite file is still in rollback-journal mode (before the first opener has
    switched it to WAL), a connection that reads the revision while another is migrating can
    be refused at once rather than after the busy timeout (SQLite does not wait where waiting
    could deadlock); seen about once in four full test runs with six openers at once. The
    schema is current by the time a retry runs, so a retry costs one read."""
    for wait_s in (*_LOCKED_RETRIES, None):
        try:
            upgrade(engine)
            return
        except OperationalError as err:
            locked = engine.dialect.name == "sqlite" and "database is locked" in str(err)
            if not locked or wait_s is None:
                raise
            time.sleep(wait_s)
