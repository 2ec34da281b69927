"""Human validity audit of benchmark tasks: from the workspace to the store and back.

The audit asks whether a task itself is sound (does the question say what the reference SQL
computes, is the extracted answer supported by the data?), not whether an agent failed it.
Candidates are the tasks that none of the chosen runs solved: they concentrate both genuinely
hard tasks and broken ones.

One step per module, each shared by the CLI and the pages:

1. `pool` -- the candidate pool (task columns only, never an agent's answer or outcome);
2. `sampling` -- a seeded sample stratified over intent x scope (`plan_audit`);
3. `workflow` -- store the audit, review queues, disagreements, the report from the store;
4. `evidence` -- what a reviewer sees for one task (reference SQL re-run, schema, evidence);
5. `report` -- the report's numbers from plain records (rendered in `analysis.audit_report`).
"""

from labeling.audit.errors import AuditError
from labeling.audit.evidence import (
    EVIDENCE_ROWS,
    EvidenceQuery,
    ItemContext,
    evidence_queries,
    item_context,
)
from labeling.audit.pool import (
    Candidate,
    CandidatePool,
    candidate_pool,
    task_record,
    workspace_runs,
)
from labeling.audit.report import AuditReport, Judgment, build_audit_report, parse_valid
from labeling.audit.sampling import DEFAULT_SAMPLE_SIZE, AuditPlan, plan_audit
from labeling.audit.workflow import (
    KAPPA_PARADOX_EXPLAINED,
    MIN_REVIEWERS,
    REASON_CODES,
    REASON_LABELS,
    AuditDisagreement,
    audit_definition,
    audit_disagreements,
    audit_report,
    create_audit,
    default_audit_name,
    imported_audit_definition,
    latest_audit,
    review_queue,
    valid_headline,
)
from labeling.store.records import AuditItem

__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "EVIDENCE_ROWS",
    "KAPPA_PARADOX_EXPLAINED",
    "MIN_REVIEWERS",
    "REASON_CODES",
    "REASON_LABELS",
    "AuditDisagreement",
    "AuditError",
    "AuditItem",
    "AuditPlan",
    "AuditReport",
    "Candidate",
    "CandidatePool",
    "EvidenceQuery",
    "ItemContext",
    "Judgment",
    "audit_definition",
    "audit_disagreements",
    "audit_report",
    "build_audit_report",
    "candidate_pool",
    "create_audit",
    "default_audit_name",
    "evidence_queries",
    "imported_audit_definition",
    "item_context",
    "latest_audit",
    "parse_valid",
    "plan_audit",
    "review_queue",
    "task_record",
    "valid_headline",
    "workspace_runs",
]
