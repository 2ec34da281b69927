"""Initial schema: users, taxonomy versions, labels, assignments, pre-labels, adjudication, history.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)

# History is evidence of who decided what; the database itself refuses to rewrite it.
_SQLITE_TRIGGERS = [
    """CREATE TRIGGER history_no_update BEFORE UPDATE ON history
       BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
    """CREATE TRIGGER history_no_delete BEFORE DELETE ON history
       BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
]
_PG_TRIGGERS = [
    """CREATE FUNCTION history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'history is append-only'; END $$""",
    """CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE ON history
       FOR EACH ROW EXECUTE FUNCTION history_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("password_hash", sa.String(300), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
        sa.CheckConstraint("role IN ('annotator', 'lead', 'admin')", name="ck_users_role"),
    )
    op.create_table(
        "taxonomy_versions",
        sa.Column("version", sa.String(100), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("snapshot", sa.JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("version", name="pk_taxonomy_versions"),
    )
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trajectory_id", sa.String(200), nullable=False),
        sa.Column("annotator_id", sa.Integer, nullable=True),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("category", sa.String(200), nullable=False),
        sa.Column("secondary_category", sa.String(200), nullable=True),
        sa.Column("first_error_step", sa.Integer, nullable=True),
        sa.Column("confidence", sa.Float, nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("taxonomy_version", sa.String(100), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_labels"),
        sa.ForeignKeyConstraint(
            ["annotator_id"], ["users.id"], name="fk_labels_annotator_id_users"
        ),
        sa.CheckConstraint("source IN ('human', 'llm')", name="ck_labels_source"),
        sa.CheckConstraint(
            "source = 'llm' OR annotator_id IS NOT NULL", name="ck_labels_human_has_annotator"
        ),
    )
    op.create_index("ix_labels_trajectory_id", "labels", ["trajectory_id"])
    op.create_index("ix_labels_annotator_id", "labels", ["annotator_id"])
    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trajectory_id", sa.String(200), nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_assignments"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_assignments_user_id_users"),
        sa.UniqueConstraint(
            "trajectory_id", "user_id", name="uq_assignments_trajectory_id_user_id"
        ),
    )
    op.create_index("ix_assignments_trajectory_id", "assignments", ["trajectory_id"])
    op.create_index("ix_assignments_user_id", "assignments", ["user_id"])
    op.create_table(
        "prelabels",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trajectory_id", sa.String(200), nullable=False),
        sa.Column("taxonomy_version", sa.String(100), nullable=False),
        sa.Column("prompt_version", sa.String(100), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("category", sa.String(200), nullable=True),
        sa.Column("confidence", sa.Float, nullable=True),
        sa.Column("first_error_step", sa.Integer, nullable=True),
        sa.Column("rationale", sa.Text, nullable=True),
        sa.Column("secondary_category", sa.String(200), nullable=True),
        sa.Column("labeller", sa.String(100), nullable=True),
        sa.Column("labeller_version", sa.String(100), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_prelabels"),
        sa.UniqueConstraint(
            "trajectory_id",
            "taxonomy_version",
            "prompt_version",
            "model",
            name="uq_prelabels_key",
        ),
    )
    op.create_index("ix_prelabels_trajectory_id", "prelabels", ["trajectory_id"])
    op.create_table(
        "adjudications",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trajectory_id", sa.String(200), nullable=False),
        sa.Column("category", sa.String(200), nullable=False),
        sa.Column("secondary_category", sa.String(200), nullable=True),
        sa.Column("first_error_step", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("decided_by", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_adjudications"),
        sa.UniqueConstraint("trajectory_id", name="uq_adjudications_trajectory_id"),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["users.id"], name="fk_adjudications_decided_by_users"
        ),
    )
    op.create_table(
        "history",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("entity", sa.String(50), nullable=False),
        sa.Column("entity_id", sa.String(300), nullable=False),
        sa.Column("action", sa.String(50), nullable=False),
        sa.Column("actor", sa.String(200), nullable=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("before", sa.JSON, nullable=True),
        sa.Column("after", sa.JSON, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_history"),
    )
    dialect = op.get_bind().dialect.name
    for statement in _PG_TRIGGERS if dialect == "postgresql" else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER history_append_only ON history")
        op.execute("DROP FUNCTION history_append_only()")
    for table in (
        "history",
        "adjudications",
        "prelabels",
        "assignments",
        "labels",
        "taxonomy_versions",
        "users",
    ):
        op.drop_table(table)
