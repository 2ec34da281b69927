"""The judge's rule layers, each with a case it accepts and a near miss it refuses; abstention
both ways; undecided where the rules cannot tell; and the agreement with people's verdicts on
the shared development sets (the targets docs/evaluation.md reports)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import CLAUDE_ANSWERS, LMSTUDIO_SAMPLE, make_trajectory, require_shared
from trajectories.importers import read_file
from trajectories.importers.tasks import load_tasks
from trajectories.judge import Case, Method, Verdict, judge, judge_prose, judge_trajectory
from trajectories.model import Step, StepKind


def prose(answer: str, gold: Any, question: str = "How many patients are there?") -> Verdict:
    return judge(Case(question=question, ground_truth=gold, final_answer=answer)).verdict


@pytest.mark.parametrize(("answer", "gold"), [
    ("Total Output: 2,845 mL", "2845"),
    ("There are 2 000 patients.", "2000"),
    ("The length of stay is 24.98 days.", "24.983"),  # written to two decimals
    ("The change was -5.00%.", "-5"),
    ("It decreased by 11.0 mmHg.", "-11"),  # a change stated in words
    ("Three patients were admitted.", "3"),
    ("No patients are in their 30s.", "0"),
    ("It was last observed on December 24, 2100 at 14:02:00.", "2100-12-24 14:02:00"),
    ("The last magnesium test was on July 4, 2100 at 6:35 AM.", "2100-07-04 06:35:00"),
    ("Discharged on 2100-06-15 at 15:05:00.", "2100-06-15 15:05:00"),
    ("The marital status was *married*.", "married"),
    ("The last care unit was medical-surgical (med/surg).", "med/surg"),
    ("Insulin, 0.9% Sodium Chloride and Furosemide.",
     [["insulin"], ["0.9% sodium chloride"], ["furosemide"]]),
])
def test_prose_that_states_the_gold_is_correct(answer: str, gold: Any) -> None:
    assert prose(answer, gold) == Verdict.CORRECT


@pytest.mark.parametrize(("answer", "gold"), [
    ("Total Output: 3,845 mL", "2845"),
    ("Difference: 81.0 - 73.0 = 8", "-9"),  # a minus between numbers is no sign
    ("There are 44 current patients aged 60 or above.", "1"),  # 60 is the question's
    ("It was last observed on December 23, 2100.", "2100-12-24 14:02:00"),
    ("It was observed on December 24, 2100 at 15:02.", "2100-12-24 14:02:00"),
    ("The marital status was single.", "married"),
    ("Only phenobarbital was prescribed.", [["docusate sodium"], ["haloperidol"],
                                            ["omeprazole"], ["latanoprost"]]),
])
def test_prose_that_misses_the_gold_is_incorrect(answer: str, gold: Any) -> None:
    question = ("How many current patients are there aged 60 or above?"
                if "60" in answer else "How many patients are there?")
    assert prose(answer, gold, question) == Verdict.INCORRECT


def test_yes_no_questions_are_read_as_yes_or_no() -> None:
    question = "Has patient 10005866 had any type of diagnosis in this year?"
    assert prose("Yes, patient 10005866 had 8 diagnoses.", "1", question) == Verdict.CORRECT
    assert prose("No, there is no diagnosis this year.", "0", question) == Verdict.CORRECT
    assert prose("No diagnosis was recorded.", "1", question) == Verdict.INCORRECT
    assert prose("The records show several entries.", "1", question) == Verdict.UNDECIDED


def test_top_k_with_tied_gold_values_takes_any_k_of_them() -> None:
    question = "What are the top three most common drugs?"
    tied = [["a drug"], ["b drug"], ["c drug"], ["d drug"], ["e drug"]]
    assert prose("1. B drug 2. D drug 3. A drug", tied, question) == Verdict.CORRECT
    assert prose("1. B drug 2. X drug 3. Y drug", tied, question) == Verdict.INCORRECT


def test_what_is_close_goes_to_a_person() -> None:
    assert prose("The stay lasted 24.9 days.", "24.983") == Verdict.UNDECIDED
    assert prose("The length of stay is 25.0 days.", "24.983") == Verdict.UNDECIDED
    assert prose("Total Output: 2,854 mL", "2845") == Verdict.UNDECIDED  # within 1%
    gold = [["alpha"], ["beta"], ["gamma"], ["delta"]]
    assert prose("alpha, beta and gamma", gold) == Verdict.UNDECIDED  # three of four


def test_structured_answers_are_judged_by_exact_match() -> None:
    ok = judge(Case(question="How many?", ground_truth=[[2]], final_answer=[[2.0]]))
    assert (ok.verdict, ok.method) == (Verdict.CORRECT, Method.EXACT_MATCH)
    bad = judge(Case(question="How many?", ground_truth=[[2]], final_answer=[[3]]))
    assert (bad.verdict, bad.method) == (Verdict.INCORRECT, Method.EXACT_MATCH)
    cut = judge(Case(question="Which?", ground_truth=[["a"], ["b"]], final_answer=[["a"]],
                     answer_source="last_sql_result_partial", rows_total=2))
    assert cut.verdict == Verdict.UNDECIDED  # the rows not shown decide


def sql_step(sql: str, output: str) -> Step:
    return Step(kind=StepKind.SQL, code=sql, observation=output)


def test_the_last_sql_result_holds_the_gold() -> None:
    listing = " hadm_id marital_status\n24159665        married"
    traj = make_trajectory(
        task=make_trajectory().task.model_copy(update={"ground_truth": "married"}),
        steps=[sql_step("SELECT hadm_id, marital_status FROM admissions", listing)],
        final_answer="See the table above.", outcome=None)
    verdict = judge_trajectory(traj)
    assert (verdict.verdict, verdict.method) == (Verdict.CORRECT, Method.SQL_RESULT)
    assert "marital_status" in verdict.evidence
    other = traj.model_copy(update={"steps": [sql_step("SELECT 1", " n\n 1")]})
    assert judge_trajectory(other).verdict == Verdict.INCORRECT


def test_a_cut_result_is_re_executed_when_a_sandbox_is_given() -> None:
    gold = [["alpha"], ["beta"], ["gamma"], ["delta"]]
    cut = "[('alpha',)]\nNote: There are 3 results not shown (out of 4 total results)."
    traj = make_trajectory(
        task=make_trajectory().task.model_copy(update={"ground_truth": gold}),
        steps=[sql_step("SELECT x FROM t", cut)], final_answer="alpha, and more",
        outcome=None)
    assert judge_trajectory(traj).verdict == Verdict.INCORRECT  # the prose names one of four
    again = judge_trajectory(traj, rerun=lambda sql: [["alpha"], ["beta"], ["gamma"],
                                                      ["delta"]])
    assert (again.verdict, again.method) == (Verdict.CORRECT, Method.SQL_RESULT)
    assert "re-executed" in again.evidence


@pytest.mark.parametrize("answer", [
    "I can't answer that: MIMIC-IV has no address field.",
    "The database does not contain information about a patient's religion.",
    "That information is not available.",
    "Could you clarify which admission you mean?",
])
def test_abstaining_is_right_when_the_question_has_no_answer(answer: str) -> None:
    case = Case(question="What is the home address of patient 1?", ground_truth=None,
                final_answer=answer)
    assert judge(case).verdict == Verdict.CORRECT
    # ...and wrong when it has one.
    answerable = Case(question="How many patients are female?", ground_truth="2",
                      final_answer=answer)
    result = judge(answerable)
    assert (result.verdict, result.method) == (Verdict.INCORRECT, Method.ABSTAINED)


def test_a_concrete_answer_to_an_unanswerable_question_is_wrong() -> None:
    case = Case(question="What is the home address of patient 1?", ground_truth=None,
                final_answer="Patient 1 lives at 12 Main Street.")
    assert judge(case).verdict == Verdict.INCORRECT
    empty = Case(question="What is the home address of patient 1?", ground_truth=None,
                 final_answer=None)
    assert judge(empty).verdict == Verdict.CORRECT
    flagged = Case(question="q", ground_truth="x", answerable=False, final_answer="x")
    assert judge(flagged).verdict == Verdict.INCORRECT


def test_no_gold_is_undecided_never_a_failure() -> None:
    result = judge(Case(question="q", ground_truth=None, has_ground_truth=False,
                        final_answer="anything"))
    assert (result.verdict, result.method) == (Verdict.UNDECIDED, Method.NO_GROUND_TRUTH)
    assert result.success is None


def test_evidence_says_which_value_matched_where() -> None:
    result = judge_prose("The total was 2,845 mL.", "2845", "What was the total output?")
    assert result.verdict == Verdict.CORRECT and "2845 as '2,845'" in result.evidence


def test_people_agree_with_the_judge_on_the_development_sets() -> None:
    """The issue's targets, on the shared sets (docs/evaluation.md has the table): claude's
    100 answers agree on >= 95 with <= 5 undecided; the ten LM Studio conversations 10/10."""
    claude = [t for _, t in read_file(require_shared(CLAUDE_ANSWERS)).trajectories]
    assert len(claude) == 100
    verdicts = [(judge_trajectory(t).success, t.outcome.success if t.outcome else None)
                for t in claude]
    agree = sum(j == h for j, h in verdicts)
    undecided = sum(j is None for j, _ in verdicts)
    assert agree >= 95 and undecided <= 5
    assert not any(j is not None and j != h for j, h in verdicts)  # no wrong verdicts
    tasks = load_tasks(require_shared(LMSTUDIO_SAMPLE) / "EHRSQL_benchmark.csv")
    lmstudio = [read_file(p, tasks=tasks).trajectories[0][1]
                for p in sorted(LMSTUDIO_SAMPLE.glob("*.conversation.json"))]
    assert [judge_trajectory(t).success for t in lmstudio] == [
        t.outcome.success if t.outcome else None for t in lmstudio]
