"""People's verdicts on outcomes.

Adds the `verdicts` table: a person's "the agent was right" / "the agent failed" on a
trajectory, with its note and who gave it. Existing stores have none.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "verdicts",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trajectory_id", sa.String(200), nullable=False),
        sa.Column("annotator_id", sa.Integer, nullable=True),
        sa.Column("verdict", sa.String(10), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("origin", sa.String(10), nullable=False, server_default="person"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retracted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_verdicts"),
        sa.ForeignKeyConstraint(["annotator_id"], ["users.id"],
                                name="fk_verdicts_annotator_id_users"),
        sa.CheckConstraint("verdict IN ('correct', 'incorrect')", name="ck_verdicts_verdict"),
        sa.CheckConstraint("origin IN ('person', 'import')", name="ck_verdicts_origin"),
    )
    op.create_index("ix_verdicts_trajectory_id", "verdicts", ["trajectory_id"])
    op.create_index("ix_verdicts_annotator_id", "verdicts", ["annotator_id"])


def downgrade() -> None:
    op.drop_index("ix_verdicts_annotator_id", table_name="verdicts")
    op.drop_index("ix_verdicts_trajectory_id", table_name="verdicts")
    op.drop_table("verdicts")
