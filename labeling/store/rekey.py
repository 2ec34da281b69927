"""`store.trajectory_ids`: what the store holds about trajectory ids, and carrying it to a
new id when re-importing a file gives a record another id (see `trajectories.prior_rows`).

A re-key moves labels, pre-labels (with their evidence), assignments and adjudications from
the old id to the new one in one transaction, and records each move in the history (entity
"trajectory", action "rekey", before/after ids and what moved). A row the new id already has
its own of (an adjudication, the same pre-label key, the same person's assignment) is not
moved: it stays on the old id and is reported, never merged or overwritten silently.
Audit items are keyed by task, not trajectory, so a re-key leaves audits alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from labeling.store.base import Part
from labeling.store.models import AdjudicationRow, AssignmentRow, LabelRow, PrelabelRow

#: Tables keyed by trajectory id, by the name reports use.
KEYED_TABLES: dict[str, Any] = {
    "labels": LabelRow,
    "prelabels": PrelabelRow,
    "assignments": AssignmentRow,
    "adjudications": AdjudicationRow,
}


@dataclass
class RekeyReport:
    #: old id -> {table: rows moved} (only ids with something moved).
    carried: dict[str, dict[str, int]] = field(default_factory=dict)
    #: old id -> {table: rows left on the old id because the new id has its own}.
    left: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rows_carried(self) -> int:
        return sum(sum(c.values()) for c in self.carried.values())


class TrajectoryIds(Part):
    """`store.trajectory_ids`."""

    def referencing(self, ids: Iterable[str]) -> dict[str, dict[str, int]]:
        """For each id the store holds anything about: {table: rows} (labels count retracted
        ones too: they are history on that id)."""
        wanted = sorted(set(ids))
        out: dict[str, dict[str, int]] = {}
        with self._read() as s:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                for table, model in KEYED_TABLES.items():
                    query = (select(model.trajectory_id, func.count())
                             .where(model.trajectory_id.in_(chunk))
                             .group_by(model.trajectory_id))
                    for tid, n in s.execute(query):
                        out.setdefault(str(tid), {})[table] = int(n)
        return out

    def known_count(self) -> int:
        """How many distinct trajectory ids the store holds labels or pre-labels on: what a
        workspace that shows none of them is missing (a mistyped bucket prefix)."""
        with self._read() as s:
            ids = select(LabelRow.trajectory_id).union(select(PrelabelRow.trajectory_id))
            return int(s.execute(select(func.count()).select_from(ids.subquery()))
                       .scalar_one())

    def rekey(self, mapping: Mapping[str, str], *, actor: str | None,
              reason: str) -> RekeyReport:
        """Move what is stored under each old id to its new id (one transaction)."""
        report = RekeyReport()
        pairs = sorted((old, new) for old, new in mapping.items() if old != new)
        if not pairs:
            return report
        with self._write() as s:
            for old, new in pairs:
                moved, left = self._move(s, old, new)
                if left:
                    report.left[old] = left
                if moved:
                    report.carried[old] = moved
                    self._log(s, entity="trajectory", entity_id=old, action="rekey",
                              actor=actor, before={"trajectory_id": old},
                              after={"trajectory_id": new, **moved,
                                     **{f"left_{k}": v for k, v in left.items()}},
                              reason=reason)
        return report

    @staticmethod
    def _move(s: Session, old: str, new: str) -> tuple[dict[str, int], dict[str, int]]:
        moved: dict[str, int] = {}
        left: dict[str, int] = {}

        def count(n: int, table: str, into: dict[str, int]) -> None:
            if n:
                into[table] = into.get(table, 0) + n

        def rows_on(model: Any, tid: str) -> int:
            return int(s.scalar(select(func.count()).where(model.trajectory_id == tid)) or 0)

        # Labels: several per id by design (one per annotator and re-label), nothing unique.
        count(rows_on(LabelRow, old), "labels", moved)
        s.execute(update(LabelRow).where(LabelRow.trajectory_id == old)
                  .values(trajectory_id=new))
        # Adjudication: one per id.
        if rows_on(AdjudicationRow, new):
            count(rows_on(AdjudicationRow, old), "adjudications", left)
        else:
            count(rows_on(AdjudicationRow, old), "adjudications", moved)
            s.execute(update(AdjudicationRow).where(AdjudicationRow.trajectory_id == old)
                      .values(trajectory_id=new))
        # Assignments: one per person and id; pre-labels: one per taxonomy, prompt and model.
        taken_users = set(s.scalars(select(AssignmentRow.user_id)
                                    .where(AssignmentRow.trajectory_id == new)))
        for row in s.scalars(select(AssignmentRow).where(AssignmentRow.trajectory_id == old)):
            if row.user_id in taken_users:
                count(1, "assignments", left)
            else:
                row.trajectory_id = new
                count(1, "assignments", moved)
        taken_keys = {
            (r.taxonomy_version, r.prompt_version, r.model)
            for r in s.scalars(select(PrelabelRow).where(PrelabelRow.trajectory_id == new))
        }
        for pre in s.scalars(select(PrelabelRow).where(PrelabelRow.trajectory_id == old)):
            if (pre.taxonomy_version, pre.prompt_version, pre.model) in taken_keys:
                count(1, "prelabels", left)
            else:
                pre.trajectory_id = new
                count(1, "prelabels", moved)
        s.flush()
        return moved, left
