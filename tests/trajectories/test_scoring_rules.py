"""The order, rounding and no-ground-truth rules of the exact-match scorer."""

from __future__ import annotations

import pytest

from trajectories.model import Task
from trajectories.scoring import declared_decimals, exact_match, score_task, wants_order


@pytest.mark.parametrize(
    ("question", "ordered"),
    [
        ("List the drugs sorted by count.", True),
        ("Give the dates in chronological order.", True),
        ("Return values in descending order of charge.", True),
        ("Which drugs are tied for the same rank within the top three ranks?", False),
        ("What are the top 5 most frequent diagnoses?", False),
        ("In order to compute the cost, use the cost table.", False),
    ],
)
def test_order_rule(question: str, ordered: bool) -> None:
    assert wants_order(question, None) is ordered


def test_declared_rounding_is_applied_to_both_sides() -> None:
    assert declared_decimals("Round the answer to 3 decimal places.") == 3
    assert declared_decimals("two decimals please") == 2
    assert declared_decimals("What is the mean?") is None
    assert not exact_match("3.383", 3.382638888899237)
    assert exact_match("3.383", 3.382638888899237, decimals=3)
    assert not exact_match("3.384", 3.382638888899237, decimals=3)


def test_no_ground_truth_is_unscored_but_null_ground_truth_is_scored() -> None:
    missing = Task(id="t", question="q", has_ground_truth=False)
    assert score_task(None, missing) is None
    null_truth = Task(id="t", question="q", ground_truth=None)
    assert score_task(None, null_truth) is True
    assert score_task("5", null_truth) is False


def test_task_rounding_rule_read_from_answer_format() -> None:
    task = Task(id="t", question="mean stay?", ground_truth=3.382638888899237,
                answer_format="round to 3 decimals")
    assert score_task(3.383, task) is True
