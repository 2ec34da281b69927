"""The first-divergence finder and the heuristic labeller's use of it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from opinions.prelabel.heuristic import HeuristicLabeller
from taxonomy import default_taxonomy
from tests.labeling.support import sqlite_ehr
from trajectories.evidence import CALIBRATION, Probe, decompose, find_divergence
from trajectories.evidence.finder import MEASURED_PARTS
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory
from trajectories.signals import ANSWER_FORMAT, CODE_LOOKUP, SEMANTIC, SQL_LOGIC, STUCK_IN_LOOP

REF = (
    "SELECT COUNT(DISTINCT l.subject_id) FROM labevents l WHERE l.itemid = 50820 "
    "AND strftime('%Y-%m', l.charttime) = '2100-11'"
)


def sql(code: str, obs: str = "[(3,)]", error: bool = False) -> Step:
    return Step(kind=StepKind.SQL, code=code, observation=obs, error=error)


def traj(steps: list[Step], final: Any, *, ref: str | None = REF, gold: Any = 4) -> Trajectory:
    return Trajectory(
        task=Task(
            id="t",
            question="How many patients had a pH test in 2100-11?",
            reference_sql=ref,
            ground_truth=gold,
        ),
        run=Run(name="r", model="m"),
        steps=[*steps, Step(kind=StepKind.MESSAGE, content=str(final))],
        final_answer=final,
        outcome=Outcome(success=False, reward=0.0),
    )


def test_decompose_reads_every_part_in_both_dialects() -> None:
    parts = decompose(REF)
    assert parts is not None
    assert parts.tables == {"labevents"}
    assert ("itemid", "50820") in parts.codes
    assert parts.times == {"2100-11"}
    assert parts.aggregations == {"count distinct"}
    duck = decompose(
        "SELECT a, count(*) FROM t WHERE ts >= TIMESTAMP '2100-11-01' "
        "GROUP BY a ORDER BY 2 DESC LIMIT 3"
    )
    assert duck is not None
    assert duck.group_by == {"a"} and duck.order_limit == (True, 3) and duck.n_outputs == 2
    assert decompose("SELEC nonsense ((") is None or decompose("") is None


def test_missing_code_filter_is_a_code_lookup_divergence() -> None:
    t = traj(
        [
            sql("SELECT * FROM d_labitems WHERE label LIKE '%ph%'"),
            sql(
                "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50831 "
                "AND strftime('%Y-%m', charttime) = '2100-11'"
            ),
        ],
        3,
    )
    ev = find_divergence(t)
    assert ev.category == CODE_LOOKUP
    assert ev.step == 1
    assert "itemid 50820 missing" in ev.reason
    assert ev.rows and ev.rows[0].startswith("step 1")


def test_other_time_window_is_sql_logic_and_first_step_is_earliest() -> None:
    wrong = (
        "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50820 "
        "AND strftime('%Y-%m', charttime) = '2100-12'"
    )
    t = traj([sql("SELECT 1 FROM patients"), sql(wrong), sql(wrong + " AND 1=1")], 3)
    ev = find_divergence(t)
    assert ev.category == SQL_LOGIC
    assert ev.step == 1
    assert "time window 2100-12 vs reference 2100-11" in ev.reason


def test_a_bound_on_a_count_is_not_a_value_of_the_counted_column() -> None:
    parts = decompose("SELECT MIN(starttime) FROM prescriptions WHERE drug IN ('a', 'b') "
                      "GROUP BY hadm_id HAVING COUNT(DISTINCT drug) = 2")
    assert parts is not None
    assert parts.codes == {("drug", "a"), ("drug", "b")}
    assert not any(v == "2" for _, v in parts.codes | parts.filters)


def test_the_step_is_where_the_primary_part_first_diverges() -> None:
    """The final query's strongest divergence is a wrong code; an earlier exploring query that
    shares only a weaker divergence (no LIMIT, like the final one) has not yet written it."""
    ref = ("SELECT starttime FROM prescriptions WHERE subject_id = 7 "
           "AND drug = 'quetiapine fumarate' ORDER BY starttime LIMIT 1")
    exploring = sql("SELECT starttime FROM prescriptions WHERE subject_id = 7", "[('x',)]")
    wrong = sql("SELECT starttime FROM prescriptions WHERE subject_id = 7 "
                "AND drug = 'quetiapine'", "[]")
    ev = find_divergence(traj([exploring, wrong], "none", ref=ref, gold=[["2100-01-01"]]))
    assert ev.divergences[0].part == "codes" and "order_limit" in ev.to_dict()["parts"]
    assert ev.step == 1


def test_answer_seen_then_changed_is_answer_format() -> None:
    t = traj([sql(REF, obs="[(4,)]")], "four patients: 4.0 maybe 5", gold=[[4]])
    t2 = t.model_copy(update={"final_answer": "around five"})
    ev = find_divergence(t2)
    assert ev.category == ANSWER_FORMAT
    assert ev.step == 1  # step 0 held the answer; the message that gave another one left it
    assert "answer correct in step 0" in ev.reason


def test_an_answer_reached_again_was_lost_after_the_last_time() -> None:
    """The answer held at step 0, a follow-up query in between, the same result again at step
    2: the detour came back, so the step that lost the answer is the query after step 2."""
    detour = sql("SELECT COUNT(*) FROM admissions", "[(17,)]")
    again = sql(REF + " ", obs="[(4,)]")
    final = sql("SELECT subject_id FROM labevents WHERE itemid = 50820", "[(10001,)]")
    t = traj([sql(REF, obs="[(4,)]"), detour, again, final], "10001", gold=[[4]])
    ev = find_divergence(t)
    assert ev.step == 3
    assert "answer correct in step 0" in " ".join(d.reason for d in ev.divergences)
    # Never reached again: the first query that left it is the step, as before.
    once = traj([sql(REF, obs="[(4,)]"), detour, final], "10001", gold=[[4]])
    assert find_divergence(once).step == 1


def test_a_result_right_by_chance_does_not_clear_its_query() -> None:
    """Step 0 writes the wrong drug name (the database has 'quetiapine fumarate') yet returns
    the answer, by chance; the follow-up query with the same wrong name loses it. The error was
    written at step 0. A pattern that takes in the reference's value chose the right rows on
    purpose: there the step is where the answer was left, as before."""
    ref = "SELECT starttime FROM prescriptions WHERE drug = 'quetiapine fumarate'"
    gold = [["2100-01-23 10:00:00"]]
    obs = "[('2100-01-23 10:00:00',)]"
    chance = sql("SELECT starttime FROM prescriptions WHERE drug = 'quetiapine'", obs)
    later = sql("SELECT starttime FROM prescriptions WHERE drug = 'quetiapine' "
                "AND hadm_id = 7", "[]")
    ev = find_divergence(traj([chance, later], "none", ref=ref, gold=gold))
    assert ev.step == 0 and ev.category == CODE_LOOKUP
    pattern = sql("SELECT starttime FROM prescriptions WHERE drug LIKE '%Quetiapine%'", obs)
    wider = sql("SELECT starttime FROM prescriptions WHERE drug LIKE '%Quetiapine%' "
                "AND hadm_id = 7", "[]")
    assert find_divergence(traj([pattern, wider], "none", ref=ref, gold=gold)).step == 1


def test_what_the_final_answer_did_to_held_rows_names_the_fault() -> None:
    """Step 0 held the verified answer; the answer then given is judged by what it did to the
    verified rows: more rows holding them answers a wider question (a condition dropped:
    Semantic), the same rows repeated drops a DISTINCT and fewer of them cuts answer rows (both
    SQL Logic). The same rows in another shape stay an Answer Format Error."""
    gold = [["sputum"], ["blood culture"], ["urine"]]
    held = sql("SELECT spec FROM micro GROUP BY spec ORDER BY COUNT(*) DESC LIMIT 3",
               "[('sputum',), ('blood culture',), ('urine',)]")
    later = sql("SELECT spec, COUNT(*) FROM micro GROUP BY spec", "[('x', 1)]")

    def judged(final: Any) -> Any:
        return find_divergence(traj([held, later], final, ref=None, gold=gold))

    wider = judged([["sputum"], ["blood culture"], ["urine"], ["stool"], ["swab"]])
    assert wider.category == SEMANTIC and wider.step == 1
    assert "3 row(s) among 5" in wider.reason
    repeated = judged([["sputum"], ["sputum"], ["blood culture"], ["urine"]])
    assert repeated.category == SQL_LOGIC and "repeats" in repeated.reason
    narrower = judged([["blood culture", 74]])
    assert narrower.category == SQL_LOGIC and narrower.step == 1
    assert "keeps 1 of the verified answer's 3 rows" in narrower.reason
    # Each verified row with its count beside it: the rows are all there, reshaped.
    reshaped = judged([["sputum", 67], ["blood culture", 74], ["urine", 38]])
    assert reshaped.category == ANSWER_FORMAT
    # Nothing of the verified rows in the answer says nothing about which condition moved.
    assert judged([["stool"], ["swab"]]).category == ANSWER_FORMAT


def _conversation(replies: list[str], *, tail: list[Step] | None = None) -> Trajectory:
    """The answer held at step 0, then the user pressing and the agent replying."""
    steps: list[Step] = [sql(REF, obs="[(4,)]")]
    for reply in replies:
        steps.append(Step(kind=StepKind.MESSAGE, role="user", content="Can you confirm?"))
        steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=reply))
    t = traj([*steps, *(tail or [])], "4", gold=[[4]])
    return t.model_copy(update={"steps": t.steps[:-1]})  # the last reply is the final one


def test_the_same_reply_until_the_end_is_a_loop_from_its_first() -> None:
    same = "I have already provided the answer."
    ev = find_divergence(_conversation(["It is 4.", same, same.upper(), f"  {same} "]))
    assert ev.category == STUCK_IN_LOOP
    assert ev.step == 4  # the first of the three repeated replies
    assert "the same reply given 3 times from step 4" in ev.reason
    # Twice is not a loop; a new action after the replies means they were not the end.
    assert find_divergence(_conversation(["It is 4.", same, same])).category != STUCK_IN_LOOP
    acted = _conversation([same, same, same], tail=[sql("SELECT 1 FROM patients", "[(1,)]")])
    assert find_divergence(acted).category != STUCK_IN_LOOP


def test_a_loop_starts_at_the_first_attempt_that_got_the_same_error() -> None:
    """Step 1 differs from the repeated query by one condition and got the same error (the
    driver quotes each query after the error, so the texts differ only there): it is the
    loop's first attempt. Step 0 got another error: it is before the loop."""
    def failing(code: str, column: str) -> Step:
        return sql(code, f"Error: no such column: {column} [SQL: {code}]", error=True)

    repeated = "SELECT charttime FROM procedures_icd p JOIN d_icd_procedures d ON p.x = d.y"
    steps = [failing(repeated + " WHERE p.q = 1", "p.q"),
             failing(repeated + " AND 1 = 1", "d.y"),
             *[failing(repeated, "d.y") for _ in range(3)]]
    ev = find_divergence(traj(steps, None))
    assert ev.category == STUCK_IN_LOOP
    assert ev.step == 1


def test_a_last_query_that_fails_after_the_answer_was_held_is_sql_logic() -> None:
    """The taxonomy: a final query that fails to execute is a SQL Logic Error. The answer was
    held at step 0; the last query (what was scored) fails at step 1."""
    broken = sql("SELECT route FROM prescriptions UNION SELECT route FROM inputevents",
                 "Error: no such column: route", error=True)
    ev = find_divergence(traj([sql(REF, obs="[(4,)]"), broken], "4", gold=[[4]]))
    assert ev.category == SQL_LOGIC and ev.step == 1
    assert "the last query, fails to execute" in ev.reason
    # Not the last query: the failure was recovered from, and it is not this rule.
    recovered = traj([sql(REF, obs="[(4,)]"), broken, sql(REF, obs="[(5,)]")], "5", gold=[[4]])
    assert "fails to execute" not in find_divergence(recovered).reason


def test_other_tables_are_semantic() -> None:
    t = traj([sql("SELECT COUNT(*) FROM chartevents WHERE itemid = 50820")], 9)
    ev = find_divergence(t)
    assert {d.part for d in ev.divergences} >= {"tables"}
    assert any(d.category == SEMANTIC for d in ev.divergences)


def test_no_reference_or_matching_query_decides_nothing() -> None:
    assert find_divergence(traj([sql(REF)], 3, ref=None)).category is None
    same = find_divergence(traj([sql(REF)], 3, gold=[[4]]))
    assert same.category is None and "matches every reference part" in same.reason


def test_heuristic_uses_evidence_and_falls_back_honestly() -> None:
    tax = default_taxonomy()
    lab = HeuristicLabeller()
    wrong = (
        "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50820 "
        "AND strftime('%Y-%m', charttime) = '2100-12'"
    )
    t = traj([sql("SELECT 1 FROM patients"), sql(wrong)], 3)
    got = lab.label(t, tax.version)
    assert got.category == SQL_LOGIC and got.first_error_step == 1
    assert "evidence:" in got.rationale
    fallback = lab.label(traj([sql(REF)], 3, gold=[[4]]), tax.version)
    assert fallback.confidence <= 0.3
    assert "No evidence decided" in fallback.rationale


def test_cli_prints_evidence_for_each_real_failure() -> None:
    import json

    from click.testing import CliRunner

    from faillab.cli import main
    from tests.support import EHRSQL_SQLITE, REAL_TRAJECTORIES, require_shared

    path = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[0]
    res = CliRunner().invoke(main, ["evidence", str(path), "--json", "--no-exec"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert rows and all("reason" in r and "step" in r for r in rows)
    assert sum(r["category"] is not None for r in rows) >= len(rows) // 2
    assert not any(r["executed"] for r in rows)
    run = CliRunner().invoke(
        main, ["evidence", str(path), "--json", "--db", str(require_shared(EHRSQL_SQLITE))]
    )
    assert run.exit_code == 0, run.output
    executed = [json.loads(line) for line in run.output.splitlines()]
    assert len(executed) == len(rows) and all(r["executed"] for r in executed)
    assert all(any(x.startswith("reference result:") for x in r["rows"]) for r in executed)
    bad = CliRunner().invoke(main, ["evidence", str(path) + ".missing"])
    assert bad.exit_code == 1 and "no such trajectory file" in bad.output
    no_db = CliRunner().invoke(main, ["evidence", str(path), "--db", str(path) + ".nodb"])
    assert no_db.exit_code == 1 and "no such EHR database" in no_db.output



def test_a_dictionary_row_id_joined_as_the_code_is_a_code_error() -> None:
    ref = ("SELECT MIN(valuenum) FROM labevents WHERE itemid IN "
           "(SELECT itemid FROM d_labitems WHERE label = 'hemoglobin')")
    by_row = ("SELECT MIN(l.valuenum) FROM labevents l JOIN d_labitems d "
              "ON l.itemid = d.row_id WHERE d.label = 'hemoglobin'")
    right_join = by_row.replace("d.row_id", "d.itemid")
    t = traj([sql("SELECT * FROM d_labitems LIMIT 3"), sql(by_row, "[(None,)]"),
              sql(by_row + " AND 1 = 1", "[(None,)]")], None, ref=ref, gold=[[9.1]])
    ev = find_divergence(t)
    assert ev.part == "codes" and ev.category == CODE_LOOKUP
    assert "itemid joined to d_labitems.row_id" in ev.reason
    assert ev.step == 1  # where the row number first stands in for the code
    # Joined on the code itself, the same query is no code error.
    fixed = find_divergence(traj([sql(right_join, "[(None,)]")], None, ref=ref, gold=[[9.1]]))
    assert "row_id" not in fixed.reason and fixed.category != CODE_LOOKUP


def test_a_partial_name_searched_is_the_same_concept() -> None:
    from trajectories.evidence.grounding import related

    assert related({"hem"}, {"hemoglobin"})  # searched too widely, same concept
    assert related({"hemoglobin"}, {"hemoglob"})
    assert not related({"hem"}, {"potassium"})
    assert not related({"culture"}, {"resection"})


# --------------------------------------------------------------------------- executed evidence


@pytest.fixture()
def icd_db(tmp_path: Path) -> Path:
    """A tiny EHR with both ICD versions of one concept, for code look-ups by execution."""
    return sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE d_icd_diagnoses (icd_code TEXT, icd_version INTEGER, long_title TEXT);"
        "INSERT INTO d_icd_diagnoses VALUES ('4280', 9, 'Congestive heart failure'),"
        " ('I509', 10, 'Heart failure, unspecified');"
        "CREATE TABLE diagnoses_icd (subject_id INTEGER, hadm_id INTEGER, icd_code TEXT,"
        " icd_version INTEGER);"
        "INSERT INTO diagnoses_icd VALUES (1, 10, 'I509', 10), (2, 20, 'I509', 10),"
        " (3, 30, '4280', 9);"
    ))


def test_executed_evidence_names_the_code_version_and_cites_rows(icd_db: Path) -> None:
    ref = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code IN ('I509')"
    wrong = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code IN ('4280')"
    t = traj([sql("SELECT * FROM d_icd_diagnoses"), sql(wrong, "[(1,)]")], 1, ref=ref, gold=[[2]])
    ev = find_divergence(t, icd_db)
    assert ev.executed and ev.part == "codes" and ev.category == CODE_LOOKUP
    assert "ICD-9 code looked up, task needs ICD-10" in ev.reason
    assert ev.step == 1
    assert "reference result: 1 row: 2" in ev.rows
    assert any("'Congestive heart failure'" in r for r in ev.rows)
    assert ev.confidence == CALIBRATION["codes"][1]


def test_a_name_matched_as_text_is_not_called_a_missing_code(icd_db: Path) -> None:
    ref = "SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 AND route = 'ih'"
    by_name = ("SELECT MAX(starttime) FROM prescriptions WHERE subject_id = 1 "
               "AND drug LIKE '%inhaler%'")
    t = traj([sql(by_name, "[(None,)]")], None, ref=ref, gold=[["2100-01-01"]])
    ev = find_divergence(t, icd_db)
    assert ev.part == "codes"
    # A drug name is never looked up as a code: the reason may not say no dictionary lists it.
    assert "no dictionary" not in ev.reason
    assert "drug text '%inhaler%'" in ev.reason
    unknown = by_name.replace("drug LIKE '%inhaler%'", "icd_code = 'Z999'")
    t = traj([sql(unknown, "[(None,)]")], None, ref=ref, gold=[["2100-01-01"]])
    assert "codes z999 are in no dictionary table" in find_divergence(t, icd_db).reason



def test_a_wrong_code_before_a_misreading_is_the_first_error(tmp_path: Path) -> None:
    path = tmp_path / "proc.sqlite"
    sqlite_ehr(path, (
        "CREATE TABLE d_icd_procedures (icd_code TEXT, long_title TEXT);"
        "INSERT INTO d_icd_procedures VALUES ('icd9|5491', 'percutaneous abdominal drainage'),"
        " ('icd9|3615', 'single internal mammary-coronary artery bypass');"
        "CREATE TABLE procedures_icd (subject_id INTEGER, hadm_id INTEGER, icd_code TEXT);"
        "INSERT INTO procedures_icd VALUES (1, 10, 'icd9|5491'), (2, 20, 'icd9|3615');"
        "CREATE TABLE microbiologyevents (subject_id INTEGER, hadm_id INTEGER, test_name TEXT);"
        "INSERT INTO microbiologyevents VALUES (1, 10, 'gram stain');"
        "CREATE TABLE labevents (subject_id INTEGER, hadm_id INTEGER, itemid INTEGER);"
        "INSERT INTO labevents VALUES (2, 20, 50902);"
    ))
    ref = ("SELECT m.test_name FROM microbiologyevents m WHERE m.hadm_id IN (SELECT hadm_id "
           "FROM procedures_icd WHERE icd_code = (SELECT icd_code FROM d_icd_procedures "
           "WHERE long_title = 'percutaneous abdominal drainage'))")
    guessed = "SELECT hadm_id FROM procedures_icd WHERE icd_code = 'icd9|3615'"
    from_labs = ("SELECT itemid FROM labevents WHERE hadm_id IN (SELECT hadm_id FROM "
                 "procedures_icd WHERE icd_code = 'icd9|3615')")
    steps = [sql("SELECT * FROM d_icd_procedures"), sql(guessed, "[(20,)]"),
             sql(from_labs, "[(50902,)]")]
    ev = find_divergence(traj(steps, [[50902]], ref=ref, gold=[["gram stain"]]), path)
    assert ev.part == "codes" and ev.category == CODE_LOOKUP and ev.step == 1
    assert "icd9|3615" in ev.reason and "icd9|5491" in ev.reason
    # With the code the look-up finds, answering from the lab table is the misreading.
    right = [sql("SELECT * FROM d_icd_procedures"), sql(guessed.replace("3615", "5491")),
             sql(from_labs.replace("3615", "5491"), "[(50902,)]")]
    ev = find_divergence(traj(right, [[50902]], ref=ref, gold=[["gram stain"]]), path)
    assert ev.part == "tables" and ev.category == SEMANTIC

def test_executed_answer_step_needs_the_same_rows_not_a_mention(icd_db: Path) -> None:
    ref = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code = 'I509'"
    # The recorded output mentions 2, but the query returns more than the reference's rows.
    superset = "SELECT hadm_id / 10 FROM diagnoses_icd ORDER BY 1"
    t = traj([sql(superset, "1\n2\n3")], "unsure", ref=ref, gold=[[2]])
    # Structural, the recorded output is all there is: three rows for a one-row answer are a
    # listing that mentions it, not the answer held.
    assert find_divergence(t).part != "answer"
    assert find_divergence(t, icd_db).part != "answer"  # executed: it is not the answer
    right = traj([sql(ref, "2")], "two admissions", ref=ref, gold=[[2]])
    ev = find_divergence(right, icd_db)
    # Step 0 held the answer; the final message (step 1) is where it was lost.
    assert ev.part == "answer" and ev.step == 1 and ev.category == ANSWER_FORMAT
    # Structural: one recorded row for a one-row answer, holding its value, is the answer held.
    ev = find_divergence(right)
    assert ev.part == "answer" and ev.step == 1


def test_hostile_agent_sql_is_no_evidence_and_changes_nothing(icd_db: Path) -> None:
    before = icd_db.read_bytes()
    ref = "SELECT COUNT(*) FROM diagnoses_icd"
    hostile = ["DELETE FROM diagnoses_icd", "ATTACH DATABASE '/tmp/x.db' AS x",
               "SELECT load_extension('/tmp/x')"]
    t = traj([sql(h, "ok") for h in hostile], 0, ref=ref, gold=[[3]])
    with Probe.open(icd_db) as probe:
        find_divergence(t, probe=probe)
        assert all(probe.run(h) is None for h in hostile)
    assert icd_db.read_bytes() == before


def test_a_step_whose_width_fits_no_answer_is_not_executed(icd_db: Path) -> None:
    ref = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code = 'I509'"
    # The recorded output mentions 2, but two columns can never equal the one-column answer.
    wide = "SELECT subject_id, hadm_id / 10 FROM diagnoses_icd WHERE subject_id = 2"
    t = traj([sql(wide, "2, 2")], "unsure", ref=ref, gold=[[2]])
    ev = find_divergence(t, icd_db)
    assert ev.part != "answer" and ev.executed
    with Probe.open(icd_db) as probe:  # the same step, one column: it is run, and is the answer
        narrow = traj([sql(ref, "2")], "two admissions", ref=ref, gold=[[2]])
        assert find_divergence(narrow, probe=probe).part == "answer"
    with Probe.open(icd_db) as probe:
        # Results are shared between probes of one file: had the finder run it, it would be
        # cached now.
        probe.run(wide)
        assert probe.queries == 1


def test_results_are_shared_between_probes_of_one_database(icd_db: Path, tmp_path: Path) -> None:
    query = "SELECT COUNT(*) FROM diagnoses_icd WHERE icd_version = 10"
    with Probe.open(icd_db) as first:
        assert first.run(query) is not None and first.queries == 1
    with Probe.open(icd_db) as second:
        got = second.run(query)
        assert got is not None and got.rows == ((2,),) and second.queries == 0
    other = tmp_path / "other.sqlite"
    other.write_bytes(icd_db.read_bytes())  # same content, another file: not shared
    with Probe.open(other) as third:
        assert third.run(query) is not None and third.queries == 1


# --------------------------------------------------------------------------- demo and real targets

# The diverging parts that count as right for each cause the demo generator injects.
RIGHT_PARTS = {
    "Medical-Code Lookup Error": {"codes", "lookup"},
    "SQL Logic Error": {"times", "aggregations", "group_by", "order_limit", "filters", "result"},
    "Semantic Misunderstanding": {"no_data", "tables", "filters", "order_limit"},
    "Answer Format Error": {"answer"},
    "Variable Scope Error": {"execution"},
    "Stuck-in-Loop": {"loop"},
}
_CATEGORY_KEYS = {
    "Medical-Code Lookup Error": CODE_LOOKUP,
    "SQL Logic Error": SQL_LOGIC,
    "Semantic Misunderstanding": SEMANTIC,
    "Answer Format Error": ANSWER_FORMAT,
    "Variable Scope Error": "variable_scope_error",
    "Stuck-in-Loop": "stuck_in_loop",
}


@pytest.fixture(scope="module")
def demo_evidence(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any]]:
    from trajectories.demo import generate_demo

    demo = generate_demo(tmp_path_factory.mktemp("evdemo"), seed=1, n_tasks=24, rollouts=2,
                         n_patients=500)
    fails = [t for t in demo.trajectories if t.outcome is not None and not t.outcome.success]
    with Probe.open(demo.ehr_path) as probe:
        return [
            (str((t.model_extra or {})["simulated_failure"]), find_divergence(t, probe=probe))
            for t in fails
        ]


def test_demo_failures_get_evidence_with_the_right_part(
    demo_evidence: list[tuple[str, Any]],
) -> None:
    assert len(demo_evidence) > 80
    assert all(ev.executed for _, ev in demo_evidence)
    right = sum(ev.part in RIGHT_PARTS[cause] for cause, ev in demo_evidence)
    assert right / len(demo_evidence) >= 0.9, right / len(demo_evidence)


def test_calibration_matches_what_the_demo_measures(
    demo_evidence: list[tuple[str, Any]],
) -> None:
    by_part: dict[str, Counter[str]] = {}
    for cause, ev in demo_evidence:
        if ev.part is not None:
            by_part.setdefault(ev.part, Counter())[_CATEGORY_KEYS[cause]] += 1
    checked = 0
    for part, causes in by_part.items():
        n = sum(causes.values())
        if part not in MEASURED_PARTS or n < 10:
            continue
        category, confidence = CALIBRATION[part]
        precision = causes[category] / n
        assert causes.most_common(1)[0][0] == category, (part, causes)
        assert abs(confidence - min(0.9, precision)) <= 0.15, (part, confidence, precision)
        checked += 1
    assert checked >= 4


def test_real_failures_mostly_get_a_non_fallback_suggestion() -> None:
    from tests.support import EHRSQL_SQLITE, REAL_TRAJECTORIES, require_shared
    from trajectories.importers import read_file

    db = require_shared(EHRSQL_SQLITE)
    fails = [
        t
        for f in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
        for _, t in read_file(f).trajectories
        if t.outcome is not None and t.outcome.reward is not None and t.outcome.reward < 1
    ]
    assert len(fails) == 95
    lab = HeuristicLabeller(ehr_path=db)
    labels = [lab.label(t, lab.taxonomy.version) for t in fails]
    non_fallback = sum(r.confidence > 0.3 for r in labels)
    assert non_fallback / len(fails) >= 0.7, non_fallback
    with Probe.open(db) as probe:
        evidence = [find_divergence(t, probe=probe) for t in fails]
    assert sum(e.category is not None for e in evidence) / len(fails) >= 0.7


# --------------------------------------------------------------------------- stored and exported


def test_evidence_is_stored_beside_the_prelabel_and_exported(store: Any, icd_db: Path) -> None:
    import json

    from labeling.store.io import export_labels
    from opinions.prelabel.base import PrelabelKey, PrelabelRecord

    ref = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code IN ('I509')"
    wrong = "SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd WHERE icd_code IN ('4280')"
    t = traj([sql(wrong, "[(1,)]")], 1, ref=ref, gold=[[2]]).with_id()
    lab = HeuristicLabeller(ehr_path=icd_db)
    result = lab.label(t, lab.taxonomy.version)
    assert result.evidence is not None and result.evidence["part"] == "codes"
    assert result.category == CODE_LOOKUP and result.rationale.startswith("evidence:")
    assert t.id is not None
    key = PrelabelKey(t.id, lab.taxonomy.version, lab.prompt_version, lab.model)
    store.prelabels.save(PrelabelRecord(key=key, result=result))
    got = store.prelabels.get(key)
    assert got is not None and got.result is not None
    assert got.result.evidence == json.loads(json.dumps(result.evidence))
    lines = [json.loads(x) for x in export_labels(store, fmt="jsonl").splitlines()]
    [row] = [x for x in lines if x["source"] == "llm"]
    assert row["evidence"]["reason"] == result.evidence["reason"]
    csv_text = export_labels(store, fmt="csv")
    assert "ICD-9 code looked up" in csv_text


def test_a_code_is_looked_up_only_where_its_column_points(tmp_path: Path) -> None:
    """An itemid that shares its digits with an ICD code is an item, never a diagnosis; ICD
    codes are found as MIMIC-IV stores them (upper case) and as EHRSQL does (lower case, with
    a version prefix), though the parser lower-cases every literal."""
    db = sqlite_ehr(tmp_path / "ehr.sqlite", (
        "CREATE TABLE d_icd_diagnoses (icd_code TEXT, icd_version INTEGER, long_title TEXT);"
        "INSERT INTO d_icd_diagnoses VALUES ('4019', 9, 'Hypertension NOS'),"
        " ('icd10|e119', 10, 'Type 2 diabetes'), ('I509', 10, 'Heart failure');"
        "CREATE TABLE d_labitems (itemid INTEGER, label TEXT);"
        "INSERT INTO d_labitems VALUES (4019, 'Made-up lab');"
    ))
    with Probe.open(db) as probe:
        assert {c: i.label for c, i in probe.codes(["4019"], "itemid").items()} == {
            "4019": "Made-up lab"}
    with Probe.open(db) as probe:
        found = probe.codes(["4019", "icd10|e119", "i509"], "icd_code")
        assert {c: i.label for c, i in found.items()} == {
            "4019": "Hypertension NOS", "icd10|e119": "Type 2 diabetes", "i509": "Heart failure"}
    with Probe.open(db) as probe:  # no column known: every dictionary the shape fits, as before
        assert probe.codes(["4019"])["4019"].table == "d_icd_diagnoses"


def test_every_evidence_part_is_calibrated_and_an_unknown_one_is_refused() -> None:
    from trajectories.evidence.finder import CALIBRATION, UNMEASURED_PARTS
    from trajectories.evidence.parts import Divergence, EvidencePart

    assert set(CALIBRATION) == set(EvidencePart)
    assert set(EvidencePart) == MEASURED_PARTS | UNMEASURED_PARTS
    assert all(CALIBRATION[p][1] == 0.15 for p in UNMEASURED_PARTS)
    with pytest.raises(ValueError, match="'joins'"):
        Divergence("joins", "a misspelt part", "sql_logic_error", 0.5)
