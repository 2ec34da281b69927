"""`store.history`: the append-only change log every write adds to."""

from __future__ import annotations

from sqlalchemy import select

from labeling.store.base import Part
from labeling.store.models import HistoryRow
from labeling.store.records import HistoryEntry


class History(Part):
    """`store.history`."""

    def entries(
        self, entity: str | None = None, entity_id: str | None = None
    ) -> list[HistoryEntry]:
        """The append-only change log, oldest first."""
        with self._read() as s:
            query = select(HistoryRow).order_by(HistoryRow.id)
            if entity is not None:
                query = query.where(HistoryRow.entity == entity)
            if entity_id is not None:
                query = query.where(HistoryRow.entity_id == entity_id)
            return [
                HistoryEntry(
                    id=h.id,
                    entity=h.entity,
                    entity_id=h.entity_id,
                    action=h.action,
                    actor=h.actor,
                    at=h.at,
                    before=h.before,
                    after=h.after,
                    reason=h.reason,
                )
                for h in s.scalars(query)
            ]
