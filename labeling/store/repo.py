"""The `Store` facade and `open_store`, the one way the rest of the app gets a store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from labeling.store.adjudication import AdjudicationMixin
from labeling.store.audit import AuditMixin
from labeling.store.engine import make_engine, upgrade
from labeling.store.models import TaxonomyVersionRow
from labeling.store.prelabels import PrelabelsMixin
from labeling.store.sessions import SessionsMixin
from labeling.store.users import UsersMixin


class Store(UsersMixin, SessionsMixin, AdjudicationMixin, PrelabelsMixin, AuditMixin):
    """Annotation store over SQLite or PostgreSQL.

    Synchronous and thread-safe: one engine (connection pool) per store, a fresh session and a
    short transaction per method call. Methods return plain frozen dataclasses or DataFrames,
    never ORM objects. Implements `labeling.prelabel.base.PrelabelStore`.
    """

    def save_taxonomy_version(self, version: str, name: str, snapshot: dict[str, Any]) -> None:
        """Keep a copy of a taxonomy version; an existing version is never overwritten, so the
        rubric behind old labels stays what it was."""
        insert_ = pg_insert if self.dialect == "postgresql" else sqlite_insert
        with self._write() as s:  # an upsert: another process saving it too is no error
            s.execute(
                insert_(TaxonomyVersionRow)
                .values(version=version, name=name, snapshot=snapshot)
                .on_conflict_do_nothing(index_elements=["version"])
            )

    def get_taxonomy_version(self, version: str) -> dict[str, Any] | None:
        with self._read() as s:
            row = s.get(TaxonomyVersionRow, version)
            return dict(row.snapshot) if row is not None else None

    def taxonomy_versions(self) -> list[str]:
        with self._read() as s:
            return list(
                s.scalars(select(TaxonomyVersionRow.version).order_by(TaxonomyVersionRow.version))
            )


def open_store(url: str) -> Store:
    """Open (creating or upgrading the schema as needed) the store at a SQLAlchemy URL.

    Safe to call from several processes at once; see `engine.upgrade`.
    """
    engine = make_engine(url)
    try:
        upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine)
