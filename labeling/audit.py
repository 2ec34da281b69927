"""Human validity audit of benchmark tasks: from the workspace to the store and back.

The audit asks whether a task itself is sound (does the question say what the reference SQL
computes, is the extracted answer supported by the data?), not whether an agent failed it.
Following the usual design, candidates are the tasks that none of the chosen runs solved: they
concentrate both genuinely hard tasks and broken ones.

Steps, each a function here so the CLI and the pages share one implementation:

1. :func:`candidate_pool` -- task-level, in DuckDB over the ``trajectories`` view.
2. :func:`plan_audit` -- stratified over intent x scope (labeling/sampling.py), seeded.
3. :func:`create_audit` -- stores the sample, its definition and the assignments.
4. :func:`item_context` -- what a reviewer sees for one task: question, reference SQL and its
   re-run result, the extracted answer, schema and evidence rows. It reads only task columns,
   so agent answers, run names and outcomes cannot leak into the blinded review.
5. :func:`audit_disagreements` / :func:`audit_report` -- adjudication queue and the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labeling.audit_export import (
    AFTER_HEADER,
    STRATUM_HEADER,
    after_rows,
    stratum_rows,
    summary_rows,
)
from labeling.audit_report import AuditItem as ReportItem
from labeling.audit_report import AuditReport, Judgment, build_audit_report
from labeling.sampling import SampleResult, stratified_sample
from labeling.store import AuditAdjudication, AuditItem, AuditJudgment, Store, StoreError
from trajectories.sandbox import (
    QueryResult,
    SandboxError,
    describe_tables,
    tables_in_sql,
)
from trajectories.sandbox_isolated import run_isolated
from trajectories.workspace import Workspace

__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "KAPPA_PARADOX_EXPLAINED",
    "MIN_REVIEWERS",
    "REASON_CODES",
    "REASON_LABELS",
    "AuditError",
    "AuditPlan",
    "Candidate",
    "CandidatePool",
    "Disagreement",
    "EvidenceQuery",
    "ItemContext",
    "audit_definition",
    "audit_disagreements",
    "audit_report",
    "candidate_pool",
    "create_audit",
    "default_audit_name",
    "imported_audit_definition",
    "item_context",
    "latest_audit",
    "plan_audit",
    "review_queue",
    "summary_table",
    "task_record",
    "workspace_runs",
]

DEFAULT_SAMPLE_SIZE = 500
# Two independent reviews per item are what makes agreement (and adjudication) measurable.
MIN_REVIEWERS = 2
EVIDENCE_ROWS = 20

# Reason codes for a judgment. The first four are the recurring concerns such audits report;
# "other" keeps the list closed without forcing a wrong code.
REASON_CODES: tuple[str, ...] = (
    "temporal_wording",
    "cohort_unit",
    "code_granularity",
    "answer_format",
    "other",
)
REASON_LABELS: dict[str, str] = {
    "temporal_wording": "Borderline temporal wording",
    "cohort_unit": "Cohort-unit interpretation",
    "code_granularity": "Medical-code granularity",
    "answer_format": "Answer-format mismatch",
    "other": "Other",
}


class AuditError(Exception):
    """A problem the user can fix (unknown run, empty pool, too few annotators...)."""


# ---- 1. candidate pool ----------------------------------------------------------------------


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


_TASK_COLUMNS = ("task_id", "question", "intent", "scope", "template_id", "reference_sql",
                 "ground_truth", "answer_format")
# Task fields repeat on every trajectory of the task; min() picks one deterministically.
_TASK_SELECT = ", ".join(["task_id"] + [f"min({c}) AS {c}" for c in _TASK_COLUMNS[1:]])


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
        "SELECT DISTINCT run FROM trajectories WHERE run IS NOT NULL ORDER BY run"
    ).fetchall()
    return [str(r[0]) for r in rows]


def candidate_pool(ws: Workspace, runs: Sequence[str] | None = None) -> CandidatePool:
    """Tasks attempted by the selected runs (default: every run) and solved by none of them.

    A run solves a task when any of its trajectories for that task succeeded (``success`` is
    the recorded outcome when there is one, else our exact match). Unscored trajectories
    (NULL ``success``: no ground truth, no recorded outcome) are neither: a task with only
    unscored trajectories is not a candidate and does not count in the pool's total.
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
    # The run filter is a bound list; nothing from the user is formatted into the SQL text.
    base = f"FROM trajectories WHERE run IN ({marks})"
    total_row = con.execute(
        f"SELECT count(DISTINCT task_id) FILTER (WHERE success IS NOT NULL) {base}", chosen
    ).fetchone()
    rows = con.execute(
        f"""SELECT {_TASK_SELECT} {base}
            GROUP BY task_id
            HAVING bool_or(success IS NOT NULL) AND NOT bool_or(coalesce(success, false))
            ORDER BY task_id""",
        chosen,
    ).fetchall()
    candidates = tuple(_candidate(r) for r in rows)
    return CandidatePool(runs=tuple(chosen), candidates=candidates,
                         n_total_tasks=int(total_row[0]) if total_row else 0)


# ---- 2./3. sampling and creating the audit --------------------------------------------------


@dataclass(frozen=True)
class AuditPlan:
    pool: CandidatePool
    sample: SampleResult[Candidate, tuple[str, str]]
    n_requested: int
    seed: int

    @property
    def items(self) -> tuple[Candidate, ...]:
        return self.sample.items

    def strata(self) -> list[dict[str, Any]]:
        return [
            {"intent": s.stratum[0] or None, "scope": s.stratum[1] or None,
             "population": s.population, "allocated": s.allocated,
             "templates_in_population": s.templates_in_population,
             "templates_in_sample": s.templates_in_sample}
            for s in self.sample.strata
        ]

    def summary(self) -> dict[str, Any]:
        """What the CLI prints and what the definition records about the sample."""
        return {
            "runs": list(self.pool.runs),
            "n": self.n_requested,
            "seed": self.seed,
            "pool_size": self.pool.n_candidates,
            "total_tasks": self.pool.n_total_tasks,
            "candidate_share": self.pool.share,
            "sample_size": self.sample.n_selected,
            "n_unique_templates": self.sample.n_unique_templates,
            "strata": self.strata(),
        }


def plan_audit(pool: CandidatePool, n: int = DEFAULT_SAMPLE_SIZE, seed: int = 0) -> AuditPlan:
    """Stratified sample of ``n`` candidates (capped at the pool) over intent x scope.

    Proportional largest-remainder allocation with at least one item per non-empty stratum and
    round-robin over templates inside a stratum; same pool, n and seed give the same sample.
    """
    if n < 1:
        raise AuditError(f"the sample size must be at least 1, not {n}")
    if not pool.candidates:
        raise AuditError("no candidate tasks: every task was solved by at least one selected "
                         "run (choose fewer or weaker runs)")
    sample = stratified_sample(
        pool.candidates, n, seed=seed,
        stratum=lambda c: c.stratum, template=lambda c: c.template_id, key=lambda c: c.task_id,
    )
    return AuditPlan(pool=pool, sample=sample, n_requested=n, seed=seed)


def default_audit_name(now: datetime | None = None) -> str:
    return f"audit-{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"


def create_audit(
    store: Store,
    plan: AuditPlan,
    *,
    name: str,
    annotators: Sequence[str] = (),
    per_item: int = MIN_REVIEWERS,
) -> dict[str, Any]:
    """Store the planned sample as audit ``name``; returns the stored definition.

    With annotators, each item goes to ``per_item`` of them (round-robin; at least two, so
    agreement is measurable). Without, the audit is open: anyone signed in reviews any item.
    Every annotator must already be a user: a typo must not silently create a reviewer who
    never signs in. Unknown names are refused and nothing is created.
    """
    people = list(dict.fromkeys(a.strip() for a in annotators if a.strip()))
    if people and len(people) < MIN_REVIEWERS:
        raise AuditError(f"each item needs at least {MIN_REVIEWERS} annotators; "
                         f"got {len(people)} ({', '.join(people)})")
    if people and per_item < MIN_REVIEWERS:
        raise AuditError(f"--per-item must be at least {MIN_REVIEWERS}")
    k = min(per_item, len(people)) if people else 0
    definition = {
        "kind": "task_validity",
        **plan.summary(),
        "annotators": people,
        "per_item": k,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    store.audits.create(name, definition, [c.as_item() for c in plan.items], people,
                        per_item=k or None)
    return definition


def imported_audit_definition(file_name: str) -> dict[str, Any]:
    """Definition of an audit created from a judgments file (``faillab audit
    import-judgments FILE --audit NEW``): no workspace sample, so no pool, total or seed; the
    report then shows no candidate share."""
    return {
        "kind": "task_validity",
        "source": "import",
        "file": file_name,
        "runs": None,
        "pool_size": None,
        "total_tasks": None,
        "candidate_share": None,
        "seed": None,
        "annotators": [],
        "per_item": 0,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def audit_definition(store: Store, name: str) -> dict[str, Any]:
    for audit, definition in store.audits.all():
        if audit == name:
            return dict(definition)
    raise AuditError(f"unknown audit {name!r}")


def latest_audit(store: Store) -> str | None:
    """The most recently created audit still in use (archived audits are never the default)."""
    audits = store.audits.all(include_archived=False)
    return audits[-1][0] if audits else None


# ---- 4. what a reviewer sees ------------------------------------------------------------------


def task_record(ws: Workspace, task_id: str) -> Candidate | None:
    """Task fields for one task (None when the workspace does not know it).

    Only task columns are selected, on purpose: this feeds the blinded review page.
    """
    row = ws.connect().execute(
        f"SELECT {_TASK_SELECT} FROM trajectories WHERE task_id = ? GROUP BY task_id",
        [task_id],
    ).fetchone()
    return None if row is None else _candidate(row)


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


def review_queue(store: Store, audit: str, annotator: str) -> list[AuditItem]:
    """Items this person reviews: those assigned to them, or every item of an open audit."""
    items = store.audits.items(audit)
    if not any(i.annotators for i in items):
        return items
    return [i for i in items if annotator in i.annotators]


# ---- 5. adjudication and report ------------------------------------------------------------


@dataclass(frozen=True)
class Disagreement:
    item: AuditItem
    reviews: tuple[AuditJudgment, ...]
    verdict: AuditAdjudication | None


def audit_disagreements(store: Store, audit: str) -> list[Disagreement]:
    """Items whose review-stage judgments include both valid and invalid, in review order."""
    reviews: dict[str, list[AuditJudgment]] = {}
    for j in store.audits.judgments(audit):
        if j.stage == "review":
            reviews.setdefault(j.task_id, []).append(j)
    verdicts = {a.task_id: a for a in store.audits.adjudications(audit)}
    out = []
    for item in store.audits.items(audit):
        mine = reviews.get(item.task_id, [])
        if len({j.valid for j in mine}) > 1:
            out.append(Disagreement(item=item, reviews=tuple(mine),
                                    verdict=verdicts.get(item.task_id)))
    return out


def _as_report_judgments(judgments: Sequence[AuditJudgment],
                         verdicts: Sequence[AuditAdjudication]) -> list[Judgment]:
    out = [Judgment(task_id=j.task_id, annotator=j.annotator, valid=j.valid, reason=j.reason,
                    note=j.note, stage="adjudication" if j.stage == "adjudication" else "review")
           for j in judgments]
    # Imported adjudication-stage judgments and verdicts made on the page can both exist for a
    # task; the report lets the later one win, so append by time (ties: verdicts last).
    timed: list[tuple[datetime, int, Judgment]] = []
    for j, rec in zip(judgments, out, strict=True):
        if j.stage == "adjudication":
            timed.append((j.created_at, 0, rec))
    for v in verdicts:
        timed.append((v.updated_at, 1, Judgment(task_id=v.task_id, annotator=v.decided_by,
                                                valid=v.valid, reason=v.reason, note=v.note,
                                                stage="adjudication")))
    reviews = [rec for j, rec in zip(judgments, out, strict=True) if j.stage != "adjudication"]
    return reviews + [rec for _, _, rec in sorted(timed, key=lambda t: (_utc(t[0]), t[1]))]


def _utc(when: datetime) -> datetime:
    # SQLite hands back naive datetimes; the store writes UTC, so naive means UTC.
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def audit_report(store: Store, audit: str, *,
                 pair: tuple[str, str] | None = None) -> AuditReport:
    """The validity report of ``audit``, with pool size and total tasks from its definition."""
    try:
        definition = audit_definition(store, audit)
        items = store.audits.items(audit)
        judgments = store.audits.judgments(audit)
        verdicts = store.audits.adjudications(audit)
    except StoreError as err:
        raise AuditError(str(err)) from None
    pool = definition.get("pool_size")
    total = definition.get("total_tasks")
    try:
        return build_audit_report(
            [ReportItem(task_id=i.task_id, intent=i.intent, scope=i.scope,
                        template_id=i.template_id) for i in items],
            _as_report_judgments(judgments, verdicts),
            n_candidates=int(pool) if isinstance(pool, int) else None,
            n_total_tasks=int(total) if isinstance(total, int) else None,
            pair=pair,
        )
    except ValueError as err:
        raise AuditError(str(err)) from None


def summary_table(report: AuditReport) -> list[dict[str, str]]:
    """The Table-11-style rows (metric, value, count) exactly as the Markdown/LaTeX exports
    show them, so the page and the downloaded files can never disagree."""
    return [{"metric": m, "value": v, "count": c} for m, v, c in summary_rows(report)]


def stratum_table(report: AuditReport) -> list[dict[str, str]]:
    """Agreement by intent x scope, formatted exactly as in the exports (last row: total)."""
    return [dict(zip(STRATUM_HEADER, row, strict=True)) for row in stratum_rows(report)]


def after_table(report: AuditReport) -> list[dict[str, str]]:
    """Agreement before and after adjudication, formatted exactly as in the exports."""
    return [dict(zip(AFTER_HEADER, row, strict=True)) for row in after_rows(report)]


def valid_headline(report: AuditReport) -> tuple[str, str]:
    """(value, note) of the "Valid after adjudication" headline.

    While disagreements are open the rate covers settled tasks only and would overstate how
    final it is (100% with two tasks undecided), so the headline names the open ones instead.
    """
    rate = report.valid_rate_adjudicated
    pct = "–" if rate is None else f"{100 * rate:.1f}%"
    settled = f"{report.n_valid_adjudicated:,} of {report.n_resolved:,} settled tasks valid"
    if report.n_unresolved:
        s = "" if report.n_unresolved == 1 else "s"
        return (f"{report.n_unresolved:,} open",
                f"Not final: {report.n_unresolved:,} disagreement{s} still open; so far "
                f"{settled} ({pct}).")
    return pct, settled + "."


KAPPA_PARADOX_EXPLAINED = (
    "Why can kappa be low when the annotators almost always agree? Kappa compares agreement "
    "with the agreement two people would reach by chance given how often each says 'valid'. "
    "When nearly every task is valid, chance agreement is already very high, so the few "
    "disagreements weigh heavily and kappa drops. PABAK (prevalence- and bias-adjusted kappa) "
    "and Gwet's AC1 correct for that imbalance; read them, and the raw agreement, alongside "
    "kappa."
)
