"""Plain, immutable records the store hands out.

ORM objects stay inside the store: they are bound to a session that is closed when the call
returns, so handing them out would invite lazy-load errors in the UI. These dataclasses are safe
to cache and to pass between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Role = Literal["annotator", "lead", "admin"]
Source = Literal["human", "llm"]
Stage = Literal["review", "adjudication"]

ROLES: tuple[str, ...] = ("annotator", "lead", "admin")
SOURCES: tuple[str, ...] = ("human", "llm")
STAGES: tuple[str, ...] = ("review", "adjudication")
RUN_STATUSES: tuple[str, ...] = ("running", "done", "failed")
# What readers see: a "running" run whose worker stopped beating is reported "interrupted"
# (it can be resumed: finished items are cached). Never stored, always derived.
REPORTED_RUN_STATUSES: tuple[str, ...] = (*RUN_STATUSES, "interrupted")
HEARTBEAT_STALE_S = 120.0
# Roles allowed to settle disagreements and to see every annotator's work in blind mode.
LEAD_ROLES: frozenset[str] = frozenset({"lead", "admin"})

# Where a final label came from, strongest first. "disputed" extends the documented four:
# humans disagree and nobody has adjudicated yet, so the category is NULL rather than a guess.
PROVENANCES: tuple[str, ...] = (
    "adjudicated", "human_agreed", "human_single", "disputed", "llm_only"
)
# The four the data contract documents (docs/CONTRACTS.md); reports always list them.
CONTRACT_PROVENANCES: tuple[str, ...] = ("adjudicated", "human_agreed", "human_single", "llm_only")
# Provenances a person stands behind (what "human-confirmed only" counts).
HUMAN_PROVENANCES: tuple[str, ...] = ("adjudicated", "human_agreed", "human_single")
# The coarse source of a final label, as reported in the paper (human-derived vs LLM-only).
PROVENANCE_SOURCE: dict[str, str] = {
    "adjudicated": "adjudicated",
    "human_agreed": "human",
    "human_single": "human",
    "disputed": "disputed",  # no category to count; shown so it is seen
    "llm_only": "llm_only",
}


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    created_at: datetime
    has_password: bool


@dataclass(frozen=True)
class Label:
    id: int
    trajectory_id: str
    annotator: str | None  # None for LLM labels
    source: str
    category: str
    secondary_category: str | None
    first_error_step: int | None
    confidence: float | None
    note: str | None
    taxonomy_version: str
    prelabel_shown: bool
    seconds_on_item: float | None
    created_at: datetime
    # The human accepted the pre-label's step instead of choosing one (revision 0004).
    step_from_prelabel: bool = False


@dataclass(frozen=True)
class Adjudication:
    trajectory_id: str
    category: str
    secondary_category: str | None
    first_error_step: int | None
    reason: str
    decided_by: str
    version: int
    updated_at: datetime


@dataclass(frozen=True)
class Disagreement:
    trajectory_id: str
    kind: Literal["humans_disagree", "llm_overridden"]
    human_categories: dict[str, str]  # annotator -> their latest primary category
    llm_category: str | None
    llm_confidence: float | None
    adjudicated: bool


@dataclass(frozen=True)
class QueueProgress:
    annotator: str
    assigned: int
    done: int


@dataclass(frozen=True)
class HistoryEntry:
    id: int
    entity: str
    entity_id: str
    action: str
    actor: str | None
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None

    @property
    def who(self) -> str:
        """Who made the change, for people: never blank, never "None". A change without an
        actor came from an LLM label or from the command line (imports, the operator)."""
        if self.actor:
            return self.actor
        if (self.after or {}).get("source") == "llm":
            return "LLM"
        return "command line"


@dataclass(frozen=True)
class PrelabelRun:
    id: int
    labeller: str
    model: str
    status: str
    total: int
    done: int
    labelled: int
    cached: int
    failed: int
    calls: int
    tokens: int
    estimated_cost: float
    started_at: datetime
    finished_at: datetime | None
    pid: int | None
    heartbeat_at: datetime | None = None


@dataclass(frozen=True)
class AuditItem:
    """One audited task and the cell it was sampled from; `position` and `annotators` are
    known once it is stored (the report needs only the first four)."""

    task_id: str
    intent: str | None = None
    scope: str | None = None
    template_id: str | None = None
    position: int = 0
    annotators: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditJudgment:
    id: int
    audit: str
    task_id: str
    annotator: str
    stage: str
    valid: bool
    reason: str | None
    note: str | None
    created_at: datetime


@dataclass(frozen=True)
class AuditAdjudication:
    audit: str
    task_id: str
    valid: bool
    reason: str
    note: str | None
    decided_by: str
    version: int
    updated_at: datetime
