"""The pool of work: which of a workspace's trajectories need a person.

Queues, clusters and the classifier all start from the same set (failures, and what the judge
could not decide), so it is read here, below all three, and never written twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from trajectories.model import Trajectory
    from trajectories.workspace import Workspace

__all__ = ["NEEDS_A_PERSON", "failed_frame", "workspace_failures"]

#: Trajectories a person must look at: failures, and those the judge could not decide
#: although the task has a gold answer (a person gives the verdict, then the label).
NEEDS_A_PERSON = ("NOT success OR (success IS NULL AND judge_verdict = 'undecided' "
                  "AND judge_method <> 'no_ground_truth')")


def failed_frame(ws: Workspace) -> pd.DataFrame:
    """Failed trajectories (workspace `success = false`) and undecided ones (``undecided``
    True: the judge could not tell), with the columns queues stratify on."""
    frame: pd.DataFrame = ws.query_df(
        "SELECT id, intent, scope, template_id, task_id, success IS NULL AS undecided "
        f"FROM trajectories WHERE {NEEDS_A_PERSON} ORDER BY run, task_id, rollout, id"
    )
    return frame


def workspace_failures(ws: Workspace) -> dict[str, Trajectory]:
    """The workspace's failed trajectories, keyed by id."""
    ids = [str(t) for t in failed_frame(ws)["id"].tolist()]
    found = ws.get_many(ids)
    return {tid: found[tid] for tid in ids if tid in found}
