"""`store.audits`: benchmark task validity audits: items, blind reviews, and locked final
verdicts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from labeling.store.base import Part, conflict_message, snapshot
from labeling.store.errors import ConflictError, NotFoundError, StoreError
from labeling.store.models import (
    AuditAdjudicationRow,
    AuditAssignmentRow,
    AuditItemRow,
    AuditJudgmentRow,
    AuditRow,
    UserRow,
    utcnow,
)
from labeling.store.records import (
    STAGES,
    AuditAdjudication,
    AuditItem,
    AuditJudgment,
)

if TYPE_CHECKING:
    import pandas as pd

JUDGMENT_COLUMNS = [
    "audit",
    "task_id",
    "annotator",
    "stage",
    "valid",
    "reason",
    "note",
    "created_at",
]


class Audits(Part):
    """`store.audits`."""

    @staticmethod
    def _audit_row(s: Session, name: str) -> AuditRow:
        row = s.scalars(select(AuditRow).where(AuditRow.name == name)).first()
        if row is None:
            raise NotFoundError(f"unknown audit {name!r}")
        return row

    @staticmethod
    def _item_row(s: Session, audit: AuditRow, task_id: str) -> AuditItemRow:
        row = s.scalars(
            select(AuditItemRow).where(
                AuditItemRow.audit_id == audit.id, AuditItemRow.task_id == task_id
            )
        ).first()
        if row is None:
            raise NotFoundError(f"task {task_id!r} is not in audit {audit.name!r}")
        return row

    def create(
        self,
        name: str,
        definition: Mapping[str, Any],
        items: Sequence[Mapping[str, Any]],
        annotators: Sequence[str],
        *,
        per_item: int | None = None,
    ) -> int:
        """Create an audit; returns its id.

        `definition` is stored as given (runs, n, seed, strata counts...) so the sample can be
        reproduced. `items` are mappings with task_id and optionally intent, scope,
        template_id, in review order. Each item goes to every annotator, or to `per_item` of
        them chosen round-robin. Every annotator must be a user; unknown names are refused and
        nothing is created.
        """
        if not name.strip():
            raise StoreError("an audit needs a name")
        task_ids = [str(item["task_id"]) for item in items]
        if len(set(task_ids)) != len(task_ids):
            raise StoreError("an audit lists each task once")
        people = list(dict.fromkeys(annotators))
        k = len(people) if per_item is None else min(per_item, len(people))
        try:
            with self._write() as s:
                known = {
                    row.name: row.id
                    for row in s.scalars(select(UserRow).where(UserRow.name.in_(people)))
                }
                unknown = [person for person in people if person not in known]
                if unknown:
                    raise NotFoundError(
                        f"unknown user{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                        "add them first (faillab users add NAME); no audit was created"
                    )
                user_ids = [known[person] for person in people]
                audit = AuditRow(name=name, definition=dict(definition))
                s.add(audit)
                s.flush()
                for position, item in enumerate(items):
                    item_row = AuditItemRow(
                        audit_id=audit.id,
                        task_id=str(item["task_id"]),
                        intent=item.get("intent"),
                        scope=item.get("scope"),
                        template_id=item.get("template_id"),
                        position=position,
                    )
                    s.add(item_row)
                    s.flush()
                    for j in range(k):
                        uid = user_ids[(position + j) % len(user_ids)]
                        s.add(AuditAssignmentRow(item_id=item_row.id, user_id=uid))
                return audit.id
        except IntegrityError:
            raise ConflictError(f"an audit named {name!r} already exists") from None

    def all(self, *, include_archived: bool = True) -> list[tuple[str, dict[str, Any]]]:
        """(name, definition) of every audit in creation order; archived ones only if asked."""
        with self._read() as s:
            query = select(AuditRow).order_by(AuditRow.id)
            if not include_archived:
                query = query.where(AuditRow.archived_at.is_(None))
            return [(a.name, a.definition) for a in s.scalars(query)]

    def archived(self) -> dict[str, datetime]:
        """Archived audits and when they were archived."""
        with self._read() as s:
            rows = s.execute(
                select(AuditRow.name, AuditRow.archived_at).where(AuditRow.archived_at.is_not(None))
            )
            return {name: when for name, when in rows if when is not None}

    def archive(self, name: str, *, actor: str | None, archived: bool = True) -> None:
        """Archive an audit (or bring it back with `archived=False`). Nothing is deleted: its
        items, judgments and verdicts stay; it only stops being anyone's default. A lead's
        action; `actor` None is the command line."""
        with self._write() as s:
            self._gate.authorise(s, actor, "archive_audit")
            row = self._audit_row(s, name)
            if (row.archived_at is not None) == archived:
                return
            before = {"archived_at": snapshot(row)["archived_at"]}
            row.archived_at = utcnow() if archived else None
            s.flush()
            self._log(
                s,
                entity="audit",
                entity_id=name,
                action="archive" if archived else "unarchive",
                actor=actor,
                before=before,
                after={"archived_at": snapshot(row)["archived_at"]},
            )

    def items(self, name: str) -> list[AuditItem]:
        with self._read() as s:
            audit = self._audit_row(s, name)
            names = self._user_names(s)
            items = s.scalars(
                select(AuditItemRow)
                .where(AuditItemRow.audit_id == audit.id)
                .order_by(AuditItemRow.position, AuditItemRow.id)
            ).all()
            assigned: dict[int, list[str]] = defaultdict(list)
            for item_id, uid in s.execute(
                select(AuditAssignmentRow.item_id, AuditAssignmentRow.user_id)
                .join(AuditItemRow, AuditItemRow.id == AuditAssignmentRow.item_id)
                .where(AuditItemRow.audit_id == audit.id)
                .order_by(AuditAssignmentRow.id)
            ):
                assigned[item_id].append(names[uid])
            return [
                AuditItem(
                    task_id=i.task_id,
                    intent=i.intent,
                    scope=i.scope,
                    template_id=i.template_id,
                    position=i.position,
                    annotators=tuple(assigned[i.id]),
                )
                for i in items
            ]

    def _upsert_judgment(
        self,
        s: Session,
        audit: AuditRow,
        item: AuditItemRow,
        user: UserRow,
        *,
        valid: bool,
        reason: str | None,
        note: str | None,
        stage: str,
        action: str,
    ) -> AuditJudgmentRow:
        """One judgment per (item, annotator, stage): a second one replaces the first."""
        row = s.scalars(
            select(AuditJudgmentRow).where(
                AuditJudgmentRow.item_id == item.id,
                AuditJudgmentRow.user_id == user.id,
                AuditJudgmentRow.stage == stage,
            )
        ).first()
        before = snapshot(row) if row is not None else None
        if row is None:
            row = AuditJudgmentRow(item_id=item.id, user_id=user.id, stage=stage)
            s.add(row)
        row.valid = valid
        row.reason = reason
        row.note = note
        row.created_at = utcnow()
        s.flush()
        self._log(
            s,
            entity="audit_judgment",
            entity_id=f"{audit.name}/{item.task_id}",
            action=action if before is None else "update",
            actor=user.name,
            before=before,
            after=snapshot(row),
        )
        return row

    def record_judgment(
        self,
        audit: str,
        task_id: str,
        annotator: str,
        valid: bool,
        reason: str | None = None,
        note: str | None = None,
        stage: str = "review",
    ) -> AuditJudgment:
        if stage not in STAGES:
            raise StoreError(f"stage must be one of {STAGES}, not {stage!r}")
        with self._write() as s:
            audit_row = self._audit_row(s, audit)
            item = self._item_row(s, audit_row, task_id)
            user = self._user_row(s, annotator)
            row = self._upsert_judgment(
                s,
                audit_row,
                item,
                user,
                valid=valid,
                reason=reason,
                note=note,
                stage=stage,
                action="create",
            )
            return self._judgment_record(row, audit, task_id, annotator)

    @staticmethod
    def _judgment_record(
        row: AuditJudgmentRow, audit: str, task_id: str, annotator: str
    ) -> AuditJudgment:
        return AuditJudgment(
            id=row.id,
            audit=audit,
            task_id=task_id,
            annotator=annotator,
            stage=row.stage,
            valid=row.valid,
            reason=row.reason,
            note=row.note,
            created_at=row.created_at,
        )

    def _judgments(self, audit: str, only_user: str | None) -> list[AuditJudgment]:
        with self._read() as s:
            audit_row = self._audit_row(s, audit)
            names = self._user_names(s)
            query = (
                select(AuditJudgmentRow, AuditItemRow.task_id)
                .join(AuditItemRow, AuditItemRow.id == AuditJudgmentRow.item_id)
                .where(AuditItemRow.audit_id == audit_row.id)
                .order_by(AuditItemRow.position, AuditJudgmentRow.id)
            )
            if only_user is not None:
                query = query.where(AuditJudgmentRow.user_id == self._user_row(s, only_user).id)
            return [
                self._judgment_record(row, audit, task_id, names[row.user_id])
                for row, task_id in s.execute(query).tuples()
            ]

    def judgments(self, name: str) -> list[AuditJudgment]:
        """Every judgment in the audit (for leads and analysis; not for blind review)."""
        return self._judgments(name, None)

    def judgments_frame(self, name: str) -> pd.DataFrame:
        records = [{c: getattr(j, c) for c in JUDGMENT_COLUMNS} for j in self.judgments(name)]
        import pandas as pd  # lazily: worker processes and the CLI rarely need it

        return pd.DataFrame.from_records(records, columns=JUDGMENT_COLUMNS)

    def judgments_visible_to(self, user: str, audit: str) -> list[AuditJudgment]:
        """Blind review: annotators see only their own judgments; leads and admins see all."""
        with self._read() as s:
            sees_all = self._gate.sees_all_judgments(s, user)
        return self._judgments(audit, None if sees_all else user)

    def decide(
        self,
        audit: str,
        task_id: str,
        lead: str,
        *,
        valid: bool,
        reason: str,
        note: str | None = None,
        expected_version: int | None,
    ) -> AuditAdjudication:
        """The lead's final verdict on a task, optimistic-locked like `adjudicate`."""
        if not reason or not reason.strip():
            raise StoreError("an audit verdict needs a reason")
        try:
            with self._write() as s:
                lead_row = self._gate.lead(s, lead, "adjudicate_audit_item")
                audit_row = self._audit_row(s, audit)
                item = self._item_row(s, audit_row, task_id)
                before, row = self._locked_upsert_in(
                    s,
                    AuditAdjudicationRow,
                    AuditAdjudicationRow.item_id == item.id,
                    expected_version,
                    {
                        "item_id": item.id,
                        "valid": valid,
                        "reason": reason.strip(),
                        "note": note,
                        "decided_by": lead_row.id,
                    },
                )
                self._log(
                    s,
                    entity="audit_adjudication",
                    entity_id=f"{audit}/{task_id}",
                    action="create" if before is None else "update",
                    actor=lead,
                    before=before,
                    after=snapshot(row),
                    reason=reason.strip(),
                )
                return self._audit_adjudication_record(row, audit, task_id, lead_row.name)
        except IntegrityError:
            current = {a.task_id: a for a in self.adjudications(audit)}.get(task_id)
            if current is None:
                raise
            raise ConflictError(conflict_message(current.decided_by, current.updated_at)) from None

    @staticmethod
    def _audit_adjudication_record(
        row: AuditAdjudicationRow, audit: str, task_id: str, decided_by: str
    ) -> AuditAdjudication:
        return AuditAdjudication(
            audit=audit,
            task_id=task_id,
            valid=row.valid,
            reason=row.reason,
            note=row.note,
            decided_by=decided_by,
            version=row.version,
            updated_at=row.updated_at,
        )

    def adjudications(self, audit: str) -> list[AuditAdjudication]:
        with self._read() as s:
            audit_row = self._audit_row(s, audit)
            names = self._user_names(s)
            rows = s.execute(
                select(AuditAdjudicationRow, AuditItemRow.task_id)
                .join(AuditItemRow, AuditItemRow.id == AuditAdjudicationRow.item_id)
                .where(AuditItemRow.audit_id == audit_row.id)
                .order_by(AuditItemRow.position)
            ).tuples()
            return [
                self._audit_adjudication_record(row, audit, task_id, names[row.decided_by])
                for row, task_id in rows
            ]

    def import_rows(
        self,
        audit: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        create: Mapping[str, Any] | None = None,
    ) -> int:
        """Store validated judgment rows in one transaction (see `io.import_audit_judgments`).

        Unknown tasks become items without intent/scope; unknown annotators become annotators.
        With `create` (a definition), the audit is created in the same transaction, so a
        failed import leaves no empty audit behind.
        """
        try:
            return self._store_judgments(audit, rows, create)
        except IntegrityError:
            raise ConflictError(f"an audit named {audit!r} already exists") from None

    def _store_judgments(
        self, audit: str, rows: Sequence[Mapping[str, Any]], create: Mapping[str, Any] | None
    ) -> int:
        with self._write() as s:
            if create is not None:
                s.add(AuditRow(name=audit, definition=dict(create)))
                s.flush()
            audit_row = self._audit_row(s, audit)
            items = {
                i.task_id: i
                for i in s.scalars(
                    select(AuditItemRow).where(AuditItemRow.audit_id == audit_row.id)
                )
            }
            users = {u.name: u for u in s.scalars(select(UserRow))}
            position = max((i.position for i in items.values()), default=-1) + 1
            for values in rows:
                task_id, name = values["task_id"], values["annotator"]
                if task_id not in items:
                    items[task_id] = AuditItemRow(
                        audit_id=audit_row.id, task_id=task_id, position=position
                    )
                    position += 1
                    s.add(items[task_id])
                if name not in users:
                    users[name] = UserRow(name=name, role="annotator")
                    s.add(users[name])
                s.flush()
                self._upsert_judgment(
                    s,
                    audit_row,
                    items[task_id],
                    users[name],
                    valid=values["valid"],
                    reason=values.get("reason"),
                    note=values.get("note"),
                    stage=values["stage"],
                    action="import",
                )
            return len(rows)
