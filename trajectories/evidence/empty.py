"""An answer exists, but the query the agent answered from returns nothing: which value it
filters on names nothing in the database.

Without a reference SQL there is no part to compare, but the database itself can say which
condition emptied a query: the query is run again once per text value it compares a column
with, each time with that one condition left out. A value whose condition, left out, brings
rows back is a value the database does not hold in that column (``route = 'inhalation'`` where
routes are written ``'ih'``, ``icd_code LIKE '%resection%'`` where codes are codes): the term was
not grounded to the database's own identifiers, which the taxonomy calls a Medical-Code Lookup
Error. Numbers, ids and dates are not such values (a window or an id that selects nothing is
query logic, left to the other rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from trajectories import signals as sg
from trajectories.evidence.commit import first_writing
from trajectories.evidence.noref import has_answer
from trajectories.evidence.parts import Divergence
from trajectories.evidence.probes import Probe, Rows
from trajectories.model import Trajectory
from trajectories.signals import CODE_LOOKUP
from trajectories.sql import parse_sql
from trajectories.sql.tables import DIALECTS

#: At most this many conditions are tried per query (each is one sandboxed execution).
MAX_TRIED = 6
_NUMBER_CHARS = frozenset("0123456789.-+ ")


@dataclass(frozen=True, slots=True)
class EmptyingValue:
    """The condition that emptied the query: the column, the value as written, and the rows
    the query returns without it (their count, for the reason a person reads)."""

    column: str
    value: str
    rows_without: int


def returns_nothing(rows: Rows | None) -> bool:
    """No rows, or only rows of NULLs (``MAX(x)`` over nothing): an empty answer."""
    return rows is not None and all(all(v is None for v in row) for row in rows.rows)


def _text_value(node: exp.Expr) -> tuple[str, str] | None:
    """(column, value) for a comparison of a column with text that is neither a number nor a
    date; None for anything else."""
    if not isinstance(node, (exp.EQ, exp.Like, exp.ILike, exp.In)):
        return None
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return None
    column = node.args.get("this")
    if not isinstance(column, exp.Column):
        return None
    literals = [lit for lit in node.find_all(exp.Literal) if lit.is_string]
    if not literals:
        return None
    value = str(literals[0].this)
    bare = value.strip("%")
    if not bare or set(bare) <= _NUMBER_CHARS or (bare[:4].isdigit() and "-" in bare[:8]):
        return None  # a number, an id or a date written as text
    return column.name.lower(), value


def emptying_value(sql: str, probe: Probe) -> EmptyingValue | None:
    """The text condition of ``sql`` whose removal makes it return rows, when ``sql`` itself
    returns nothing; None when it returns rows, cannot run, or no single text condition
    explains the empty result."""
    if not returns_nothing(probe.run(sql)):
        return None
    tree = parse_sql(sql)
    if tree is None:
        return None
    tried = 0
    for position, node in enumerate(tree.walk()):
        found = _text_value(node)
        if found is None:
            continue
        tried += 1
        if tried > MAX_TRIED:
            break
        without = _without(tree, position)
        rows = next((r for d in DIALECTS
                     if (r := probe.run(without.sql(dialect=d))) is not None), None)
        if rows is not None and not returns_nothing(rows):
            return EmptyingValue(found[0], found[1], len(rows.rows))
    return None


def _without(tree: exp.Expr, position: int) -> exp.Expr:
    """A copy of ``tree`` (cached and shared: never changed in place) with the node at
    ``position`` of its walk replaced by TRUE."""
    copy = tree.copy()
    next(n for i, n in enumerate(copy.walk()) if i == position).replace(exp.true())
    return copy


def emptied_by_a_value(trajectory: Trajectory, steps: list[tuple[int, str]],
                       probe: Probe | None) -> tuple[int, Divergence, int] | None:
    """(first step, divergence, answering step) when the task has an answer but the last query
    that ran returns nothing because of a text value the database does not hold there; the
    step is the first query that wrote that value into the same column (where the agent
    committed to it), else the first that wrote it at all. The divergence is uncalibrated
    (the finder gives its part's category and confidence)."""
    if probe is None or not has_answer(trajectory):
        return None
    last = next(((i, sql) for i, sql in reversed(steps) if not trajectory.steps[i].error), None)
    if last is None:
        return None
    found = emptying_value(last[1], probe)
    if found is None:
        return None
    divergence = Divergence("lookup", emptying_reason(last[0], found), CODE_LOOKUP, 0.0)
    return _committed_at(steps, found, last[0]), divergence, last[0]


def _committed_at(steps: list[tuple[int, str]], found: EmptyingValue, emptied: int) -> int:
    """The first query up to step ``emptied`` that wrote ``found``'s value into its column
    (where the agent committed to it), else the first that wrote it at all, else ``emptied``."""
    value = found.value.lower() if "%" in found.value else found.value
    first = first_writing(steps, {(found.column, value)}, emptied + 1)
    if first is None:  # written where the parts keep no column (a dictionary look-up)
        bare = found.value.strip("%").lower()
        first = next((i for i, sql in steps if i <= emptied and bare in sql.lower()), None)
    return first if first is not None else emptied


#: Queries tried per trajectory by ``first_emptied`` (each costs a few sandboxed executions).
MAX_EMPTY_QUERIES = 3


def first_emptied(trajectory: Trajectory, steps: list[tuple[int, str]], probe: Probe | None
                  ) -> tuple[int, Divergence] | None:
    """(step, divergence) for the first query that came back empty because of a text value
    its column does not hold, when the task has an answer and no later query that returned
    rows compared that column with another value (the agent never grounded the term: it
    dropped the condition or gave up); None otherwise. The step is where the agent first
    wrote that value, as above. Uncalibrated, as above."""
    if probe is None or not has_answer(trajectory):
        return None
    views = [v for v in sg.action_views(trajectory) if v.sql]
    empty = [v for v in views if _recorded_empty(v)][:MAX_EMPTY_QUERIES]
    for view in empty:
        found = emptying_value(str(view.sql), probe)
        if found is None:
            continue
        if any(_compares_otherwise(str(later.sql), found) for later in views
               if later.index > view.index and not _recorded_empty(later) and not later.error):
            continue  # grounded later: the agent went on with a value the column holds
        return _committed_at(steps, found, view.index), Divergence(
            "lookup", emptying_reason(view.index, found), CODE_LOOKUP, 0.0)
    return None


#: A recorded result of one row of NULLs (``MAX(x)`` over nothing), as drivers print it.
_RE_NULL_ROW = re.compile(r"\[\((?:\s*None\s*,?)+\)\]")


def _recorded_empty(view: sg.ActionView) -> bool:
    """Whether the step's recorded result was empty: no rows, or one row of NULLs."""
    if view.error:
        return False
    return view.empty or bool(_RE_NULL_ROW.fullmatch((view.observation or "").strip()))


def _compares_otherwise(sql: str, found: EmptyingValue) -> bool:
    """Whether ``sql`` compares ``found``'s column with another text value."""
    tree = parse_sql(sql)
    return tree is not None and any(
        (hit := _text_value(node)) is not None and hit[0] == found.column
        and hit[1].lower() != found.value.lower() for node in tree.walk())


def emptying_reason(step: int, found: EmptyingValue) -> str:
    return (f"the query at step {step} returns nothing though the task has an answer; without "
            f"its condition {found.column} ~ {found.value!r} it returns {found.rows_without} "
            f"row{'s' if found.rows_without != 1 else ''}: the value names nothing in "
            f"{found.column} (the term was not grounded to the database's own values)")


__all__ = ["EmptyingValue", "emptied_by_a_value", "emptying_reason", "emptying_value",
           "first_emptied", "returns_nothing"]
