"""Labels, work queues and the LLM opinion on each item."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from labeling.store import policy
from labeling.store.base import StoreBase, jsonable, snapshot
from labeling.store.errors import NotFoundError, StoreError
from labeling.store.models import AssignmentRow, LabelRow, PrelabelRow, UserRow, utcnow
from labeling.store.policy import Viewer
from labeling.store.records import SOURCES, Label, QueueProgress

if TYPE_CHECKING:
    import pandas as pd

LABEL_COLUMNS = [
    "id",
    "trajectory_id",
    "annotator",
    "source",
    "category",
    "secondary_category",
    "first_error_step",
    "confidence",
    "note",
    "taxonomy_version",
    "prelabel_shown",
    "step_from_prelabel",
    "seconds_on_item",
    "created_at",
]


@dataclass(frozen=True)
class LlmOpinion:
    """The most recent successful LLM label on an item (pre-label or an llm-source label)."""

    category: str
    confidence: float | None
    secondary_category: str | None
    first_error_step: int | None
    created_at: datetime
    rationale: str | None = None
    labeller: str | None = None


def label_record(row: LabelRow, names: Mapping[int, str]) -> Label:
    return Label(
        id=row.id,
        trajectory_id=row.trajectory_id,
        annotator=names.get(row.annotator_id) if row.annotator_id is not None else None,
        source=row.source,
        category=row.category,
        secondary_category=row.secondary_category,
        first_error_step=row.first_error_step,
        confidence=row.confidence,
        note=row.note,
        taxonomy_version=row.taxonomy_version,
        prelabel_shown=row.prelabel_shown,
        step_from_prelabel=row.step_from_prelabel,
        seconds_on_item=row.seconds_on_item,
        created_at=row.created_at,
    )


def _visible(scope: policy.Scope, row: LabelRow, include_llm: bool = True) -> bool:
    if row.source == "llm":
        return include_llm and scope.may_see_llm(row.trajectory_id)
    return scope.may_see_human(row.trajectory_id, row.annotator_id)


def unit_hash(seed: int | str, key: str) -> float:
    """A stable pseudo-random number in [0, 1) for (seed, key), independent of call order."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()
    return int(digest[:15], 16) / 16**15


class LabelsMixin(StoreBase):
    # -- labels -------------------------------------------------------------------------------

    def add_label(
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
        (both are kept; history records the change).

        Categories must be keys of `taxonomy_version` (see `policy.check_category`).
        `first_error_step` is what the labeller chose; `step_from_prelabel` says the human
        explicitly accepted the pre-label's step rather than choosing one. Callers must not
        prefill a step the human did not choose.
        """
        if source not in SOURCES:
            raise StoreError(f"source must be one of {SOURCES}, not {source!r}")
        if source == "human" and not annotator:
            raise StoreError("a human label needs an annotator")
        category, secondary_category = self._valid_categories(
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
                                & (labels.c.trajectory_id == trajectory_id),
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
                    previous = {k: v for k, v in found.items() if k != "user_id"}
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

    def labels_for(
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
        who = policy.as_viewer(viewer, blind)
        with self._read() as s:
            scope = policy.scope_for(s, who)
            names = self._user_names(s)
            rows = s.scalars(
                select(LabelRow)
                .where(LabelRow.trajectory_id == trajectory_id)
                .order_by(LabelRow.created_at, LabelRow.id)
            ).all()
            return [label_record(r, names) for r in rows if _visible(scope, r, include_llm)]

    def labels_df(
        self, *, taxonomy_version: str | None = None, viewer: Viewer = policy.OPERATOR
    ) -> pd.DataFrame:
        """Every label row `viewer` may see (superseded ones too) for analysis, one per label."""
        with self._read() as s:
            scope = policy.scope_for(s, viewer)
            names = self._user_names(s)
            query = select(LabelRow).order_by(LabelRow.created_at, LabelRow.id)
            if taxonomy_version is not None:
                query = query.where(LabelRow.taxonomy_version == taxonomy_version)
            records = [
                asdict(label_record(r, names)) for r in s.scalars(query) if _visible(scope, r)
            ]
        import pandas as pd  # lazily: worker processes and the CLI rarely need it

        return pd.DataFrame.from_records(records, columns=LABEL_COLUMNS)

    def all_labels(self, viewer: Viewer = policy.OPERATOR) -> list[Label]:
        """Every label `viewer` may see, oldest first (the operator: all of them)."""
        with self._read() as s:
            scope = policy.scope_for(s, viewer)
            names = self._user_names(s)
            rows = s.scalars(select(LabelRow).order_by(LabelRow.created_at, LabelRow.id))
            return [label_record(r, names) for r in rows if _visible(scope, r)]

    def _insert_labels(self, rows: Sequence[Mapping[str, Any]], *, actor: str | None) -> int:
        """Insert validated label rows in one transaction, creating unknown annotators.

        Used by the importer, which has already validated every row, so that a file is
        stored entirely or not at all.
        """
        with self._write() as s:
            ids = self._upsert_users(
                s, (str(v["annotator"]) for v in rows if v.get("annotator")), "annotator"
            )
            for values in rows:
                name = values.get("annotator")
                row = LabelRow(
                    annotator_id=ids[name] if name else None,
                    **{k: v for k, v in values.items() if k != "annotator"},
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

    # -- what humans and the LLM said, latest first -------------------------------------------

    @staticmethod
    def _latest_human_labels(
        s: Session, taxonomy_version: str | None = None
    ) -> dict[str, dict[str, LabelRow]]:
        """trajectory -> annotator name -> that annotator's latest label on it."""
        names = {uid: name for uid, name in s.execute(select(UserRow.id, UserRow.name))}
        query = (
            select(LabelRow)
            .where(LabelRow.source == "human")
            .order_by(LabelRow.created_at, LabelRow.id)
        )
        if taxonomy_version is not None:
            query = query.where(LabelRow.taxonomy_version == taxonomy_version)
        latest: dict[str, dict[str, LabelRow]] = defaultdict(dict)
        for row in s.scalars(query):
            assert row.annotator_id is not None
            latest[row.trajectory_id][names[row.annotator_id]] = row  # later rows win
        return dict(latest)

    @staticmethod
    def _llm_opinions(
        s: Session, taxonomy_version: str | None = None, trajectory_id: str | None = None
    ) -> dict[str, LlmOpinion]:
        """trajectory -> the latest successful pre-label or llm-source label on it."""
        found: dict[str, LlmOpinion] = {}

        def offer(tid: str, opinion: LlmOpinion) -> None:
            if tid not in found or opinion.created_at >= found[tid].created_at:
                found[tid] = opinion

        pre = select(PrelabelRow).where(
            PrelabelRow.category.is_not(None), PrelabelRow.error.is_(None)
        )
        llm = select(LabelRow).where(LabelRow.source == "llm")
        if taxonomy_version is not None:
            pre = pre.where(PrelabelRow.taxonomy_version == taxonomy_version)
            llm = llm.where(LabelRow.taxonomy_version == taxonomy_version)
        if trajectory_id is not None:
            pre = pre.where(PrelabelRow.trajectory_id == trajectory_id)
            llm = llm.where(LabelRow.trajectory_id == trajectory_id)
        for p in s.scalars(pre.order_by(PrelabelRow.created_at, PrelabelRow.id)):
            assert p.category is not None
            offer(
                p.trajectory_id,
                LlmOpinion(
                    p.category, p.confidence, p.secondary_category, p.first_error_step,
                    p.created_at, p.rationale, p.labeller,
                ),
            )
        for r in s.scalars(llm.order_by(LabelRow.created_at, LabelRow.id)):
            offer(
                r.trajectory_id,
                LlmOpinion(
                    r.category, r.confidence, r.secondary_category, r.first_error_step,
                    r.created_at, r.note, "llm",
                ),
            )
        return found

    def llm_opinion(
        self, trajectory_id: str, taxonomy_version: str | None = None
    ) -> LlmOpinion | None:
        with self._read() as s:
            return self._llm_opinions(s, taxonomy_version, trajectory_id).get(trajectory_id)

    def llm_opinions(self, taxonomy_version: str | None = None) -> dict[str, LlmOpinion]:
        """Every item's latest LLM opinion in one read (use this, not ``llm_opinion``, in loops)."""
        with self._read() as s:
            return self._llm_opinions(s, taxonomy_version)

    # -- queues -------------------------------------------------------------------------------

    def assign(
        self,
        trajectory_ids: Iterable[str],
        annotators: Sequence[str],
        *,
        overlap: int = 2,
        double_share: float = 0.0,
        seed: int = 0,
        queue: str = "default",
        strata: Mapping[str, str] | None = None,
        actor: str | None = None,
    ) -> int:
        """Assign items to annotators; returns the number of new assignments.

        `actor` is the signed-in user asking (None: the command line, the operator). Leads and
        admins assign anyone; an annotator may only take items for themselves (self-service).

        A `double_share` of the items (drawn at random with `seed`, within each stratum when
        `strata` maps item -> stratum) gets `overlap` annotators, so agreement can be
        measured; the rest get one. Annotators are picked by least current load with a
        rotating tie-break, which keeps workloads balanced. Re-running is idempotent: pairs
        that already exist are kept and count towards the overlap.
        """
        ids = list(dict.fromkeys(trajectory_ids))
        people = list(dict.fromkeys(annotators))
        if not people:
            raise StoreError("assign needs at least one annotator")
        if overlap < 1:
            raise StoreError("overlap must be at least 1")
        if not 0.0 <= double_share <= 1.0:
            raise StoreError("double_share must be between 0 and 1")
        overlap = min(overlap, len(people))
        rng = random.Random(seed)

        groups: dict[str, list[str]] = defaultdict(list)
        for tid in ids:
            groups[strata.get(tid, "") if strata else ""].append(tid)
        doubled: set[str] = set()
        for key in sorted(groups):
            members = sorted(groups[key])
            rng.shuffle(members)
            doubled.update(members[: round(double_share * len(members))])
        order = sorted(ids)
        rng.shuffle(order)  # so the round-robin is not correlated with input order

        with self._write() as s:
            if actor is not None and people != [actor]:
                self._lead_row(s, actor, "assign work to other people")
            user_ids = [self._user_row(s, name).id for name in people]
            load = dict.fromkeys(user_ids, 0)
            for uid, n in s.execute(
                select(AssignmentRow.user_id, func.count())
                .where(AssignmentRow.user_id.in_(user_ids))
                .group_by(AssignmentRow.user_id)
            ):
                load[uid] = n
            existing: dict[str, set[int]] = defaultdict(set)
            for tid, uid in s.execute(select(AssignmentRow.trajectory_id, AssignmentRow.user_id)):
                existing[tid].add(uid)
            created = 0
            for i, tid in enumerate(order):
                wanted = overlap if tid in doubled else 1
                have = existing[tid] & set(user_ids)
                candidates = [u for u in user_ids if u not in existing[tid]]
                candidates.sort(key=lambda u: (load[u], (user_ids.index(u) - i) % len(user_ids)))
                for uid in candidates[: max(0, wanted - len(have))]:
                    s.add(AssignmentRow(trajectory_id=tid, user_id=uid, queue=queue))
                    load[uid] += 1
                    created += 1
            return created

    def assignments(self, user: str | None = None) -> list[tuple[str, str, str]]:
        """(trajectory_id, annotator, queue) triples, optionally for one annotator."""
        with self._read() as s:
            query = (
                select(AssignmentRow.trajectory_id, UserRow.name, AssignmentRow.queue)
                .join(UserRow, UserRow.id == AssignmentRow.user_id)
                .order_by(AssignmentRow.id)
            )
            if user is not None:
                query = query.where(UserRow.name == user)
            return [(t, n, q) for t, n, q in s.execute(query)]

    def next_items(
        self,
        user: str,
        *,
        prelabel_threshold: float = 0.8,
        spot_check_share: float = 0.1,
        seed: int = 0,
        queue: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """What `user` should label next, in order.

        1. items whose pre-label confidence is below the threshold, least confident first;
        2. items with no (successful) pre-label, in assignment order;
        3. a seeded spot-check sample of the confidently pre-labelled items.
        Confident items outside the sample are left to the LLM. The sample is drawn over all
        the user's confident assignments, labelled or not, so it does not drift as work
        progresses, and it is the same items for everyone with the same seed.
        """
        if not 0.0 <= spot_check_share <= 1.0:
            raise StoreError("spot_check_share must be between 0 and 1")
        with self._read() as s:
            user_row = self._user_row(s, user)
            query = (
                select(AssignmentRow.trajectory_id)
                .where(AssignmentRow.user_id == user_row.id)
                .order_by(AssignmentRow.id)
            )
            if queue is not None:
                query = query.where(AssignmentRow.queue == queue)
            assigned = list(s.scalars(query))
            done = set(
                s.scalars(
                    select(LabelRow.trajectory_id).where(LabelRow.annotator_id == user_row.id)
                )
            )
            opinions = self._llm_opinions(s)

        low: list[tuple[float, str]] = []
        unlabelled: list[str] = []
        confident: list[str] = []
        for tid in assigned:
            opinion = opinions.get(tid)
            if opinion is None or opinion.confidence is None:
                unlabelled.append(tid)
            elif opinion.confidence < prelabel_threshold:
                low.append((opinion.confidence, tid))
            else:
                confident.append(tid)
        confident.sort(key=lambda tid: unit_hash(seed, tid))
        spot = confident[: round(spot_check_share * len(confident))]
        ordered = [tid for _, tid in sorted(low)] + unlabelled + spot
        todo = [tid for tid in ordered if tid not in done]
        return todo[:limit] if limit is not None else todo

    def progress(self, queue: str | None = None) -> list[QueueProgress]:
        """Per annotator: items assigned and how many of those they have labelled."""
        with self._read() as s:
            query = select(AssignmentRow.trajectory_id, AssignmentRow.user_id)
            if queue is not None:
                query = query.where(AssignmentRow.queue == queue)
            assigned: dict[int, set[str]] = defaultdict(set)
            for tid, uid in s.execute(query):
                assigned[uid].add(tid)
            labelled: dict[int, set[str]] = defaultdict(set)
            for tid, annotator_id in s.execute(
                select(LabelRow.trajectory_id, LabelRow.annotator_id).where(
                    LabelRow.annotator_id.is_not(None)
                )
            ):
                if annotator_id is not None:
                    labelled[annotator_id].add(tid)
            names = self._user_names(s)
        return sorted(
            (
                QueueProgress(names[uid], len(items), len(items & labelled[uid]))
                for uid, items in assigned.items()
            ),
            key=lambda p: p.annotator,
        )

    def require_user(self, name: str) -> None:
        """Raise NotFoundError unless `name` is a user."""
        with self._read() as s:
            self._user_row(s, name)
