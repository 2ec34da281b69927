"""Step provenance on labels and a heartbeat on pre-label runs.

Adds `labels.step_from_prelabel` (the human accepted the pre-label's first faulty step rather
than choosing one; existing labels read as False, i.e. unknown provenance is not claimed as
accepted) and `prelabel_runs.heartbeat_at` (a running run whose heartbeat is stale is
reported as interrupted).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("labels") as batch:
        batch.add_column(
            sa.Column("step_from_prelabel", sa.Boolean, nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("prelabel_runs") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("prelabel_runs") as batch:
        batch.drop_column("heartbeat_at")
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("step_from_prelabel")
