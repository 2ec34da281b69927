"""Evidence where the task has a verified answer but no reference SQL: the database says which
text value emptied the agent's query (a look-up error, at the query that first wrote it), and
the query whose rows were the answer is what a later, answer-losing query is read against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.labeling.support import sqlite_ehr
from tests.trajectories.test_evidence import sql, traj
from trajectories.evidence import find_divergence
from trajectories.evidence.empty import emptying_value, returns_nothing
from trajectories.evidence.probes import Probe
from trajectories.model import Step, StepKind, Trajectory
from trajectories.signals import CODE_LOOKUP, SEMANTIC


@pytest.fixture()
def ehr(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE prescriptions (subject_id INTEGER, starttime TEXT, drug TEXT, route TEXT);"
        "INSERT INTO prescriptions VALUES (1, '2100-01-02', 'albuterol', 'ih'),"
        " (1, '2100-01-03', 'heparin', 'iv'), (2, '2100-02-01', 'albuterol', 'ih');"
    ))


LAST_INHALED = [["2100-01-02"]]


def test_a_text_value_that_empties_the_query_is_a_lookup_error_where_it_was_first_written(
        ehr: Path) -> None:
    steps = [
        sql("SELECT drug FROM prescriptions WHERE subject_id = 1 AND route = 'inhalation'", "[]"),
        sql("SELECT COUNT(*) FROM prescriptions WHERE subject_id = 1", "[(2,)]"),
        sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
            "AND route = 'inhalation'", "[(None,)]"),
    ]
    t = traj(steps, "no inhaled drug", ref=None, gold=LAST_INHALED)
    ev = find_divergence(t, ehr)
    assert ev.part == "lookup" and ev.category == CODE_LOOKUP
    assert ev.step == 0  # the first query that wrote 'inhalation' into route
    assert "route" in ev.reason and "'inhalation'" in ev.reason and "step 2" in ev.reason
    # Without a database there is nothing to run it on: no evidence, as before.
    assert find_divergence(t).category is None


def test_a_date_or_an_id_that_selects_nothing_is_not_a_lookup_error(ehr: Path) -> None:
    steps = [sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
                 "AND starttime >= '2100-06-01'", "[(None,)]")]
    assert find_divergence(traj(steps, "none", ref=None, gold=LAST_INHALED), ehr).part != "lookup"
    steps = [sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = '7'", "[(None,)]")]
    assert find_divergence(traj(steps, "none", ref=None, gold=LAST_INHALED), ehr).part != "lookup"


def test_a_query_with_rows_or_a_task_without_an_answer_is_left_to_other_rules(ehr: Path) -> None:
    with Probe.open(ehr) as probe:
        assert emptying_value("SELECT drug FROM prescriptions WHERE route = 'ih'", probe) is None
        found = emptying_value("SELECT drug FROM prescriptions WHERE drug LIKE '%salbutamol%' "
                               "AND subject_id = 1", probe)
        assert found is not None and (found.column, found.value) == ("drug", "%salbutamol%")
        assert found.rows_without == 2
        assert returns_nothing(probe.run("SELECT MAX(drug) FROM prescriptions WHERE 0"))
    steps = [sql("SELECT drug FROM prescriptions WHERE route = 'inhalation'", "[]")]
    # A verified answer of nothing: an empty result is not evidence of a wrong value.
    assert find_divergence(traj(steps, "none", ref=None, gold=[]), ehr).part != "lookup"


def test_an_answer_held_and_lost_is_read_against_the_query_that_held_it(ehr: Path) -> None:
    steps = [
        sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 AND route = 'ih'",
            "[('2100-01-02',)]"),
        sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1", "[('2100-01-03',)]"),
    ]
    ev = find_divergence(traj(steps, [["2100-01-03"]], ref=None, gold=LAST_INHALED), ehr)
    # The second query dropped the route the first one had: that part lost the answer.
    assert ev.step == 1
    assert ev.divergences[0].part != "answer" and "route" in ev.divergences[0].reason


DIAGNOSED = [["2100-07-01 12:45:00"]]
ASKED = "When was patient 7 first diagnosed with COPD in 2100?"


def _search(table: str, value: str, obs: str, *, error: bool = False) -> Step:
    """A search tool's call, as the tau-bench agents make them."""
    return Step(kind=StepKind.TOOL_CALL, name="substring_search_tool",
                arguments=json.dumps({"table": table, "column": "long_title", "value": value}),
                observation=obs, error=error)


def _asked(steps: list[Step], final: Any, question: str, gold: Any = DIAGNOSED) -> Trajectory:
    t = traj(steps, final, ref=None, gold=gold)
    return t.model_copy(update={"task": t.task.model_copy(update={"question": question})})


def test_a_term_every_search_missed_is_a_lookup_error_where_the_agent_concluded() -> None:
    """The task has an answer, the agent searched for the question's term (first in a table
    without that column, then in the dictionary), found nothing, and answered that there is
    none: the term was not grounded, at the agent's message after its first search (a search
    that finds nothing is a question asked, not yet an error). No database is needed."""
    steps = [
        _search("diagnoses_icd", "COPD", "Error: no such column: long_title", error=True),
        _search("d_icd_diagnoses", "COPD", "No values in d_icd_diagnoses.long_title contain "
                                           "'COPD'."),
    ]
    ev = find_divergence(_asked(steps, "There are no COPD diagnoses for this patient.", ASKED))
    assert (ev.part, ev.category, ev.step) == ("lookup", CODE_LOOKUP, 2)
    assert "'copd'" in ev.reason and "steps 0, 1" in ev.reason
    # A message between the searches is where the agent acted on the first one.
    spoke = [steps[0], Step(kind=StepKind.MESSAGE, content="Let me try the dictionary."),
             steps[1]]
    ev = find_divergence(_asked(spoke, "There are no COPD diagnoses.", ASKED))
    assert (ev.part, ev.step) == ("lookup", 1)
    # An SQL search of a dictionary counts as a search too.
    by_sql = [sql("SELECT icd_code FROM d_icd_diagnoses WHERE long_title LIKE '%COPD%'", "[]")]
    ev = find_divergence(_asked(by_sql, "No such diagnosis was found.", ASKED))
    assert (ev.part, ev.step) == ("lookup", 1)


def test_with_rows_scored_the_agents_conclusion_is_its_last_message() -> None:
    """A harness that scores the last query's result: the agent listed the patient's codes and
    told the user there is no COPD. Its conclusion is that message, so the unfound term is
    the error; rows that hold the verified answer are an answer given, whatever it says."""
    missed = _search("d_icd_diagnoses", "COPD", "No values in d_icd_diagnoses.long_title "
                                                "contain 'COPD'.")
    listed = sql("SELECT icd_code FROM diagnoses_icd WHERE subject_id = 7",
                 "[('icd10|i10',), ('icd10|j449',)]")

    def judged(rows: Any, said: str) -> Any:
        t = _asked([missed, listed], rows, ASKED)
        steps = [*t.steps[:-1], Step(kind=StepKind.MESSAGE, role="assistant", content=said)]
        return find_divergence(t.model_copy(update={"steps": steps}))

    none = "There are no records of a COPD diagnosis for this patient in 2100."
    ev = judged([["icd10|i10"], ["icd10|j449"]], none)
    # No message between the search and the listing: the conclusion is the final message.
    assert (ev.part, ev.category, ev.step) == ("lookup", CODE_LOOKUP, 2)
    # The evidence shows the message by its words (a message has no call and no result).
    assert ev.rows[0] == f"step 2 (assistant): {none}"
    # The evidence shows the message by its words (a message has no call and no result).
    assert ev.rows[0] == f"step 2 (assistant): {none}"
    assert judged([["2100-07-01 12:45:00"]], none).part != "lookup"
    assert judged([["icd10|i10"], ["icd10|j449"]], "The patient has two diagnoses.").part \
        != "lookup"


def test_a_term_found_later_or_an_answer_given_is_left_to_other_rules() -> None:
    missed = _search("d_icd_diagnoses", "COPD", "[]")
    found = _search("d_icd_diagnoses", "chronic obstructive",
                    "Values containing 'chronic obstructive': ['chronic obstructive ...']")

    def part(steps: list[Step], final: Any, question: str = ASKED, gold: Any = DIAGNOSED
             ) -> str | None:
        return find_divergence(_asked(steps, final, question, gold)).part

    # The concept found under another spelling: what went wrong came after.
    assert part([missed, found], "No diagnosis in 2100.") != "lookup"
    # The agent answered with a value: not a conclusion from the empty search.
    assert part([missed], "2100-03-04 10:00:00") != "lookup"
    assert part([missed], [["2100-03-04"]]) != "lookup"
    # A term the question does not use, or a task whose verified answer is that there is none.
    assert part([missed], "No diagnosis found.", "When was patient 7 first diagnosed in "
                                                  "2100 with a lung disease?") != "lookup"
    assert part([missed], "No diagnosis found.", gold=None) != "lookup"


def test_a_result_with_the_answers_rows_and_a_column_more_holds_the_answer(ehr: Path) -> None:
    """Without a reference, a query whose executed result has the verified answer's number of
    rows and every one of its values (the drug beside the time) held the answer; one that lists
    more rows only mentions it."""
    held = sql("SELECT starttime, drug FROM prescriptions WHERE subject_id = 1 AND route = 'ih'",
               "[('2100-01-02', 'albuterol')]")
    ev = find_divergence(traj([held], "albuterol, on the 2nd", ref=None, gold=LAST_INHALED), ehr)
    # Held at step 0, left at the final message (step 1), where the answer went wrong.
    assert ev.part == "answer" and ev.step == 1
    assert "step 0 (its result holds the verified answer's rows)" in ev.reason
    listing = sql("SELECT starttime, drug FROM prescriptions WHERE subject_id = 1",
                  "[('2100-01-02', 'albuterol'), ('2100-01-03', 'heparin')]")
    ev = find_divergence(traj([listing], "heparin", ref=None, gold=LAST_INHALED), ehr)
    assert ev.part != "answer"


def test_an_executed_number_holds_the_answer_as_the_answer_is_read(ehr: Path) -> None:
    """The verified answer is read to two decimals (3.38); a result that computes 3.3826 beside
    the two times it came from holds it, and the later rounding to 3 left it."""
    span = "julianday('2100-01-03 10:00') - julianday('2100-01-03 01:49')"
    held = sql(f"SELECT starttime, drug, {span} FROM prescriptions WHERE subject_id = 2",
               "[('2100-02-01', 'albuterol', 0.340972)]")
    rounded = sql(f"SELECT CAST({span} AS INTEGER) FROM prescriptions WHERE subject_id = 2",
                  "[(0,)]")
    ev = find_divergence(traj([held, rounded], [[0]], ref=None, gold=[[0.3409722222]]), ehr)
    assert ev.part == "answer" and ev.step == 1
    assert "step 0 (its result holds the verified answer's rows)" in ev.reason


def test_an_emptied_query_the_agent_never_grounded_is_a_lookup_error_there(ehr: Path) -> None:
    """Step 0 comes back empty because routes are written 'ih', not 'inhalation'; the agent
    then drops the route and answers from other rows. It never compared route with a value
    the column holds: the look-up error is step 0, though the last query returned rows."""
    emptied = sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
                  "AND route = 'inhalation'", "[(None,)]")
    dropped = sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1",
                  "[('2100-01-03',)]")
    ev = find_divergence(traj([emptied, dropped], "2100-01-03", ref=None, gold=LAST_INHALED),
                         ehr)
    assert ev.part == "lookup" and ev.category == CODE_LOOKUP and ev.step == 0
    assert "route ~ 'inhalation'" in ev.reason
    # Grounded later (route = 'ih' returned rows): the empty guess was a question asked.
    grounded = sql("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
                   "AND route = 'ih' AND drug = 'heparin'", "[('x',)]")
    later = find_divergence(traj([emptied, grounded], "x", ref=None, gold=LAST_INHALED), ehr)
    assert not (later.part == "lookup" and later.step == 0)


def _micro_ehr(tmp_path: Path, with_micro: bool = True) -> Path:
    micro = ("CREATE TABLE microbiologyevents (subject_id INTEGER, spec_type_desc TEXT);"
             "INSERT INTO microbiologyevents VALUES (1, 'blood culture');") if with_micro else ""
    path = tmp_path / f"micro{int(with_micro)}.sqlite"
    if path.exists():
        return path
    return sqlite_ehr(path, (
        "CREATE TABLE labevents (subject_id INTEGER, itemid INTEGER);"
        "CREATE TABLE d_labitems (itemid INTEGER, label TEXT);"
        "CREATE TABLE procedures_icd (subject_id INTEGER, icd_code TEXT);" + micro))


def _micro_traj(steps: list[Step]) -> Trajectory:
    t = traj(steps, "none", ref=None, gold=[["blood culture"]])
    task = t.task.model_copy(update={
        "question": "Which microbiology test was done most often after the patient's "
                    "drainage procedure?"})
    return t.model_copy(update={"task": task})


def test_the_event_the_question_names_looked_for_in_another_table_is_semantic(
        tmp_path: Path) -> None:
    """The question is about microbiology; the agent reads the procedure (which the question
    names too), then looks for the tests among the laboratory items and never reads
    microbiologyevents: the concept was misread, at its first step on the lab tables."""
    steps = [sql("SELECT icd_code FROM procedures_icd WHERE subject_id = 1", "[('x',)]"),
             sql("SELECT itemid FROM d_labitems WHERE label LIKE '%culture%'", "[]"),
             sql("SELECT COUNT(*) FROM labevents WHERE subject_id = 1", "[(0,)]")]
    ev = find_divergence(_micro_traj(steps), _micro_ehr(tmp_path))
    assert ev.part == "tables" and ev.category == SEMANTIC and ev.step == 1
    assert "microbiologyevents" in ev.reason and "labevents" in ev.reason
    # The table read after all, or a database without it: not this rule.
    read = [*steps, sql("SELECT spec_type_desc FROM microbiologyevents", "[('blood culture',)]")]
    assert find_divergence(_micro_traj(read), _micro_ehr(tmp_path)).part != "tables"
    assert find_divergence(_micro_traj(steps), _micro_ehr(tmp_path, with_micro=False)
                           ).part != "tables"


def _icd_ehr(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "icd.sqlite", (
        "CREATE TABLE d_icd_procedures (icd_code TEXT, long_title TEXT);"
        "INSERT INTO d_icd_procedures VALUES ('icd9|5491', 'percutaneous abdominal drainage'),"
        " ('icd9|3614', '(aorto)coronary bypass of four or more coronary arteries');"
        "CREATE TABLE procedures_icd (subject_id INTEGER, icd_code TEXT, charttime TEXT);"
        "INSERT INTO procedures_icd VALUES (1, 'icd9|5491', '2100-01-02');"
        "CREATE TABLE microbiologyevents (subject_id INTEGER, test_name TEXT);"
        "INSERT INTO microbiologyevents VALUES (1, 'blood culture');"
        "CREATE TABLE labevents (subject_id INTEGER, itemid INTEGER);"
        "CREATE TABLE d_icd_diagnoses (icd_code TEXT, long_title TEXT);"
        "INSERT INTO d_icd_diagnoses VALUES ('icd9|2768', 'hypopotassemia'),"
        " ('icd10|e876', 'hypokalemia');"
        "CREATE TABLE diagnoses_icd (subject_id INTEGER, icd_code TEXT);"))


def test_a_typed_code_that_names_another_concept_is_a_lookup_error_where_written(
        tmp_path: Path) -> None:
    """The agent searched for the drainage, found its title, then filtered procedures on a
    code the dictionary calls a coronary bypass: the concept was understood and mapped to the
    wrong identifier (Medical-Code Lookup Error) at that query, before anything later went
    wrong. The found code, a query run again and again (the loop dominates), an earlier read
    of another event table (the earlier error decides) and no database are not this rule."""
    db = _icd_ehr(tmp_path)
    found = _search("d_icd_procedures", "percutaneous abdominal drainage",
                    "Values containing it: ['percutaneous abdominal drainage']")

    def typed(code: str) -> Step:
        return sql(f"SELECT COUNT(*) FROM procedures_icd WHERE icd_code = '{code}'", "[(0,)]")

    later = sql("SELECT COUNT(*) FROM labevents WHERE subject_id = 1", "[(0,)]")
    ev = find_divergence(_micro_traj([found, typed("icd9|3614"), later]), db)
    assert (ev.part, ev.category, ev.step) == ("codes", CODE_LOOKUP, 1)
    assert "coronary bypass" in ev.reason and "percutaneous abdominal drainage" in ev.reason
    assert find_divergence(_micro_traj([found, typed("icd9|5491"), later]), db).part != "codes"
    # Nothing searched: the code is read against the question's words.
    unsearched = find_divergence(_micro_traj([typed("icd9|3614"), later]), db)
    assert (unsearched.part, unsearched.step) == ("codes", 0)
    assert "nothing the question names" in unsearched.reason
    looped = [found, *[typed("icd9|3614") for _ in range(3)], later]
    assert find_divergence(_micro_traj(looped), db).part != "codes"
    first_lab = find_divergence(_micro_traj([found, later, typed("icd9|3614")]), db)
    assert (first_lab.part, first_lab.step) == ("tables", 1)
    assert find_divergence(_micro_traj([found, typed("icd9|3614"), later])).part != "codes"


def test_a_code_beside_its_other_version_or_inside_a_search_is_not_typed(tmp_path: Path) -> None:
    """The same concept under its older ICD-9 name (hypopotassemia) written beside the ICD-10
    code whose title the question names, and a code whose title holds a partial search
    ('kal'), are the concept mapped, not another one; the older name alone, with nothing
    beside it, is read as typed."""
    db = _icd_ehr(tmp_path)
    partial = _search("d_icd_diagnoses", "kal", "Values containing 'kal': ['hypokalemia']")

    def diagnosed(codes: str) -> Trajectory:
        t = traj([partial, sql(f"SELECT COUNT(*) FROM diagnoses_icd WHERE icd_code IN ({codes})",
                               "[(3,)]")], "3", ref=None, gold=[[5]])
        return t.model_copy(update={"task": t.task.model_copy(update={
            "question": "How many patients had hypokalemia coded?"})})

    assert find_divergence(diagnosed("'icd9|2768', 'icd10|e876'"), db).part != "codes"
    assert find_divergence(diagnosed("'icd10|e876'"), db).part != "codes"
    alone = find_divergence(diagnosed("'icd9|2768'"), db)
    assert (alone.part, alone.step) == ("codes", 1) and "hypopotassemia" in alone.reason

