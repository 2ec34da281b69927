"""The finder's rules for where an answer went wrong after the data was right: a result that
holds the reference's values in another shape, an answer held and then lost, and a code the
question names in words that no query wrote (the taxonomy's Answer Format, SQL Logic and
Medical-Code Lookup definitions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.labeling.support import sqlite_ehr
from tests.trajectories.test_evidence import sql, traj
from tests.trajectories.test_evidence_grounding import search
from trajectories.evidence import find_divergence
from trajectories.evidence.probes import Rows, in_another_shape
from trajectories.model import Step, StepKind, Trajectory
from trajectories.signals import ANSWER_FORMAT, CODE_LOOKUP, SQL_LOGIC

ROUTE_REF = "SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 AND route = 'IH'"


@pytest.fixture()
def ehr(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE prescriptions (subject_id INTEGER, starttime TEXT, drug TEXT, route TEXT);"
        "INSERT INTO prescriptions VALUES (1, '2100-01-02', 'albuterol', 'IH'),"
        " (1, '2100-01-03', 'heparin', 'IV'), (2, '2100-02-01', 'albuterol', 'IH');"
        "CREATE TABLE admissions (subject_id INTEGER, admittime TEXT, dischtime TEXT);"
        "INSERT INTO admissions VALUES (1, '2100-08-10 07:19:00', '2100-08-13 16:30:00');"
    ))


def asked(t: Trajectory, question: str) -> Trajectory:
    return t.model_copy(update={"task": t.task.model_copy(update={"question": question})})


def rows(*values: tuple[object, ...]) -> Rows:
    return Rows(columns=tuple(f"c{i}" for i in range(len(values[0]))) if values else (),
                rows=tuple(values), truncated=False)


def test_a_code_the_question_names_in_words_is_a_lookup_error_where_a_query_first_names_it(
) -> None:
    steps = [search("prescriptions", "inhalation", "['sodium chloride 3% inhalation soln']"),
             sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
                 "AND drug = 'sodium chloride 3% inhalation soln'", "[(None,)]")]
    t = asked(traj(steps, "none", ref=ROUTE_REF, gold=[["2100-01-02"]]),
              "When was an inhalation drug last given to patient 1?")
    ev = find_divergence(t)
    assert ev.part == "lookup" and ev.category == CODE_LOOKUP
    assert "'IH'" in ev.reason and "'inhalation'" in ev.reason
    # The search looked; the query committed to another value: the query is the step.
    assert ev.step == 1


def test_a_value_the_question_spells_out_is_a_criterion_not_a_code() -> None:
    steps = [sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1", "[(None,)]")]
    t = asked(traj(steps, "none", ref=ROUTE_REF, gold=[["2100-01-02"]]),
              "When was a drug given by route ih last given to patient 1?")
    ev = find_divergence(t)
    assert ev.part != "lookup" and ev.category != CODE_LOOKUP


def test_extra_columns_around_the_right_value_are_an_answer_format_error(ehr: Path) -> None:
    ref = ("SELECT julianday(dischtime) - julianday(admittime) FROM admissions "
           "WHERE subject_id = 1")
    steps = [
        sql("SELECT admittime, dischtime, julianday(dischtime) - julianday(admittime) "
            "FROM admissions WHERE subject_id = 1",
            "[('2100-08-10 07:19:00', '2100-08-13 16:30:00', 3.382638888899237)]"),
        Step(kind=StepKind.MESSAGE, content="About 3.383 days."),
        sql("SELECT CAST(julianday(dischtime) - julianday(admittime) AS INTEGER) "
            "FROM admissions WHERE subject_id = 1", "[(3,)]"),
    ]
    ev = find_divergence(traj(steps, [[3]], ref=ref, gold=[[3.382638888899237]]), ehr)
    assert ev.part == "answer" and ev.category == ANSWER_FORMAT
    assert ev.step == 0  # the first query whose result held the value in another shape
    assert "another shape" in ev.reason


def test_another_shape_is_right_values_in_other_columns_rows_or_rounding() -> None:
    ref = rows(("sputum",), ("blood",), ("urine",))
    assert in_another_shape(rows(("sputum", 88), ("blood", 80), ("urine", 40)), ref)
    # A ranking not cut: the reference's rows first, in order, then more.
    assert in_another_shape(rows(("sputum", 88), ("blood", 80), ("urine", 40), ("swab", 2)),
                            ref)
    # More rows with the reference's among them but not first: another cohort.
    assert not in_another_shape(rows(("swab",), ("sputum",), ("blood",), ("urine",)), ref)
    assert not in_another_shape(rows(("sputum",), ("blood",)), ref)  # a row missing
    assert in_another_shape(rows((3,)), rows((3.382638888899237,)))  # cut to whole days
    assert in_another_shape(rows((3.4,)), rows((3.382638888899237,)))  # rounded
    assert not in_another_shape(rows((4,)), rows((3.382638888899237,)))
    assert not in_another_shape(ref, ref)  # the same rows are no other shape


def test_an_answer_lost_to_a_dropped_distinct_is_a_sql_logic_error() -> None:
    ref = "SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'"
    steps = [sql("SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'",
                 "[('ih',)]"),
             Step(kind=StepKind.MESSAGE, content="ih"),
             sql("SELECT route FROM prescriptions WHERE drug = 'albuterol'",
                 "[('ih',), ('ih',)]")]
    ev = find_divergence(traj(steps, [["ih"], ["ih"]], ref=ref, gold=[["ih"]]))
    assert ev.category == SQL_LOGIC and "DISTINCT dropped" in ev.reason
    assert ev.step == 2  # where the answer was left


def test_an_answer_only_shown_otherwise_stays_an_answer_format_error() -> None:
    ref = "SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'"
    steps = [sql("SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'",
                 "[('ih',)]"),
             Step(kind=StepKind.MESSAGE, content="The route is inhalation (ih).")]
    ev = find_divergence(traj(steps, "The route is inhalation (ih).", ref=ref, gold=[["ih"]]))
    assert ev.category == ANSWER_FORMAT


def test_a_failed_query_after_the_answer_is_where_the_answer_was_left() -> None:
    ref = "SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'"
    steps = [sql("SELECT DISTINCT route FROM prescriptions WHERE drug = 'albuterol'",
                 "[('ih',)]"),
             Step(kind=StepKind.MESSAGE, content="ih"),
             sql("SELECT routes FROM prescription", "no such table", error=True),
             sql("SELECT DISTINCT drug FROM prescriptions", "[('albuterol',)]")]
    ev = find_divergence(traj(steps, [["albuterol"]], ref=ref, gold=[["ih"]]))
    assert ev.part == "answer" and ev.step == 2
