"""Label retraction.

Adds `labels.retracted_at` and `labels.retracted_by_id`: an annotator's Undo retracts the label
(kept as history, counted nowhere) instead of deleting it. Existing labels read as NULL, that
is, not retracted, which is what they were.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 06:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("labels") as batch:
        batch.add_column(sa.Column("retracted_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("retracted_by_id", sa.Integer, nullable=True))
        batch.create_foreign_key("fk_labels_retracted_by_id_users", "users",
                                 ["retracted_by_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("labels") as batch:
        batch.drop_constraint("fk_labels_retracted_by_id_users", type_="foreignkey")
        batch.drop_column("retracted_by_id")
        batch.drop_column("retracted_at")
