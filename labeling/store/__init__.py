"""Annotation store: users, labels, queues, adjudication, pre-labels and validity audits.

`open_store(url)` gives a migrated, thread-safe `Store` over a SQLite file or PostgreSQL, made of
parts: `store.users`, `store.sessions`, `store.labels`, `store.queues`, `store.adjudications`,
`store.prelabels`, `store.audits`, `store.taxonomies`, `store.history` and
`store.verdicts`. Every part goes
through the store's one `policy.Gate` for permissions, category checks and read scopes.
"""

from labeling.store.adjudication import FINAL_COLUMNS
from labeling.store.engine import head_revision, make_engine, upgrade
from labeling.store.errors import (
    ConflictError,
    DataImportError,
    JudgmentImportError,
    LabelImportError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    StoreStorageError,
    StoreUnavailableError,
)
from labeling.store.io import (
    export_labels,
    import_audit_judgments,
    import_labels,
)
from labeling.store.labels import LABEL_COLUMNS
from labeling.store.opinions import LlmOpinion
from labeling.store.policy import OPERATOR, Viewer, unknown_viewer_scope
from labeling.store.records import (
    CONTRACT_PROVENANCES,
    EXPORT_COLUMNS,
    HUMAN_PROVENANCES,
    LEAD_ROLES,
    PROVENANCE_SOURCE,
    PROVENANCES,
    ROLES,
    Adjudication,
    AuditAdjudication,
    AuditItem,
    AuditJudgment,
    Disagreement,
    ExportedLabel,
    HistoryEntry,
    Label,
    PrelabelRun,
    QueueProgress,
    User,
)
from labeling.store.repo import Store, open_store
from labeling.store.verdicts import VERDICTS, HumanVerdict

__all__ = [
    "CONTRACT_PROVENANCES",
    "EXPORT_COLUMNS",
    "FINAL_COLUMNS",
    "HUMAN_PROVENANCES",
    "LABEL_COLUMNS",
    "LEAD_ROLES",
    "OPERATOR",
    "PROVENANCES",
    "PROVENANCE_SOURCE",
    "ROLES",
    "VERDICTS",
    "Adjudication",
    "AuditAdjudication",
    "AuditItem",
    "AuditJudgment",
    "ConflictError",
    "DataImportError",
    "Disagreement",
    "ExportedLabel",
    "HistoryEntry",
    "HumanVerdict",
    "JudgmentImportError",
    "Label",
    "LabelImportError",
    "LlmOpinion",
    "NotFoundError",
    "PermissionDeniedError",
    "PrelabelRun",
    "QueueProgress",
    "Store",
    "StoreError",
    "StoreStorageError",
    "StoreUnavailableError",
    "User",
    "Viewer",
    "export_labels",
    "head_revision",
    "import_audit_judgments",
    "import_labels",
    "make_engine",
    "open_store",
    "unknown_viewer_scope",
    "upgrade",
]
