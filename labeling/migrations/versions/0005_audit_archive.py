"""Archived audits.

Adds `audits.archived_at`: an audit created by mistake (or finished) can be archived, so pages
and commands default to the newest audit still in use. Archiving keeps every item and
judgment; NULL means in use. Who archived it is in the change history.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 04:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.add_column(sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audits") as batch:
        batch.drop_column("archived_at")
