from __future__ import annotations

import pytest

from trajectories.scoring import answer_diff, exact_match, to_rows, wants_order


@pytest.mark.parametrize(
    ("predicted", "truth"),
    [
        (52, [[52]]),
        ("52", [[52.0]]),
        ([52], [[52]]),
        ([" Heparin ", "ASPIRIN"], [["heparin"], ["aspirin"]]),
        ([["aspirin"], ["heparin"]], [["heparin"], ["aspirin"]]),  # order ignored by default
        (3.14159, [[3.1416]]),  # numeric tolerance
        (None, None),
        ("null", None),
        ([], None),
        ([[None]], None),
        ("", None),
        ('[["a", 1], ["b", 2]]', [["b", 2], ["a", 1]]),  # JSON text answer
        ([["F", 10]], [["f", "10"]]),
        (True, [[1]]),
    ],
)
def test_equivalent_answers_match(predicted: object, truth: object) -> None:
    assert exact_match(predicted, truth)


@pytest.mark.parametrize(
    ("predicted", "truth"),
    [
        (53, [[52]]),
        (3.2, [[3.1416]]),
        ([["aspirin"]], [["heparin"], ["aspirin"]]),  # missing row
        ([["aspirin"], ["aspirin"]], [["aspirin"]]),  # duplicates count
        (["Acetaminophen"], [["Acetaminophen", 31]]),  # missing required column
        (None, [[7]]),  # no answer where one exists
        ([[7]], None),  # an answer where none exists
    ],
)
def test_different_answers_do_not_match(predicted: object, truth: object) -> None:
    assert not exact_match(predicted, truth)


def test_order_counts_only_when_asked() -> None:
    truth = [["a"], ["b"]]
    assert exact_match([["b"], ["a"]], truth)
    assert not exact_match([["b"], ["a"]], truth, ordered=True)
    assert exact_match([["a"], ["b"]], truth, ordered=True)
    assert wants_order("List the drugs in chronological order", None)
    assert wants_order("q", "rows sorted by count, descending")
    assert not wants_order("How many patients?", "a single number")


def test_dict_rows_and_diff() -> None:
    assert to_rows([{"drug": "Heparin", "n": 3}]) == [("heparin", 3.0)]
    both, missing, extra = answer_diff([["a"], ["c"]], [["a"], ["b"]])
    assert both == [("a",)] and missing == [("b",)] and extra == [("c",)]


@pytest.mark.parametrize(
    ("predicted", "truth", "expected"),
    [
        # A list's length decides before its cells are read, whatever the cells hold.
        ([None, None], [["a"]], False),  # all null: no rows, the truth has one
        ([[None], [None]], [[None]], True),  # all null on both sides: both "no answer"
        ([None, None, None], [], True),
        ('[["a"], ["b"]]', [["a"]], False),  # JSON text counts its rows too
        ('[["a"]]', [["A "]], True),
        ((["a"], ["b"]), [["a"], ["b"]], True),  # a tuple of rows is a list of rows
        ((["a"],), [["a"], ["b"]], False),
    ],
)
def test_row_counts_and_null_rows(predicted: object, truth: object, expected: bool) -> None:
    assert exact_match(predicted, truth) is expected
    assert exact_match(predicted, truth, ordered=True) is expected
