"""`store.verdicts`: people's verdicts on outcomes ("the agent was right" / "the agent
failed"), as each viewer may see them.

A person's verdict wins over the recorded and the judged outcome wherever the statistics, the
failure queue and the audit pool read outcomes. Who may see which verdicts is the labels' rule
(``policy.Scope.may_see_human``): with blind mode on an annotator sees only their own.

What one trajectory's verdict is, from the verdicts a viewer may see (each person's latest,
retracted ones left out): a lead's or admin's (the latest of theirs) wins; else the
annotators' when they all agree; annotators who disagree leave it undecided (None), for a lead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, or_, select, update
from sqlalchemy.orm import Session

from labeling.store.base import Part, snapshot
from labeling.store.errors import StoreError
from labeling.store.models import UserRow, VerdictRow, utcnow
from labeling.store.policy import OPERATOR, Viewer
from labeling.store.records import LEAD_ROLES, PERSON_VERDICTS, Origin
from trajectories.judge import Verdict

if TYPE_CHECKING:
    import pandas as pd

VERDICTS: tuple[str, ...] = PERSON_VERDICTS


@dataclass(frozen=True)
class HumanVerdict:
    id: int
    trajectory_id: str
    verdict: Verdict  # correct or incorrect (PERSON_VERDICTS)
    annotator: str | None
    role: str | None
    note: str | None
    origin: str
    created_at: datetime
    retracted_at: datetime | None = None

    @property
    def success(self) -> bool:
        return self.verdict == Verdict.CORRECT


# The verdict frame's columns are the record's fields, so the two cannot drift apart.
VERDICT_COLUMNS = [f.name for f in fields(HumanVerdict)]


class Verdicts(Part):
    """People's verdicts; every read goes through the gate's scope."""

    def record(self, trajectory_id: str, verdict: str, annotator: str, *,
               note: str | None = None, origin: str = Origin.PERSON.value) -> HumanVerdict:
        """Store ``annotator``'s verdict (a new row; an earlier one of theirs stays as
        history, the latest counts)."""
        if verdict not in VERDICTS:
            raise StoreError(f"a verdict is one of {', '.join(VERDICTS)}, not {verdict!r}")
        if not trajectory_id:
            raise StoreError("a verdict needs a trajectory id")
        with self._write() as s:
            user = self._user_row(s, annotator)
            row = VerdictRow(trajectory_id=trajectory_id, annotator_id=user.id,
                             verdict=verdict, note=(note or "").strip() or None, origin=origin,
                             created_at=utcnow())
            s.add(row)
            s.flush()
            self._log(s, entity="verdict", entity_id=trajectory_id, action="record",
                      actor=annotator, before=None, after=snapshot(row))
            return _record(row, user.name, user.role)

    def retract(self, trajectory_id: str, annotator: str) -> HumanVerdict | None:
        """Undo ``annotator``'s latest verdict on the item (kept, counted nowhere); None when
        they have none."""
        with self._write() as s:
            user = self._user_row(s, annotator)
            row = s.scalars(
                select(VerdictRow).where(VerdictRow.trajectory_id == trajectory_id,
                                         VerdictRow.annotator_id == user.id,
                                         VerdictRow.retracted_at.is_(None))
                .order_by(VerdictRow.id.desc())).first()
            if row is None:
                return None
            before = snapshot(row)
            s.execute(update(VerdictRow).where(VerdictRow.id == row.id)
                      .values(retracted_at=utcnow()))
            s.refresh(row)
            self._log(s, entity="verdict", entity_id=trajectory_id, action="retract",
                      actor=annotator, before=before, after=snapshot(row))
            return _record(row, user.name, user.role)

    def visible(self, viewer: Viewer = OPERATOR, *, ids: Iterable[str] | None = None,
                history: bool = False) -> list[HumanVerdict]:
        """The verdicts ``viewer`` may see (oldest first); retracted ones only with
        ``history`` (their authors and leads see them, as for labels)."""
        wanted = None if ids is None else set(ids)
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            # Who gave each verdict in the same statement (a page asks this on every key).
            query = (select(VerdictRow, UserRow.name, UserRow.role)
                     .outerjoin(UserRow, UserRow.id == VerdictRow.annotator_id)
                     .order_by(VerdictRow.id))
            if wanted is not None and len(wanted) <= 500:
                query = query.where(VerdictRow.trajectory_id.in_(sorted(wanted)))
            out = []
            for row, name, role in s.execute(query):
                if wanted is not None and row.trajectory_id not in wanted:
                    continue
                if row.retracted_at is not None and not history:
                    continue
                if not scope.may_see_human(row.trajectory_id, row.annotator_id):
                    continue
                out.append(_record(row, name, role))
            return out

    def for_item(self, trajectory_id: str, viewer: Viewer = OPERATOR) -> list[HumanVerdict]:
        """The item's verdicts ``viewer`` may see, each person's latest."""
        return _latest(self.visible(viewer, ids=[trajectory_id]))

    def effective(self, viewer: Viewer = OPERATOR,
                  ids: Iterable[str] | None = None) -> dict[str, bool | None]:
        """Per trajectory with a visible verdict: True (right), False (failed) or None (the
        annotators disagree, no lead decided): the module's rule."""
        by_item: dict[str, list[HumanVerdict]] = {}
        for verdict in _latest(self.visible(viewer, ids=ids)):
            by_item.setdefault(verdict.trajectory_id, []).append(verdict)
        return {tid: decide(verdicts) for tid, verdicts in by_item.items()}

    def for_queue(self, user: str) -> dict[str, bool]:
        """What decides ``user``'s queue, over every item (``queue_verdicts``)."""
        with self._read() as s:
            found = s.scalar(select(UserRow.id).where(UserRow.name == user))
            return queue_verdicts(s, -1 if found is None else int(found),
                                  select(VerdictRow.trajectory_id))

    def frame(self, viewer: Viewer = OPERATOR, *, history: bool = False) -> pd.DataFrame:
        """The visible verdicts as a table (``VERDICT_COLUMNS``)."""
        import pandas as pd

        rows = [{"id": v.id, "trajectory_id": v.trajectory_id, "verdict": v.verdict,
                 "annotator": v.annotator, "role": v.role, "note": v.note, "origin": v.origin,
                 "created_at": v.created_at, "retracted_at": v.retracted_at}
                for v in self.visible(viewer, history=history)]
        return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def queue_verdicts(session: Session, user_id: int, among: Select[Any]) -> dict[str, bool]:
    """What decides a person's queue on the items `among` selects (``Verdicts.for_queue``'s
    rule, in the caller's read): a lead's latest verdict on an item, else the person's own
    latest; a colleague's verdict never moves another annotator's item."""
    rows = session.execute(
        select(VerdictRow.trajectory_id, VerdictRow.verdict, VerdictRow.annotator_id)
        .join(UserRow, UserRow.id == VerdictRow.annotator_id)
        .where(VerdictRow.retracted_at.is_(None), VerdictRow.trajectory_id.in_(among),
               or_(VerdictRow.annotator_id == user_id, UserRow.role.in_(LEAD_ROLES)))
        .add_columns(UserRow.role)
        .order_by(VerdictRow.id))
    mine: dict[str, bool] = {}
    leads: dict[str, bool] = {}
    for trajectory_id, verdict, annotator_id, role in rows:
        right = verdict == Verdict.CORRECT
        if role in LEAD_ROLES:
            leads[trajectory_id] = right
        if annotator_id == user_id:
            mine[trajectory_id] = right
    return {**mine, **leads}


def decide(verdicts: list[HumanVerdict]) -> bool | None:
    """One item's verdict from its people's latest ones (the module's rule)."""
    leads = [v for v in verdicts if v.role in LEAD_ROLES]
    if leads:
        return max(leads, key=lambda v: v.id).success
    values = {v.success for v in verdicts}
    return values.pop() if len(values) == 1 else None


def _latest(verdicts: list[HumanVerdict]) -> list[HumanVerdict]:
    """Each person's latest verdict per item."""
    latest: dict[tuple[str, str | None], HumanVerdict] = {}
    for verdict in verdicts:
        latest[(verdict.trajectory_id, verdict.annotator)] = verdict
    return list(latest.values())


def _record(row: VerdictRow, name: str | None, role: str | None) -> HumanVerdict:
    value = Verdict.CORRECT if row.verdict == Verdict.CORRECT else Verdict.INCORRECT
    return HumanVerdict(id=row.id, trajectory_id=row.trajectory_id, verdict=value,
                        annotator=name, role=role, note=row.note, origin=row.origin,
                        created_at=row.created_at, retracted_at=row.retracted_at)
