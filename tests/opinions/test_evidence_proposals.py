"""One proposal per failure: literals compared as the database compares them, the step where the
agent commits to the diverging part, failures without a reference SQL and without any tool."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from opinions.prelabel.heuristic import HeuristicLabeller, one_step
from taxonomy import default_taxonomy
from tests.labeling.support import sqlite_ehr
from tests.trajectories.test_evidence import sql, traj
from trajectories.evidence import find_divergence
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory
from trajectories.signals import ANSWER_FORMAT, CODE_LOOKUP, SEMANTIC, SQL_LOGIC

GENDER_REF = "SELECT COUNT(*) FROM patients WHERE gender = 'f' AND anchor_age > 60"


@pytest.fixture()
def patients(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE patients (subject_id INTEGER, gender TEXT, anchor_age INTEGER);"
        "INSERT INTO patients VALUES (1, 'f', 70), (2, 'f', 65), (3, 'm', 80);"
    ))


def test_a_literal_in_another_case_is_a_divergence(patients: Path) -> None:
    upper = GENDER_REF.replace("'f'", "'F'")
    steps = [sql("SELECT * FROM patients LIMIT 3", "[(1, 'f', 70)]"), sql(upper, "[(0,)]")]
    for db in (None, patients):  # structurally, and executed (0 rows against 2)
        ev = find_divergence(traj(steps, 0, ref=GENDER_REF, gold=[[2]]), db)
        assert ev.part == "codes" and ev.category == CODE_LOOKUP, ev.reason
        assert "gender 'F' where the reference has 'f'" in ev.reason
        assert ev.step == 1  # the query that wrote the value
    # The same literal in the same case is no divergence; a LIKE pattern folds case.
    same = find_divergence(traj([sql(GENDER_REF, "[(2,)]")], 3, ref=GENDER_REF, gold=[[2]]))
    assert "where the reference has" not in same.reason
    like_ref = "SELECT COUNT(*) FROM d_labitems WHERE label LIKE '%Hemoglobin%'"
    like = find_divergence(traj([sql(like_ref.replace("Hemoglobin", "hemoglobin"))], 3,
                                ref=like_ref, gold=[[2]]))
    assert "where the reference has" not in like.reason


DRAIN_REF = ("SELECT COUNT(*) FROM microbiologyevents m WHERE m.subject_id = 1 "
             "AND strftime('%Y-%m', m.charttime) = '2100-12'")


def message(text: str, role: str = "assistant") -> Step:
    return Step(kind=StepKind.MESSAGE, role=role, content=text)


def test_a_missing_part_is_placed_at_the_first_query_answered_from() -> None:
    no_window = "SELECT COUNT(*) FROM microbiologyevents m WHERE m.subject_id = 1"
    steps = [sql("SELECT * FROM microbiologyevents LIMIT 1", "[...]"),
             sql(no_window, "[(7,)]"), message("There were 7 tests."),
             message("Are you sure?", role="user"),
             sql(no_window + " AND m.spec_type_desc IS NOT NULL", "[(7,)]")]
    ev = find_divergence(traj(steps, 7, ref=DRAIN_REF, gold=[[3]]))
    assert ev.part == "times" and "missing" in ev.reason
    # Step 1 is the query the agent answered from, and it already lacked the window (the last
    # query, step 4, lacks it too; the first exploring query does not count).
    assert ev.step == 1


def test_a_wrong_value_is_placed_where_it_is_first_written() -> None:
    ref = ("SELECT charttime FROM procedures_icd WHERE icd_code IN (SELECT icd_code FROM "
           "d_icd_procedures WHERE long_title LIKE '%resection%') AND subject_id = 1")
    steps = [sql("SELECT long_title FROM procedures_icd WHERE long_title LIKE '%resection%'",
                 "no such column: long_title", error=True),
             sql("SELECT * FROM patients WHERE subject_id = 1", "[(1,)]"),
             sql("SELECT charttime FROM procedures_icd WHERE icd_code LIKE '%resection%' "
                 "AND subject_id = 1", "[]")]
    ev = find_divergence(traj(steps, "none", ref=ref, gold=[["2100-01-01"]]))
    assert ev.part == "lookup"
    # Step 0 compared the pattern with another column (the title, as the reference's look-up
    # does); the value the final query is wrong about, the pattern on icd_code, is first
    # written at step 2.
    assert ev.step == 2
    # The same comparison written first by a query that failed: it failed, but it is where
    # the agent committed to the value.
    steps[0] = sql("SELECT charttime FROM procedure_icd WHERE icd_code LIKE '%resection%'",
                   "no such table: procedure_icd", error=True)
    ev = find_divergence(traj(steps, "none", ref=ref, gold=[["2100-01-01"]]))
    assert ev.part == "lookup" and ev.step == 0


def test_an_answer_held_and_then_replaced_is_left_at_the_replacing_query() -> None:
    steps = [sql(DRAIN_REF, "[(3,)]"), message("3 tests."), message("All?", role="user"),
             sql("SELECT COUNT(*) FROM microbiologyevents", "[(40,)]"), message("40 tests.")]
    ev = find_divergence(traj(steps, "40", ref=DRAIN_REF, gold=[[3]]))
    # The replacing query chose other rows (it dropped the time window): the values went
    # wrong there, so that part decides; the answer once held is cited beside it.
    assert ev.part == "times" and ev.category == SQL_LOGIC
    assert any("answer correct in step 0" in d.reason for d in ev.divergences)
    assert ev.step == 3


def unanswerable(steps: list[Step], final: str) -> Trajectory:
    return Trajectory(
        task=Task(id="u", question="What is the most common location among hospitals?",
                  reference_sql="null", ground_truth=None),
        run=Run(name="r", model="m"), steps=[*steps, message(final)], final_answer=final,
        outcome=Outcome(success=False, reward=0.0))


@pytest.fixture()
def admissions(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "adm.sqlite", (
        "CREATE TABLE admissions (subject_id INTEGER, admission_location TEXT);"
        "INSERT INTO admissions VALUES (1, 'emergency room'), (2, 'emergency room');"
        "CREATE TABLE d_labitems (itemid INTEGER, label TEXT);"
        "INSERT INTO d_labitems VALUES (1, 'hemoglobin');"
    ))


def test_an_unanswerable_question_answered_is_placed_at_the_query_it_reports(
        admissions: Path) -> None:
    steps = [sql("SELECT COUNT(DISTINCT hospital) FROM admissions", "no such column", True),
             sql("SELECT * FROM admissions LIMIT 1", "[(1, 'emergency room')]"),
             sql("SELECT admission_location, COUNT(*) FROM admissions GROUP BY 1 "
                 "ORDER BY 2 DESC LIMIT 1", "[('emergency room', 59)]")]
    t = unanswerable(steps, "The most common location is emergency room (59 admissions).")
    ev = find_divergence(t, admissions)
    assert ev.part == "no_data" and ev.category == SEMANTIC
    # Step 1 shows 'emergency room' too, but the answer repeats more of step 2's rows (the count).
    assert ev.step == 2 and "'emergency room' is in the final answer" in ev.reason
    assert "verified answer NULL" in ev.reason
    # What the database cannot hold: the question's words that name nothing in it.
    assert "'hospitals'" in ev.reason
    label = HeuristicLabeller(ehr_path=admissions).label(t, default_taxonomy().version)
    assert label.category == SEMANTIC and label.first_error_step == 2
    # Without a database it still proposes, and says what it could not check.
    assert find_divergence(t).step == 2
    # An abstention is no failure of this kind.
    assert find_divergence(unanswerable(steps, "null")).part != "no_data"
    # Nor is a task whose producer recorded no ground truth: nobody verified that none exists.
    unknown = t.model_copy(update={"task": t.task.model_copy(update={
        "reference_sql": None, "has_ground_truth": False})})
    assert find_divergence(unknown).part != "no_data"


def test_no_tool_used_is_the_final_message() -> None:
    t = unanswerable([], "Here is how to build a model of discharge location: ...")
    ev = find_divergence(t)
    assert ev.part == "no_data" and ev.step == 0 and "without any query" in ev.reason
    answered = traj([], "41 patients", ref=DRAIN_REF, gold=[[8]])
    ev = find_divergence(answered)
    assert ev.part == "unqueried" and ev.category == SEMANTIC and ev.step == 0
    # Only the final answer recorded (no step at all): the proposal names the final answer.
    bare = answered.model_copy(update={"steps": []})
    ev = find_divergence(bare)
    assert ev.part == "unqueried" and ev.step is None and ev.reason.startswith("final answer:")
    assert "final answer: 41 patients" in ev.rows and "verified answer: [[8]]" in ev.rows


def test_the_prelabel_step_is_the_evidence_step_or_says_why() -> None:
    steps = [sql("SELECT * FROM microbiologyevents LIMIT 1", "[...]"),
             sql(DRAIN_REF.replace("2100-12", "2100-11"), "[(5,)]"), message("5 tests.")]
    t = traj(steps, 5, ref=DRAIN_REF, gold=[[3]])
    label = HeuristicLabeller().label(t, default_taxonomy().version)
    assert label.evidence is not None
    assert label.first_error_step == label.evidence["step"] == 1
    # A label of another category takes the evidence's step too, and says how the two differ.
    ev = find_divergence(t)
    other = one_step(dataclasses.replace(label, category=ANSWER_FORMAT, first_error_step=2),
                     ev, SQL_LOGIC)
    assert other.first_error_step == 1
    assert "Step 1 is the evidence's (times, which alone would say sql_logic_error" in \
        other.rationale and "whose pattern shows at step 2" in other.rationale
    # No evidence deciding: the rules' own step stands.
    assert one_step(label, None, None) is label


def test_another_entity_is_placed_where_the_agent_first_reaches_for_its_table() -> None:
    ref = "SELECT COUNT(*) FROM microbiologyevents WHERE subject_id = 1"
    search = Step(kind=StepKind.TOOL_CALL, name="substring_search_tool",
                  arguments='{"table": "d_labitems", "column": "label", "value": "culture"}',
                  observation="['blood culture hold']")
    steps = [sql("SELECT * FROM patients WHERE subject_id = 1", "[(1,)]"), search,
             sql("SELECT COUNT(*) FROM labevents WHERE subject_id = 1", "[(40,)]")]
    ev = find_divergence(traj(steps, 40, ref=ref, gold=[[3]]))
    assert ev.part == "tables" and "answers from labevents" in ev.reason
    assert ev.step == 1  # the search of the lab dictionary: where lab items were taken for it


def test_a_code_guessed_before_another_code_error_is_the_first_error(tmp_path: Path) -> None:
    path = sqlite_ehr(tmp_path / "px.sqlite", (
        "CREATE TABLE d_icd_procedures (icd_code TEXT, long_title TEXT);"
        "INSERT INTO d_icd_procedures VALUES ('icd9|5491', 'percutaneous abdominal drainage'),"
        " ('icd9|3615', 'single internal mammary-coronary artery bypass');"
        "CREATE TABLE procedures_icd (subject_id INTEGER, hadm_id INTEGER, icd_code TEXT);"
        "INSERT INTO procedures_icd VALUES (1, 10, 'icd9|5491'), (2, 20, 'icd9|3615');"
        "CREATE TABLE microbiologyevents (subject_id INTEGER, hadm_id INTEGER, test_name TEXT);"
        "INSERT INTO microbiologyevents VALUES (1, 10, 'gram stain');"
    ))
    ref = ("SELECT m.test_name FROM microbiologyevents m WHERE m.hadm_id IN (SELECT hadm_id "
           "FROM procedures_icd WHERE icd_code = (SELECT icd_code FROM d_icd_procedures "
           "WHERE long_title = 'percutaneous abdominal drainage'))")
    guessed = "SELECT hadm_id FROM procedures_icd WHERE icd_code = 'icd9|3615'"
    row_id = ("SELECT m.test_name FROM microbiologyevents m JOIN procedures_icd p ON "
              "m.hadm_id = p.hadm_id JOIN d_icd_procedures d ON p.icd_code = d.row_id "
              "WHERE d.long_title = 'percutaneous abdominal drainage'")
    steps = [sql("SELECT * FROM d_icd_procedures"), sql(guessed, "[(20,)]"), sql(row_id, "[]")]
    ev = find_divergence(traj(steps, "none", ref=ref, gold=[["gram stain"]]), path)
    assert ev.part == "codes" and ev.category == CODE_LOOKUP
    assert ev.step == 1 and "icd9|3615" in ev.reason  # the guessed code, before the row_id
