"""Where the agent commits to what went wrong: the step a proposal names.

The taxonomy's guideline puts the first faulty step where the primary error first becomes
visible in an action. Three readings of that, each stated from the trajectory alone:

- a wrong value (a code, a dictionary pattern, a literal) is committed to by the first query
  that writes it, whether or not that query reads the reference's tables or ran
  (:func:`first_writing`);
- a part that is only missing (a filter, a time window) is committed to by the first query the
  agent answers from, i.e. whose result its next message reports, when that query already lacks
  it (:func:`reported_steps`);
- an answer seen in a step and then lost is lost at the first later action that replaces it: a
  query with another result, else the message that reports another answer (:func:`left_answer`);
- another entity (the answer read from another table) is committed to where the agent first
  reaches for that table: a query on it, or a search of it or of its dictionary
  (:func:`first_reaching`).
"""

from __future__ import annotations

from collections.abc import Iterable

from trajectories import signals as sg
from trajectories.evidence.grounding import is_agent_message
from trajectories.evidence.parts import RefParts, decompose
from trajectories.model import Trajectory

# The dictionary an events table's codes are named in: searching it is reaching for the table.
DICTIONARY_OF = {"labevents": "d_labitems", "chartevents": "d_items", "inputevents": "d_items",
                 "outputevents": "d_items", "procedureevents": "d_items",
                 "diagnoses_icd": "d_icd_diagnoses", "procedures_icd": "d_icd_procedures"}


def diverging_values(ref: RefParts, got: RefParts) -> set[tuple[str, str]]:
    """The (column, value) pairs the query writes that the reference does not: its other codes,
    dictionary patterns (keyed by their table) and filter literals, folded (a step's text is
    searched for them)."""
    pairs = set(got.codes - ref.codes) | set(got.lookups - ref.lookups)
    pairs |= set(got.filters - ref.filters)
    return {(c.lower(), v.lower()) for c, v in pairs if len(v.strip("%")) >= 2}


def first_writing(steps: Iterable[tuple[int, str]], values: set[tuple[str, str]], before: int
                  ) -> int | None:
    """The first SQL step before ``before`` that writes one of ``values`` into a comparison on
    the same column (a code, a look-up pattern or a filter), wherever it looks: a query on the
    wrong table or one that failed has still committed to the value. A value compared with a
    column the database does not have (``drug_name`` for ``drug``) is not yet that value."""
    if not values:
        return None
    for i, sql in steps:
        if i >= before:
            return None
        low = sql.lower()
        if not any(v.strip("%") in low for _, v in values):
            continue  # a query cannot compare a value its text does not contain
        parts = decompose(sql)
        if parts is None:
            continue
        written = {(c.lower(), v.lower()) for c, v in parts.codes | parts.filters | parts.lookups}
        if written & values:
            return i
    return None


def reported_steps(trajectory: Trajectory, steps: Iterable[tuple[int, str]]) -> list[int]:
    """SQL steps whose result the agent reports: the step right after is its own message (to
    the user or as its answer), so that message is read from this query's result."""
    n = len(trajectory.steps)
    return [i for i, _ in steps
            if i + 1 < n and not trajectory.steps[i].error and is_agent_message(trajectory, i + 1)]


def left_answer(trajectory: Trajectory, steps: list[tuple[int, str]], seen: int) -> int:
    """The first action after step ``seen`` (whose result held the answer), or after the last
    later query that returned the same result again, that leaves it: a
    later query with another result, or one that fails (an errored query is already a step off
    the answer's path, whatever the agent does next), else the agent's last message (the
    answer it gave)."""
    held = " ".join((trajectory.steps[seen].observation or "").split())
    # An answer reached again (a later query returned the same result) was not lost in
    # between: what went astray there came back. It was lost after the last time it was held.
    again = max((i for i, _sql in steps if held and i > seen and not trajectory.steps[i].error
                 and " ".join((trajectory.steps[i].observation or "").split()) == held),
                default=seen)
    for i, _sql in steps:
        if i <= again:
            continue
        step = trajectory.steps[i]
        got = " ".join((step.observation or "").split())
        if step.error or (got and got != held):
            return i
    last_message = next((i for i in range(len(trajectory.steps) - 1, again, -1)
                         if is_agent_message(trajectory, i)), None)
    return last_message if last_message is not None else again


def first_reaching(trajectory: Trajectory, tables: set[str], before: int) -> int | None:
    """The first action before ``before`` that reads one of ``tables`` or searches it or its
    dictionary (a search tool's table argument, or SQL on it)."""
    wanted = set(tables) | {DICTIONARY_OF[t] for t in tables if t in DICTIONARY_OF}
    for view in sg.action_views(trajectory):
        if view.index >= before:
            return None
        if view.tool_table is not None and view.tool_table.lower() in wanted:
            return view.index
        if view.sql and any(t in view.sql.lower() for t in wanted) and view.tables & wanted:
            return view.index
    return None
