"""The audit's workflow over the store: create it, review, adjudicate, report.

3. `create_audit` stores the sample, its definition and the assignments;
5. `audit_disagreements` / `audit_report` give the adjudication queue and the report
   (computed in `labeling.audit.report`, rendered in `analysis.audit_report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from labeling.audit.errors import AuditError
from labeling.audit.report import AuditReport, Judgment, build_audit_report
from labeling.audit.sampling import AuditPlan
from labeling.store import AuditAdjudication, AuditItem, AuditJudgment, Store, StoreError

# Two independent reviews per item are what makes agreement (and adjudication) measurable.
MIN_REVIEWERS = 2

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


def review_queue(store: Store, audit: str, annotator: str) -> list[AuditItem]:
    """Items this person reviews: those assigned to them, or every item of an open audit."""
    items = store.audits.items(audit)
    if not any(i.annotators for i in items):
        return items
    return [i for i in items if annotator in i.annotators]


# ---- 5. adjudication and report ------------------------------------------------------------


@dataclass(frozen=True)
class AuditDisagreement:
    """A task whose reviews disagree, with the lead's verdict once there is one."""

    item: AuditItem
    reviews: tuple[AuditJudgment, ...]
    verdict: AuditAdjudication | None


def audit_disagreements(store: Store, audit: str) -> list[AuditDisagreement]:
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
            out.append(AuditDisagreement(item=item, reviews=tuple(mine),
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
            items,
            _as_report_judgments(judgments, verdicts),
            n_candidates=int(pool) if isinstance(pool, int) else None,
            n_total_tasks=int(total) if isinstance(total, int) else None,
            pair=pair,
        )
    except ValueError as err:
        raise AuditError(str(err)) from None


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
