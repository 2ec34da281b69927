"""Did it fail: the one rule every reader of an outcome goes through (docs/scoring.md).

A trajectory's outcome, for a viewer, is decided in this order:

1. people's verdict, as the viewer may see them (the annotation store decides what a viewer
   may see, and its rule for one item: a lead's latest verdict wins; annotators who disagree
   leave it open, ``None``);
2. else the producer's recorded verdict (a harness reward, a verdict column);
3. else the judge's verdict (its rule layers, or an LLM judge beyond them);
4. else undecided (``None``): never a success and never a failure.

A trajectory *needs a person* when it failed (a failure label is wanted), or when it is
undecided although it could be decided: people disagree (a lead decides), or the judge could
not tell although the task has a gold answer.

This module sits in the domain layer, below the annotation store: the store hands people's
verdicts down as a plain mapping (trajectory id -> True, False or None), so the rule is
written once, here, in SQL for the workspace's views and in Python for single trajectories
and id lists; a test holds the two to the same answers. Only the ``verdict`` success source
takes people's verdicts: ``recorded`` and ``exact_match`` are what their names say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from trajectories import columns as col

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from trajectories.model import Outcome as RecordedOutcome
    from trajectories.model import Trajectory

__all__ = [
    "DEFAULT_SUCCESS_SOURCE",
    "NEEDS_A_PERSON",
    "NO_PEOPLE",
    "SUCCESS_SOURCES",
    "Outcome",
    "PeopleVerdicts",
    "apply_people",
    "count_outcomes",
    "judge_could_decide",
    "list_outcomes",
    "needs_a_person",
    "outcome_name",
    "outcome_of_success",
    "people_counted",
    "recorded_verdict",
    "recorded_verdict_of",
    "resolve",
    "resolve_recorded",
    "resolved_relation",
    "still_needing_a_person",
    "success_expression",
    "trajectory_success",
]

#: People's verdicts as a viewer may see them: trajectory id -> True (the agent was right),
#: False (it failed) or None (people disagree and no lead decided).
PeopleVerdicts = Mapping[str, "bool | None"]
NO_PEOPLE: PeopleVerdicts = {}


#: Where the workspace's own outcome comes from (before people's verdicts): ``verdict`` (the
#: default) is the producer's recorded verdict, else the judge's (undecided is NULL); people's
#: verdicts win over both. ``recorded`` prefers the producer's verdict, then exact match;
#: ``exact_match`` is EHR-Complex's scoring, then the recorded verdict. Under these two,
#: people's verdicts do not apply: they are what their names say.
SUCCESS_SOURCES = ("verdict", "recorded", "exact_match")
DEFAULT_SUCCESS_SOURCE = "verdict"


def success_expression(source: str) -> str:
    """SQL for the workspace's ``success`` under a success source, over the ``outcomes`` and
    ``trajectories`` views' columns (a fixed expression, never user text)."""
    if source == "verdict":
        return f"coalesce({col.RECORDED_SUCCESS}, {col.JUDGED_SUCCESS})"
    if source == "recorded":
        return f"coalesce({col.RECORDED_SUCCESS}, {col.EXACT_MATCH})"
    if source == "exact_match":
        return f"coalesce({col.EXACT_MATCH}, {col.RECORDED_SUCCESS})"
    choices = ", ".join(SUCCESS_SOURCES)
    raise ValueError(f"unknown success source {source!r} (choose from {choices})")


def people_counted(success_source: str, people: PeopleVerdicts) -> PeopleVerdicts:
    """People's verdicts count under the ``verdict`` source only."""
    return people if success_source == DEFAULT_SUCCESS_SOURCE else NO_PEOPLE


class Outcome(StrEnum):
    """How an outcome is shown. ``unscored`` is the undecided outcome: nothing decides it."""

    SUCCESS = "success"
    FAILURE = "failure"
    UNSCORED = "unscored"


def outcome_of_success(success: bool | None) -> Outcome:
    """The shown outcome of a resolved success (None, or a pandas NaN, is unscored)."""
    if success is None or (isinstance(success, float) and success != success):
        return Outcome.UNSCORED
    return Outcome.SUCCESS if success else Outcome.FAILURE


def outcome_name(success: bool | None) -> str:
    """``success``, ``failure`` or ``unscored``, as plain text (CLI, JSON, tables)."""
    return str(outcome_of_success(success))


def recorded_verdict(outcome: RecordedOutcome | None) -> bool | None:
    """The producer's verdict: its success flag, else a reward (full reward is success, any
    partial reward a failure), else none."""
    if outcome is None:
        return None
    return recorded_verdict_of(outcome.success, outcome.reward)


def recorded_verdict_of(success: bool | None, reward: float | None) -> bool | None:
    """``recorded_verdict`` from the two values (the fast import path has no model)."""
    if success is not None:
        return bool(success)
    if reward is not None:
        return reward >= 1.0 - 1e-9
    return None


def resolve(trajectory_id: str, *, recorded: bool | None, judged: bool | None,
            people: PeopleVerdicts = NO_PEOPLE) -> bool | None:
    """One trajectory's success under the module's order."""
    if trajectory_id in people:
        return people[trajectory_id]
    if recorded is not None:
        return recorded
    return judged


def resolve_recorded(trajectory_id: str, recorded: Mapping[str, object] | None,
                     people: PeopleVerdicts = NO_PEOPLE) -> bool | None:
    """``resolve`` over a workspace's stored outcome of one trajectory (``Workspace.verdict_of``:
    ``recorded_success`` and ``judged_success``); None for an unknown id without a verdict."""
    if recorded is None:
        return people.get(trajectory_id)
    return resolve(trajectory_id, recorded=_truth(recorded.get(col.RECORDED_SUCCESS)),
                   judged=_truth(recorded.get(col.JUDGED_SUCCESS)), people=people)


def _truth(value: object) -> bool | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return bool(value)


def judge_could_decide(judge_verdict: str | None, judge_method: str | None) -> bool:
    """False where the judge was left undecided although the task has a gold answer (a
    person can decide what the rules could not); True otherwise."""
    return not (judge_verdict == "undecided" and judge_method != "no_ground_truth")


def needs_a_person(success: bool | None, *, person_decided: bool,
                   judge_verdict: str | None, judge_method: str | None) -> bool:
    """The module's "needs a person" for one resolved trajectory."""
    if success is False:
        return True
    if success is True:
        return False
    return person_decided or not judge_could_decide(judge_verdict, judge_method)


def trajectory_success(traj: Trajectory, people: PeopleVerdicts = NO_PEOPLE,
                       judged: bool | None = None) -> bool | None:
    """A trajectory's success read from its record (its recorded verdict, else the judge's
    rules run on it now, unless ``judged`` is given), with people's verdicts on its id."""
    recorded = recorded_verdict(traj.outcome)
    tid = traj.id or ""
    if tid not in people and recorded is None and judged is None:
        from trajectories.judge import judge_trajectory

        judged = judge_trajectory(traj).success
    return resolve(tid, recorded=recorded, judged=judged, people=people)


def still_needing_a_person(ids: Iterable[str], pool: Iterable[str],
                           people: PeopleVerdicts) -> list[str]:
    """``ids`` (in their order) that need a person, where ``pool`` is the set that needs one
    by the workspace alone (no people's verdicts) and ``people`` the verdicts that count:
    a person's False or None puts an item in, a True takes it out, and the workspace decides
    the rest. The same answer as ``NEEDS_A_PERSON`` over ``resolved_relation``."""
    in_pool = set(pool)
    out = []
    for tid in ids:
        if tid in people:
            if people[tid] is not True:
                out.append(tid)
        elif tid in in_pool:
            out.append(tid)
    return out


# -- SQL over the workspace's views ---------------------------------------------------------------

#: Over a ``resolved_relation``: the trajectories that need a person (the module's rule).
NEEDS_A_PERSON = (f"coalesce({col.SUCCESS} = false OR ({col.SUCCESS} IS NULL AND "
                  f"({col.PERSON_DECIDED} OR ({col.JUDGE_VERDICT} = 'undecided' "
                  f"AND coalesce({col.JUDGE_METHOD}, '') <> 'no_ground_truth'))), false)")

#: The name people's verdicts are registered under on a reader's connection.
_PEOPLE_TABLE = "people_verdicts"


def resolved_relation(con: duckdb.DuckDBPyConnection, relation: str,
                      people: PeopleVerdicts = NO_PEOPLE, *,
                      success_sql: str = col.SUCCESS, has_success: bool = True) -> str:
    """A subquery of ``relation``'s rows (a view or table name the code fixes, never user
    text) with ``success`` resolved by the module's order and ``person_decided`` added.
    Use it before the next ``resolved_relation`` on the same connection: the people's
    verdicts table is the connection's, one at a time.

    ``success_sql`` is the workspace's own outcome over the relation's columns (the success
    source's expression); ``has_success`` says whether the relation already has a ``success``
    column to replace. People's verdicts are registered on ``con`` (a reader's own cursor)."""
    select = (f"SELECT b.* REPLACE ({{expr}} AS {col.SUCCESS})" if has_success
              else f"SELECT b.*, {{expr}} AS {col.SUCCESS}")
    if not people:
        return (f"({select.format(expr=success_sql)}, false AS {col.PERSON_DECIDED} "
                f"FROM {relation} b)")
    ids = list(people)
    # A temporary table of this connection (a statement, where registering an Arrow table is
    # refused while an earlier result on the connection is still open).
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_PEOPLE_TABLE} AS SELECT "
                "unnest(?::VARCHAR[]) AS id, unnest(?::BOOLEAN[]) AS people",
                [ids, [people[i] for i in ids]])
    resolved = f"CASE WHEN pv.id IS NULL THEN {success_sql} ELSE pv.people END"
    return (f"({select.format(expr=resolved)}, pv.id IS NOT NULL AS {col.PERSON_DECIDED} "
            f"FROM {relation} b LEFT JOIN {_PEOPLE_TABLE} pv ON pv.id = b.{col.ID})")


def apply_people(frame: pd.DataFrame, people: PeopleVerdicts) -> pd.DataFrame:
    """``frame`` (rows with ``id`` and the workspace's ``success``) with people's verdicts
    winning, as ``resolved_relation`` does in SQL: a None (people disagree) is undecided, left
    out like every unscored row until a lead decides. The frame itself is returned when there
    is nothing to apply (it may be a shared one, never written)."""
    if not people or frame.empty:
        return frame
    ids = frame[col.ID].astype(str)
    decided = ids.isin(people.keys())
    if not decided.any():
        return frame
    out = frame.copy()
    success = out[col.SUCCESS].astype("object")
    success[decided] = [None if v is None else bool(v) for v in ids[decided].map(people)]
    out[col.SUCCESS] = success.astype("boolean")
    return out


# -- counts and lists over a workspace's ``outcomes`` view ------------------------------------


def count_outcomes(con: duckdb.DuckDBPyConnection, success_source: str = DEFAULT_SUCCESS_SOURCE,
                   people: PeopleVerdicts = NO_PEOPLE) -> dict[str, int]:
    """Counts over the ``outcomes`` view on ``con``: ``failed``, ``unscored`` and
    ``needs_a_person`` follow ``success_source`` and, under the ``verdict`` source, people's
    verdicts; ``decided_by_people`` counts the trajectories a person's verdict decided."""
    rows = resolved_relation(con, col.OUTCOMES, people_counted(success_source, people),
                             success_sql=success_expression(success_source), has_success=False)
    row = con.execute(
        f"""SELECT count(*), count(DISTINCT {col.TASK_ID}), count(DISTINCT {col.RUN}),
                  count(*) FILTER (WHERE NOT {col.SUCCESS}),
                  count(*) FILTER (WHERE {col.SUCCESS} IS NULL),
                  count(*) FILTER (WHERE {NEEDS_A_PERSON}),
                  count(*) FILTER (WHERE {col.PERSON_DECIDED}),
                  count(*) FILTER (WHERE {col.RECORDED_SUCCESS} IS NOT NULL
                                   AND {col.RECORDED_SUCCESS} <> {col.EXACT_MATCH})
           FROM {rows}"""
    ).fetchone()
    assert row is not None
    keys = ("trajectories", "tasks", "runs", "failed", "unscored", "needs_a_person",
            "decided_by_people", "outcome_disagreements")
    return {k: int(v or 0) for k, v in zip(keys, row, strict=True)}


def list_outcomes(con: duckdb.DuckDBPyConnection, *, failed: bool = False,
                  unscored: bool = False, run: str | None = None, limit: int | None = None,
                  success_source: str = DEFAULT_SUCCESS_SOURCE,
                  people: PeopleVerdicts = NO_PEOPLE, needing_a_person: bool = False,
                  ids: Sequence[str] | None = None) -> list[dict[str, object]]:
    """Trajectories of the ``outcomes`` view on ``con`` with ``success`` (None when
    undecided) and ``outcome`` (``success`` | ``failure`` | ``unscored``), resolved as
    ``count_outcomes`` does; ``needing_a_person`` keeps what ``NEEDS_A_PERSON`` keeps."""
    rows = resolved_relation(con, col.OUTCOMES, people_counted(success_source, people),
                             success_sql=success_expression(success_source), has_success=False)
    where: list[str] = []
    params: list[object] = []
    if failed:
        where.append(f"NOT {col.SUCCESS}")
    if unscored:
        where.append(f"{col.SUCCESS} IS NULL")
    if needing_a_person:
        where.append(NEEDS_A_PERSON)
    if run:
        where.append(f"{col.RUN} = ?")
        params.append(run)
    if ids is not None:
        where.append(f"{col.ID} IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(ids))
    keys = (col.ID, col.RUN, col.MODEL, col.TASK_ID, col.SUCCESS)
    sql = f"SELECT {col.listed(keys)} FROM {rows}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {col.listed(col.LIST_ORDER)}"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return [{**dict(zip(keys, r, strict=True)), "outcome": str(outcome_of_success(r[4]))}
            for r in con.execute(sql, params).fetchall()]
