"""The pool of work: which of a workspace's trajectories need a person.

Queues, clusters, pre-labelling and the classifier all start from the same set, the failures
and what could be decided but was not (``trajectories.outcome.NEEDS_A_PERSON``, the one rule
of "did it fail"), so it is read here, below all of them, and never written twice. People's
verdicts are passed in: which ones count is the caller's viewer's (the store decides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajectories import columns as col
from trajectories.outcome import NEEDS_A_PERSON, NO_PEOPLE, PeopleVerdicts, resolved_relation

if TYPE_CHECKING:
    import pandas as pd

    from trajectories.model import Trajectory
    from trajectories.workspace import Workspace

__all__ = ["failed_frame", "workspace_failures"]


def failed_frame(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE) -> pd.DataFrame:
    """The trajectories that need a person, in browse order, with the columns queues
    stratify on and ``undecided`` (True: nothing decided the outcome yet; a person gives the
    verdict, then the label). ``people``: the verdicts that count (they win)."""
    con = ws.connect()
    rows = resolved_relation(con, col.TRAJECTORIES, people)
    frame: pd.DataFrame = con.execute(
        f"SELECT {col.listed((col.ID, *col.TASK_FIELDS, col.TASK_ID))}, "
        f"{col.SUCCESS} IS NULL AS undecided "
        f"FROM {rows} WHERE {NEEDS_A_PERSON} ORDER BY {col.listed(col.LIST_ORDER)}"
    ).df()
    return frame


def workspace_failures(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE
                       ) -> dict[str, Trajectory]:
    """The trajectories that need a person (``failed_frame``), keyed by id."""
    ids = [str(t) for t in failed_frame(ws, people)[col.ID].tolist()]
    found = ws.get_many(ids)
    return {tid: found[tid] for tid in ids if tid in found}
