"""Validity audits, pre-labelling run progress, and labelling context on labels.

Adds `labels.prelabel_shown` (was the LLM pre-label visible before committing: needed to
measure anchoring) and `labels.seconds_on_item`; existing labels read as not shown / unknown.

Revision ID: 0002_audit_runs_label_context
Revises: 0001_initial
Create Date: 2025-01-15 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_audit_runs_label_context"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("labels") as batch:
        batch.add_column(
            sa.Column("prelabel_shown", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("seconds_on_item", sa.Float, nullable=True))

    op.create_table(
        "prelabel_runs",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("labeller", sa.String(100), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("labelled", sa.Integer, nullable=False),
        sa.Column("cached", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("estimated_cost", sa.Float, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_prelabel_runs"),
        sa.CheckConstraint(
            "status IN ('running', 'done', 'failed')", name="ck_prelabel_runs_status"
        ),
    )
    op.create_table(
        "audits",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audits"),
        sa.UniqueConstraint("name", name="uq_audits_name"),
    )
    op.create_table(
        "audit_items",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("audit_id", sa.Integer, nullable=False),
        sa.Column("task_id", sa.String(200), nullable=False),
        sa.Column("intent", sa.String(100), nullable=True),
        sa.Column("scope", sa.String(100), nullable=True),
        sa.Column("template_id", sa.String(200), nullable=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_items"),
        sa.ForeignKeyConstraint(["audit_id"], ["audits.id"], name="fk_audit_items_audit_id_audits"),
        sa.UniqueConstraint("audit_id", "task_id", name="uq_audit_items_audit_id_task_id"),
    )
    op.create_index("ix_audit_items_audit_id", "audit_items", ["audit_id"])
    op.create_table(
        "audit_assignments",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("item_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_assignments"),
        sa.ForeignKeyConstraint(
            ["item_id"], ["audit_items.id"], name="fk_audit_assignments_item_id_audit_items"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_audit_assignments_user_id_users"
        ),
        sa.UniqueConstraint("item_id", "user_id", name="uq_audit_assignments_item_id_user_id"),
    )
    op.create_index("ix_audit_assignments_item_id", "audit_assignments", ["item_id"])
    op.create_table(
        "audit_judgments",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("item_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("reason", sa.String(100), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_judgments"),
        sa.ForeignKeyConstraint(
            ["item_id"], ["audit_items.id"], name="fk_audit_judgments_item_id_audit_items"
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_audit_judgments_user_id_users"),
        sa.UniqueConstraint(
            "item_id", "user_id", "stage", name="uq_audit_judgments_item_id_user_id_stage"
        ),
        sa.CheckConstraint("stage IN ('review', 'adjudication')", name="ck_audit_judgments_stage"),
    )
    op.create_index("ix_audit_judgments_item_id", "audit_judgments", ["item_id"])
    op.create_table(
        "audit_adjudications",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("item_id", sa.Integer, nullable=False),
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("reason", sa.String(100), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("decided_by", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_adjudications"),
        sa.ForeignKeyConstraint(
            ["item_id"], ["audit_items.id"], name="fk_audit_adjudications_item_id_audit_items"
        ),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["users.id"], name="fk_audit_adjudications_decided_by_users"
        ),
        sa.UniqueConstraint("item_id", name="uq_audit_adjudications_item_id"),
    )


def downgrade() -> None:
    for table in (
        "audit_adjudications",
        "audit_judgments",
        "audit_assignments",
        "audit_items",
        "audits",
        "prelabel_runs",
    ):
        op.drop_table(table)
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("seconds_on_item")
        batch.drop_column("prelabel_shown")
