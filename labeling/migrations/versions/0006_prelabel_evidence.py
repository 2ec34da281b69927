"""First-divergence evidence beside each pre-label.

Adds `prelabels.evidence`: the evidence finder's result (first diverging step, part, reason,
evidence rows, suggested category and calibrated confidence) as JSON text. Existing pre-labels
read as NULL (no evidence recorded), which is what they had.

Revision ID: 0006
Revises: 0004
Create Date: 2026-12-01 04:15:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("prelabels") as batch:
        batch.add_column(sa.Column("evidence", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("prelabels") as batch:
        batch.drop_column("evidence")
