"""Failures with nothing to compare part by part: no reference SQL, or no query at all.

- **An unanswerable question answered anyway.** The task has no reference SQL and its verified
  answer is NULL (the database cannot answer it), yet the agent answered: that is the failure,
  whatever its queries did. It is committed to at the first query whose result the agent
  reports (a value of that query's output is in the final answer), else its last query that
  returned rows, else (no tool used) its final message. What the database cannot hold is shown
  as the question's words that name no table, column or dictionary entry of the database.
- **No tool used** (only a final answer is recorded): the final message is the only action, so
  it is the step; nothing in it can be compared with the reference's parts.
"""

from __future__ import annotations

import re
from typing import Any

from trajectories import signals as sg
from trajectories.evidence.probes import Probe
from trajectories.model import StepKind, Trajectory

# A verified answer that says there is none.
_NO_ANSWER = sg.NULL_TEXTS | {"unanswerable", "not answerable", "no answer", "null"}
_RE_VALUE = re.compile(r"'([^'\n]{2,80})'|\"([^\"\n]{2,80})\"|(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")
_RE_WORD = re.compile(r"[a-z]{4,}")
# Words of a question that ask for something rather than name it.
_ASKING = frozenset({
    "about", "after", "also", "among", "average", "been", "before", "calculate", "common",
    "could", "count", "current", "currently", "days", "determine", "distinct", "does", "during",
    "each", "ever", "every", "find", "first", "frequent", "from", "give", "have", "hours", "into",
    "last", "least", "list", "many", "maximum", "mean", "minimum", "month", "months", "most",
    "much", "name", "names", "number", "only", "other", "over", "patient", "patients", "same",
    "should", "show", "since", "tell", "than", "that", "their", "there", "these", "they", "this",
    "those", "time", "times", "total", "unique", "until", "value", "values", "week", "weeks",
    "were", "what", "when", "where", "which", "whose", "will", "with", "would", "year", "years",
})
_TERMS_CHECKED = 6


def has_reference(trajectory: Trajectory) -> bool:
    ref = trajectory.task.reference_sql
    return isinstance(ref, str) and ref.strip().lower() not in _NO_ANSWER


def unanswerable(trajectory: Trajectory) -> bool:
    """No reference SQL and a verified answer that says there is none. A task whose producer
    recorded no ground truth at all says nothing about whether an answer exists."""
    if has_reference(trajectory) or not trajectory.task.has_ground_truth:
        return False
    gold = trajectory.task.ground_truth
    if gold is None:
        return True
    if isinstance(gold, str):
        return gold.strip().lower() in _NO_ANSWER
    table = sg.as_table(gold)
    return table is not None and all(all(v in _NO_ANSWER for v in row) for row in table)


def has_answer(trajectory: Trajectory) -> bool:
    """A verified answer with something in it: the task can be answered and says how."""
    if not trajectory.task.has_ground_truth or unanswerable(trajectory):
        return False
    table = sg.as_table(trajectory.task.ground_truth)
    return bool(table) and any(any(v not in _NO_ANSWER for v in row) for row in table or [])


def used_tools(trajectory: Trajectory) -> bool:
    return any(s.kind != StepKind.MESSAGE for s in trajectory.steps)


def final_message(trajectory: Trajectory) -> int | None:
    """The agent's last message (its answer); None when only the final answer is recorded."""
    for i in range(len(trajectory.steps) - 1, -1, -1):
        step = trajectory.steps[i]
        if step.kind == StepKind.MESSAGE and (step.role or "assistant") == "assistant":
            return i
    return None


def _answer_text(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    # 20,626,031 and 10 005 817 are the numbers a query printed as 20626031 and 10005817.
    return re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text.lower())


def answering_step(trajectory: Trajectory, steps: list[tuple[int, str]]) -> tuple[int, str] | None:
    """(step, how it was found) of the query the agent answered from: the one whose output
    holds the most values (ones the query did not write itself) that the final answer repeats,
    the first of equals, else the last query that returned rows. None when no query returned
    anything."""
    answer = _answer_text(trajectory.final_answer or "")
    ran: list[int] = []
    best: tuple[int, int, str] | None = None  # (values repeated, step, the longest of them)
    for i, sql in steps:
        step = trajectory.steps[i]
        obs = step.observation or ""
        if step.error or not obs.strip():
            continue
        ran.append(i)
        written = sql.lower()
        repeated = []
        for match in _RE_VALUE.finditer(obs.lower()):
            value = next(g for g in match.groups() if g)
            if value in written:
                continue  # a value the query wrote itself is not a result
            pattern = rf"(?<![\w.]){re.escape(value)}(?![\w.])" if value[0].isdigit() else \
                re.escape(value)
            if re.search(pattern, answer):
                repeated.append(value)
        if repeated and (best is None or len(set(repeated)) > best[0]):
            best = (len(set(repeated)), i, max(repeated, key=len))
    if best is not None:
        return best[1], f"its result {best[2]!r} is in the final answer"
    if ran:
        return ran[-1], "the last query that returned rows before the answer"
    return None


def absent_terms(question: str, probe: Probe | None) -> list[str] | None:
    """Words of the question that no table, column or dictionary entry of the database holds
    (to the first five letters: 'locations' is the column admission_location); None when there
    is no database to ask."""
    if probe is None:
        return None
    names = probe.schema_words()
    out: list[str] = []
    seen: set[str] = set()
    for word in _RE_WORD.findall(question.lower()):
        # A word's stem, its ending dropped: 'locations' is the column admission_location,
        # while 'influential' is not 'influenza'.
        stem = word[:max(5, len(word) - 3)]
        if word in _ASKING or stem in seen:
            continue
        seen.add(stem)
        if len(seen) > _TERMS_CHECKED:
            break
        if any(n.startswith(stem) or (len(n) >= 4 and word.startswith(n)) for n in names):
            continue
        if not probe.dictionary_holds(stem):
            out.append(word)
    return out


def unanswerable_reason(step: int | None, how: str, terms: list[str] | None) -> str:
    where = f"step {step} reports a result ({how})" if step is not None else \
        "the final answer gives one without any query"
    if terms is None:
        held = "no database to say which of its words it cannot hold"
    elif terms:
        held = "no table, column or dictionary entry holds " + ", ".join(repr(t) for t in terms)
    else:
        held = ("every word of it names something in the database, so what it asks is not there "
                "in the form asked")
    return f"the question has no answer in the database (verified answer NULL), yet {where}; " \
        f"{held}"
