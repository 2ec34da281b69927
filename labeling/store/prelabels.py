"""`store.prelabels`: the pre-label cache (a `opinions.prelabel.base.PrelabelStore`), the LLM's
opinion on each item, and pre-label run progress."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import desc, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from labeling.store.base import Part
from labeling.store.errors import NotFoundError, StoreError
from labeling.store.models import PrelabelRow, PrelabelRunRow, utcnow
from labeling.store.opinions import LlmOpinion, latest_opinions
from labeling.store.policy import OPERATOR, Viewer
from labeling.store.records import (
    HEARTBEAT_STALE_S,
    RUN_STATUSES,
    LabelResult,
    PrelabelKey,
    PrelabelRecord,
    PrelabelRun,
)

_RUN_COUNTERS = frozenset(
    {"total", "done", "labelled", "cached", "failed", "calls", "tokens", "estimated_cost"}
)


def reported_status(
    status: str, started_at: datetime, heartbeat_at: datetime | None, now: datetime
) -> str:
    """The stored status, except that a "running" run whose worker has not beaten for
    `HEARTBEAT_STALE_S` (killed with SIGKILL, machine rebooted) reads as "interrupted"."""
    last = heartbeat_at or started_at
    if status == "running" and (now - last).total_seconds() > HEARTBEAT_STALE_S:
        return "interrupted"
    return status


def _run_record(row: PrelabelRunRow, now: datetime | None = None) -> PrelabelRun:
    return PrelabelRun(
        id=row.id,
        labeller=row.labeller,
        model=row.model,
        status=reported_status(row.status, row.started_at, row.heartbeat_at, now or utcnow()),
        total=row.total,
        done=row.done,
        labelled=row.labelled,
        cached=row.cached,
        failed=row.failed,
        calls=row.calls,
        tokens=row.tokens,
        estimated_cost=row.estimated_cost,
        started_at=row.started_at,
        finished_at=row.finished_at,
        pid=row.pid,
        heartbeat_at=row.heartbeat_at,
    )


def _evidence_from(text: str | None) -> dict[str, Any] | None:
    """The stored evidence JSON; unreadable text is reported as such rather than lost."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text[:200]}
    return value if isinstance(value, dict) else {"unreadable": text[:200]}


def _prelabel_record(row: PrelabelRow, key: PrelabelKey) -> PrelabelRecord:
    result = None
    if row.category is not None and row.error is None:
        result = LabelResult(
            category=row.category,
            confidence=row.confidence if row.confidence is not None else 0.0,
            first_error_step=row.first_error_step,
            rationale=row.rationale or "",
            labeller=row.labeller or "",
            labeller_version=row.labeller_version or "",
            secondary_category=row.secondary_category,
            evidence=_evidence_from(row.evidence),
        )
    return PrelabelRecord(
        key=key,
        result=result,
        error=row.error,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        attempts=row.attempts,
    )


_KEY_COLUMNS = ("trajectory_id", "taxonomy_version", "prompt_version", "model")
_UPSERT_COLUMNS = (
    "category", "confidence", "first_error_step", "rationale", "secondary_category", "labeller",
    "labeller_version", "evidence", "error", "input_tokens", "output_tokens", "attempts",
    "created_at",
)
_SAVE_CHUNK = 1_000  # rows per transaction: bounded statement size, progress kept on a crash


def _row_values(record: PrelabelRecord, now: datetime) -> dict[str, Any]:
    r = record.result
    return {
        "trajectory_id": record.key.trajectory_id,
        "taxonomy_version": record.key.taxonomy_version,
        "prompt_version": record.key.prompt_version,
        "model": record.key.model,
        "category": r.category if r else None,
        "confidence": r.confidence if r else None,
        "first_error_step": r.first_error_step if r else None,
        "rationale": r.rationale if r else None,
        "secondary_category": r.secondary_category if r else None,
        "labeller": r.labeller if r else None,
        "labeller_version": r.labeller_version if r else None,
        "evidence": json.dumps(r.evidence, ensure_ascii=False) if r and r.evidence else None,
        "error": record.error,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "attempts": record.attempts,
        "created_at": now,
    }


class Prelabels(Part):
    """`store.prelabels`."""

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        with self._read() as s:
            row = s.scalars(
                select(PrelabelRow).where(
                    PrelabelRow.trajectory_id == key.trajectory_id,
                    PrelabelRow.taxonomy_version == key.taxonomy_version,
                    PrelabelRow.prompt_version == key.prompt_version,
                    PrelabelRow.model == key.model,
                )
            ).first()
            return _prelabel_record(row, key) if row is not None else None

    def get_many(
        self, taxonomy_version: str, prompt_version: str, model: str
    ) -> dict[str, PrelabelRecord]:
        """Every cached pre-label of one labeller configuration, by trajectory id, in one read
        (pages that summarise a whole workspace must not query per item)."""
        with self._read() as s:
            rows = s.scalars(
                select(PrelabelRow).where(
                    PrelabelRow.taxonomy_version == taxonomy_version,
                    PrelabelRow.prompt_version == prompt_version,
                    PrelabelRow.model == model,
                )
            )
            return {
                row.trajectory_id: _prelabel_record(
                    row, PrelabelKey(row.trajectory_id, taxonomy_version, prompt_version, model)
                )
                for row in rows
            }

    def save(self, record: PrelabelRecord) -> None:
        """Insert or replace the pre-label for `record.key` (one atomic upsert statement)."""
        self.save_many([record])

    def save_many(self, records: Sequence[PrelabelRecord], *, keep_labels: bool = False) -> None:
        """Insert or replace many pre-labels in one transaction per chunk (a Batch API job
        brings tens of thousands of answers at once; one transaction each would take minutes
        on PostgreSQL). With `keep_labels`, a failed record never replaces a stored label
        (an interactive run may have labelled the item meanwhile)."""
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        stmt = insert(PrelabelRow)
        set_ = {k: stmt.excluded[k] for k in _UPSERT_COLUMNS}
        if keep_labels:
            # Replace a stored row only when it holds no label, or the new one has one.
            replaceable = PrelabelRow.category.is_(None) | stmt.excluded.category.isnot(None)
            upsert = stmt.on_conflict_do_update(index_elements=list(_KEY_COLUMNS), set_=set_,
                                                where=replaceable)
        else:
            upsert = stmt.on_conflict_do_update(index_elements=list(_KEY_COLUMNS), set_=set_)
        now = utcnow()
        rows = [_row_values(r, now) for r in records]
        for first in range(0, len(rows), _SAVE_CHUNK):
            with self._write() as s:
                s.execute(upsert, rows[first:first + _SAVE_CHUNK])

    def successful(self, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
        """Every pre-label that produced a category and `viewer` may see, oldest first (for
        exports)."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            rows = s.scalars(
                select(PrelabelRow)
                .where(PrelabelRow.category.is_not(None), PrelabelRow.error.is_(None))
                .order_by(PrelabelRow.created_at, PrelabelRow.id)
            )
            return [
                {
                    "trajectory_id": r.trajectory_id,
                    "labeller": f"{r.labeller or r.model}:{r.model}",
                    "category": r.category,
                    "secondary_category": r.secondary_category,
                    "first_error_step": r.first_error_step,
                    "confidence": r.confidence,
                    "rationale": r.rationale,
                    "evidence": _evidence_from(r.evidence),
                    "taxonomy_version": r.taxonomy_version,
                    "created_at": r.created_at,
                }
                for r in rows
                if scope.may_see_llm(r.trajectory_id)
            ]

    def sees_distribution(self, viewer: Viewer) -> bool:
        """Whether `viewer` may see counts over every item's pre-label (a page's distribution
        of categories and confidences; see `policy`)."""
        with self._read() as s:
            return self._gate.scope(s, viewer).sees_all_llm

    def visible_items(self, trajectory_ids: Sequence[str], viewer: Viewer) -> frozenset[str]:
        """The items among `trajectory_ids` on which `viewer` may see automatic opinions: the
        pre-label and the evidence finder's suggested category (see `policy`)."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
        return frozenset(t for t in trajectory_ids if scope.may_see_llm(t))

    def count(self) -> int:
        with self._read() as s:
            return s.scalar(select(func.count()).select_from(PrelabelRow)) or 0

    # -- the LLM's opinion (pre-labels and llm-source labels, one read path) ------------------

    def opinion(self, trajectory_id: str, taxonomy_version: str | None = None, *,
                viewer: Viewer = OPERATOR) -> LlmOpinion | None:
        """The item's latest automatic opinion as `viewer` may see it (None: none, or hidden)."""
        return self.opinion_for(trajectory_id, viewer, taxonomy_version)[0]

    def opinion_for(self, trajectory_id: str, viewer: Viewer,
                    taxonomy_version: str | None = None) -> tuple[LlmOpinion | None, bool]:
        """The item's latest automatic opinion as `viewer` may see it, and whether the store
        holds one that it hides from them (blind, before they commit): a page says "hidden
        until you commit" without ever holding the hidden opinion."""
        with self._read() as s:
            scope = self._gate.scope(s, viewer)
            opinion = latest_opinions(s, taxonomy_version, trajectory_id).get(trajectory_id)
        if opinion is None:
            return None, False
        if scope.may_see_llm(trajectory_id):
            return opinion, False
        return None, True

    def opinions(self, taxonomy_version: str | None = None) -> dict[str, LlmOpinion]:
        """Every item's latest LLM opinion in one read (use this, not `opinion`, in loops)."""
        with self._read() as s:
            return latest_opinions(s, taxonomy_version)

    # -- runs ---------------------------------------------------------------------------------

    def start_run(
        self,
        labeller: str,
        model: str,
        *,
        total: int = 0,
        pid: int | None = None,
        actor: str | None = None,
    ) -> int:
        """Record a new run. `actor` is the signed-in user starting it from the app, who must
        be a lead or admin; the command line (actor None) is the operator."""
        with self._write() as s:
            self._gate.authorise(s, actor, "start_prelabel_run")
            row = PrelabelRunRow(
                labeller=labeller,
                model=model,
                status="running",
                total=total,
                pid=os.getpid() if pid is None else pid,
                heartbeat_at=utcnow(),
            )
            s.add(row)
            s.flush()
            return row.id

    def update_run(self, run_id: int, **changes: Any) -> PrelabelRun:
        """Set counters (total, done, labelled, cached, failed, calls, tokens, estimated_cost),
        `status` and/or `pid` (the worker process records its own); finishing a run
        (done/failed) stamps finished_at."""
        unknown = set(changes) - _RUN_COUNTERS - {"status", "pid"}
        if unknown:
            raise StoreError(f"unknown run fields: {', '.join(sorted(unknown))}")
        status = changes.get("status")
        if status is not None and status not in RUN_STATUSES:
            raise StoreError(f"run status must be one of {RUN_STATUSES}, not {status!r}")
        with self._write() as s:
            row = s.get(PrelabelRunRow, run_id)
            if row is None:
                raise NotFoundError(f"no pre-label run {run_id}")
            for name, value in changes.items():
                setattr(row, name, value)
            row.heartbeat_at = utcnow()  # any update is a sign of life
            if status in ("done", "failed") and row.finished_at is None:
                row.finished_at = utcnow()
            s.flush()
            return _run_record(row)

    def heartbeat_run(self, run_id: int) -> None:
        """The worker is alive (called periodically while a run is going, even between items)."""
        with self._write() as s:
            row = s.get(PrelabelRunRow, run_id)
            if row is None:
                raise NotFoundError(f"no pre-label run {run_id}")
            row.heartbeat_at = utcnow()

    def get_run(self, run_id: int) -> PrelabelRun | None:
        with self._read() as s:
            row = s.get(PrelabelRunRow, run_id)
            return _run_record(row) if row is not None else None

    def latest_runs(self, limit: int = 20) -> list[PrelabelRun]:
        with self._read() as s:
            rows = s.scalars(
                select(PrelabelRunRow)
                .order_by(desc(PrelabelRunRow.started_at), desc(PrelabelRunRow.id))
                .limit(limit)
            )
            return [_run_record(r) for r in rows]
