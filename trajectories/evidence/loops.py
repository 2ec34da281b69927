"""Loops: the same plan repeated without revision (the taxonomy's Stuck-in-Loop).

- **The same query run again and again**: one query (its text, case and spacing aside) run at
  least ``LOOP_MIN_RUNS`` times, and no final answer; the loop starts at its first run, or at
  the first of the attempts right before it that got the very same result (a near-identical
  query: only a literal or a condition changed, the same error came back).
- **The same reply again and again**: after the agent held the answer, it gave the same reply
  at least ``LOOP_MIN_RUNS`` times in a row, with only the user's turns between them and no
  action of its own, until the conversation ended. The answer was right; repeating itself
  instead of ending is why the run failed, from the first of those replies.

Both return uncalibrated divergences: the finder gives the part its category and confidence.
"""

from __future__ import annotations

import re
from collections import Counter

from trajectories.evidence.grounding import is_agent_message
from trajectories.evidence.parts import Divergence
from trajectories.model import StepKind, Trajectory
from trajectories.signals import STUCK_IN_LOOP, has_final_answer

_RE_QUOTED_SQL = re.compile(r"\[SQL:.*", re.DOTALL)
#: Repeats that make a loop (the taxonomy: "three or more near-identical actions").
LOOP_MIN_RUNS = 3


def _norm(text: str) -> str:
    return " ".join(text.replace(";", " ").split()).lower()


def query_runs(steps: list[tuple[int, str]]) -> Counter[str]:
    """How often each query was run, its case, spacing and semicolons aside (keyed by
    :func:`same_query`)."""
    return Counter(_norm(sql) for _, sql in steps)


def same_query(sql: str) -> str:
    """The key :func:`query_runs` counts ``sql`` under."""
    return _norm(sql)


def _result(trajectory: Trajectory, index: int) -> str:
    """A step's result for comparing attempts: an error without the query text that drivers
    quote after it (``[SQL: ...]``), so two queries with the same error read the same."""
    text = trajectory.steps[index].observation or ""
    return _norm(_RE_QUOTED_SQL.sub("", text))


def repeated_query(trajectory: Trajectory, steps: list[tuple[int, str]]
                   ) -> tuple[int, Divergence] | None:
    """(the loop's first step, divergence) for a query run ``LOOP_MIN_RUNS`` times or more by
    an agent that gave no final answer; None otherwise."""
    counts = query_runs(steps)
    if not counts:
        return None
    query, n = counts.most_common(1)[0]
    if n < LOOP_MIN_RUNS or has_final_answer(trajectory.final_answer):
        return None
    at = next(k for k, (_, sql) in enumerate(steps) if _norm(sql) == query)
    # Near-identical attempts just before it that got the very same result (the same error,
    # the same rows) are the loop's start: only a literal or a condition changed.
    result = _result(trajectory, steps[at][0])
    while at > 0 and result and _result(trajectory, steps[at - 1][0]) == result:
        at -= 1
    first = steps[at][0]
    return first, Divergence("loop", f"same query run {n} times from step {first} without a "
                                     "new result", STUCK_IN_LOOP, 0.0)


def repeated_reply(trajectory: Trajectory, after: int) -> tuple[int, Divergence] | None:
    """(the first repeated reply, divergence) when, after step ``after``, the agent's replies
    to the end are one text given ``LOOP_MIN_RUNS`` times or more with no action between them
    (the user's turns aside); None otherwise."""
    replies: list[int] = []
    for i in range(after + 1, len(trajectory.steps)):
        if is_agent_message(trajectory, i):
            replies.append(i)
        elif trajectory.steps[i].kind != StepKind.MESSAGE:
            replies = []  # an action: whatever came before it was not the end
    texts = [_norm(trajectory.steps[i].content or "") for i in replies]
    tail = 0
    while tail < len(texts) and texts[-1 - tail] == texts[-1] and texts[-1]:
        tail += 1
    if tail < LOOP_MIN_RUNS:
        return None
    first = replies[len(replies) - tail]
    return first, Divergence(
        "loop", f"the same reply given {tail} times from step {first} with no new action, "
                "until the conversation ended: the answer was held, the agent never ended",
        STUCK_IN_LOOP, 0.0)


__all__ = ["LOOP_MIN_RUNS", "query_runs", "repeated_query", "repeated_reply", "same_query"]
