"""The workspace's column names are written once (``trajectories.columns``): the stored row's
schema is built from them and the views a workspace connection has carry them."""

from __future__ import annotations

from pathlib import Path

from tests.support import make_trajectory
from trajectories import columns as col
from trajectories.rows import INDEX_SCHEMA
from trajectories.workspace import Workspace

COMPUTED = (col.JUDGED_SUCCESS, col.SUCCESS, col.PERSON_DECIDED)


def _named() -> dict[str, str]:
    """Every column constant of the module (view names and groups left out)."""
    views = {col.TRAJECTORIES, col.OUTCOMES, col.PARTS}
    return {name: value for name, value in vars(col).items()
            if name.isupper() and isinstance(value, str) and value not in views}


def test_each_constant_is_its_own_name() -> None:
    assert all(value == name.lower() for name, value in _named().items())


def test_the_stored_row_is_built_from_the_constants() -> None:
    assert set(INDEX_SCHEMA.names) == set(_named().values()) - set(COMPUTED)


def test_the_views_carry_the_constants(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.add([(make_trajectory().with_id(), None)])
    con = ws.connect()

    def columns(view: str) -> list[str]:
        return [str(r[0]) for r in con.execute(f"DESCRIBE {view}").fetchall()]

    trajectories = columns(col.TRAJECTORIES)
    hidden = {col.PAYLOAD, col.PERSON_DECIDED, *col.PROVENANCE_COLUMNS}
    assert set(_named().values()) - hidden <= set(trajectories)
    assert set(col.LIST_ORDER) | set(col.TASK_FIELDS) | set(col.JUDGE_COLUMNS) <= set(trajectories)
    assert {col.ID, col.RUN, col.TASK_ID, col.SUCCESS} - set(columns(col.OUTCOMES)) \
        == {col.SUCCESS}  # the outcomes view leaves ``success`` to the success source
    assert set(INDEX_SCHEMA.names) <= set(columns(col.PARTS))
