"""ORM tables of the annotation store.

These classes describe the schema at migration head; the migrations in `labeling/migrations`
are the source of truth for how a database gets there, and a test checks the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from labeling.store.records import (
    ORIGINS,
    PERSON_VERDICTS,
    ROLES,
    RUN_STATUSES,
    SOURCES,
    STAGES,
    check_in,
)

# Explicit constraint names so migrations (and SQLite batch rebuilds) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    SQLite has no timezone-aware type, so values are stored as naive UTC and re-tagged on the
    way out; PostgreSQL uses timestamptz. Either way callers always get aware UTC datetimes,
    which keeps comparisons and the "changed by X at T" messages consistent across backends.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UserRow(Base):
    __tablename__ = "users"
    __table_args__ = (CheckConstraint(check_in("role", ROLES), name="role"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    password_hash: Mapped[str | None] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TaxonomyVersionRow(Base):
    """A frozen copy of each taxonomy version, so old labels keep the rubric they were made with."""

    __tablename__ = "taxonomy_versions"

    version: Mapped[str] = mapped_column(String(100), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LabelRow(Base):
    """One label as given; a re-label is a new row (the latest per annotator and item counts)."""

    __tablename__ = "labels"
    __table_args__ = (
        CheckConstraint(check_in("source", SOURCES), name="source"),
        CheckConstraint("source = 'llm' OR annotator_id IS NOT NULL", name="human_has_annotator"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(200), index=True)
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    source: Mapped[str] = mapped_column(String(10))
    category: Mapped[str] = mapped_column(String(200))
    secondary_category: Mapped[str | None] = mapped_column(String(200))
    first_error_step: Mapped[int | None] = mapped_column(Integer)
    confidence: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(Text)
    taxonomy_version: Mapped[str] = mapped_column(String(100))
    # Added in revision 0002: was the LLM pre-label visible before the annotator committed?
    # Needed to measure anchoring bias; rows from before the column existed read as False.
    prelabel_shown: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Added in revision 0004: the step was the pre-label's, explicitly accepted by the human
    # (False: the human chose the step, or gave none). Step agreement uses only human-chosen.
    step_from_prelabel: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false()
    )
    seconds_on_item: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Added in revision 0007: a retracted label (undone by its annotator) stays as history but
    # no longer counts anywhere; who retracted it and when. NULL: the label counts.
    retracted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    retracted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)


class AssignmentRow(Base):
    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("trajectory_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(200), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    queue: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PrelabelRow(Base):
    __tablename__ = "prelabels"
    __table_args__ = (
        # Explicit name: the generated one would exceed PostgreSQL's 63-character limit.
        UniqueConstraint(
            "trajectory_id", "taxonomy_version", "prompt_version", "model", name="uq_prelabels_key"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(200), index=True)
    taxonomy_version: Mapped[str] = mapped_column(String(100))
    prompt_version: Mapped[str] = mapped_column(String(100))
    model: Mapped[str] = mapped_column(String(200))
    category: Mapped[str | None] = mapped_column(String(200))
    confidence: Mapped[float | None] = mapped_column(Float)
    first_error_step: Mapped[int | None] = mapped_column(Integer)
    rationale: Mapped[str | None] = mapped_column(Text)
    # Added in revision 0006: the first-divergence evidence as JSON text
    # (see trajectories.evidence).
    evidence: Mapped[str | None] = mapped_column(Text)
    secondary_category: Mapped[str | None] = mapped_column(String(200))
    labeller: Mapped[str | None] = mapped_column(String(100))
    labeller_version: Mapped[str | None] = mapped_column(String(100))
    error: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class PrelabelRunRow(Base):
    """Progress of an out-of-process pre-labelling run, polled by the UI."""

    __tablename__ = "prelabel_runs"
    __table_args__ = (CheckConstraint(check_in("status", RUN_STATUSES), name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    labeller: Mapped[str] = mapped_column(String(100))
    model: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="running")
    total: Mapped[int] = mapped_column(Integer, default=0)
    done: Mapped[int] = mapped_column(Integer, default=0)
    labelled: Mapped[int] = mapped_column(Integer, default=0)
    cached: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    estimated_cost: Mapped[float] = mapped_column(Float, default=0.0)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    pid: Mapped[int | None] = mapped_column(Integer)
    # Added in revision 0004: the worker's last sign of life; a running run whose heartbeat
    # is older than `HEARTBEAT_STALE_S` is reported as interrupted (and can be resumed).
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class AdjudicationRow(Base):
    __tablename__ = "adjudications"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(200), unique=True)
    category: Mapped[str] = mapped_column(String(200))
    secondary_category: Mapped[str | None] = mapped_column(String(200))
    first_error_step: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    decided_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    # Optimistic lock: every UPDATE says `WHERE version = <the version the lead was shown>`.
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class HistoryRow(Base):
    """Append-only change log; database triggers reject UPDATE and DELETE on it."""

    __tablename__ = "history"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    entity: Mapped[str] = mapped_column(String(50))
    entity_id: Mapped[str] = mapped_column(String(300))
    action: Mapped[str] = mapped_column(String(50))
    actor: Mapped[str | None] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)


class AuditRow(Base):
    __tablename__ = "audits"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Set when a lead archives the audit (revision 0005); NULL while it is in use.
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class AuditItemRow(Base):
    __tablename__ = "audit_items"
    __table_args__ = (UniqueConstraint("audit_id", "task_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_id: Mapped[int] = mapped_column(ForeignKey("audits.id"), index=True)
    task_id: Mapped[str] = mapped_column(String(200))
    intent: Mapped[str | None] = mapped_column(String(100))
    scope: Mapped[str | None] = mapped_column(String(100))
    template_id: Mapped[str | None] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)


class AuditAssignmentRow(Base):
    __tablename__ = "audit_assignments"
    __table_args__ = (UniqueConstraint("item_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("audit_items.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))


class AuditJudgmentRow(Base):
    __tablename__ = "audit_judgments"
    __table_args__ = (
        UniqueConstraint("item_id", "user_id", "stage"),
        CheckConstraint(check_in("stage", STAGES), name="stage"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("audit_items.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    stage: Mapped[str] = mapped_column(String(20))
    valid: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(String(100))  # a reason code
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class AuditAdjudicationRow(Base):
    """The lead's final validity verdict on an audit item, optimistic-locked like adjudications."""

    __tablename__ = "audit_adjudications"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("audit_items.id"), unique=True)
    valid: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(String(100))
    note: Mapped[str | None] = mapped_column(Text)
    decided_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class AuthSessionRow(Base):
    """A signed-in browser session (revision 0003). Only a SHA-256 of the random token is kept,
    so a copy of the database does not let anyone take over a session."""

    __tablename__ = "auth_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class InvitationRow(Base):
    """A one-time invitation to set a password (revision 0009): a SHA-256 of the random token
    sent as a link, its expiry, and when it was used (a used or expired one signs nobody in)."""

    __tablename__ = "invitations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SignInThrottleRow(Base):
    """Failed sign-ins counted per key ("user:NAME" or "client:ADDRESS"), shared by replicas."""

    __tablename__ = "signin_throttle"

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class VerdictRow(Base):
    """A person's verdict on a trajectory's outcome (revision 0008): the agent was right, or
    it failed. People's verdicts win over the recorded and the judged ones; a changed mind is
    a new row, an undone one is retracted (kept as history, counted nowhere)."""

    __tablename__ = "verdicts"
    __table_args__ = (
        CheckConstraint(check_in("verdict", PERSON_VERDICTS), name="verdict"),
        CheckConstraint(check_in("origin", ORIGINS), name="origin"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(200), index=True)
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    verdict: Mapped[str] = mapped_column(String(10))
    note: Mapped[str | None] = mapped_column(Text)
    #: ``person``: given in the app or the CLI; ``import``: read from a verdicts file.
    origin: Mapped[str] = mapped_column(String(10), default="person")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    retracted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
