"""`store.history`: the append-only change log every write adds to."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import func, select

from labeling.store import policy
from labeling.store.base import Part
from labeling.store.models import HistoryRow, PrelabelRow
from labeling.store.policy import Scope, Viewer
from labeling.store.records import HistoryEntry


def _visible(scope: Scope, h: HistoryRow) -> bool:
    """Whether a change-log entry may be shown (see `policy`): a label's changes to its author
    and to leads, an adjudication's to whoever may see the adjudication, the rest to leads."""
    if h.entity == "label":
        snap = h.after or h.before or {}
        annotator_id = snap.get("annotator_id")
        if snap.get("source") == "llm":
            return scope.may_see_llm(h.entity_id)
        return scope.may_see_history(h.entity_id,
                                     annotator_id if isinstance(annotator_id, int) else None)
    if h.entity == "adjudication":
        return scope.may_see_adjudication(h.entity_id)
    return scope.lead and scope.sees_all


class History(Part):
    """`store.history`."""

    def revision(self) -> tuple[int, int]:
        """A token that changes whenever the store's labels could have: the newest change-log
        row (every label, re-label, retraction, import and adjudication writes one) and the
        number of pre-labels (they are not logged). One statement over two indexed reads,
        cheap enough for every key press."""
        with self._read() as s:
            row = s.execute(select(
                select(func.max(HistoryRow.id)).scalar_subquery(),
                select(func.count()).select_from(PrelabelRow).scalar_subquery())).one()
        return int(row[0] or 0), int(row[1] or 0)

    def entries(
        self,
        entity: str | None = None,
        entity_id: str | None = None,
        viewer: Viewer = policy.OPERATOR,
    ) -> list[HistoryEntry]:
        """The append-only change log as `viewer` may see it, oldest first (the operator:
        all of it)."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
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
                if _visible(scope, h)
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
