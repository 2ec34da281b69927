"""`store.adjudications`: disagreements, a lead's decisions, and the final labels."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from labeling.store import policy
from labeling.store.base import Part, conflict_message, snapshot
from labeling.store.errors import ConflictError, StoreError
from labeling.store.labels import latest_human_labels
from labeling.store.models import AdjudicationRow, LabelRow, PrelabelRow
from labeling.store.opinions import LlmOpinion, latest_opinions
from labeling.store.policy import Viewer
from labeling.store.records import Adjudication, Disagreement, Provenance

if TYPE_CHECKING:
    import pandas as pd

FINAL_COLUMNS = [
    "trajectory_id",
    "category",
    "secondary_category",
    "first_error_step",
    "provenance",
]


def _consensus(values: list[Any]) -> Any:
    """Most common non-null value; ties go to the smallest (for steps: the earliest error)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    counts = Counter(present)
    top = max(counts.values())
    return min(v for v, n in counts.items() if n == top)


class Adjudications(Part):
    """`store.adjudications`."""

    def disagreements(
        self,
        *,
        prelabel_threshold: float = 0.8,
        taxonomy_version: str | None = None,
        include_adjudicated: bool = False,
        viewer: Viewer = policy.OPERATOR,
    ) -> list[Disagreement]:
        """Items a lead should look at.

        `humans_disagree`: annotators' latest primary categories differ.
        `llm_overridden`: humans agree (or only one labelled) but a human's category differs
        from an LLM label whose confidence is at or above the threshold.
        """
        with self._read() as s:
            humans, opinions, _ = self._visible_inputs(s, viewer, taxonomy_version)
            adjudicated = set(s.scalars(select(AdjudicationRow.trajectory_id)))
            scope = self._gate.scope(s, viewer)
        # A lead assigned to an item they have not labelled yet does not see it here either.
        humans = {t: h for t, h in humans.items() if scope.may_see_adjudication(t)}
        out: list[Disagreement] = []
        for tid in sorted(humans):
            categories = {name: row.category for name, row in sorted(humans[tid].items())}
            opinion = opinions.get(tid)
            if len(set(categories.values())) > 1:
                kind = "humans_disagree"
            elif (
                opinion is not None
                and opinion.confidence is not None
                and opinion.confidence >= prelabel_threshold
                and opinion.category not in categories.values()
            ):
                kind = "llm_overridden"
            else:
                continue
            if tid in adjudicated and not include_adjudicated:
                continue
            out.append(
                Disagreement(
                    trajectory_id=tid,
                    kind=kind,  # type: ignore[arg-type]
                    human_categories=categories,
                    llm_category=opinion.category if opinion else None,
                    llm_confidence=opinion.confidence if opinion else None,
                    adjudicated=tid in adjudicated,
                )
            )
        return out

    def decide(
        self,
        trajectory_id: str,
        category: str,
        reason: str,
        lead: str,
        *,
        expected_version: int | None,
        secondary_category: str | None = None,
        first_error_step: int | None = None,
        taxonomy_version: str | None = None,
    ) -> Adjudication:
        """Set the final label of an item.

        Categories must be keys of `taxonomy_version`; when it is not given, the version of
        the item's latest label (human or LLM) is used, and an item with no label needs one.

        `expected_version` is the version the lead was shown: None when there was no
        adjudication yet. If someone else saved in between, nothing is written and
        ConflictError says who and when, so the lead can reload and decide again.
        """
        if not reason or not reason.strip():
            raise StoreError("an adjudication needs a reason")
        if not category:
            raise StoreError("an adjudication needs a category")
        with self._read() as s:
            self._gate.lead(s, lead, "adjudicate")  # permission before validation
        version = taxonomy_version or self._item_taxonomy_version(trajectory_id)
        category, secondary_category = self._gate.categories(
            version, category, secondary_category
        )
        try:
            with self._write() as s:
                lead_row = self._gate.lead(s, lead, "adjudicate")
                before, row = self._locked_upsert_in(
                    s,
                    AdjudicationRow,
                    AdjudicationRow.trajectory_id == trajectory_id,
                    expected_version,
                    {
                        "trajectory_id": trajectory_id,
                        "category": category,
                        "secondary_category": secondary_category,
                        "first_error_step": first_error_step,
                        "reason": reason.strip(),
                        "decided_by": lead_row.id,
                    },
                )
                after = snapshot(row)
                self._log(
                    s,
                    entity="adjudication",
                    entity_id=trajectory_id,
                    action="create" if before is None else "update",
                    actor=lead,
                    before=before,
                    after=after,
                    reason=reason.strip(),
                )
                return self._adjudication_record(row, lead_row.name)
        except IntegrityError:
            # Two first-time adjudications raced on PostgreSQL; the unique key picked a winner.
            current = self.get(trajectory_id)
            if current is None:
                raise
            raise ConflictError(conflict_message(current.decided_by, current.updated_at)) from None

    def _item_taxonomy_version(self, trajectory_id: str) -> str:
        with self._read() as s:
            version = s.scalars(
                select(LabelRow.taxonomy_version)
                .where(LabelRow.trajectory_id == trajectory_id, LabelRow.retracted_at.is_(None))
                .order_by(LabelRow.created_at.desc(), LabelRow.id.desc())
                .limit(1)
            ).first()
            if version is None:
                version = s.scalars(
                    select(PrelabelRow.taxonomy_version)
                    .where(PrelabelRow.trajectory_id == trajectory_id)
                    .order_by(PrelabelRow.created_at.desc(), PrelabelRow.id.desc())
                    .limit(1)
                ).first()
        if version is None:
            raise StoreError(
                f"{trajectory_id} has no label yet; give the taxonomy version to adjudicate it"
            )
        return version

    @staticmethod
    def _adjudication_record(row: AdjudicationRow, decided_by: str) -> Adjudication:
        return Adjudication(
            trajectory_id=row.trajectory_id,
            category=row.category,
            secondary_category=row.secondary_category,
            first_error_step=row.first_error_step,
            reason=row.reason,
            decided_by=decided_by,
            version=row.version,
            updated_at=row.updated_at,
        )

    def get(self, trajectory_id: str) -> Adjudication | None:
        with self._read() as s:
            row = s.scalars(
                select(AdjudicationRow).where(AdjudicationRow.trajectory_id == trajectory_id)
            ).first()
            if row is None:
                return None
            return self._adjudication_record(row, self._user_names(s)[row.decided_by])

    def all(self) -> list[Adjudication]:
        with self._read() as s:
            names = self._user_names(s)
            rows = s.scalars(select(AdjudicationRow).order_by(AdjudicationRow.trajectory_id))
            return [self._adjudication_record(r, names[r.decided_by]) for r in rows]

    def _visible_inputs(
        self, s: Session, viewer: Viewer, taxonomy_version: str | None, *,
        with_opinions: bool = True,
    ) -> tuple[dict[str, dict[str, LabelRow]], dict[str, LlmOpinion], dict[str, AdjudicationRow]]:
        """Latest human labels, LLM opinions (none unless `with_opinions`) and adjudications,
        cut to what `viewer` may see."""
        scope = self._gate.scope(s, viewer)
        humans = {
            tid: seen
            for tid, by_name in latest_human_labels(s, taxonomy_version).items()
            if (
                seen := {
                    name: row
                    for name, row in by_name.items()
                    if scope.may_see_human(tid, row.annotator_id)
                }
            )
        }
        opinions = {
            tid: o
            for tid, o in latest_opinions(s, taxonomy_version).items()
            if scope.may_see_llm(tid)
        } if with_opinions else {}
        adjudicated = {
            a.trajectory_id: a
            for a in s.scalars(select(AdjudicationRow))
            if scope.may_see_adjudication(a.trajectory_id)
        }
        return humans, opinions, adjudicated

    def final_labels(
        self, taxonomy_version: str | None = None, *, viewer: Viewer = policy.OPERATOR,
        people_only: bool = False,
    ) -> pd.DataFrame:
        """One row per labelled item: the label analysis should use, and where it came from,
        computed only from what `viewer` may see (a blind annotator: their own labels and
        the pre-labels; never a colleague's label or an adjudication).

        Precedence: adjudicated > human_agreed (>= 2 humans, same primary category) >
        human_single > llm_only (only an LLM label; treat as unverified). Items where humans
        disagree and no lead has adjudicated get provenance "disputed" and category NULL:
        picking one human (or the LLM) would silently bias the statistics.
        For agreed items the secondary category and first error step are the most common
        values among the humans (ties: the smallest, i.e. the earliest error step).
        With `people_only` the llm_only rows are left out (the pre-labels are then not read):
        what a person made or confirmed needs no LLM opinion to decide.
        """
        with self._read() as s:
            humans, opinions, adjudicated = self._visible_inputs(
                s, viewer, taxonomy_version, with_opinions=not people_only)
        rows: list[dict[str, Any]] = []
        for tid in sorted(set(humans) | set(opinions) | set(adjudicated)):
            if tid in adjudicated:
                a = adjudicated[tid]
                rows.append(
                    {
                        "trajectory_id": tid,
                        "category": a.category,
                        "secondary_category": a.secondary_category,
                        "first_error_step": a.first_error_step,
                        "provenance": Provenance.ADJUDICATED.value,
                    }
                )
                continue
            labels: list[LabelRow] = list(humans.get(tid, {}).values())
            if labels:
                categories = {label.category for label in labels}
                if len(categories) > 1:
                    rows.append(
                        {
                            "trajectory_id": tid,
                            "category": None,
                            "secondary_category": None,
                            "first_error_step": None,
                            "provenance": Provenance.DISPUTED.value,
                        }
                    )
                    continue
                rows.append(
                    {
                        "trajectory_id": tid,
                        "category": labels[0].category,
                        "secondary_category": _consensus(
                            [label.secondary_category for label in labels]
                        ),
                        "first_error_step": _consensus(
                            [label.first_error_step for label in labels]
                        ),
                        "provenance": (Provenance.HUMAN_AGREED if len(labels) > 1
                                       else Provenance.HUMAN_SINGLE).value,
                    }
                )
                continue
            o = opinions[tid]
            rows.append(
                {
                    "trajectory_id": tid,
                    "category": o.category,
                    "secondary_category": o.secondary_category,
                    "first_error_step": o.first_error_step,
                    "provenance": Provenance.LLM_ONLY.value,
                }
            )
        import pandas as pd  # lazily: worker processes and the CLI rarely need it

        frame = pd.DataFrame.from_records(rows, columns=FINAL_COLUMNS)
        # Nullable integer so a missing step stays missing instead of turning into a float.
        frame["first_error_step"] = frame["first_error_step"].astype("Int64")
        return frame
