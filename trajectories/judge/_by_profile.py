"""The judge under a scoring profile (``_profiles``): which rules decide, and the profile named
in the evidence of every verdict it gives."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from trajectories.judge._layers import Case, _answer_kind, _exact, case_of, judge
from trajectories.judge._profiles import Execution, Executor, Profile, profile_of_task
from trajectories.judge._verdict import Judgement, Method, Verdict, _short
from trajectories.model import Trajectory
from trajectories.scoring import declared_decimals, to_rows, wants_order
from trajectories.scoring_ehrsql import execution_key, is_null_prediction, post_process

__all__ = ["judge_trajectory", "profile_of_case", "tagged"]


def profile_of_case(case: Case) -> Profile:
    return profile_of_task({"scoring_profile": case.profile})


def tagged(judgement: Judgement, profile: Profile) -> Judgement:
    """The verdict with its profile named at the head of its evidence (none for the default)."""
    if profile == Profile.DEFAULT:
        return judgement
    return dataclasses.replace(judgement, evidence=f"[profile {profile}] {judgement.evidence}")


def judge_trajectory(traj: Trajectory,
                     rerun: Callable[[str], list[list[Any]] | None] | None = None, *,
                     profile: Profile | str | None = None,
                     execute: Executor | None = None) -> Judgement:
    """The rules' verdict on a trajectory under ``profile`` (default: its task's).

    ``execute`` runs SQL in the sandbox at the task's reference time: under ``ehrsql-2024`` the
    prediction and the gold SQL are both executed again, as the benchmark's scorer does; under
    the other profiles only a last SQL query whose recorded result was cut or unreadable.
    ``rerun`` is the older form of the latter (the SQL alone, at the sandbox's default clock).
    """
    case = case_of(traj)
    chosen = Profile(profile) if profile else profile_of_case(case)
    if chosen == Profile.EHRSQL_2024:
        return tagged(_ehrsql(case, execute), chosen)
    if rerun is None and execute is not None:
        now = case.reference_time

        def rerun(sql: str) -> list[list[Any]] | None:
            assert execute is not None
            return execute(sql, now).rows

    if rerun is not None and case.last_sql and (
            case.last_result is None or case.last_result.cut):
        rows = rerun(case.last_sql)
        if rows is not None:
            case = dataclasses.replace(case, rerun_rows=rows)
    if chosen == Profile.EHR_COMPLEX:
        return tagged(_ehr_complex(case), chosen)
    if chosen == Profile.ROBUSTGYM:
        return tagged(_robustgym(case), chosen)
    return judge(case)


# ------------------------------------------------------------------------------ ehr-complex


def _ehr_complex(case: Case) -> Judgement:
    if not case.has_ground_truth:
        return Judgement(Verdict.UNDECIDED, Method.NO_GROUND_TRUTH,
                         "the task records no gold answer")
    ordered = wants_order(case.question, case.answer_format)
    decimals = declared_decimals(case.answer_format, case.question, case.rules)
    exact = _exact(case, case.final_answer, ordered, decimals)
    if exact is None:
        return Judgement(Verdict.UNDECIDED, Method.EXACT_MATCH, "the final answer is a SQL "
                         "result the log cut or that could not be read")
    if exact:
        return Judgement(Verdict.CORRECT, Method.EXACT_MATCH,
                         f"the final answer equals the gold ({_short(case.ground_truth)})")
    return Judgement(Verdict.INCORRECT, Method.EXACT_MATCH,
                     f"the final answer {_short(case.final_answer)} is not the gold "
                     f"{_short(case.ground_truth)}")


# -------------------------------------------------------------------------------- robustgym


def _robustgym(case: Case) -> Judgement:
    if not case.has_ground_truth:
        return Judgement(Verdict.UNDECIDED, Method.NO_GROUND_TRUTH,
                         "the task records no gold answer")
    prose, structured, empty = _answer_kind(case.final_answer)
    if prose is not None:
        return judge(case)  # a sentence is no NULL: the default layers read it
    answer: Any = structured
    where = "the final answer"
    if empty and structured is None:  # no final answer at all: the last SQL result is it
        if case.rerun_rows is not None:
            answer, where = case.rerun_rows, "the last SQL result (re-executed)"
        elif case.last_result is not None and not case.last_result.cut:
            answer, where = case.last_result.rows, "the last SQL result"
        elif case.last_result is not None:
            return Judgement(Verdict.UNDECIDED, Method.SQL_RESULT, "the last SQL result was "
                             "cut: the rows not shown decide whether it is empty")
        elif case.last_sql is not None:
            return Judgement(Verdict.UNDECIDED, Method.SQL_RESULT, "the last SQL result could "
                             "not be read, nor run again: it decides whether it is empty")
    if not to_rows(answer):
        if case.unanswerable:
            return Judgement(Verdict.CORRECT, Method.ABSTENTION,
                             f"{where} is empty or NULL: an abstention, on a question that "
                             "has no answer")
        return Judgement(Verdict.INCORRECT, Method.ABSTAINED,
                         f"{where} is empty or NULL: an abstention, on a question that has an "
                         "answer")
    if case.unanswerable:
        return Judgement(Verdict.INCORRECT, Method.ABSTENTION,
                         f"{where} {_short(answer)} answers a question that has no answer")
    source = case.answer_source if answer is structured else None
    return judge(dataclasses.replace(case, final_answer=answer, answer_source=source))


# ------------------------------------------------------------------------------ ehrsql-2024


def _ehrsql(case: Case, execute: Executor | None) -> Judgement:
    prediction = case.prediction_sql
    gold_sql = case.reference_sql
    # The benchmark's own mark (gold SQL "null", answerable false), or a log with a null gold
    # and no gold SQL; an empty gold result is an answer here (a query that finds nothing).
    unanswerable = case.answerable is False or (
        is_null_prediction(gold_sql.strip()) if gold_sql is not None
        else case.has_ground_truth and case.ground_truth is None)
    if prediction is None or is_null_prediction(prediction.strip()):
        if unanswerable:
            return Judgement(Verdict.CORRECT, Method.ABSTENTION,
                             "a null prediction, on a question that has no answer")
        return Judgement(Verdict.INCORRECT, Method.ABSTAINED,
                         "a null prediction (an abstention) on a question that has an answer")
    if unanswerable:
        return Judgement(Verdict.INCORRECT, Method.ABSTENTION,
                         "a prediction that is not null answers a question that has no answer")
    mine = _run(prediction, case, execute) if execute else _recorded_prediction(case)
    if mine.stopped is not None:
        return Judgement(Verdict.UNDECIDED, Method.EXACT_MATCH,
                         f"the prediction did not run to the end: {mine.stopped}")
    if mine.error is not None:
        return Judgement(Verdict.INCORRECT, Method.EXACT_MATCH,
                         f"the prediction fails: {mine.error[:200]}")
    if gold_sql is not None and execute is not None:
        gold = _run(gold_sql, case, execute)
    else:
        gold = _recorded_gold(case)
    if gold.stopped is not None:
        return Judgement(Verdict.UNDECIDED, Method.EXACT_MATCH,
                         f"the gold SQL did not run to the end: {gold.stopped}")
    if gold.error is not None:
        return Judgement(Verdict.INCORRECT, Method.EXACT_MATCH,
                         "the gold SQL fails, so no answer can equal it (the scorer's rule)")
    assert mine.rows is not None and gold.rows is not None
    if execution_key(mine.rows) == execution_key(gold.rows):
        return Judgement(Verdict.CORRECT, Method.EXACT_MATCH,
                         f"the prediction's result equals the gold's ({_short(gold.rows)})")
    return Judgement(Verdict.INCORRECT, Method.EXACT_MATCH,
                     f"the prediction's result {_short(mine.rows)} is not the gold's "
                     f"{_short(gold.rows)}")


def _run(sql: str, case: Case, execute: Executor) -> Execution:
    return execute(post_process(sql), case.reference_time)


def _recorded_prediction(case: Case) -> Execution:
    if case.execution == "stopped":
        return Execution(stopped=case.prediction_error or "stopped by the sandbox")
    if case.prediction_error is not None or case.execution == "failed":
        return Execution(error=case.prediction_error or "failed")
    if case.execution != "ok":
        return Execution(stopped="the log records no run of the prediction (judge with "
                         "--rerun-sql)")
    rows = case.final_answer
    return Execution(rows=[list(r) for r in rows] if isinstance(rows, list) else [[rows]])


def _recorded_gold(case: Case) -> Execution:
    if case.gold_execution == "failed":
        return Execution(error="failed")
    if case.gold_execution == "stopped":
        return Execution(stopped="the gold SQL was stopped by the sandbox")
    gold = case.ground_truth
    if not isinstance(gold, list):
        return Execution(stopped="the task records no gold result")
    return Execution(rows=[list(r) if isinstance(r, list | tuple) else [r] for r in gold])
