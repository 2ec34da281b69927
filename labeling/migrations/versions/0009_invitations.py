"""One-time invitations to set a password.

Adds `invitations`: a SHA-256 of each invitation token (the link's secret) with its person,
expiry and the time it was used. Existing stores have none.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 04:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "invitations",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("used_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_invitations"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_invitations_user_id_users"),
        sa.UniqueConstraint("token_hash", name="uq_invitations_token_hash"),
    )
    op.create_index("ix_invitations_user_id", "invitations", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_invitations_user_id", table_name="invitations")
    op.drop_table("invitations")
