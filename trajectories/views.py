"""Read-side queries the workbench pages need, pushed down into DuckDB.

Every filter is a bound parameter; nothing from a user is formatted into SQL text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trajectories import columns as col
from trajectories.outcome import NO_PEOPLE, PeopleVerdicts, resolved_relation
from trajectories.workspace import Workspace

BROWSE_COLUMNS = (col.ID, col.RUN, col.MODEL, col.TASK_ID, *col.TASK_FIELDS, col.ROLLOUT,
                  col.SUCCESS, col.EXACT_MATCH, col.RECORDED_SUCCESS, col.N_TURNS, col.N_ERRORS,
                  col.QUESTION)


#: The order Browse lists trajectories in (ties broken by id, so pages never overlap).
BROWSE_ORDER = col.listed(col.LIST_ORDER)

#: Browse reads a per-connection copy of its columns sorted in browse order, rebuilt when the
#: parts change (``Workspace.shared_table``). A run filter then skips every row group of other
#: runs (DuckDB's min/max per row group), and a page needs no join with the task consensus:
#: at a million rows a one-run filter fell from ~340 ms (reading the view) to the figures in
#: docs/benchmarks.md. The copy holds no payloads; its memory is in docs/benchmarks.md too.
_BROWSE_ROWS = (f"SELECT {col.listed(BROWSE_COLUMNS)} FROM {col.TRAJECTORIES} "
                f"ORDER BY {BROWSE_ORDER}")


def _browse_rows(ws: Workspace) -> Any:
    """This thread's connection, with ``browse_rows`` current."""
    ws.keep_warm("browse_rows", _BROWSE_ROWS, build_now=False)  # built just below
    return ws.shared_table("browse_rows", _BROWSE_ROWS)


def keep_browse_warm(ws: Workspace) -> None:
    """Build the Browse table in the background now and after every change of the parts, so
    the first Browse after opening a workspace or an import does not wait for it (4-11 s at a
    million rows under load); readers are never blocked by the build. Cheap when warm."""
    ws.keep_warm("browse_rows", _BROWSE_ROWS)


#: "success" | "failure" | "unscored" (no ground truth and no recorded outcome).
_OUTCOME = (f"CASE WHEN {col.SUCCESS} IS NULL THEN 'unscored' WHEN {col.SUCCESS} THEN 'success' "
            "ELSE 'failure' END")
#: The producer's recorded verdict and the exact match disagree.
_DISAGREEMENT = (f"{col.RECORDED_SUCCESS} IS NOT NULL "
                 f"AND {col.RECORDED_SUCCESS} <> {col.EXACT_MATCH}")


@dataclass
class BrowseFilter:
    runs: Sequence[str] = ()
    models: Sequence[str] = ()
    intents: Sequence[str] = ()
    scopes: Sequence[str] = ()
    templates: Sequence[str] = ()
    success: bool | None = None
    disagreement_only: bool = False
    text: str = ""
    ids: Sequence[str] | None = None  # e.g. trajectories with a given failure label
    unscored_only: bool = False  # no ground truth and no recorded outcome (success IS NULL)
    limit: int = 1000
    extra: dict[str, Any] = field(default_factory=dict)
    #: People's verdicts (``store.verdicts.effective``, as the reader may see them): they win
    #: over the workspace's ``success``; None is an open disagreement (undecided).
    verdicts: Mapping[str, bool | None] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        """The filter as a cache key: its SQL, its parameters and the verdicts it applies."""
        where, params = self.where()
        return (where, tuple(map(str, params)),
                tuple(sorted((k, v) for k, v in self.verdicts.items())))

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, values in ((col.RUN, self.runs), (col.MODEL, self.models),
                               (col.INTENT, self.intents), (col.SCOPE, self.scopes),
                               (col.TEMPLATE_ID, self.templates)):
            if values:
                clauses.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if self.success is not None:
            clauses.append(f"{col.SUCCESS} = ?")
            params.append(self.success)
        if self.unscored_only:
            clauses.append(f"{col.SUCCESS} IS NULL")
        if self.disagreement_only:
            clauses.append(_DISAGREEMENT)
        if self.text.strip():
            clauses.append(f"({col.QUESTION} ILIKE ? OR {col.TASK_ID} = ? OR {col.ID} = ?)")
            params.extend([f"%{self.text.strip()}%", self.text.strip(), self.text.strip()])
        if self.ids is not None:
            if not self.ids:
                clauses.append("false")
            else:
                clauses.append(f"{col.ID} IN (SELECT unnest(?::VARCHAR[]))")
                params.append(list(self.ids))
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _rows(con: Any, flt: BrowseFilter) -> str:
    """What Browse reads from: its table with ``success`` resolved by the one outcome rule
    (people's verdicts, as the filter carries them, winning)."""
    return resolved_relation(con, "browse_rows", flt.verdicts)


def browse(ws: Workspace, flt: BrowseFilter) -> tuple[pd.DataFrame, int]:
    """The matching rows (up to ``flt.limit``) and the total match count."""
    where, params = flt.where()
    con = _browse_rows(ws)
    rows = _rows(con, flt)
    total_row = con.execute(f"SELECT count(*) FROM {rows}{where}", params).fetchone()
    total = int(total_row[0]) if total_row else 0
    df = con.execute(
        f"SELECT {', '.join(BROWSE_COLUMNS)}, {_OUTCOME} AS outcome FROM {rows}{where} "
        f"ORDER BY {BROWSE_ORDER} LIMIT {int(flt.limit)}",
        params,
    ).df()
    return df, total


#: Columns Browse may sort on (a whitelist: the name is formatted into the ORDER BY).
SORTABLE = (*BROWSE_COLUMNS, "outcome")


def browse_page(ws: Workspace, flt: BrowseFilter, *, sort: str = "", descending: bool = False,
                offset: int = 0, limit: int = 100) -> tuple[pd.DataFrame, int]:
    """One page of the whole filtered set, sorted in DuckDB, and the total match count.

    Sorting and paging happen over every match, not over rows already loaded; ties fall back
    to the browse order so pages never overlap or skip a row.
    """
    if sort and sort not in SORTABLE:
        raise ValueError(f"cannot sort on {sort!r}; one of {', '.join(SORTABLE)}")
    where, params = flt.where()
    con = _browse_rows(ws)
    rows = _rows(con, flt)
    total_row = con.execute(f"SELECT count(*) FROM {rows}{where}", params).fetchone()
    total = int(total_row[0]) if total_row else 0
    order = BROWSE_ORDER
    if sort:
        order = f"{sort} {'DESC' if descending else 'ASC'} NULLS LAST, {order}"
    df = con.execute(
        f"SELECT {', '.join(BROWSE_COLUMNS)}, {_OUTCOME} AS outcome FROM {rows}{where} "
        f"ORDER BY {order} LIMIT ? OFFSET ?",
        [*params, int(limit), max(0, int(offset))],
    ).df()
    return df, total


def facets(ws: Workspace) -> dict[str, list[str]]:
    """Distinct values for the filter widgets."""
    con = _browse_rows(ws)
    out: dict[str, list[str]] = {}
    for column in (col.RUN, col.MODEL, *col.TASK_FIELDS):
        rows = con.execute(
            f"SELECT DISTINCT {column} FROM browse_rows WHERE {column} IS NOT NULL ORDER BY 1"
        ).fetchall()
        out[column] = [str(r[0]) for r in rows]
    return out


def overview_by_run(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE) -> pd.DataFrame:
    """Per run and model: counts, the success rate and failures, with ``people``'s verdicts
    winning (``trajectories.outcome``)."""
    keep_browse_warm(ws)  # the first page of a workspace: Browse is usually next
    con = ws.connect()
    rows = resolved_relation(con, col.TRAJECTORIES, people)
    by = col.listed((col.RUN, col.MODEL))
    return con.execute(
        f"""SELECT {by}, any_value({col.TEMPERATURE}) AS temperature,
                  count(*) AS trajectories, count(DISTINCT {col.TASK_ID}) AS tasks,
                  avg({col.SUCCESS}::INT) AS success_rate,
                  count(*) FILTER (WHERE NOT {col.SUCCESS}) AS failures,
                  count(*) FILTER (WHERE {col.SUCCESS} IS NULL) AS unscored,
                  count(*) FILTER (WHERE {_DISAGREEMENT}) AS outcome_disagreements,
                  avg({col.N_TURNS}) AS mean_turns
           FROM {rows} GROUP BY {by} ORDER BY {by}"""
    ).df()


def intent_scope_counts(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE) -> pd.DataFrame:
    con = ws.connect()
    rows = resolved_relation(con, col.TRAJECTORIES, people)
    return con.execute(
        f"""SELECT {col.INTENT}, coalesce({col.SCOPE}, 'unknown') AS {col.SCOPE},
                  count(*) AS trajectories, count(DISTINCT {col.TASK_ID}) AS tasks,
                  avg({col.SUCCESS}::INT) AS success_rate
           FROM {rows} GROUP BY ALL ORDER BY {col.INTENT}, {col.SCOPE}"""
    ).df()


def failure_neighbours(ws: Workspace, trajectory_id: str,
                       flt: BrowseFilter | None = None) -> tuple[str | None, str | None]:
    """The previous and next failed trajectory around ``trajectory_id`` in browse order."""
    base = flt or BrowseFilter()
    where, params = base.where()
    failed = f"NOT {col.SUCCESS}"
    cond = failed if not where else where[len(" WHERE "):] + f" AND {failed}"
    con = _browse_rows(ws)
    rows = _rows(con, base)
    row = con.execute(
        f"""WITH ordered AS (
              SELECT {col.ID}, lag({col.ID}) OVER w AS prev_id, lead({col.ID}) OVER w AS next_id
              FROM {rows} WHERE {cond} OR {col.ID} = ?
              WINDOW w AS (ORDER BY {BROWSE_ORDER}))
            SELECT prev_id, next_id FROM ordered WHERE {col.ID} = ?""",
        [*params, trajectory_id, trajectory_id],
    ).fetchone()
    if row is None:
        return None, None
    return row[0], row[1]


def first_failure(ws: Workspace, people: PeopleVerdicts = NO_PEOPLE) -> str | None:
    con = _browse_rows(ws)
    rows = resolved_relation(con, "browse_rows", people)
    row = con.execute(
        f"SELECT {col.ID} FROM {rows} WHERE NOT {col.SUCCESS} ORDER BY {BROWSE_ORDER} LIMIT 1"
    ).fetchone()
    return row[0] if row else None
