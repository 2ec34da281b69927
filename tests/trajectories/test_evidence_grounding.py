"""The finder's grounding rules: a term never found, a value the database does not hold, an
abbreviation of the reference's concept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opinions.prelabel.heuristic import HeuristicLabeller
from taxonomy import default_taxonomy
from tests.labeling.support import sqlite_ehr
from tests.trajectories.test_evidence import sql, traj
from trajectories.evidence import CALIBRATION, find_divergence
from trajectories.evidence.grounding import related
from trajectories.model import Step, StepKind
from trajectories.signals import CODE_LOOKUP, SEMANTIC

COPD = "chronic obstructive pulmonary disease, unspecified"
DX_REF = ("SELECT d.charttime FROM diagnoses_icd d JOIN d_icd_diagnoses t "
          f"ON d.icd_code = t.icd_code WHERE d.subject_id = 1 AND t.long_title = '{COPD}'")
ROUTE_REF = "SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 AND route = 'IH'"


def search(table: str, value: str, obs: str) -> Step:
    return Step(kind=StepKind.TOOL_CALL, name="substring_search_tool",
                arguments=json.dumps({"table": table, "column": "long_title", "value": value}),
                observation=obs)


@pytest.fixture()
def ehr(tmp_path: Path) -> Path:
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE prescriptions (subject_id INTEGER, starttime TEXT, drug TEXT, route TEXT);"
        "INSERT INTO prescriptions VALUES (1, '2100-01-02', 'albuterol', 'IH'),"
        " (1, '2100-01-03', 'heparin', 'IV');"
        "CREATE TABLE d_icd_diagnoses (icd_code TEXT, icd_version INTEGER, long_title TEXT);"
        f"INSERT INTO d_icd_diagnoses VALUES ('496', 9, '{COPD}'),"
        " ('J449', 10, 'Chronic obstructive pulmonary disease, unspecified');"
        "CREATE TABLE diagnoses_icd (subject_id INTEGER, hadm_id INTEGER, icd_code TEXT,"
        " charttime TEXT);"
        "INSERT INTO diagnoses_icd VALUES (1, 10, '496', '2100-07-01');"
    ))


def test_searches_that_never_find_the_reference_name_are_a_lookup_error() -> None:
    steps = [search("d_icd_diagnoses", "COPD", "No values in d_icd_diagnoses.long_title "
                    "contain 'COPD'."),
             search("diagnoses_icd", "COPD", "No values in diagnoses_icd.icd_code contain 'COPD'.")]
    ev = find_divergence(traj(steps, "No COPD diagnosis found.", ref=DX_REF, gold=[["2100"]]))
    assert ev.part == "lookup" and ev.category == CODE_LOOKUP
    # A search that finds nothing is not yet wrong: the fault is the message that concludes
    # from the two empty searches (index 2, after them).
    assert ev.step == 2
    assert ev.confidence == CALIBRATION["lookup"][1]
    assert "never found it" in ev.reason
    label = HeuristicLabeller().label(traj(steps, "none", ref=DX_REF, gold=[["2100"]]),
                                      default_taxonomy().version)
    assert label.category == CODE_LOOKUP and label.first_error_step == 2


def test_a_search_without_a_word_after_it_is_where_the_term_was_left() -> None:
    # No message of the agent follows its searches: the first search is all there is.
    steps = [search("d_icd_diagnoses", "COPD", "No values in d_icd_diagnoses.long_title "
                    "contain 'COPD'.")]
    t = traj(steps, "none", ref=DX_REF, gold=[["2100"]])
    t = t.model_copy(update={"steps": t.steps[:1]})
    ev = find_divergence(t)
    assert ev.part == "lookup" and ev.step == 0


def test_a_name_that_a_search_found_is_not_a_lookup_error() -> None:
    # The search shows the reference's name: the agent grounded it; what failed came later.
    ref = "SELECT DISTINCT route FROM prescriptions WHERE drug = 'isosorbide dinitrate'"
    found = search("prescriptions", "isosorbide", "Values in prescriptions.drug containing "
                   "'isosorbide': ['isosorbide dinitrate'].")
    ev = find_divergence(traj([found], "no routes", ref=ref, gold=[["po"]]))
    assert ev.category is None and "no parsable agent SQL step" in ev.reason
    # Found in the middle of a long listing (past what the rules' views keep) is still found.
    listing = ", ".join(f"'title {i}'" for i in range(800))
    long = search("d_icd_diagnoses", "pulmonary", f"[{listing}, '{COPD}', {listing}]")
    assert find_divergence(traj([long], "none", ref=DX_REF, gold=[["2100"]])).category is None
    # No search at all: nothing says the term was not grounded (only that no tool was used).
    assert find_divergence(traj([], "no", ref=DX_REF, gold=[["2100"]])).part == "unqueried"


def test_a_value_the_database_does_not_hold_is_a_lookup_error(ehr: Path) -> None:
    spelled_out = ROUTE_REF.replace("'IH'", "'inhalation'")
    limited = ROUTE_REF + " ORDER BY starttime DESC LIMIT 1"
    steps = [sql("SELECT * FROM prescriptions WHERE subject_id = 1", "[...]"),
             sql(spelled_out, "[(None,)]"), sql(spelled_out + " AND starttime > '2099'", "[]")]
    ev = find_divergence(traj(steps, None, ref=limited, gold=[["2100-01-02"]]), ehr)
    # Ahead of the missing LIMIT: the value is why the rows differ.
    assert ev.part == "codes" and ev.category == CODE_LOOKUP
    assert "route = 'inhalation' matches no row" in ev.reason and "'IH'" in ev.reason
    assert ev.step == 1  # the first query that used the value
    # Another value the database does hold is a different reading, not a grounding failure.
    other = ROUTE_REF.replace("'IH'", "'IV'")
    ev = find_divergence(traj([sql(other, "[('2100-01-03',)]")], [["2100-01-03"]], ref=limited,
                              gold=[["2100-01-02"]]), ehr)
    assert "matches no row" not in ev.reason
    # Without the database nothing can say the value is absent.
    ev = find_divergence(traj(steps, None, ref=limited, gold=[["2100-01-02"]]))
    assert "matches no row" not in ev.reason


def test_an_abbreviation_names_the_same_concept(ehr: Path) -> None:
    assert related({"chronic", "obstructive", "pulmonary", "disease"}, {"copd"}, [COPD])
    assert not related({"chronic", "obstructive", "pulmonary", "disease"}, {"chf"}, [COPD])
    assert not related({"hemoglobin"}, {"hb"}, ["hemoglobin"])
    by_abbreviation = ("SELECT d.charttime FROM diagnoses_icd d JOIN d_icd_diagnoses t ON "
                       "d.icd_code = t.icd_code WHERE d.subject_id = 1 AND t.long_title LIKE "
                       "'%COPD%'")
    ev = find_divergence(traj([sql(by_abbreviation, "[]")], None, ref=DX_REF,
                              gold=[["2100-07-01"]]), ehr)
    assert ev.category == CODE_LOOKUP and ev.part != "concept"
    another = by_abbreviation.replace("%COPD%", "%asthma%")
    ev = find_divergence(traj([sql(another, "[]")], None, ref=DX_REF, gold=[["2100-07-01"]]), ehr)
    assert ev.part == "concept" and ev.category == SEMANTIC


def test_the_calibration_templates_make_value_and_limit_failures_the_finder_names(
    tmp_path: Path,
) -> None:
    """On the calibration demo (seed 1, not the one calibrated on) the value rule decides only
    failures injected as code errors, and the limit part only logic errors."""
    from trajectories.demo import generate_demo
    from trajectories.demo.drafting import CODE, LOGIC
    from trajectories.evidence import Probe

    demo = generate_demo(tmp_path, seed=1, n_tasks=48, rollouts=3, n_patients=500,
                         calibration=True)
    fails = [t for t in demo.trajectories if t.outcome is not None and not t.outcome.success
             and (t.task.template_id or "").startswith("grounding.")]
    with Probe.open(demo.ehr_path) as probe:
        found = [(str((t.model_extra or {})["simulated_failure"]), find_divergence(t, probe=probe))
                 for t in fails]
    by_value = [cause for cause, ev in found if "matches no row" in ev.reason]
    by_limit = [cause for cause, ev in found if ev.part == "order_limit"]
    assert by_value and set(by_value) == {CODE}
    assert by_limit and set(by_limit) == {LOGIC}

