"""Server-side sign-in sessions and sign-in throttling.

`auth_sessions` keeps a SHA-256 of each browser session token with its expiry (sign-out and
`faillab users revoke` delete rows); `signin_throttle` counts failed sign-ins per user and per
client so back-off works across server replicas.

Revision ID: 0003
Revises: 0002_audit_runs_label_context
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002_audit_runs_label_context"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "auth_sessions",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_auth_sessions"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_auth_sessions_user_id_users"),
        sa.UniqueConstraint("token_hash", name="uq_auth_sessions_token_hash"),
    )
    op.create_index("ix_auth_sessions_user_id", "auth_sessions", ["user_id"])
    op.create_table(
        "signin_throttle",
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("locked_until", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_signin_throttle"),
    )


def downgrade() -> None:
    op.drop_table("signin_throttle")
    op.drop_index("ix_auth_sessions_user_id", table_name="auth_sessions")
    op.drop_table("auth_sessions")
