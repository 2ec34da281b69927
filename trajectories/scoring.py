"""Exact-match scoring of a final answer against the ground truth.

Normalisation (documented in docs/scoring.md), applied to both sides before comparison:

1. Shapes: a scalar ``x``, ``[x]`` and ``[[x]]`` are the same answer; a flat list of scalars
   ``[a, b]`` equals a one-column result ``[[a], [b]]``. Dicts become rows of their values.
2. Values: strings are trimmed, inner whitespace collapsed and lower-cased; numeric strings are
   read as numbers; numbers compare with a relative tolerance of 1e-4 (absolute 1e-6) after
   rounding noise; booleans are 1/0.
3. Unanswerable tasks: ``None``, ``"null"``, ``"none"``, ``""``, ``[]`` and ``[[None]]`` are all
   "no answer" and match each other.
4. Row order is ignored (rows compared as multisets) unless the task explicitly asks for the
   rows in an order (``ordered=True``, see ``wants_order``): "in (ascending|descending|
   chronological|alphabetical|...) order" (not "in order to"), "sort"/"sorted",
   "ascending", "descending", "chronologically". Words that select a set ("top three",
   "ranks", "highest") do not make an answer ordered.
5. Declared rounding: when the task text or answer format says "round to N decimal places"
   (or "N decimal places"), numbers on both sides are rounded half-up to N decimals first.
6. No ground truth: a task with ``has_ground_truth=False`` cannot be scored (``score_task``
   returns None: "unscored"); a ground truth that is genuinely NULL is still scored.
7. A final answer taken from a SQL result the harness cut ("Note: There are 73 results not
   shown (out of 173 total results).") is only its visible rows: it is a failure when the
   full row count differs from the ground truth's or a visible row is not in the ground
   truth (in order, for an ordered task), else unknown (None): exact match needs the whole
   result. A last SQL result that could not be read is unknown too, never a success.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from trajectories.model import Task, Trajectory

SCORER_VERSION = "em-3"  # em-3: a cut or unreadable last SQL result (rule 7)

#: Where an importer took a trajectory's final answer from (``final_answer_source``), for the
#: answers rule 7 scores apart: the last successful SQL query's rows, the visible rows of a
#: result the harness cut (``final_answer_rows_total`` holds its full row count), or nothing
#: when that result could not be read.
ANSWER_SQL = "last_sql_result"
ANSWER_SQL_PARTIAL = "last_sql_result_partial"
ANSWER_SQL_UNREADABLE = "last_sql_result_unreadable"

_WS = re.compile(r"\s+")
_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ORDER_WORDS = re.compile(
    r"\bin\s+(?:(?:ascending|descending|chronological|alphabetical|reverse|increasing|"
    r"decreasing|numerical|time)\s+)?order\b(?!\s+to\b)"
    r"|\bsort(?:ed|ing)?\b|\bascending\b|\bdescending\b|\bchronologically\b",
    re.IGNORECASE,
)
_NUMBER_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS = re.compile(
    r"\b(\d{1,2}|zero|one|two|three|four|five|six)\s+decimal(?:\s+places?|\s+digits?|s)?\b"
    r"|\bdecimal\s+places?\s*[:=]?\s*(\d{1,2})\b",
    re.IGNORECASE,
)
_NULL_STRINGS = {"", "null", "none", "nan", "n/a"}

Row = tuple[Any, ...]


def _round_half_up(value: float, decimals: int) -> float:
    if not math.isfinite(value):
        return value
    exact = Decimal(repr(value))
    quantum = Decimal(1).scaleb(-decimals)
    # Enough digits for the value's integer part and the asked decimals: the default 28 are
    # too few for a large value rounded to many places (1e15 to 17 decimals needs 33).
    with localcontext() as context:
        context.prec = max(context.prec, exact.adjusted() + decimals + 2)
        return float(exact.quantize(quantum, rounding=ROUND_HALF_UP))


def _norm_value(value: Any, decimals: int | None = None) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            f = float(value)
        except OverflowError:  # an integer beyond every float: compared as the integer it is
            return value
        if math.isnan(f):
            return None
        return f if decimals is None else _round_half_up(f, decimals)
    if isinstance(value, str):
        text = _WS.sub(" ", value.strip()).lower()
        if text in _NULL_STRINGS:
            return None
        if _NUMERIC.match(text):
            f = float(text)
            return f if decimals is None else _round_half_up(f, decimals)
        return text
    # Nested containers inside a cell: compare their canonical JSON.
    return json.dumps(value, sort_keys=True, default=str).lower()


def _maybe_json(value: Any) -> Any:
    """Agents often return a JSON document as a string; read it when it clearly is one."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{" and text[-1:] in "]}":
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def to_rows(answer: Any, decimals: int | None = None) -> list[Row]:
    """Bring any answer shape to a list of tuples of normalised values (numbers rounded to
    ``decimals`` places when the task declares a rounding rule)."""
    answer = _maybe_json(answer)
    if answer is None:
        return []
    if isinstance(answer, dict):
        return [tuple(_norm_value(v, decimals) for v in answer.values())]
    if not isinstance(answer, list | tuple):
        value = _norm_value(answer, decimals)
        return [] if value is None else [(value,)]
    rows: list[Row] = []
    for item in answer:
        if isinstance(item, dict):
            rows.append(tuple(_norm_value(v, decimals) for v in item.values()))
        elif isinstance(item, list | tuple):
            rows.append(tuple(_norm_value(v, decimals) for v in item))
        else:
            rows.append((_norm_value(item, decimals),))
    # [[None]] and [None] mean "no answer".
    if all(all(v is None for v in row) for row in rows):
        return []
    return rows


def _round_key(value: Any) -> Any:
    if isinstance(value, float):
        # Rounding to 4 significant decimals makes tolerance work inside multiset comparison.
        return round(value, 4) if abs(value) < 1e12 else value
    return value


def _rows_equal(a: Row, b: Row) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6):
                return False
        elif x != y:
            return False
    return True


@functools.lru_cache(maxsize=4096)  # an import asks once per record about few distinct tasks
def wants_order(question: str | None, answer_format: str | None) -> bool:
    """True when the task explicitly asks for its rows in an order (rule 4 of the module doc).

    "Sorted", "ascending", "in chronological order" do; "top three", "ranks", "highest" and
    "in order to" do not: they select a set of rows, which is compared as a multiset.
    """
    text = f"{question or ''} {answer_format or ''}"
    return bool(_ORDER_WORDS.search(text))


@functools.lru_cache(maxsize=4096)
def declared_decimals(*texts: str | None) -> int | None:
    """The number of decimals a task's text declares for its answer ("round to 3 decimal
    places", "2 decimals"), or None. When several are declared the first one wins."""
    for text in texts:
        if not text:
            continue
        match = _DECIMALS.search(text)
        if match:
            word = (match.group(1) or match.group(2)).lower()
            return _NUMBER_WORDS[word] if word in _NUMBER_WORDS else int(word)
    return None


def _task_texts(task: Task) -> list[str | None]:
    rules = (task.model_extra or {}).get("rules")
    return [task.answer_format, task.question, rules if isinstance(rules, str) else None]


def score_task(final_answer: Any, task: Task) -> bool | None:
    """Exact match of ``final_answer`` against the task's ground truth with the task's own
    rules (order, declared rounding); None ("unscored") when the task has no ground truth."""
    rules = (task.model_extra or {}).get("rules")
    return score_values(final_answer, task.has_ground_truth, task.ground_truth, task.question,
                        task.answer_format, rules)


def score_values(final_answer: Any, has_ground_truth: bool, ground_truth: Any,
                 question: str | None, answer_format: str | None, rules: Any,
                 source: Any = None, rows_total: Any = None) -> bool | None:
    """``score_task`` on the task's values (the import scores JSON documents, not models),
    with rule 7 when the answer's ``source`` (``final_answer_source``) says a cut or an
    unreadable SQL result (``rows_total``: the cut result's full row count)."""
    if not has_ground_truth or source == ANSWER_SQL_UNREADABLE:
        return None
    texts = (answer_format, question, rules if isinstance(rules, str) else None)
    ordered = wants_order(question, answer_format)
    decimals = declared_decimals(*texts)
    if source == ANSWER_SQL_PARTIAL:
        total = rows_total if isinstance(rows_total, int) and not isinstance(rows_total, bool) \
            else None
        return partial_match(final_answer, ground_truth, total, ordered=ordered,
                             decimals=decimals)
    return exact_match(final_answer, ground_truth, ordered=ordered, decimals=decimals)


def _unmatched(rows: list[Row], truth: list[Row]) -> list[Row] | None:
    """The truth's rows left after pairing each of ``rows`` with an equal one (greedy, under
    the numeric tolerance); None when some row has no partner."""
    remaining = list(truth)
    for row in rows:
        for i, candidate in enumerate(remaining):
            if _rows_equal(row, candidate):
                del remaining[i]
                break
        else:
            return None
    return remaining


def partial_match(visible: Any, truth: Any, total: int | None, *, ordered: bool = False,
                  decimals: int | None = None) -> bool | None:
    """Rule 7: False when a cut result cannot match the ground truth (another full row count,
    a visible row the truth lacks, or out of order for an ordered task), else None: the rows
    not shown decide, and they are unknown."""
    if total is None:
        return None
    true_rows = to_rows(truth, decimals)
    shown = to_rows(visible, decimals)
    if total != len(true_rows) or len(shown) > len(true_rows):
        return False
    if ordered:
        in_order = all(_rows_equal(a, b) for a, b in zip(shown, true_rows, strict=False))
        return None if in_order else False
    return None if _unmatched(shown, true_rows) is not None else False


def score_trajectory(traj: Trajectory) -> bool | None:
    """Exact match of a trajectory's own final answer under its task's rules; None when the
    task has no ground truth or the answer came from a cut or unreadable SQL result that cannot
    decide (rule 7). Every place that scores one trajectory (the import, re-scoring, the answer
    panel) calls this, so they agree."""
    task, extra = traj.task, traj.model_extra or {}
    return score_values(traj.final_answer, task.has_ground_truth, task.ground_truth,
                        task.question, task.answer_format, (task.model_extra or {}).get("rules"),
                        extra.get("final_answer_source"), extra.get("final_answer_rows_total"))


def answer_cut(traj: Trajectory) -> str | None:
    """Why the final answer is incomplete, in words, or None when it is whole."""
    extra = traj.model_extra or {}
    source = extra.get("final_answer_source")
    if source == ANSWER_SQL_UNREADABLE:
        return "the last SQL query's recorded result could not be read"
    if source == ANSWER_SQL_PARTIAL:
        total = extra.get("final_answer_rows_total")
        shown = len(traj.final_answer) if isinstance(traj.final_answer, list) else 0
        of = f" of {total}" if isinstance(total, int) else ""
        return f"the producer recorded {shown}{of} rows of the last SQL query's result"
    return None


def task_decimals(task: Task) -> int | None:
    return declared_decimals(*_task_texts(task))


def exact_match(
    predicted: Any, truth: Any, *, ordered: bool = False, decimals: int | None = None
) -> bool:
    """True when ``predicted`` equals ``truth`` under the documented normalisation."""
    true_rows = to_rows(truth, decimals)
    predicted = _maybe_json(predicted)
    if true_rows and isinstance(predicted, list | tuple) and len(predicted) != len(true_rows):
        # A list normalises to as many rows as it has, or to none (all null): either way not
        # the truth's count. Most failed answers end here, before every cell is normalised.
        return False
    pred_rows = to_rows(predicted, decimals)
    if len(pred_rows) != len(true_rows):
        return False
    if ordered:
        return all(_rows_equal(a, b) for a, b in zip(pred_rows, true_rows, strict=True))
    if Counter(tuple(map(_round_key, r)) for r in pred_rows) == Counter(
        tuple(map(_round_key, r)) for r in true_rows
    ):
        return True
    # Fall back to a tolerant greedy match when rounding put near-equal numbers in two buckets.
    remaining = _unmatched(pred_rows, true_rows)
    return remaining is not None and not remaining


def answer_diff(
    predicted: Any, truth: Any, decimals: int | None = None
) -> tuple[list[Row], list[Row], list[Row]]:
    """Rows in both, rows missing from the prediction, rows the prediction added."""
    pred = Counter(tuple(map(_round_key, r)) for r in to_rows(predicted, decimals))
    true = Counter(tuple(map(_round_key, r)) for r in to_rows(truth, decimals))
    common = pred & true
    return list(common.elements()), list((true - pred).elements()), list((pred - true).elements())
