"""The one outcome rule (trajectories.outcome): its SQL and its Python give the same answers."""

from __future__ import annotations

import itertools

import duckdb
import pandas as pd
import pytest

from tests.support import make_trajectory
from trajectories.model import Outcome
from trajectories.outcome import (
    NEEDS_A_PERSON,
    apply_people,
    needs_a_person,
    recorded_verdict,
    resolve,
    resolved_relation,
    still_needing_a_person,
    success_expression,
    trajectory_success,
)

_MISSING = "no verdict"
TRUTHS: list[bool | None] = [True, False, None]
PEOPLE: list[object] = [True, False, None, _MISSING]
JUDGE = [("correct", "exact_match"), ("incorrect", "sql_result"), ("undecided", "prose"),
         ("undecided", "no_ground_truth")]


def _grid() -> list[tuple[str, bool | None, bool | None, object, str, str]]:
    rows = []
    for n, (recorded, person, (verdict, method)) in enumerate(
            itertools.product(TRUTHS, PEOPLE, JUDGE)):
        judged = {"correct": True, "incorrect": False}.get(verdict)
        rows.append((f"t{n}", recorded, judged, person, verdict, method))
    return rows


def test_sql_and_python_resolve_every_case_alike() -> None:
    grid = _grid()
    con = duckdb.connect()
    con.execute("CREATE TABLE outcomes (id VARCHAR, recorded_success BOOLEAN, "
                "judged_success BOOLEAN, judge_verdict VARCHAR, judge_method VARCHAR)")
    con.executemany("INSERT INTO outcomes VALUES (?, ?, ?, ?, ?)",
                    [(t, r, j, v, m) for t, r, j, _p, v, m in grid])
    people: dict[str, bool | None] = {t: p for t, _r, _j, p, _v, _m in grid  # type: ignore[misc]
                                      if p is not _MISSING}
    rows = resolved_relation(con, "outcomes", people,
                             success_sql=success_expression("verdict"), has_success=False)
    found = {tid: (success, need) for tid, success, need in con.execute(
        f"SELECT id, success, {NEEDS_A_PERSON} FROM {rows}").fetchall()}
    pool = [t for t, r, j, _p, v, m in grid
            if needs_a_person(resolve(t, recorded=r, judged=j), person_decided=False,
                              judge_verdict=v, judge_method=m)]
    for tid, recorded, judged, person, verdict, method in grid:
        expected = resolve(tid, recorded=recorded, judged=judged, people=people)
        need = needs_a_person(expected, person_decided=person is not _MISSING,
                              judge_verdict=verdict, judge_method=method)
        assert found[tid] == (expected, need), (tid, recorded, judged, person, verdict)
    # The id-list form (a person's queue) agrees with the SQL on every id.
    ids = [t for t, *_ in grid]
    assert still_needing_a_person(ids, pool, people) == [t for t in ids if found[t][1]]


def test_the_order_is_people_then_recorded_then_judge_then_undecided() -> None:
    assert resolve("a", recorded=True, judged=False, people={"a": False}) is False
    assert resolve("a", recorded=False, judged=True, people={"a": None}) is None
    assert resolve("a", recorded=False, judged=True, people={"b": True}) is False
    assert resolve("a", recorded=None, judged=True) is True
    assert resolve("a", recorded=None, judged=None) is None


@pytest.mark.parametrize(("outcome", "expected"), [
    (None, None),
    (Outcome(success=True), True),
    (Outcome(success=False, reward=1.0), False),  # the flag wins over the reward
    (Outcome(reward=0.5), False),  # a partial reward is a failure
    (Outcome(reward=1.0), True),
    (Outcome(source="harness"), None),
])
def test_the_recorded_verdict(outcome: Outcome | None, expected: bool | None) -> None:
    assert recorded_verdict(outcome) is expected


def test_a_trajectory_without_a_recorded_verdict_is_judged() -> None:
    right = make_trajectory(final_answer=52).with_id()
    wrong = make_trajectory(final_answer=7).with_id()
    assert trajectory_success(right) is True
    assert trajectory_success(wrong) is False
    assert trajectory_success(wrong, {wrong.id or "": True}) is True


def test_people_in_a_frame_win_and_a_disagreement_is_undecided() -> None:
    frame = pd.DataFrame({"id": ["a", "b", "c"],
                          "success": pd.array([True, False, True], dtype="boolean")})
    out = apply_people(frame, {"a": False, "c": None})
    assert out["success"].tolist() == [False, False, pd.NA]
    assert apply_people(frame, {}) is frame  # nothing to apply: the shared frame itself
