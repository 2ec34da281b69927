"""Step 1 of the audit: the candidate pool, tasks no selected run solved.

Task-level, in DuckDB over the ``trajectories`` view. Only task columns are ever read here,
so agent answers, run names and outcomes cannot leak into the blinded review.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labeling.audit.errors import AuditError
from trajectories import columns as col
from trajectories.outcome import resolved_relation
from trajectories.workspace import Workspace


@dataclass(frozen=True)
class Candidate:
    """One task as the audit sees it: task fields only, never an agent's answer or outcome."""

    task_id: str
    question: str
    intent: str | None
    scope: str | None
    template_id: str | None
    reference_sql: str | None
    ground_truth: str | None  # JSON text, as stored in the workspace
    answer_format: str | None = None

    @property
    def stratum(self) -> tuple[str, str]:
        # Strings (not None) so strata sort and serialise; "" marks a missing value.
        return (self.intent or "", self.scope or "")

    def as_item(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "intent": self.intent, "scope": self.scope,
                "template_id": self.template_id}


@dataclass(frozen=True)
class CandidatePool:
    runs: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    n_total_tasks: int  # tasks attempted by at least one of the selected runs

    @property
    def n_candidates(self) -> int:
        return len(self.candidates)

    @property
    def share(self) -> float | None:
        return self.n_candidates / self.n_total_tasks if self.n_total_tasks else None


_TASK_COLUMNS = (col.TASK_ID, col.QUESTION, col.INTENT, col.SCOPE, col.TEMPLATE_ID,
                 col.REFERENCE_SQL, col.GROUND_TRUTH, col.ANSWER_FORMAT)
# Task fields repeat on every trajectory of the task; min() picks one deterministically.
_TASK_SELECT = ", ".join([col.TASK_ID] + [f"min({c}) AS {c}" for c in _TASK_COLUMNS[1:]])


def _candidate(row: Sequence[Any]) -> Candidate:
    values = dict(zip(_TASK_COLUMNS, row, strict=True))
    text = {k: None if v is None else str(v) for k, v in values.items()}
    return Candidate(
        task_id=str(values["task_id"]), question=text["question"] or "",
        intent=text["intent"], scope=text["scope"], template_id=text["template_id"],
        reference_sql=text["reference_sql"], ground_truth=text["ground_truth"],
        answer_format=text["answer_format"],
    )


def workspace_runs(ws: Workspace) -> list[str]:
    rows = ws.connect().execute(
        f"SELECT DISTINCT {col.RUN} FROM {col.TRAJECTORIES} WHERE {col.RUN} IS NOT NULL "
        f"ORDER BY {col.RUN}"
    ).fetchall()
    return [str(r[0]) for r in rows]


def candidate_pool(ws: Workspace, runs: Sequence[str] | None = None,
                   verdicts: Mapping[str, bool | None] | None = None) -> CandidatePool:
    """Tasks attempted by the selected runs (default: every run) and solved by none of them.

    A run solves a task when any of its trajectories for that task succeeded (``success`` is
    the recorded outcome when there is one, else the judge's verdict; ``verdicts``, people's
    verdicts from the store, win over both). Unscored and undecided trajectories (NULL
    ``success``) are neither: a task with only such trajectories is not a candidate and does
    not count in the pool's total.
    """
    known = workspace_runs(ws)
    chosen = list(dict.fromkeys(runs)) if runs else known
    unknown = [r for r in chosen if r not in known]
    if unknown:
        raise AuditError(f"unknown run(s): {', '.join(unknown)}; the workspace has "
                         f"{', '.join(known) or 'no runs'}")
    con = ws.connect()
    if not chosen:
        return CandidatePool(runs=(), candidates=(), n_total_tasks=0)
    marks = ", ".join("?" for _ in chosen)
    # Outcomes by the one rule (trajectories.outcome): people's verdicts win.
    source = resolved_relation(con, col.TRAJECTORIES, verdicts or {})
    # The run filter is a bound list; nothing from the user is formatted into the SQL text.
    base = f"FROM {source} WHERE {col.RUN} IN ({marks})"
    total_row = con.execute(
        f"SELECT count(DISTINCT {col.TASK_ID}) FILTER (WHERE {col.SUCCESS} IS NOT NULL) {base}",
        chosen,
    ).fetchone()
    rows = con.execute(
        f"""SELECT {_TASK_SELECT} {base}
            GROUP BY {col.TASK_ID}
            HAVING bool_or({col.SUCCESS} IS NOT NULL)
               AND NOT bool_or(coalesce({col.SUCCESS}, false))
            ORDER BY {col.TASK_ID}""",
        chosen,
    ).fetchall()
    candidates = tuple(_candidate(r) for r in rows)
    return CandidatePool(runs=tuple(chosen), candidates=candidates,
                         n_total_tasks=int(total_row[0]) if total_row else 0)


def task_record(ws: Workspace, task_id: str) -> Candidate | None:
    """Task fields for one task (None when the workspace does not know it).

    Only task columns are selected, on purpose: this feeds the blinded review page.
    """
    row = ws.connect().execute(
        f"SELECT {_TASK_SELECT} FROM {col.TRAJECTORIES} WHERE {col.TASK_ID} = ? "
        f"GROUP BY {col.TASK_ID}",
        [task_id],
    ).fetchone()
    return None if row is None else _candidate(row)
