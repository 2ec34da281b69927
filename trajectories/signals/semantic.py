"""Semantic misunderstanding: the final query reads other tables than the task needs, and the
fallback step where a misreading would first show."""

from __future__ import annotations

from trajectories.model import Trajectory
from trajectories.signals._common import (
    DICTIONARY_TABLES,
    SEMANTIC,
    ActionView,
    Signal,
    _cite,
    _lookup_dict,
)
from trajectories.signals._reference import base_tables


def detect_semantic(views: list[ActionView], trajectory: Trajectory) -> list[Signal]:
    ref = trajectory.task.reference_sql
    sql_views = [v for v in views if v.sql and not v.error]
    if not isinstance(ref, str) or not sql_views:
        return []
    final = sql_views[-1]
    # CTE names are the agent's own: only base tables tell which clinical entity is read.
    ref_tables = base_tables(ref)
    got_tables = base_tables(final.sql or "") - set(DICTIONARY_TABLES)
    missing, extra = ref_tables - got_tables, got_tables - ref_tables
    if not (missing and extra):
        return []
    first = next((v for v in sql_views if v.tables & extra), final)
    return [
        Signal(
            SEMANTIC,
            0.5,
            first.index,
            _cite(
                first,
                f"queries {', '.join(sorted(extra))} where the task needs "
                f"{', '.join(sorted(missing))}: a different clinical entity.",
            ),
        )
    ]


def fallback_step(views: list[ActionView], trajectory: Trajectory) -> int | None:
    """Where a misreading would first show: the first substantive query, else any step."""
    for v in views:
        if (v.sql or v.python) and not _lookup_dict(v):
            return v.index
    if views:
        return views[0].index
    return 0 if trajectory.steps else None
