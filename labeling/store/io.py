"""Label and audit-judgment import/export (CSV and JSONL).

Imports are all-or-nothing: every row is validated first and the error names the first bad
row (1-based, header excluded); only then is the whole file stored in one transaction. A
half-imported file is worse than none, because re-importing it would duplicate the first half.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faillab_core.textsafe import csv_cell, csv_text
from labeling.store.errors import (
    DataImportError,
    JudgmentImportError,
    LabelImportError,
    StoreError,
)
from labeling.store.models import utcnow
from labeling.store.policy import OPERATOR, Viewer
from labeling.store.records import EXPORT_COLUMNS, SOURCES, STAGES, ExportedLabel
from taxonomy.model import default_taxonomy

if TYPE_CHECKING:
    from labeling.store.repo import Store

LABEL_REQUIRED = ("trajectory_id", "annotator", "source", "category")
JUDGMENT_REQUIRED = ("task_id", "annotator", "valid")
# Columns people write prose in: kept as written on import (only a blank one is empty).
_FREE_TEXT = frozenset({"note"})
JUDGMENT_COLUMNS = ("task_id", "annotator", "valid", "reason", "note", "stage")

_TRUE = {"1", "true", "valid", "yes"}
_FALSE = {"0", "false", "invalid", "no"}


# -- export ---------------------------------------------------------------------------------


def export_labels(
    store: Store,
    fmt: str = "csv",
    *,
    include_prelabels: bool = True,
    viewer: Viewer = OPERATOR,
    include_history: bool = True,
) -> str:
    """Every label `viewer` may see as CSV or JSONL text, oldest first, followed by the LLM
    pre-labels (source ``llm``; ``annotator`` names the labeller and model, which import
    ignores for LLM rows; ``note`` carries the rationale). The command line exports as the
    operator; the app passes the signed-in viewer.

    With `include_history` (the default) superseded and retracted labels are in it too, with
    `superseded_by` and `retracted_at`/`retracted_by` saying what became of them (the store
    shows a retracted label only to its author and to leads); without, only current labels.
    """
    rows = [
        ExportedLabel.of_label(entry.label, superseded_by=entry.superseded_by,
                               retracted_at=entry.retracted_at,
                               retracted_by=entry.retracted_by).as_dict()
        for entry in store.labels.entries(viewer, history=include_history)
    ]
    if include_prelabels:
        rows += [
            ExportedLabel(
                trajectory_id=p["trajectory_id"],
                annotator=p["labeller"],
                source="llm",
                category=p["category"],
                secondary_category=p["secondary_category"],
                first_error_step=p["first_error_step"],
                confidence=p["confidence"],
                note=p["rationale"],
                evidence=p.get("evidence"),
                taxonomy_version=p["taxonomy_version"],
                created_at=p["created_at"].isoformat(),
            ).as_dict()
            for p in store.prelabels.successful(viewer)
        ]
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if fmt != "csv":
        raise ValueError(f"unknown export format {fmt!r}; use 'csv' or 'jsonl'")
    cells = [
        ["" if row.get(k) is None else csv_cell(json.dumps(row[k], ensure_ascii=False)
                                                 if isinstance(row[k], dict) else row[k])
         for k in EXPORT_COLUMNS]
        for row in rows
    ]
    return csv_text([list(EXPORT_COLUMNS), *cells])


# -- reading --------------------------------------------------------------------------------


def _file_text(path: Path) -> str:
    # newline="": a CR or CR LF inside a quoted CSV field is part of a note, not a line end
    # to translate (universal newlines would turn "a\r\nb" into "a\nb").
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return handle.read()


def _read_text(text_or_path: str | Path) -> tuple[str, str]:
    """(content, format hint) from a path or from the content itself."""
    if isinstance(text_or_path, Path):
        return _file_text(text_or_path), text_or_path.suffix.lower()
    # A one-line string that names an existing file is a path; anything else is content.
    if "\n" not in text_or_path and len(text_or_path) < 4096:
        candidate = Path(text_or_path)
        if candidate.is_file():
            return _file_text(candidate), candidate.suffix.lower()
    return text_or_path, ""


def _records(
    text: str, hint: str, required: Iterable[str], error: type[DataImportError]
) -> list[dict[str, Any]]:
    """Rows as dicts with empty strings turned into None; checks required columns exist."""
    required = list(required)
    stripped = text.lstrip()
    if hint in (".jsonl", ".ndjson") or (hint != ".csv" and stripped.startswith("{")):
        rows: list[dict[str, Any]] = []
        lines = [line for line in text.splitlines() if line.strip()]
        for number, line in enumerate(lines, start=1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"not valid JSON ({exc.msg})", row=number) from None
            if not isinstance(obj, dict):
                raise error("expected a JSON object", row=number)
            missing = [c for c in required if c not in obj]
            if missing:
                raise error(f"missing field(s): {', '.join(missing)}", row=number)
            rows.append({k: (None if v == "" else v) for k, v in obj.items()})
        return rows
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in required if c not in header]
    if missing:
        raise error(f"missing column(s): {', '.join(missing)}")
    reader.fieldnames = header
    out = []
    for number, raw in enumerate(reader, start=1):
        if None in raw:
            raise error("more values than columns", row=number)
        out.append({k: _cell(k, v) for k, v in raw.items()})
    return out


def _cell(column: str, value: Any) -> Any:
    """A CSV cell: blank is None; free text keeps its spaces and line breaks, the rest is
    trimmed."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    return value if column in _FREE_TEXT else value.strip()


def _text(value: Any) -> str | None:
    return None if value is None else str(value).strip() or None


def _free_text(value: Any) -> str | None:
    """A note as written (spaces and line breaks kept); blank means no note."""
    return None if value is None or not str(value).strip() else str(value)


def _parse_int(value: Any, field: str, row: int, error: type[DataImportError]) -> int | None:
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise error(f"{field} must be a whole number, not {value!r}", row=row) from None
    if number < 0:
        raise error(f"{field} cannot be negative", row=row)
    return number


def _parse_confidence(value: Any, row: int) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LabelImportError(f"confidence must be a number, not {value!r}", row=row) from None
    if not 0.0 <= number <= 1.0:
        raise LabelImportError(f"confidence must be in [0, 1], not {number}", row=row)
    return number


def _parse_time(value: Any, row: int, field: str = "created_at") -> datetime:
    if value is None:
        return utcnow()
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise LabelImportError(f"{field} is not an ISO timestamp: {value!r}", row=row) from None
    # Timestamps without an offset are taken as UTC, which is what the exporter writes.
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


# -- labels ---------------------------------------------------------------------------------


def import_labels(
    store: Store,
    text_or_path: str | Path,
    *,
    known_trajectory_ids: set[str],
    default_taxonomy_version: str | None = None,
) -> int:
    """Import labels from CSV or JSONL (content or a path); returns the number stored.

    Needs trajectory_id, annotator, source and category; the other export columns are
    optional. A missing taxonomy_version falls back to `default_taxonomy_version` (default:
    the default shipped taxonomy). Categories are checked by the store against each row's
    taxonomy version; display names are mapped to keys, anything else refuses the file with
    the row number. Annotators
    the store does not know are created with the annotator role. LLM rows carry no annotator
    (a name given there is ignored, as the exporter writes none). A human row with
    `retracted_at` (an export's history) is stored retracted, by `retracted_by` when given:
    kept, but counted nowhere, as it was in the store it came from. `label_id` and
    `superseded_by` are the exporting store's ids and are not read.
    """
    text, hint = _read_text(text_or_path)
    records = _records(text, hint, LABEL_REQUIRED, LabelImportError)
    rows: list[dict[str, Any]] = []
    for number, rec in enumerate(records, start=1):
        tid = _text(rec.get("trajectory_id"))
        if tid is None:
            raise LabelImportError("trajectory_id is empty", row=number)
        if tid not in known_trajectory_ids:
            raise LabelImportError(f"unknown trajectory id {tid!r}", row=number)
        source = _text(rec.get("source")) or ""
        if source not in SOURCES:
            raise LabelImportError(f"source must be human or llm, not {source!r}", row=number)
        annotator = _text(rec.get("annotator")) if source == "human" else None
        if source == "human" and annotator is None:
            raise LabelImportError("a human label needs an annotator", row=number)
        version = (
            _text(rec.get("taxonomy_version"))
            or default_taxonomy_version
            or default_taxonomy().version
        )
        category = _text(rec.get("category"))
        if category is None:
            raise LabelImportError("category is empty", row=number)
        try:
            category, secondary = store.gate.categories(
                version, category, _text(rec.get("secondary_category")), names_ok=True
            )
        except StoreError as err:
            raise LabelImportError(str(err), row=number) from None
        rows.append(
            {
                "trajectory_id": tid,
                "annotator": annotator,
                "source": source,
                "category": category,
                "secondary_category": secondary,
                "first_error_step": _parse_int(
                    rec.get("first_error_step"), "first_error_step", number, LabelImportError
                ),
                "confidence": _parse_confidence(rec.get("confidence"), number),
                "note": _free_text(rec.get("note")),
                "taxonomy_version": version,
                "created_at": _parse_time(rec.get("created_at"), number),
                **_retraction(rec, source, number),
            }
        )
    if not rows:
        return 0
    return store.labels.import_rows(rows, actor=None)


def _retraction(rec: Mapping[str, Any], source: str, number: int) -> dict[str, Any]:
    """The row's retraction columns, checked (only a human label can have been retracted)."""
    at, by = rec.get("retracted_at"), _text(rec.get("retracted_by"))
    if at is None:
        if by is not None:
            raise LabelImportError("retracted_by is given without retracted_at", row=number)
        return {}
    if source != "human":
        raise LabelImportError("only human labels can be retracted", row=number)
    return {"retracted_at": _parse_time(at, number, "retracted_at"), "retracted_by": by}


# -- audit judgments ------------------------------------------------------------------------


def _parse_valid(value: Any, row: int) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise JudgmentImportError(
        f"valid must be 1/0, true/false or valid/invalid, not {value!r}", row=row
    )


def import_audit_judgments(
    store: Store,
    path: str | Path,
    audit: str,
    *,
    reasons: set[str] | None = None,
    create: Mapping[str, Any] | None = None,
) -> int:
    """Import judgments in long format: task_id, annotator, valid[, reason, note, stage].

    `stage` is review (the default) or adjudication. Tasks not yet in the audit are added as
    items without intent/scope; unknown annotators are created as annotators. When `reasons`
    is given, a non-empty reason code must be one of them. A repeated (task, annotator,
    stage) in one file is an error: which one was meant is unknowable.

    With `create` (an audit definition) an unknown `audit` is created from the file, its items
    being the file's tasks in order (judgments made elsewhere need no workspace sample); the
    audit and its judgments are stored together or not at all.
    """
    exists = audit in {name for name, _ in store.audits.all()}
    if not exists and create is None:
        raise JudgmentImportError(f"unknown audit {audit!r}")
    text, hint = _read_text(path)
    records = _records(text, hint, JUDGMENT_REQUIRED, JudgmentImportError)
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str], int] = {}
    for number, rec in enumerate(records, start=1):
        task_id = _text(rec.get("task_id"))
        annotator = _text(rec.get("annotator"))
        if task_id is None:
            raise JudgmentImportError("task_id is empty", row=number)
        if annotator is None:
            raise JudgmentImportError("annotator is empty", row=number)
        valid = _parse_valid(rec.get("valid"), number)
        stage = (_text(rec.get("stage")) or "review").lower()
        if stage not in STAGES:
            raise JudgmentImportError(
                f"stage must be review or adjudication, not {stage!r}", row=number
            )
        reason = _text(rec.get("reason"))
        if reasons is not None and reason is not None and reason not in reasons:
            raise JudgmentImportError(f"unknown reason code {reason!r}", row=number)
        key = (task_id, annotator, stage)
        if key in seen:
            raise JudgmentImportError(
                f"{annotator} judged {task_id} ({stage}) already in row {seen[key]}", row=number
            )
        seen[key] = number
        rows.append(
            {
                "task_id": task_id,
                "annotator": annotator,
                "valid": valid,
                "reason": reason,
                "note": _free_text(rec.get("note")),
                "stage": stage,
            }
        )
    if not rows:
        if not exists:
            raise JudgmentImportError("the file holds no judgments to create an audit from")
        return 0
    return store.audits.import_rows(audit, rows, create=None if exists else create)
