"""`store.labels`: the labels people and LLMs gave, as each viewer may see them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, insert, select, update
from sqlalchemy.orm import Session

from labeling.store import policy
from labeling.store.base import Part, jsonable, snapshot
from labeling.store.errors import NotFoundError, StoreError
from labeling.store.models import LabelRow, UserRow, utcnow
from labeling.store.policy import Viewer
from labeling.store.records import LEAD_ROLES, SOURCES, Label

if TYPE_CHECKING:
    import pandas as pd

# The label frame's columns are the record's fields, so the two cannot drift apart.
LABEL_COLUMNS = [f.name for f in fields(Label)]


def label_record(row: LabelRow, names: Mapping[int, str]) -> Label:
    """The record of a stored label: its row's columns under the record's field names, with the
    annotator's name for their id."""
    annotator = names.get(row.annotator_id) if row.annotator_id is not None else None
    return Label(annotator=annotator,
                 **{name: getattr(row, name) for name in _ROW_FIELDS})


# Every field of the record but the annotator is a column of the row under the same name.
_ROW_FIELDS = tuple(name for name in LABEL_COLUMNS if name != "annotator")


#: Only labels that were not retracted count: queues, progress, agreement, statistics and
#: exports all read through this condition (a retracted label stays in the table as history).
LIVE: ColumnElement[bool] = LabelRow.retracted_at.is_(None)
#: What makes two labels by one annotator on one item the same label; how long it took or
#: whether a pre-label was on screen describes the act of saving, not the label.
SAME_LABEL = ("source", "category", "secondary_category", "first_error_step", "note",
              "confidence", "taxonomy_version")


def _visible(scope: policy.Scope, row: LabelRow, include_llm: bool = True) -> bool:
    if row.source == "llm":
        return include_llm and scope.may_see_llm(row.trajectory_id)
    if row.retracted_at is not None:
        return scope.may_see_history(row.trajectory_id, row.annotator_id)
    return scope.may_see_human(row.trajectory_id, row.annotator_id)


@dataclass(frozen=True)
class LabelEntry:
    """One stored label with its place in the history.

    `superseded_by` is the id of the annotator's next counted label on the item (None: no
    counted label came after, so this one is current unless it was retracted); a retracted
    label (Undo) has `retracted_at` and `retracted_by` and counts nowhere.
    """

    label: Label
    superseded_by: int | None = None
    retracted_at: datetime | None = None
    retracted_by: str | None = None

    @property
    def current(self) -> bool:
        """The label counts now: neither retracted nor superseded."""
        return self.retracted_at is None and self.superseded_by is None


def _successors(rows: Sequence[LabelRow]) -> dict[int, int]:
    """label id -> the id of the same annotator's next counted label on the same item.

    `rows` oldest first. A retracted label supersedes nothing: after an Undo the label before
    it counts again, so only counted (live) labels are successors."""
    following: dict[int, int] = {}
    pending: dict[tuple[str, int], list[int]] = defaultdict(list)
    for row in rows:
        if row.source != "human" or row.annotator_id is None:
            continue
        key = (row.trajectory_id, row.annotator_id)
        if row.retracted_at is None:
            for earlier in pending.pop(key, []):
                following[earlier] = row.id
        pending[key].append(row.id)
    return following


class Labels(Part):
    """`store.labels`."""

    def authorise_many(self, annotator: str, trajectory_ids: list[str], what: str) -> None:
        """Whether `annotator` may give one label to all of `trajectory_ids` at once (see
        `policy.Gate.authorise_many_items`); PermissionDeniedError if not."""
        with self._read() as s:
            self._gate.authorise_many_items(s, annotator, trajectory_ids, what)

    def add(
        self,
        trajectory_id: str,
        category: str,
        *,
        annotator: str | None,
        taxonomy_version: str,
        source: str = "human",
        secondary_category: str | None = None,
        first_error_step: int | None = None,
        confidence: float | None = None,
        note: str | None = None,
        prelabel_shown: bool = False,
        step_from_prelabel: bool = False,
        seconds_on_item: float | None = None,
        created_at: datetime | None = None,
    ) -> Label:
        """Record a label. A second label by the same annotator on an item supersedes the first
        (both are kept; history records the change). The same label again (every field of
        `SAME_LABEL` equal to the annotator's label that counts on the item) records nothing
        and returns the stored one, so a retried save never stores a label twice.

        Categories must be keys of `taxonomy_version` (see `policy.check_category`).
        `first_error_step` is what the labeller chose; `step_from_prelabel` says the human
        explicitly accepted the pre-label's step rather than choosing one. Callers must not
        prefill a step the human did not choose.
        """
        if source not in SOURCES:
            raise StoreError(f"source must be one of {SOURCES}, not {source!r}")
        if source == "human" and not annotator:
            raise StoreError("a human label needs an annotator")
        category, secondary_category = self._gate.categories(
            taxonomy_version, category, secondary_category
        )
        if step_from_prelabel and first_error_step is None:
            raise StoreError("step_from_prelabel needs the accepted first_error_step")
        labels = LabelRow.__table__
        with self._write_conn() as conn:
            annotator_id: int | None = None
            previous: dict[str, Any] | None = None
            if annotator:
                # One round trip for both the annotator's id and their previous label on the
                # item (the "before" of a re-label): round trips dominate under load.
                found = (
                    conn.execute(
                        select(UserRow.__table__.c.id.label("user_id"), labels)
                        .select_from(
                            UserRow.__table__.outerjoin(
                                labels,
                                (labels.c.annotator_id == UserRow.__table__.c.id)
                                & (labels.c.trajectory_id == trajectory_id)
                                & labels.c.retracted_at.is_(None),
                            )
                        )
                        .where(UserRow.__table__.c.name == annotator)
                        .order_by(labels.c.created_at.desc(), labels.c.id.desc())
                        .limit(1)
                    )
                    .mappings()
                    .first()
                )
                if found is None:
                    raise NotFoundError(f"unknown user {annotator!r}")
                annotator_id = found["user_id"]
                if found["id"] is not None:
                    previous = {k: v for k, v in found.items()
                                if k not in ("user_id", "retracted_at", "retracted_by_id")}
            values: dict[str, Any] = {
                "trajectory_id": trajectory_id,
                "annotator_id": annotator_id,
                "source": source,
                "category": category,
                "secondary_category": secondary_category,
                "first_error_step": first_error_step,
                "confidence": confidence,
                "note": note,
                "taxonomy_version": taxonomy_version,
                "prelabel_shown": prelabel_shown,
                "step_from_prelabel": step_from_prelabel,
                "seconds_on_item": seconds_on_item,
                "created_at": created_at or utcnow(),
            }
            if previous is not None and all(previous[k] == values[k] for k in SAME_LABEL):
                # The same label again (a key retried after an outage, pressed twice, or whose
                # commit went through although its answer was lost): nothing new to record.
                return Label(annotator=annotator, **{k: previous[k] for k in (*values, "id")
                                                     if k != "annotator_id"})
            values["id"] = conn.execute(
                insert(LabelRow).values(**values).returning(LabelRow.id)
            ).scalar_one()
            self._log(
                conn,
                entity="label",
                entity_id=trajectory_id,
                action="relabel" if previous is not None else "create",
                actor=annotator,
                before={k: jsonable(v) for k, v in previous.items()} if previous else None,
                after={k: jsonable(v) for k, v in values.items()},
            )
        return Label(
            annotator=annotator, **{k: v for k, v in values.items() if k != "annotator_id"}
        )

    def for_item(
        self,
        trajectory_id: str,
        *,
        viewer: Viewer | str | None,
        blind: bool | None = None,
        include_llm: bool = True,
    ) -> list[Label]:
        """Labels on one item, oldest first, as `viewer` may see them (see `policy`).

        Blind mode hides other people's labels from annotators, before and after they submit
        their own, so agreement statistics measure independent judgments; leads see
        everything except on items they are assigned to and have not labelled yet. LLM labels
        are not "other annotators" and follow `include_llm` and the viewer's pre-label hiding.
        (`viewer` may still be given as a name with `blind`.)
        """
        with self._read() as s:
            scope = self._gate.scope(s, viewer, blind)
            # The annotators' names in the same statement (a page asks this on every key).
            rows = s.execute(
                select(LabelRow, UserRow.name)
                .outerjoin(UserRow, UserRow.id == LabelRow.annotator_id)
                .where(LabelRow.trajectory_id == trajectory_id, LIVE)
                .order_by(LabelRow.created_at, LabelRow.id)
            ).all()
            names = {row.annotator_id: name for row, name in rows
                     if row.annotator_id is not None and name is not None}
            return [label_record(r, names) for r, _ in rows if _visible(scope, r, include_llm)]

    def retract_latest(self, trajectory_id: str, *, annotator: str) -> Label | None:
        """Undo: retract `annotator`'s latest counted label on the item (None: there was none).

        The row stays (history, with who retracted it and when) but counts nowhere any more:
        the annotator's previous label on the item, if any, counts again; without one the item
        is open in their queue again.
        """
        with self._read() as s:
            user = self._user_row(s, annotator)
            row_id = s.scalars(
                select(LabelRow.id)
                .where(
                    LabelRow.trajectory_id == trajectory_id,
                    LabelRow.annotator_id == user.id,
                    LabelRow.source == "human",
                    LIVE,
                )
                .order_by(LabelRow.created_at.desc(), LabelRow.id.desc())
                .limit(1)
            ).first()
        return None if row_id is None else self.retract(row_id, actor=annotator)

    def retract(self, label_id: int, *, actor: str) -> Label:
        """Retract one human label: its annotator may (Undo), and so may leads and admins.

        Raises NotFoundError for an unknown label or actor, StoreError for an LLM label, a label
        already retracted, or an actor who may not retract it.
        """
        with self._write() as s:
            who = self._user_row(s, actor)
            row = s.get(LabelRow, label_id, with_for_update=True)
            if row is None:
                raise NotFoundError(f"no label {label_id}")
            if row.source != "human":
                raise StoreError("only human labels are retracted (LLM opinions are re-run)")
            if row.retracted_at is not None:
                raise StoreError(f"label {label_id} is already retracted")
            if row.annotator_id != who.id and who.role not in LEAD_ROLES:
                raise StoreError(f"{actor} may not retract another annotator's label")
            before = snapshot(row)
            at = utcnow()
            # A guarded UPDATE, so two racing undos cannot both retract the same row.
            done = s.execute(
                update(LabelRow)
                .where(LabelRow.id == label_id, LIVE)
                .values(retracted_at=at, retracted_by_id=who.id)
            )
            if done.rowcount != 1:  # type: ignore[attr-defined]
                raise StoreError(f"label {label_id} is already retracted")
            s.refresh(row)
            self._log(
                s,
                entity="label",
                entity_id=row.trajectory_id,
                action="retract",
                actor=actor,
                before=before,
                after=snapshot(row),
                at=at,
            )
            return label_record(row, self._user_names(s))

    def retracted(
        self, trajectory_id: str, viewer: Viewer = policy.OPERATOR
    ) -> list[tuple[Label, str | None, datetime]]:
        """The item's retracted labels `viewer` may see (their own; a lead all), oldest first,
        with who retracted each and when."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            names = self._user_names(s)
            rows = s.scalars(
                select(LabelRow)
                .where(LabelRow.trajectory_id == trajectory_id, LabelRow.retracted_at.is_not(None))
                .order_by(LabelRow.created_at, LabelRow.id)
            ).all()
            return [
                (
                    label_record(r, names),
                    names.get(r.retracted_by_id) if r.retracted_by_id is not None else None,
                    r.retracted_at,
                )
                for r in rows
                if r.retracted_at is not None and _visible(scope, r)
            ]

    def entries(
        self,
        viewer: Viewer = policy.OPERATOR,
        *,
        trajectory_id: str | None = None,
        history: bool = True,
    ) -> list[LabelEntry]:
        """Every label `viewer` may see with its place in the history, oldest first.

        With `history` the superseded and retracted labels are included (a retracted one only
        for its author and for leads, see `policy`); without, only the current ones (each
        annotator's counted label per item, and the LLM labels).
        """
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            names = self._user_names(s)
            query = select(LabelRow).order_by(LabelRow.created_at, LabelRow.id)
            if trajectory_id is not None:
                query = query.where(LabelRow.trajectory_id == trajectory_id)
            rows = list(s.scalars(query))
        following = _successors(rows)
        out = []
        for row in rows:
            entry = LabelEntry(
                label=label_record(row, names),
                superseded_by=following.get(row.id),
                retracted_at=row.retracted_at,
                retracted_by=(names.get(row.retracted_by_id)
                              if row.retracted_by_id is not None else None),
            )
            if (history or entry.current) and _visible(scope, row):
                out.append(entry)
        return out

    def frame(
        self, *, taxonomy_version: str | None = None, viewer: Viewer = policy.OPERATOR
    ) -> pd.DataFrame:
        """Every label row `viewer` may see (superseded ones too) for analysis, one per label."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            names = self._user_names(s)
            query = select(LabelRow).where(LIVE).order_by(LabelRow.created_at, LabelRow.id)
            if taxonomy_version is not None:
                query = query.where(LabelRow.taxonomy_version == taxonomy_version)
            records = [
                asdict(label_record(r, names)) for r in s.scalars(query) if _visible(scope, r)
            ]
        import pandas as pd  # lazily: worker processes and the CLI rarely need it

        return pd.DataFrame.from_records(records, columns=LABEL_COLUMNS)

    def all(self, viewer: Viewer = policy.OPERATOR) -> list[Label]:
        """Every label `viewer` may see, oldest first (the operator: all of them)."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            names = self._user_names(s)
            rows = s.scalars(
                select(LabelRow).where(LIVE).order_by(LabelRow.created_at, LabelRow.id)
            )
            return [label_record(r, names) for r in rows if _visible(scope, r)]

    def import_rows(self, rows: Sequence[Mapping[str, Any]], *, actor: str | None) -> int:
        """Insert validated label rows in one transaction, creating unknown annotators (and
        unknown people named in `retracted_by`, for rows carrying `retracted_at`).

        Used by the importer, which has already validated every row, so that a file is
        stored entirely or not at all.
        """
        with self._write() as s:
            people = {str(v[k]) for v in rows for k in ("annotator", "retracted_by") if v.get(k)}
            ids = self._upsert_users(s, people, "annotator")
            for values in rows:
                name = values.get("annotator")
                # A label exported as retracted comes back retracted: kept, counted nowhere.
                retracted_by = values.get("retracted_by")
                row = LabelRow(
                    annotator_id=ids[name] if name else None,
                    retracted_by_id=ids[retracted_by] if retracted_by else None,
                    **{k: v for k, v in values.items() if k not in ("annotator", "retracted_by")},
                )
                s.add(row)
                s.flush()
                self._log(
                    s,
                    entity="label",
                    entity_id=row.trajectory_id,
                    action="import",
                    actor=actor or name,
                    before=None,
                    after=snapshot(row),
                )
            return len(rows)



def latest_human_labels(
    s: Session, taxonomy_version: str | None = None
) -> dict[str, dict[str, LabelRow]]:
    """trajectory -> annotator name -> that annotator's latest label on it."""
    names = {uid: name for uid, name in s.execute(select(UserRow.id, UserRow.name))}
    query = (
        select(LabelRow)
        .where(LabelRow.source == "human", LIVE)
        .order_by(LabelRow.created_at, LabelRow.id)
    )
    if taxonomy_version is not None:
        query = query.where(LabelRow.taxonomy_version == taxonomy_version)
    latest: dict[str, dict[str, LabelRow]] = defaultdict(dict)
    for row in s.scalars(query):
        assert row.annotator_id is not None
        latest[row.trajectory_id][names[row.annotator_id]] = row  # later rows win
    return dict(latest)
