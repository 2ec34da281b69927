"""RS(c), EHRSQL-2024's reliability score, per run through the statistics registry."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.reliability import question_scores, reliability
from analysis.tables import STATISTICS, TableOptions, compute


def _frame() -> pd.DataFrame:
    rows = [
        # run a: 3 right, 1 abstention on an answerable question, 1 wrong, 1 undecided
        ("a", True, "exact_match"), ("a", True, "abstention"), ("a", True, "prose"),
        ("a", False, "abstained"), ("a", False, "exact_match"), ("a", None, "prose"),
        # run b: one answer to a question without one (judged by the abstention layer)
        ("b", True, "exact_match"), ("b", False, "abstention"), ("b", False, "no_answer"),
    ]
    return pd.DataFrame([{"id": f"{run}{i}", "run": run, "model": f"m-{run}",
                          "success": success, "judge_method": method}
                         for i, (run, success, method) in enumerate(rows)])


def test_each_question_scores_one_zero_or_minus_one() -> None:
    scores = question_scores(_frame()).tolist()
    assert scores[:5] == [1.0, 1.0, 1.0, 0.0, -1.0]
    assert pd.isna(scores[5])  # undecided: no score, never a failure
    # Near miss: an answer judged by the abstention layer is an answer, not an abstention.
    assert scores[6:] == [1.0, -1.0, 0.0]


def test_rs_at_each_penalty_by_hand() -> None:
    table = reliability(_frame()).set_index("run")
    a = table.loc["a"]
    assert (a["questions"], a["undecided"], a["right"], a["abstained"], a["wrong"]) == \
        (5, 1, 3, 1, 1)
    assert a["RS(0)"] == pytest.approx(100 * 3 / 5)
    assert a["RS(5)"] == pytest.approx(100 * (3 - 5) / 5)
    assert a["RS(10)"] == pytest.approx(100 * (3 - 10) / 5)
    assert a["RS(N)"] == pytest.approx(100 * (3 - 5) / 5)  # N = 5 questions
    b = table.loc["b"]
    assert b["RS(0)"] == pytest.approx(100 / 3)
    assert b["RS(N)"] == pytest.approx(100 * (1 - 3) / 3)


def test_the_registry_computes_it_for_the_cli_and_the_page() -> None:
    assert STATISTICS["reliability"].reads == "trajectories"
    table = compute("reliability", _frame(), None, None, TableOptions(runs=("b",)))
    assert table["run"].tolist() == ["b"]


def test_a_run_with_every_outcome_undecided_has_no_score() -> None:
    frame = pd.DataFrame([{"id": "x", "run": "c", "model": "m", "success": None,
                           "judge_method": "prose"}])
    row = reliability(frame).iloc[0]
    assert row["questions"] == 0 and row["RS(0)"] is None
