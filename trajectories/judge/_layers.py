"""The judge's rule layers, in order; the first that decides gives the verdict, its method and
its evidence (which value matched where).

For a question that has an answer:

1. ``exact_match``: a structured final answer (rows, a number: what a harness scores) is
   judged by exact match alone (``trajectories.scoring``: shapes, case, tolerance, the task's
   rounding and order; a cut or unreadable SQL result is undecided, rule 7). The layers below
   are for answers in prose.
2. ``sql_result``: the agent's last successful SQL result (as recorded, or re-executed in the
   sandbox when the recorded one was cut) holds the gold in some of its columns ("any column
   of the last result equals the gold"); for a "top k" question whose gold lists tied values,
   k rows drawn from them.
3. ``prose``: every gold value is stated in the answer's text: numbers with the task's rounding,
   the written decimals and a relative tolerance, thousands separators and number words; dates
   and times in the common written forms; yes/no for a yes/no question; text by its words; a
   list as a set, and for "top k" with ties any k of the tied values.

Then what decides against it: an abstention (``abstention``), no answer (``no_answer``) or
prose without the gold (``prose``). What
is close but not equal (a number within 1%, most but not all of a list, a yes/no answer that
says neither) is **undecided**: a person decides.

For a question without an answer (the gold is null, or the task says unanswerable): an
abstention or an empty answer is correct, any concrete answer incorrect (``abstention``).

A task with no gold at all is undecided (``no_ground_truth``).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trajectories.reading
import trajectories.scoring
import trajectories.scoring_ehrsql
from faillab_core.versions import code_version, package_files
from trajectories.judge._abstain import abstains
from trajectories.judge._prose import judge_prose
from trajectories.judge._values import (
    as_number,
    requested_count,
)
from trajectories.judge._verdict import (
    Judgement,
    Method,
    Verdict,
    _correct,
    _incorrect,
    _raw_rows,
    _short,
    _undecided,
)
from trajectories.model import StepKind, Trajectory
from trajectories.reading import ResultTable, result_table
from trajectories.scoring import (
    ANSWER_SQL_PARTIAL,
    ANSWER_SQL_UNREADABLE,
    declared_decimals,
    exact_match,
    partial_match,
    to_rows,
    wants_order,
)

SQL_KIND = str(StepKind.SQL)
#: Made from the code of the rules (this package, the exact-match scorer, the EHRSQL-2024
#: scorer's conventions and the step-reading rules): a stored verdict whose version differs came
#: from other rules.
JUDGE_VERSION = code_version("judge", package_files(
    Path(__file__).with_name("__init__.py"), trajectories.scoring.__file__,
    trajectories.scoring_ehrsql.__file__, trajectories.reading.__file__))


@dataclass(frozen=True)
class Case:
    """What the judge reads of one trajectory."""

    question: str
    ground_truth: Any
    has_ground_truth: bool = True
    answerable: bool | None = None
    final_answer: Any = None
    answer_source: str | None = None
    rows_total: int | None = None
    answer_format: str | None = None
    rules: str | None = None
    #: The last SQL step that ran without error: its index, its SQL and what it printed.
    last_step: int | None = None
    last_sql: str | None = None
    last_output: str | None = None
    #: Rows of ``last_sql`` re-executed in the sandbox (``judge_trajectory(rerun=...)``).
    rerun_rows: list[list[Any]] | None = None
    #: The last SQL step whatever its outcome (a SQL submission's prediction), and the error
    #: it recorded when it failed.
    prediction_sql: str | None = None
    prediction_error: str | None = None
    #: How the importer's own run of the prediction ended: ``ok``, ``failed`` or ``stopped``
    #: (a benchmark's submission, executed at import); None for a log.
    execution: str | None = None
    reference_sql: str | None = None
    #: The task's reference time (``trajectories.sql.clock``) and how its gold SQL ran.
    reference_time: str | None = None
    gold_execution: str | None = None
    #: The task's own scoring profile (``_profiles``), or None.
    profile: str | None = None

    @property
    def unanswerable(self) -> bool:
        return self.answerable is False or (self.has_ground_truth
                                            and not to_rows(self.ground_truth))

    @functools.cached_property
    def last_result(self) -> ResultTable | None:
        """The last SQL step's table, read only when a layer needs it."""
        return result_table(self.last_output)


def case_from(task: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], final_answer: Any,
              extra: Mapping[str, Any]) -> Case:
    """The judge's view of a trajectory's JSON document (or its models' fields): ``task`` and
    each step as mappings, ``extra`` the trajectory's other fields."""
    last_step: int | None = None
    sql = output = None
    predicted = next((step for step in reversed(steps) if step.get("kind") == SQL_KIND), None)
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.get("kind") == SQL_KIND and not step.get("error"):
            last_step, sql, output = index, step.get("code"), step.get("observation")
            break
    rules, answerable = task.get("rules"), task.get("answerable")
    total = extra.get("final_answer_rows_total")
    return Case(
        question=str(task.get("question") or ""), ground_truth=task.get("ground_truth"),
        has_ground_truth=bool(task.get("has_ground_truth", True)),
        answerable=answerable if isinstance(answerable, bool) else None,
        final_answer=final_answer, answer_source=extra.get("final_answer_source"),
        rows_total=total if isinstance(total, int) and not isinstance(total, bool) else None,
        answer_format=task.get("answer_format"), rules=rules if isinstance(rules, str) else None,
        last_step=last_step, last_sql=sql if isinstance(sql, str) else None,
        last_output=output if isinstance(output, str) else None,
        prediction_sql=_text(predicted.get("code")) if predicted else None,
        prediction_error=(_text(predicted.get("observation")) or "failed")
        if predicted and predicted.get("error") else None,
        execution=_text(extra.get("execution")), reference_sql=_text(task.get("reference_sql")),
        reference_time=_text(task.get("reference_time")),
        gold_execution=_text(task.get("gold_execution")),
        profile=_text(task.get("scoring_profile")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def case_of(traj: Trajectory) -> Case:
    """The judge's view of a trajectory model."""
    task = {**vars(traj.task), **(traj.task.model_extra or {})}
    return case_from(task, [vars(step) for step in traj.steps], traj.final_answer,
                     traj.model_extra or {})


def judge(case: Case) -> Judgement:
    """The verdict of the rule layers (the module's order)."""
    if not case.has_ground_truth:
        return _undecided(Method.NO_GROUND_TRUTH, "the task records no gold answer")
    prose, structured, empty = _answer_kind(case.final_answer)
    if case.unanswerable:
        return _unanswerable(prose, structured, empty)
    texts = (case.answer_format, case.question, case.rules)
    ordered = wants_order(case.question, case.answer_format)
    decimals = declared_decimals(*texts)
    if structured is not None or case.answer_source == ANSWER_SQL_UNREADABLE:
        # A structured answer (rows, a number) is what a harness scores: exact match decides.
        exact = _exact(case, structured, ordered, decimals)
        if exact:
            return _correct(Method.EXACT_MATCH, "the final answer equals the gold "
                            f"({_short(case.ground_truth)})")
        if exact is False:
            return _not_exact(case, structured, ordered)
        return _undecided(Method.EXACT_MATCH, "the final answer is a SQL result the log cut "
                          "or that could not be read: the rows not shown decide")
    from_sql = _sql_result(case, ordered, decimals)
    if from_sql is not None:
        return from_sql
    said: Judgement | None = None
    if prose is not None and not empty:
        said = judge_prose(prose, case.ground_truth, case.question, decimals)
        if said.verdict == Verdict.CORRECT:
            return said
    if said is not None:
        if said.verdict == Verdict.INCORRECT and prose is not None:
            refusal = abstains(prose)
            if refusal:
                return _incorrect(Method.ABSTAINED, f"abstains ('{refusal}') on a question "
                                  "that has an answer")
        return said
    return _incorrect(Method.NO_ANSWER, "no final answer"
                      + ("" if case.last_result is None else
                         "; the last SQL result does not hold the gold either"))


def _unanswerable(prose: str | None, structured: Any, empty: bool) -> Judgement:
    if empty:
        return _correct(Method.ABSTENTION, "no answer, to a question that has none")
    if prose is not None:
        refusal = abstains(prose)
        if refusal:
            return _correct(Method.ABSTENTION, f"abstains ('{refusal}') on a question that "
                            "has no answer")
        return _incorrect(Method.ABSTENTION, "answers a question that has no answer, without "
                          "saying it cannot be answered")
    return _incorrect(Method.ABSTENTION, f"answers {_short(structured)} to a question that "
                      "has no answer")


_EMPTY_TEXTS = frozenset({"", "null", "none", "nan", "n/a", "[]", "{}"})


def _answer_kind(answer: Any) -> tuple[str | None, Any, bool]:
    """``(prose, structured, empty)``: a text answer that is not a JSON document is prose;
    anything else (rows, numbers, a JSON document sent as text) is structured."""
    if answer is None:
        return None, None, True
    if isinstance(answer, str):
        text = answer.strip()
        if text.lower() in _EMPTY_TEXTS:
            return None, None, True
        if text[:1] in "[{" and text[-1:] in "]}":
            try:
                value = json.loads(text)
            except ValueError:
                return answer, None, False
            return None, value, not to_rows(value)
        return answer, None, False
    return None, answer, not to_rows(answer)


def _exact(case: Case, answer: Any, ordered: bool, decimals: int | None) -> bool | None:
    if case.answer_source == ANSWER_SQL_UNREADABLE:
        if case.rerun_rows is not None:
            return exact_match(case.rerun_rows, case.ground_truth, ordered=ordered,
                               decimals=decimals)
        return None
    if case.answer_source == ANSWER_SQL_PARTIAL:
        if case.rerun_rows is not None:
            return exact_match(case.rerun_rows, case.ground_truth, ordered=ordered,
                               decimals=decimals)
        return partial_match(answer, case.ground_truth, case.rows_total, ordered=ordered,
                             decimals=decimals)
    return exact_match(answer, case.ground_truth, ordered=ordered, decimals=decimals)


def _not_exact(case: Case, answer: Any, ordered: bool) -> Judgement:
    """A structured answer that is not the gold under exact match: right when it rounds to the
    gold as the gold is written, undecided when every value is within 1% of the gold's."""
    if case.answer_source in (ANSWER_SQL_PARTIAL, ANSWER_SQL_UNREADABLE) \
            and case.rerun_rows is not None:
        answer = case.rerun_rows
    written = written_decimals(case.ground_truth)
    if written and exact_match(answer, case.ground_truth, ordered=ordered, decimals=written):
        return _correct(Method.EXACT_MATCH, f"the final answer rounds to the gold as it is "
                        f"written ({written} decimals): {_short(case.ground_truth)}")
    if _close(answer, case.ground_truth, ordered):
        return _undecided(Method.EXACT_MATCH, f"close to the gold but not equal: "
                          f"{_short(answer)} for {_short(case.ground_truth)}")
    return _incorrect(Method.EXACT_MATCH, f"the final answer {_short(answer)} "
                      f"differs from the gold {_short(case.ground_truth)}")


def written_decimals(gold: Any) -> int | None:
    """The most decimals a number of the gold is written with (``0.697``: 3), or None when it
    holds no number written with decimals."""
    most = 0
    for row in _raw_rows(gold):
        for value in row:
            if isinstance(value, bool) or not isinstance(value, str | float):
                continue
            text = repr(value) if isinstance(value, float) else value.strip()
            match = _DECIMAL_TEXT.fullmatch(text)
            if match:
                most = max(most, len(match.group(1)))
    return most or None


_DECIMAL_TEXT = re.compile(r"[-+]?\d+\.(\d+)")


def _close(answer: Any, gold: Any, ordered: bool) -> bool:
    """Same shape, every value equal or a number within 1% of the gold's (not both whole
    numbers), and not all equal."""
    mine, theirs = to_rows(answer), to_rows(gold)
    if not theirs or len(mine) != len(theirs) or any(len(a) != len(b) for a, b in
                                                      zip(mine, theirs, strict=True)):
        return False
    if not ordered:
        mine, theirs = sorted(mine, key=repr), sorted(theirs, key=repr)
    for row_a, row_b in zip(mine, theirs, strict=True):
        for a, b in zip(row_a, row_b, strict=True):
            if a == b:
                continue
            x, y = as_number(a), as_number(b)
            if x is None or y is None or y == 0 or abs(x - y) > 0.01 * abs(y):
                return False
            if x.is_integer() and y.is_integer():
                return False  # two different whole numbers are different counts, never close
    return True


def _sql_result(case: Case, ordered: bool, decimals: int | None) -> Judgement | None:
    """Layer 2: the gold among the columns of the last successful SQL result."""
    if case.rerun_rows is not None:
        rows, how = case.rerun_rows, "re-executed in the sandbox"
    elif case.last_result is not None and not case.last_result.cut:
        rows, how = case.last_result.rows, "as recorded"
    else:
        return None
    gold = to_rows(case.ground_truth, decimals)
    if not gold or not rows:
        return None
    width = len(gold[0])
    columns = list(case.last_result.columns or []) if case.last_result else []
    wide = max((len(r) for r in rows), default=0)
    if wide > 12 or width > 3 or any(len(r) != width for r in gold):
        return None
    k = requested_count(case.question)
    for picked in itertools.permutations(range(wide), width):
        projected = [[row[i] if i < len(row) else None for i in picked] for row in rows]
        if exact_match(projected, case.ground_truth, ordered=ordered, decimals=decimals) \
                or _tied_top_k(projected, gold, k, decimals):
            names = ", ".join(columns[i] if i < len(columns) else f"#{i + 1}" for i in picked)
            return _correct(Method.SQL_RESULT, f"step {case.last_step}'s result ({how}): column "
                            f"{names} equals the gold {_short(case.ground_truth)}")
    return None


def _tied_top_k(rows: list[list[Any]], gold: list[tuple[Any, ...]], k: int | None,
                decimals: int | None) -> bool:
    """k rows, all among a gold list longer than k (values tied at the cut)."""
    if not k or len(gold) <= k or len(rows) != k:
        return False
    wanted = set(gold)
    return all(row in wanted for row in to_rows(rows, decimals))
