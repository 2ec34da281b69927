"""Trajectories without ground truth and without a recorded outcome are unscored."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from analysis.passk import pass_k
from analysis.sources import load_frame
from analysis.success import success_grid
from tests.support import make_trajectory
from trajectories.model import Run, Task
from trajectories.workspace import Workspace


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws").create()
    no_truth = Task(id="t2", question="q2", intent="Labs", scope="patient",
                    has_ground_truth=False)
    trajs = [
        make_trajectory(final_answer=52),  # success by exact match
        make_trajectory(final_answer=7, run=Run(name="run-a", model="model-a", temperature=0.0,
                                                rollout=1)),  # failure
        make_trajectory(task=no_truth, final_answer=None),  # unscored
    ]
    ws.add([(t.with_id(), None) for t in trajs])
    return ws


def test_summary_and_list_count_unscored_separately(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    summary = ws.summary()
    assert summary["trajectories"] == 3
    assert summary["failed"] == 1 and summary["unscored"] == 1
    outcomes = sorted(r["outcome"] for r in ws.list())
    assert outcomes == ["failure", "success", "unscored"]
    assert [r["task_id"] for r in ws.list(unscored=True)] == ["t2"]


def test_unscored_left_out_of_grid_and_passk(tmp_path: Path) -> None:
    frame = load_frame(_workspace(tmp_path))
    assert frame["success"].isna().sum() == 1
    grid = success_grid(frame)
    assert int(cast(int, grid.loc[0, "n"])) == 2
    assert "Labs/patient" not in grid.columns or grid["Labs/patient"].isna().all()
    pk = pass_k(frame)
    overall = pk[(pk["scope"] == "all") & (pk["intent"] == "all") & (pk["k"] == 1)]
    assert int(overall["n_tasks"].iloc[0]) == 1
    assert float(overall["pass_hat_k"].iloc[0]) == 0.5


def test_unscored_task_is_not_an_audit_candidate(tmp_path: Path) -> None:
    from labeling.audit import candidate_pool

    pool = candidate_pool(_workspace(tmp_path))
    assert [c.task_id for c in pool.candidates] == []
    assert pool.n_total_tasks == 1


def test_a_cut_answer_is_unknown_or_a_failure_everywhere_it_is_scored() -> None:
    from trajectories.rows import score
    from trajectories.scoring import answer_cut, score_trajectory

    whole = make_trajectory(final_answer=[[52]])
    # The producer showed 1 of 1 rows: the visible row is the truth's only row, yet the
    # result is marked cut, so nothing decides: unknown, never a success.
    undecided = make_trajectory(final_answer=[[52]], final_answer_source="last_sql_result_partial",
                                final_answer_rows_total=1)
    too_many = make_trajectory(final_answer=[[52]], final_answer_source="last_sql_result_partial",
                               final_answer_rows_total=173)
    unreadable = make_trajectory(final_answer=None,
                                 final_answer_source="last_sql_result_unreadable")
    assert [score_trajectory(t) for t in (whole, undecided, too_many, unreadable)] == [
        True, None, False, None]
    assert all(score(t) == score_trajectory(t) for t in (whole, undecided, too_many, unreadable))
    assert answer_cut(whole) is None
    assert answer_cut(too_many) == (
        "the producer recorded 1 of 173 rows of the last SQL query's result")
    assert "could not be read" in (answer_cut(unreadable) or "")

    from faillab.app.widgets.answer import answer_panel_html
    from tests.app.support import verdicts

    panel = answer_panel_html(undecided)
    assert verdicts(panel)["Exact match"] == "unknown"
    assert "Incomplete final answer: the producer" in panel
    assert verdicts(answer_panel_html(too_many))["Exact match"] == "wrong"
