"""The heuristic on a task with a verified answer and no reference SQL: with the workspace's EHR
database it executes the evidence (the look-up that emptied the agent's query decides); without
one the evidence decides only what needs no database, and the text rules label the rest."""

from __future__ import annotations

from pathlib import Path

from opinions.prelabel.heuristic import HeuristicLabeller
from tests.trajectories.test_evidence import sql, traj
from tests.trajectories.test_evidence_without_reference import LAST_INHALED, ehr  # noqa: F401
from trajectories.signals import CODE_LOOKUP


def test_the_heuristic_executes_evidence_for_an_answerable_task_without_reference(
        ehr: Path) -> None:  # noqa: F811
    steps = [sql("SELECT COUNT(*) FROM prescriptions WHERE subject_id = 1", "[(2,)]"),
             sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
                 "AND route = 'inhalation'", "[(None,)]")]
    t = traj(steps, "none", ref=None, gold=LAST_INHALED)
    executed = HeuristicLabeller(ehr_path=ehr)
    result = executed.label(t, executed.taxonomy.version)
    assert result.category == CODE_LOOKUP and result.first_error_step == 1
    assert result.evidence is not None and result.evidence["part"] == "lookup"
    # Without the database nothing runs the query: the evidence decides nothing and the text
    # rules label.
    structural = HeuristicLabeller()
    found = structural.label(t, structural.taxonomy.version)
    assert found.evidence is not None and found.evidence["category"] is None
    assert not found.rationale.startswith("evidence:")
