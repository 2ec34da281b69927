"""`store.history`: the append-only change log every write adds to."""

from __future__ import annotations

from collections.abc import Callable, Iterable

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


def history_table(
    entries: Iterable[HistoryEntry], category_name: Callable[[str], str]
) -> list[dict[str, str]]:
    """History rows for people: who by name, categories by their display name, empty text
    (never "None") where a change has no category or note."""
    rows = []
    for h in entries:
        after = h.after or {}
        category = after.get("category")
        rows.append({
            "at": f"{h.at:%Y-%m-%d %H:%M:%S} UTC",
            "what": h.entity.replace("_", " "),
            "action": h.action,
            "by": h.who,
            "category": category_name(str(category)) if category else "",
            "note / reason": h.reason or after.get("note") or "",
        })
    return rows
