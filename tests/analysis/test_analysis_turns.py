"""Turns on commonly solved tasks and SR(T)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.turns import (
    common_solved_tasks,
    solved_task_counts,
    success_by_turn_budget,
    turns_table,
)


@pytest.fixture
def df() -> pd.DataFrame:
    rows = [
        # run, task, scope, success, turns
        ("A", "t1", "patient", True, 4),
        ("A", "t2", "population", True, 10),
        ("A", "t3", "patient", True, 2),
        ("A", "t4", "patient", False, 30),
        ("B", "t1", "patient", True, 6),
        ("B", "t2", "population", True, 12),
        ("B", "t3", "patient", False, 3),
        ("B", "t4", "patient", True, 1),
    ]
    return pd.DataFrame(
        [
            {
                "id": f"{r}{t}",
                "run": r,
                "model": r.lower(),
                "task_id": t,
                "intent": "Labs",
                "scope": s,
                "success": ok,
                "n_turns": n,
            }
            for r, t, s, ok, n in rows
        ]
    )


def test_common_tasks(df: pd.DataFrame) -> None:
    assert common_solved_tasks(df) == {"t1", "t2"}
    assert common_solved_tasks(df, runs=["A"]) == {"t1", "t2", "t3"}


def test_solved_task_counts_say_why_nothing_is_commonly_solved(df: pd.DataFrame) -> None:
    assert solved_task_counts(df) == {"A": 3, "B": 3}
    # A run that solved nothing empties the common set; the counts name it, in the caller's
    # order, and an unscored trajectory is not a solve.
    failed = pd.DataFrame([{"id": "C1", "run": "C", "model": "c", "task_id": "t1",
                            "intent": "Labs", "scope": "patient", "success": False,
                            "n_turns": 3},
                           {"id": "C2", "run": "C", "model": "c", "task_id": "t2",
                            "intent": "Labs", "scope": "patient", "success": None,
                            "n_turns": 3}])
    both = pd.concat([df, failed], ignore_index=True)
    assert common_solved_tasks(both) == set()
    assert turns_table(both).empty
    assert solved_task_counts(both, runs=["C", "B", "A"]) == {"C": 0, "B": 3, "A": 3}
    assert solved_task_counts(both, runs=["A", "missing"]) == {"A": 3}


def test_turns_table(df: pd.DataFrame) -> None:
    out = turns_table(df).set_index(["run", "scope"])
    assert out.loc[("A", "patient"), "mean_turns"] == 4
    assert out.loc[("A", "population"), "mean_turns"] == 10
    assert out.loc[("A", "all"), "mean_turns"] == 7
    assert out.loc[("B", "all"), "mean_turns"] == 9
    assert out.loc[("B", "all"), "n_tasks"] == 2
    only_a = turns_table(df, runs=["A"]).set_index(["run", "scope"])
    assert only_a.loc[("A", "patient"), "mean_turns"] == 3


def test_sr_paper_definition_counts_common_solved_tasks_and_reaches_one(
    df: pd.DataFrame,
) -> None:
    out = success_by_turn_budget(df, budgets=(1, 5, 10, 50))
    assert set(out["definition"]) == {"common_solved"}
    a = out[out["run"] == "A"].set_index("budget")
    # Common tasks t1 (4 turns) and t2 (10 turns) for run A.
    assert a["sr"].to_dict() == {1: 0.0, 5: 0.5, 10: 1.0, 50: 1.0}
    assert a.loc[50, "n"] == 2


def test_sr_budget(df: pd.DataFrame) -> None:
    out = success_by_turn_budget(df, budgets=(1, 5, 10, 50), definition="all_trajectories")
    assert set(out["definition"]) == {"all_trajectories"}
    a = out[out["run"] == "A"].set_index("budget")["sr"]
    assert a.to_dict() == {1: 0.0, 5: 0.5, 10: 0.75, 50: 0.75}
    b = out[out["run"] == "B"].set_index("budget")
    assert b.loc[1, "sr"] == 0.25 and b.loc[50, "n_success_within"] == 3 and b.loc[50, "n"] == 4
    # SR(T) is monotone in T and bounded by the run's success rate.
    assert out.groupby("run")["sr"].apply(lambda s: s.is_monotonic_increasing).all()
