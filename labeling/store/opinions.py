"""The LLM's opinion on an item: one read path over the two places it is stored.

A pre-labeller's answer lands in the pre-label cache; an LLM label imported from a file lands
among the labels with source "llm". Readers want one thing, the latest successful opinion per
item, so both tables are read by one UNION query here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, literal, select, union_all
from sqlalchemy.orm import Session

from labeling.store.models import LabelRow, PrelabelRow


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


def latest_opinions(
    s: Session, taxonomy_version: str | None = None, trajectory_id: str | None = None,
    *, among: Select[str] | None = None,
) -> dict[str, LlmOpinion]:
    """trajectory -> the latest successful pre-label or llm-source label on it; only on the
    items `among` selects (a query of trajectory ids) when given, so a page asking about one
    person's queue does not read every pre-label of the store on each key.

    At equal timestamps an llm-source label wins over a pre-label (`kind` orders them), so the
    answer does not depend on which table a backend happens to return first.
    """
    pre = select(
        PrelabelRow.trajectory_id.label("tid"),
        PrelabelRow.category.label("category"),
        PrelabelRow.confidence.label("confidence"),
        PrelabelRow.secondary_category.label("secondary_category"),
        PrelabelRow.first_error_step.label("first_error_step"),
        PrelabelRow.created_at.label("created_at"),
        PrelabelRow.rationale.label("rationale"),
        PrelabelRow.labeller.label("labeller"),
        literal(0).label("kind"),
        PrelabelRow.id.label("row_id"),
    ).where(PrelabelRow.category.is_not(None), PrelabelRow.error.is_(None))
    llm = select(
        LabelRow.trajectory_id,
        LabelRow.category,
        LabelRow.confidence,
        LabelRow.secondary_category,
        LabelRow.first_error_step,
        LabelRow.created_at,
        LabelRow.note,
        literal("llm"),
        literal(1),
        LabelRow.id,
    ).where(LabelRow.source == "llm", LabelRow.retracted_at.is_(None))
    if taxonomy_version is not None:
        pre = pre.where(PrelabelRow.taxonomy_version == taxonomy_version)
        llm = llm.where(LabelRow.taxonomy_version == taxonomy_version)
    if trajectory_id is not None:
        pre = pre.where(PrelabelRow.trajectory_id == trajectory_id)
        llm = llm.where(LabelRow.trajectory_id == trajectory_id)
    if among is not None:
        pre = pre.where(PrelabelRow.trajectory_id.in_(among))
        llm = llm.where(LabelRow.trajectory_id.in_(among))
    both = union_all(pre, llm).subquery()
    rows = s.execute(select(both).order_by(both.c.created_at, both.c.kind, both.c.row_id))
    found: dict[str, LlmOpinion] = {}
    for r in rows:  # oldest first: later rows win
        found[r.tid] = LlmOpinion(
            r.category, r.confidence, r.secondary_category, r.first_error_step,
            r.created_at, r.rationale, r.labeller,
        )
    return found
