"""`store.queues`: who labels what, in which order, and how far they got."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from sqlalchemy import func, select

from labeling.store.base import Part
from labeling.store.errors import StoreError
from labeling.store.models import AssignmentRow, LabelRow, UserRow
from labeling.store.opinions import latest_opinions
from labeling.store.policy import Viewer
from labeling.store.records import PersonQueue, QueueProgress
from labeling.store.verdicts import queue_verdicts


def unit_hash(seed: int | str, key: str) -> float:
    """A stable pseudo-random number in [0, 1) for (seed, key), independent of call order."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()
    return int(digest[:15], 16) / 16**15


class Queues(Part):
    """`store.queues`."""

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
            self._gate.authorise_assignment(s, actor, people)
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
        left_to_machine: Collection[str] | None = None,
    ) -> list[str]:
        """What `user` should label next, in order (``queue_of``'s ``todo``)."""
        todo = self.queue_of(user, prelabel_threshold=prelabel_threshold,
                             spot_check_share=spot_check_share, seed=seed, queue=queue,
                             left_to_machine=left_to_machine).todo
        return todo[:limit] if limit is not None else todo

    def queue_of(
        self,
        user: str,
        *,
        prelabel_threshold: float = 0.8,
        spot_check_share: float = 0.1,
        seed: int = 0,
        queue: str | None = None,
        left_to_machine: Collection[str] | None = None,
    ) -> PersonQueue:
        """`user`'s queue in one read: what to label next, how far they got, and the items a
        verdict says the agent got right (a page asks this on every key; it was three reads
        and a scan of every verdict in the store).

        The order of ``todo``:
        1. items whose pre-label confidence is below the threshold, least confident first;
        2. items with no (successful) pre-label, in assignment order;
        3. a seeded spot-check sample of the confidently pre-labelled items.
        Confident items outside the sample are left to the LLM. The sample is drawn over all
        the user's confident assignments, labelled or not, so it does not drift as work
        progresses, and it is the same items for everyone with the same seed.

        ``left_to_machine``: the items routing by measured trust leaves to their labeller
        (``opinions.learn.trust``, spot checks already drawn); when given it replaces the
        threshold and the spot-check share: every other item goes to the person, least
        confident pre-label first, then the items with none.
        """
        if not 0.0 <= spot_check_share <= 1.0:
            raise StoreError("spot_check_share must be between 0 and 1")
        with self._read() as s:
            user_row = self._user_row(s, user)
            mine = select(AssignmentRow.trajectory_id).where(AssignmentRow.user_id == user_row.id)
            query = mine.order_by(AssignmentRow.id)
            if queue is not None:
                query = query.where(AssignmentRow.queue == queue)
            assigned = list(s.scalars(query))
            done = set(
                s.scalars(
                    select(LabelRow.trajectory_id).where(
                        LabelRow.annotator_id == user_row.id, LabelRow.retracted_at.is_(None)
                    )
                )
            )
            opinions = latest_opinions(s, among=mine)
            right = queue_verdicts(s, user_row.id, mine)

        low: list[tuple[float, str]] = []
        unlabelled: list[str] = []
        confident: list[str] = []
        for tid in assigned:
            opinion = opinions.get(tid)
            if left_to_machine is not None and tid in left_to_machine:
                continue  # trusted to its labeller: not this person's work
            if opinion is None or opinion.confidence is None:
                unlabelled.append(tid)
            elif left_to_machine is not None or opinion.confidence < prelabel_threshold:
                low.append((opinion.confidence, tid))
            else:
                confident.append(tid)
        confident.sort(key=lambda tid: unit_hash(seed, tid))
        spot = confident[: round(spot_check_share * len(confident))]
        ordered = [tid for _, tid in sorted(low)] + unlabelled + spot
        items = set(assigned)
        return PersonQueue(todo=[tid for tid in ordered if tid not in done],
                           assigned=len(items), done=len(items & done),
                           judged_right=frozenset(t for t, ok in right.items() if ok),
                           verdicts=right)

    def progress(self, queue: str | None = None, *,
                 user: str | None = None,
                 viewer: Viewer | None = None) -> list[QueueProgress]:
        """Per annotator: items assigned and how many of those they have labelled; only
        `user`'s (one entry, or none when nothing is assigned to them) when given, which is
        what a page asks on every key and costs a read of their rows, not everyone's.
        `viewer` (a page's reader; None: the operator) who may not see counts over other
        people's work (an annotator in blind mode, see `policy`) gets their own entry only."""
        if viewer is not None:
            with self._read() as s:
                sees_team = self._gate.scope(s, viewer).sees_team_counts
            if not sees_team:
                if viewer.name is None or (user is not None and user != viewer.name):
                    return []
                user = viewer.name
                with self._read() as s:
                    if s.scalar(select(UserRow.id).where(UserRow.name == user)) is None:
                        return []  # a name the store has not recorded: nothing assigned
        with self._read() as s:
            query = select(AssignmentRow.trajectory_id, AssignmentRow.user_id)
            labels = select(LabelRow.trajectory_id, LabelRow.annotator_id).where(
                LabelRow.annotator_id.is_not(None), LabelRow.retracted_at.is_(None))
            if queue is not None:
                query = query.where(AssignmentRow.queue == queue)
            if user is not None:
                user_id = self._user_row(s, user).id
                query = query.where(AssignmentRow.user_id == user_id)
                labels = labels.where(LabelRow.annotator_id == user_id)
            assigned: dict[int, set[str]] = defaultdict(set)
            for tid, uid in s.execute(query):
                assigned[uid].add(tid)
            labelled: dict[int, set[str]] = defaultdict(set)
            for tid, annotator_id in s.execute(labels):
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
