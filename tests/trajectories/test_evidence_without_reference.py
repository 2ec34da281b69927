"""Evidence where the task has a verified answer but no reference SQL: the database says which
text value emptied the agent's query (a look-up error, at the query that first wrote it), and
the query whose rows were the answer is what a later, answer-losing query is read against."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.labeling.support import sqlite_ehr
from tests.trajectories.test_evidence import sql, traj
from trajectories.evidence import find_divergence
from trajectories.evidence.empty import emptying_value, returns_nothing
from trajectories.evidence.probes import Probe
from trajectories.signals import CODE_LOOKUP


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
