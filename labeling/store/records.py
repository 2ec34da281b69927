"""Plain, immutable records the store hands out.

ORM objects stay inside the store: they are bound to a session that is closed when the call
returns, so handing them out would invite lazy-load errors in the UI. These dataclasses are safe
to cache and to pass between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from trajectories.judge import Verdict


class Role(StrEnum):
    """What a person may do: label (annotator), settle disagreements and see everyone's work
    in blind mode (lead), and manage users (admin)."""

    ANNOTATOR = "annotator"
    LEAD = "lead"
    ADMIN = "admin"


class Source(StrEnum):
    """Who gave a label: a person, or an LLM (or heuristic) pre-labeller."""

    HUMAN = "human"
    LLM = "llm"


class Stage(StrEnum):
    """The step of a validity audit a judgment belongs to."""

    REVIEW = "review"
    ADJUDICATION = "adjudication"


class RunStatus(StrEnum):
    """A pre-label run's status. INTERRUPTED is never stored: readers report a RUNNING run
    whose worker stopped beating as interrupted (it can be resumed: finished items are cached).
    """

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Provenance(StrEnum):
    """Where a final label came from, strongest first. DISPUTED extends the documented four:
    humans disagree and nobody has adjudicated yet, so the category is NULL rather than a guess.
    """

    ADJUDICATED = "adjudicated"
    HUMAN_AGREED = "human_agreed"
    HUMAN_SINGLE = "human_single"
    DISPUTED = "disputed"
    LLM_ONLY = "llm_only"


class Origin(StrEnum):
    """How a person's verdict reached the store: given in the app or CLI, or imported."""

    PERSON = "person"
    IMPORT = "import"


def values(*members: StrEnum) -> tuple[str, ...]:
    """Plain string values, in order (for click choices, messages and CHECK constraints)."""
    return tuple(m.value for m in members)


def check_in(column: str, allowed: tuple[str, ...]) -> str:
    """The SQL of a CHECK constraint that `column` holds one of `allowed`."""
    return f"{column} IN ({', '.join(repr(v) for v in allowed)})"


ROLES: tuple[str, ...] = values(*Role)
SOURCES: tuple[str, ...] = values(*Source)
STAGES: tuple[str, ...] = values(*Stage)
ORIGINS: tuple[str, ...] = values(*Origin)
#: A person's verdict on a final answer: the judge's values less ``undecided`` (an open
#: disagreement between people is what reads as undecided). Defined once, in
#: ``trajectories.judge.Verdict``.
PERSON_VERDICTS: tuple[str, ...] = values(Verdict.CORRECT, Verdict.INCORRECT)
RUN_STATUSES: tuple[str, ...] = values(RunStatus.RUNNING, RunStatus.DONE, RunStatus.FAILED)
REPORTED_RUN_STATUSES: tuple[str, ...] = values(*RunStatus)
HEARTBEAT_STALE_S = 120.0
# Roles allowed to settle disagreements and to see every annotator's work in blind mode.
LEAD_ROLES: frozenset[str] = frozenset({Role.LEAD.value, Role.ADMIN.value})

PROVENANCES: tuple[str, ...] = values(*Provenance)
# The four the data contract documents (docs/CONTRACTS.md); reports always list them.
CONTRACT_PROVENANCES: tuple[str, ...] = tuple(p for p in PROVENANCES if p != Provenance.DISPUTED)
# Provenances a person stands behind (what "human-confirmed only" counts).
HUMAN_PROVENANCES: tuple[str, ...] = values(
    Provenance.ADJUDICATED, Provenance.HUMAN_AGREED, Provenance.HUMAN_SINGLE
)
# The coarse source of a final label, as reported in the paper (human-derived vs LLM-only).
PROVENANCE_SOURCE: dict[str, str] = {
    Provenance.ADJUDICATED: "adjudicated",
    Provenance.HUMAN_AGREED: "human",
    Provenance.HUMAN_SINGLE: "human",
    Provenance.DISPUTED: "disputed",  # no category to count; shown so it is seen
    Provenance.LLM_ONLY: "llm_only",
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
class ExportedLabel:
    """One row of a label export (`faillab labels export`, CSV or JSONL): the export contract.

    Its fields, in order, are the export's columns (``EXPORT_COLUMNS``), so the header, the
    rows and docs/CONTRACTS.md cannot drift apart. People's labels and LLM pre-labels both
    export as this record; the history columns come last, so readers of the older columns are
    unaffected, and pre-label rows leave them empty. Import ignores the two ids (they are this
    store's) and keeps retractions."""

    trajectory_id: str
    annotator: str | None
    source: str
    category: str
    secondary_category: str | None
    first_error_step: int | None
    confidence: float | None
    note: str | None
    # Pre-labels only: the first-divergence evidence as JSON (revision 0006).
    evidence: dict[str, Any] | None
    taxonomy_version: str
    created_at: str  # ISO 8601
    label_id: int | None = None
    superseded_by: int | None = None
    retracted_at: str | None = None  # ISO 8601
    retracted_by: str | None = None

    @classmethod
    def of_label(cls, label: Label, *, superseded_by: int | None = None,
                 retracted_at: datetime | None = None,
                 retracted_by: str | None = None) -> ExportedLabel:
        """A person's label with its place in the history."""
        shared = {name: getattr(label, name) for name in _LABEL_FIELDS_EXPORTED}
        return cls(**shared, evidence=None, created_at=label.created_at.isoformat(),
                   label_id=label.id, superseded_by=superseded_by,
                   retracted_at=retracted_at.isoformat() if retracted_at else None,
                   retracted_by=retracted_by)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in EXPORT_COLUMNS}


#: The export's columns, in order: the fields of its record.
EXPORT_COLUMNS: list[str] = [f.name for f in fields(ExportedLabel)]
# Fields a person's label carries into its export row under the same name.
_LABEL_FIELDS_EXPORTED = tuple(f.name for f in fields(Label)
                               if f.name in EXPORT_COLUMNS and f.name != "created_at")


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
class PersonQueue:
    """One person's queue as one read gives it (``Queues.queue_of``): what to label next, in
    order (labelled items left out), how many items are assigned and labelled, and the items a
    verdict took out of the failures (a lead's latest verdict, else their own, says right)."""

    todo: list[str]
    assigned: int
    done: int
    judged_right: frozenset[str]
    #: The verdicts that decide this person's items (a lead's latest, else their own): True
    #: right, False failed; what ``trajectories.outcome`` resolves their queue with.
    verdicts: Mapping[str, bool] = field(default_factory=dict)


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


# -- pre-labels as stored (what a cached pre-label depends on, its result or failure) ------


@dataclass(frozen=True)
class PrelabelKey:
    """What a cached pre-label depends on: change any part and the label is recomputed."""

    trajectory_id: str
    taxonomy_version: str
    prompt_version: str
    model: str  # labeller model, e.g. "gemini-2.5-pro" or "heuristic"


@dataclass(frozen=True)
class LabelResult:
    category: str
    confidence: float  # in [0, 1]; honest: low when the labeller is guessing
    first_error_step: int | None  # index into Trajectory.steps
    rationale: str  # short, cites the step ("step 7: ...")
    labeller: str  # "heuristic" | "gemini"
    labeller_version: str
    secondary_category: str | None = None
    # The first-divergence evidence behind the label (trajectories.evidence.Evidence.to_dict()),
    # stored beside the pre-label and exported with it; None when the labeller had none.
    evidence: dict[str, Any] | None = None


@dataclass(frozen=True)
class PrelabelRecord:
    """A pre-label as stored: either a result or a recorded failure (never a crashed run)."""

    key: PrelabelKey
    result: LabelResult | None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.result is not None
