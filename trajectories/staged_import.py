"""Imports as transactions: what an import has staged, and the steps that make it visible.

``StagedImport`` is one ``Workspace.import_files``. Under the workspace's write lock it
*stages* (worker processes parse the files into hidden parts; rows an earlier file of the same
import holds are dropped from them), *validates* (an invalid record without ``skip_invalid``
fails the whole import), *publishes* (parts renamed into place and listed by one manifest
replace, with the rows re-imported files replace retired in the same replace), then, outside
the lock, tries a *compaction*, whose failure is only a warning: the import stands. A failure
before the publish deletes exactly what this import staged, so nothing of it is ever visible.

``StagedRows`` is the same for ``Workspace.add`` (trajectories already in memory).

Both are given the workspace's ``Parts`` (the write lock, staging, publishing), not the
workspace: an import needs nothing else of it but the compaction to try afterwards, which it is
handed as a function.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from trajectories import rekey_journal
from trajectories.import_workers import FileResult, FileSpec, parse_files
from trajectories.importers import ImportProblem
from trajectories.importers.errors import ImportProblems
from trajectories.model import Trajectory
from trajectories.objectstore import ObjectStoreError
from trajectories.parts import Parts, WorkspaceError, atomic_write_text
from trajectories.prior_rows import PriorRows, Replacement, match_records
from trajectories.rows import PART_OPTIONS, index_row, reject_line, remove_part

__all__ = ["ImportReport", "StagedImport", "StagedRows", "pending_rekeys"]


def pending_rekeys(root: Path) -> rekey_journal.PendingRekeys:
    """The re-keys published whose labels the annotation store has not taken yet (a damaged
    journal is a ``WorkspaceError``: nothing is written over it)."""
    try:
        return rekey_journal.read(root)
    except rekey_journal.JournalError as err:
        raise WorkspaceError(str(err)) from None


@dataclass
class ImportReport:
    imported: int = 0
    duplicates: int = 0
    rejected: int = 0
    files: int = 0
    #: Stored rows retired because re-importing their file gave their record another id (or
    #: rejected it): see ``trajectories.prior_rows``.
    replaced: int = 0
    #: Old id -> new id of the same record, for carrying labels over.
    rekeyed: dict[str, str] = field(default_factory=dict)
    #: Retired ids with no new row (their labels can only be reported).
    orphaned: list[str] = field(default_factory=list)
    rejects_file: Path | None = None
    problems: list[ImportProblem] = field(default_factory=list)
    #: Records read per run (the runs this import made or added to; files skipped as
    #: imported before are not read and not counted).
    runs: dict[str, int] = field(default_factory=dict)
    #: With a task file: how many trajectories it matched, and the ones it did not.
    task_matched: int | None = None
    task_unmatched: list[str] = field(default_factory=list)
    #: What went wrong after the import was published (it stands): e.g. the compaction.
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, int]:
        return {"imported": self.imported, "duplicates": self.duplicates,
                "rejected": self.rejected, "replaced": self.replaced}

    def details(self) -> dict[str, Any]:
        """The runs read and, with a task file, how it matched (``faillab import --json``)."""
        out: dict[str, Any] = {"runs": dict(sorted(self.runs.items()))}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.task_matched is not None:
            out["tasks_matched"] = self.task_matched
            out["tasks_unmatched"] = list(self.task_unmatched)
        return out


class StagedImport:
    """One import of files into a workspace, all-or-nothing (see the module docstring).

    It holds the import's state between the steps: the staged parts (hidden until published),
    the source files to list in the manifest, the stored rows it replaces, the rejected
    records, and the report it returns. ``maybe_compact`` is called once the import is
    published (``Compaction.maybe_compact``; its failure is a warning)."""

    def __init__(self, parts: Parts, paths: Sequence[Path], spec: FileSpec, *,
                 maybe_compact: Callable[[], object],
                 workers: int | None = None,
                 progress: Callable[[int, int, int], None] | None = None) -> None:
        self.parts = parts
        self.maybe_compact = maybe_compact
        self.paths = [Path(p) for p in paths]
        self.spec = spec
        self.workers = workers
        self.progress = progress
        self.report = ImportReport(files=len(self.paths))
        if spec.tasks is not None:
            self.report.task_matched = 0
        self.added = 0
        self.duplicates = 0
        self.records = 0
        self.rejects: list[dict[str, str]] = []
        self.replacement = Replacement()
        #: Source key -> records, for files read whole and clean (the manifest's "sources").
        self.sources: dict[str, int] = {}
        #: (hidden staged path, final path) of every part this import wrote.
        self.staged: list[tuple[Path, Path]] = []
        #: Staged parts that held only duplicates (already deleted).
        self.emptied: set[Path] = set()
        #: The first problem of each file that has one (without ``skip_invalid``).
        self.failed: list[ImportProblem] = []
        # What is stored, read under the write lock by ``run`` before anything is staged.
        self.known: dict[str, int] = {}
        self.seen: set[str] = set()

    def run(self) -> ImportReport:
        """Stage, validate and publish under the write lock, then compact; the report."""
        parts = self.parts
        with parts.write_lock():
            # Read first: a damaged journal stops the import before anything changes.
            pending = pending_rekeys(parts.root)
            self.known = parts.imported_sources()
            prior = PriorRows.read(parts.part_files(), parts.fs, self.paths, set(self.known))
            self.seen = prior.ids
            try:
                self.stage(prior)
                self.validate()
                self.publish()
            except BaseException:
                self.clean_up()
                raise
            finally:
                parts.changed()
            self.record_rekeys(pending)
            self.write_rejects()
        self.fill_report()
        self.compact()
        return self.report

    # --- stage -----------------------------------------------------------------------------
    def stage(self, prior: PriorRows) -> None:
        """Parse every file into hidden parts and count what they hold."""
        # ``seen`` is the very set the in-process parser reads (one worker): it grows as
        # files are taken, so a later file's record seen in an earlier one is a duplicate.
        results = parse_files(self.spec, self.paths, (self.seen, set(self.known)),
                              self.workers, self.progress, prior.prior_ids)
        # closing(): on a failure every worker has stopped before staging is cleaned.
        with contextlib.closing(results):
            for done, (path, result) in enumerate(zip(self.paths, results, strict=True),
                                                  start=1):
                self._take_file(path, result, prior)
                if self.progress:
                    self.progress(done, len(self.paths), self.records)

    def _take_file(self, path: Path, result: FileResult, prior: PriorRows) -> None:
        report = self.report
        self.records += result.records
        for name, count in result.runs.items():
            report.runs[name] = report.runs.get(name, 0) + count
        if report.task_matched is not None:
            report.task_matched += result.task_matched
            report.task_unmatched.extend(result.task_unmatched)
        for problem, location, raw in result.rejected:
            if not self.spec.skip_invalid:
                # The first problem of each file; the import fails after every file was
                # read, naming them all.
                self.failed.append(problem)
                break
            report.problems.append(problem)
            self.rejects.append({"file": problem.path, "location": location,
                                 "error": str(problem), "record": raw})
        self.duplicates += result.duplicates
        if result.skipped:  # read before: all duplicates
            self.duplicates += self.known.get(str(result.source_key), 0)
            self.records += self.known.get(str(result.source_key), 0)
        elif result.source_key and not result.rejected:
            self.sources[result.source_key] = result.records
        if result.prior:
            # This file's old rows go; its records are written again.
            self.seen -= result.prior
            match_records(prior.rows_of(str(path)), result, self.replacement)
        for tmp, final, ids in result.parts:
            self._take_part(tmp, final, ids, result.prior)

    def _take_part(self, tmp: Path, final: Path, ids: list[str],
                   rewritten_ids: frozenset[str]) -> None:
        # Workers only know what was stored before: a record an earlier file of this import
        # holds is a duplicate too (first file wins, as in a single-process import).
        again = [i for i in ids if i in self.seen]
        if again:
            if not _drop_rows(tmp, set(again), self.parts.fs):
                self.emptied.add(tmp)
            self.duplicates += len(again)
        self.seen.update(ids)
        rewritten = sum(1 for i in ids if i in rewritten_ids)
        self.added += len(ids) - len(again) - rewritten
        self.duplicates += rewritten  # stored before, under the same id
        self.staged.append((tmp, final))

    # --- validate --------------------------------------------------------------------------
    def validate(self) -> None:
        """Without ``skip_invalid``, any invalid record fails the import (nothing written)."""
        if self.failed:
            raise ImportProblems.of(self.failed)

    # --- publish ---------------------------------------------------------------------------
    def publish(self) -> None:
        parts = self.parts
        retired: list[Path] = []
        if self.replacement.retire:
            # The parts holding replaced rows are written again without them and retired in
            # the same publish: readers see the old rows or the new ones.
            kept, retired = parts.rewrite_without(self.replacement.retire)
            self.staged.extend(kept)
        published = []
        for tmp, final in self.staged:
            if parts.remote is not None:
                if tmp not in self.emptied:
                    published.append(final)
            elif tmp.exists():
                os.replace(tmp, final)
                published.append(final)
        if published or self.sources or retired:
            parts.publish(published, removed=retired, sources=self.sources)

    def clean_up(self) -> None:
        """After a failure before (or during) the publish: delete what this import staged."""
        if self.parts.remote is not None:
            # Unlisted objects are only aged out, so delete what this import staged.
            for tmp, _ in self.staged:
                if tmp not in self.emptied:
                    self.parts.remote.delete(tmp.name)
        # Every worker has stopped: any staged part left is this import's.
        self.parts.clean_stale_staging()

    def record_rekeys(self, pending: rekey_journal.PendingRekeys) -> None:
        if self.replacement.rekeyed or self.replacement.orphaned:
            # Published; the annotation store must still take these (rekey_journal).
            rekey_journal.write(self.parts.root, rekey_journal.merged(
                pending, self.replacement.rekeyed, self.replacement.orphaned))

    def write_rejects(self) -> None:
        if self.rejects:
            # Written under the lock with a unique name: two imports in the same second each
            # keep their own rejects file.
            stamp = time.strftime("%Y%m%dT%H%M%S")
            rejects_path = self.parts.root / f"rejects-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
            atomic_write_text(rejects_path, "".join(reject_line(r) for r in self.rejects))
            self.report.rejects_file = rejects_path

    def fill_report(self) -> None:
        report = self.report
        report.imported, report.duplicates = self.added, self.duplicates
        report.rejected = len(self.rejects)
        report.replaced = self.replacement.replaced
        report.rekeyed, report.orphaned = self.replacement.rekeyed, self.replacement.orphaned

    # --- compact ---------------------------------------------------------------------------
    def compact(self) -> None:
        if not self.added:
            return
        try:
            self.maybe_compact()
        except (WorkspaceError, ObjectStoreError, OSError) as err:
            # The import is published and visible: it succeeded. A compaction that fails is
            # its own problem (the next import or `faillab workspace compact` tries again),
            # never reported as a failed import.
            self.report.warnings.append(f"compaction after the import failed ({err}); the "
                                        "import stands; run 'faillab workspace compact' later")


class StagedRows:
    """Rows on their way into the workspace: deduplicated, written to hidden parts in chunks,
    and made visible together by ``commit`` (or deleted by ``abort``)."""

    CHUNK = 10_000

    def __init__(self, parts: Parts, seen: set[str]) -> None:
        self.parts = parts
        self.seen = seen
        self.rows: list[dict[str, Any]] = []
        self.staged: list[tuple[Path, Path]] = []
        self.added = 0
        self.duplicates = 0

    def offer(self, traj: Trajectory, source: str | None) -> None:
        if traj.id is None:
            traj = traj.with_id()
        tid = str(traj.id)
        if tid in self.seen:
            self.duplicates += 1
            return
        self.seen.add(tid)
        self.rows.append(index_row(traj, source))
        self.added += 1
        if len(self.rows) >= self.CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.staged.append(self.parts.stage_part(self.rows))
            self.rows = []

    def commit(self) -> None:
        self._flush()
        for tmp, final in self.staged:
            self.parts.place(tmp, final)
        if self.staged:
            self.parts.publish([final for _, final in self.staged])
        self.staged = []

    def abort(self) -> None:
        for tmp, _ in self.staged:
            self.parts.discard(tmp)
        self.staged = []
        self.rows = []


def _drop_rows(part: Path, ids: set[str], filesystem: pafs.FileSystem | None = None) -> bool:
    """Rewrite a staged part without the given ids; False when nothing was left (deleted)."""
    if filesystem is None:
        table = pq.read_table(part)
    else:
        table = pq.read_table(str(part), filesystem=filesystem)
    keep = pc.invert(pc.is_in(table.column("id"), pa.array(sorted(ids))))
    table = table.filter(keep)
    if table.num_rows == 0:
        remove_part(part, filesystem)
        return False
    if filesystem is None:
        pq.write_table(table, part, **PART_OPTIONS)
    else:
        pq.write_table(table, str(part), **PART_OPTIONS,
                       filesystem=filesystem)
    return True
