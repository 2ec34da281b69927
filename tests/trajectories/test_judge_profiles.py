"""Scoring profiles: each benchmark's own conventions, each rule with a case it accepts and a
near miss; the default profile's rounding of structured answers and its "close is undecided"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faillab.cli.verdicts import PROFILE_NAMES
from trajectories.judge import (
    Case,
    Execution,
    Method,
    Profile,
    Verdict,
    judge,
    judge_trajectory,
    written_decimals,
)
from trajectories.model import Run, Step, StepKind, Task, Trajectory
from trajectories.scoring_ehrsql import execution_key, post_process

_GOLD_SQL = "SELECT avg(x) FROM t"


def _submission(prediction: str | None, *, gold_sql: str | None = _GOLD_SQL,
                rows: Any = None, execution: str = "ok", gold: Any = None,
                profile: str | None = "ehrsql-2024", final: Any = None) -> Trajectory:
    task: dict[str, Any] = {"id": "q1", "question": "What is the average x?",
                            "reference_sql": gold_sql, "ground_truth": gold,
                            "answerable": gold_sql is not None}
    if profile:
        task["scoring_profile"] = profile
    steps = [] if prediction is None else [Step(kind=StepKind.SQL, code=prediction,
                                                observation="x", error=execution != "ok")]
    extra = {} if prediction is None else {"execution": execution}
    return Trajectory.model_validate({"task": Task.model_validate(task),
                                      "run": Run(name="r", model="m"), "steps": steps,
                                      "final_answer": rows if final is None else final,
                                      **extra})


def test_every_profile_is_offered_on_the_command_line() -> None:
    assert set(PROFILE_NAMES) == {str(p) for p in Profile}


# ------------------------------------------------------------------------- ehrsql-2024


def test_ehrsql_rounds_both_sides_to_three_decimals_as_the_scorer_does() -> None:
    right = judge_trajectory(_submission("SELECT 1", rows=[[0.69722]], gold=[[0.697]]))
    assert right.verdict == Verdict.CORRECT
    assert right.evidence.startswith("[profile ehrsql-2024] ")
    # Near miss: 0.6981 rounds to 0.698.
    wrong = judge_trajectory(_submission("SELECT 1", rows=[[0.6981]], gold=[[0.697]]))
    assert wrong.verdict == Verdict.INCORRECT


def test_ehrsql_compares_sorted_rows_and_only_the_first_hundred() -> None:
    assert execution_key([[2], [1]]) == execution_key([[1], [2]])
    hundred = [[i] for i in range(100)]
    # Rows past the 100th of the sorted result are not compared (text sorts after digits).
    assert execution_key([*hundred, ["x"]]) == execution_key([*hundred, ["y"]])
    assert execution_key([*hundred[1:], ["x"]]) != execution_key([*hundred[1:], ["y"]])
    assert execution_key([["b"], ["a"]]) != execution_key([["a"]])


def test_ehrsql_a_null_prediction_abstains_and_anything_else_answers() -> None:
    assert judge_trajectory(_submission(None, gold_sql=None)).verdict == Verdict.CORRECT
    # Near miss: a query that finds nothing still answers, under this profile.
    empty = judge_trajectory(_submission("SELECT 1 WHERE 0", rows=[], gold_sql=None))
    assert (empty.verdict, empty.method) == (Verdict.INCORRECT, Method.ABSTENTION)
    # And under RobustGym's rule the same empty result is the abstention.
    gym = judge_trajectory(_submission("SELECT 1 WHERE 0", rows=[], profile="robustgym",
                                       gold_sql=None))
    assert gym.verdict == Verdict.CORRECT


def test_ehrsql_abstaining_on_an_answerable_question_is_its_own_kind() -> None:
    result = judge_trajectory(_submission(None, gold=[[1]]))
    assert (result.verdict, result.method) == (Verdict.INCORRECT, Method.ABSTAINED)


def test_ehrsql_a_failing_prediction_is_wrong_and_a_stopped_one_undecided() -> None:
    failed = judge_trajectory(_submission("SELEC 1", execution="failed", gold=[[1]]))
    assert failed.verdict == Verdict.INCORRECT
    stopped = judge_trajectory(_submission("SELECT 1", execution="stopped", gold=[[1]]))
    assert stopped.verdict == Verdict.UNDECIDED


def test_ehrsql_re_executes_both_queries_post_processed_at_the_tasks_time() -> None:
    seen: list[tuple[str, str | None]] = []

    def execute(sql: str, now: str | None) -> Execution:
        seen.append((sql, now))
        return Execution(rows=[[1]])

    traj = _submission("SELECT  x\n FROM t WHERE y > = 1", gold=[[2]], rows=[[3]])
    assert judge_trajectory(traj, execute=execute).verdict == Verdict.CORRECT
    assert seen[0] == ("SELECT x FROM t WHERE y >= 1", None)
    assert seen[1] == (_GOLD_SQL, None)


def test_post_processing_follows_the_scorers_rules() -> None:
    assert post_process("SELECT DATE_SUB(NOW(), INTERVAL 1 YEAR)") == \
        "SELECT datetime(NOW(), '-1 year')"
    assert post_process("SELECT DATE_ADD('2100-01-01', INTERVAL 3 MONTH)") == \
        "SELECT datetime('2100-01-01', '+3 months')"
    assert post_process("SELECT strftime('%y-%j', t)") == "SELECT strftime('%Y-%J', t)"
    assert post_process("WHERE v BETWEEN temperature_lower AND temperature_upper") == \
        "WHERE v BETWEEN 35.5 AND 38.1"
    # Near miss: bounds of two different signs are left alone.
    mixed = "WHERE v BETWEEN temperature_lower AND sao2_upper"
    assert post_process(mixed) == mixed


# ----------------------------------------------------------------------------- ehr-complex


def test_ehr_complex_is_exact_match_alone() -> None:
    prose = _submission(None, gold=[[57]], final="There are 57 patients.", profile=None)
    assert judge_trajectory(prose).verdict == Verdict.CORRECT  # the default reads prose
    strict = judge_trajectory(prose, profile="ehr-complex")
    assert strict.verdict == Verdict.INCORRECT and "[profile ehr-complex]" in strict.evidence
    exact = judge_trajectory(_submission(None, gold=[[57]], final=[[57]], profile=None),
                             profile="ehr-complex")
    assert exact.verdict == Verdict.CORRECT


# ---------------------------------------------------------------- default: structured answers


@pytest.mark.parametrize(("answer", "verdict"), [
    ([[0.69722]], Verdict.CORRECT),     # rounds to the gold as written (3 decimals)
    ([[0.6991]], Verdict.UNDECIDED),    # within 1%: close but not equal, a person decides
    ([[0.75]], Verdict.INCORRECT),      # not close
])
def test_a_structured_answer_is_rounded_to_the_gold_as_it_is_written(
        answer: Any, verdict: Verdict) -> None:
    case = Case(question="What is the ratio?", ground_truth=[["0.697"]], final_answer=answer)
    assert judge(case).verdict == verdict


def test_an_integer_gold_does_not_round_a_decimal_answer() -> None:
    assert written_decimals([[57]]) is None
    case = Case(question="How many?", ground_truth=[[57]], final_answer=[[57.3]])
    assert judge(case).verdict == Verdict.UNDECIDED  # 0.5% off: close, never equal
    far = Case(question="How many?", ground_truth=[[57]], final_answer=[[60]])
    assert judge(far).verdict == Verdict.INCORRECT
    # Near miss of "close": two whole numbers that differ are different counts.
    count = Case(question="How many?", ground_truth=[[115]], final_answer=[[114]])
    assert judge(count).verdict == Verdict.INCORRECT


def test_ehrsql_reads_a_null_gold_without_gold_sql_as_no_answer() -> None:
    log = Trajectory.model_validate({
        "task": {"id": "q", "question": "Where does patient 1 live?", "ground_truth": None},
        "run": {"name": "r", "model": "m"}})
    assert judge_trajectory(log, profile="ehrsql-2024").verdict == Verdict.CORRECT
    # Near miss: an empty gold result is an answer (the query finds nothing), so abstaining
    # on it is not right.
    empty = _submission(None, gold=[])
    assert judge_trajectory(empty).verdict == Verdict.INCORRECT


def test_the_sandboxs_own_limits_are_no_wrong_answer(tmp_path: Path) -> None:
    import sqlite3

    from trajectories.judge import sandbox_executor

    db = tmp_path / "t.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5)])
    con.commit()
    con.close()
    execute = sandbox_executor(db, timeout_s=10.0, row_cap=3)
    assert execute("SELECT x FROM t WHERE x < 2", None).rows == [[0], [1]]
    assert execute("SELECT nope FROM t", None).error is not None  # the query's own fault
    assert execute("SELECT x FROM t", None).stopped is not None   # more rows than the cap
    assert execute("DELETE FROM t", None).stopped is not None     # refused: never ran
