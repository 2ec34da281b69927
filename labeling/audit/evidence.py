"""What a reviewer sees for one task: the reference SQL re-run in the sandbox, the schema of
the tables it reads, and evidence rows about the patient the question names.

Reads only task columns (through `pool.task_record`), so the review stays blind to agents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labeling.audit.pool import Candidate
from trajectories.sql import (
    QueryResult,
    SandboxError,
    describe_tables,
    run_isolated,
    tables_in_sql,
)
from trajectories.workspace import Workspace

EVIDENCE_ROWS = 20


@dataclass(frozen=True)
class EvidenceQuery:
    title: str
    sql: str
    result: QueryResult | None
    error: str | None


@dataclass(frozen=True)
class ItemContext:
    task: Candidate
    ground_truth: Any  # parsed JSON (the extracted answer)
    ehr_path: Path | None
    tables: tuple[str, ...]
    schema: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    result: QueryResult | None = None
    result_error: str | None = None
    evidence: tuple[EvidenceQuery, ...] = ()

    @property
    def has_database(self) -> bool:
        return self.ehr_path is not None


_PATIENT_ID = re.compile(r"\bpatient\s+(?:id\s+)?#?(\d{3,})\b", re.IGNORECASE)
_PATIENT_COLUMN = "subject_id"


def _parse_json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _quote_ident(name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def _run(db: Path, sql: str, timeout_s: float, row_cap: int) -> tuple[QueryResult | None,
                                                                          str | None]:
    try:
        return run_isolated(db, sql, timeout_s=timeout_s, row_cap=row_cap), None
    except SandboxError as err:
        return None, str(err)


def evidence_queries(question: str, schema: Mapping[str, list[tuple[str, str]]],
                     limit: int = EVIDENCE_ROWS) -> list[tuple[str, str]]:
    """(title, SQL) pairs showing the rows of the patient the question names, per table the
    reference SQL touches that has a subject_id column (at most three tables)."""
    match = _PATIENT_ID.search(question or "")
    if not match:
        return []
    patient = int(match.group(1))  # digits only: safe to put in the SQL text
    out = []
    for table, columns in schema.items():
        if any(c.lower() == _PATIENT_COLUMN for c, _ in columns):
            out.append((f"Rows of patient {patient} in {table}",
                        f"SELECT * FROM {_quote_ident(table)} WHERE {_PATIENT_COLUMN} = "
                        f"{patient} LIMIT {int(limit)}"))
        if len(out) == 3:
            break
    return out


def item_context(
    ws: Workspace,
    task: Candidate,
    *,
    timeout_s: float = 5.0,
    row_cap: int = 1000,
) -> ItemContext:
    """Re-run the reference SQL in the sandbox and gather schema and evidence for one task."""
    ehr = ws.ehr_path
    tables = tuple(tables_in_sql(task.reference_sql or ""))
    truth = _parse_json(task.ground_truth)
    if ehr is None or not ehr.exists():
        return ItemContext(task=task, ground_truth=truth, ehr_path=None, tables=tables)
    try:
        schema = describe_tables(ehr, list(tables)) if tables else {}
    except SandboxError:
        schema = {}
    result: QueryResult | None = None
    error: str | None = "this task has no reference SQL"
    if task.reference_sql:
        result, error = _run(ehr, task.reference_sql, timeout_s, row_cap)
    evidence = []
    for title, sql in evidence_queries(task.question, schema):
        res, err = _run(ehr, sql, timeout_s, EVIDENCE_ROWS)
        evidence.append(EvidenceQuery(title=title, sql=sql, result=res, error=err))
    return ItemContext(task=task, ground_truth=truth, ehr_path=ehr, tables=tables,
                       schema=schema, result=result, result_error=error,
                       evidence=tuple(evidence))
