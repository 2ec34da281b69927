"""The workspace: imported trajectories as immutable Parquet parts, queried with DuckDB.

Layout under the workspace root::

    trajectories/part-*.parquet  one row per trajectory (index columns + the full JSON payload)
    trajectories/manifest.json   which parts are visible (absent in older workspaces: all are)
    scores.parquet               optional re-score overlay written by ``faillab score``
    workspace.json               settings of this workspace (the EHR database to re-run SQL on)
    ehr.duckdb                   the demo's synthetic EHR database, when built by ``faillab demo``
    annotations.sqlite           the annotation store (default; PostgreSQL for teams)

Imports parse files in worker processes (``trajectories.import_workers``; one part per file or
per 64 MB of payloads) and publish what they staged in one manifest replace, each run as a
``trajectories.staged_import.StagedImport`` transaction. The rest lives in modules by concern,
joined here: ``trajectories.parts`` (the manifest, the write lock,
publishing), ``trajectories.compaction`` (merging small parts), ``trajectories.queries`` (the
DuckDB views and the queries) and ``trajectories.objectstore`` (parts in an S3 bucket).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from faillab.core.settings import Settings, sqlite_store_url
from trajectories import rekey_journal
from trajectories.compaction import COMPACT_AT_PARTS, COMPACT_PART_MB, COMPACT_ROWS, Compaction
from trajectories.import_workers import FileSpec
from trajectories.importers.mapping import Mapping
from trajectories.importers.tasks import TaskFile
from trajectories.model import Trajectory
from trajectories.objectstore import (
    RemoteParts,
    S3Location,
    filesystem_from_settings,
    is_remote,
)
from trajectories.overlay import Scoring
from trajectories.parts import (
    MANIFEST,
    PART_GLOB,
    RETIRED_GRACE_S,
    WorkspaceError,
    atomic_write_text,
)
from trajectories.prior_rows import read_part_columns
from trajectories.queries import (
    DEFAULT_SUCCESS_SOURCE,
    SUCCESS_SOURCES,
    TASK_FIELDS,
    Queries,
    outcome_name,
    success_expression,
)
from trajectories.rows import PART_OPTIONS, part_name, rows_table, stage_rows
from trajectories.staged_import import ImportReport, StagedImport, StagedRows

__all__ = [
    "COMPACT_AT_PARTS", "COMPACT_PART_MB", "COMPACT_ROWS", "DEFAULT_SUCCESS_SOURCE", "MANIFEST",
    "PART_GLOB", "RETIRED_GRACE_S", "SUCCESS_SOURCES", "TASK_FIELDS", "ImportReport",
    "RemovalReport", "Workspace", "WorkspaceError", "outcome_name", "success_expression",
]


@dataclass
class RemovalReport:
    """Rows ``Workspace.remove`` retired (or would retire, when not confirmed)."""

    ids: list[str] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)
    parts_rewritten: int = 0


class Workspace(Queries, Compaction, Scoring):
    def __init__(self, root: Path | str, trajectories_url: str = "",
                 filesystem: pafs.FileSystem | None = None,
                 settings: Settings | None = None) -> None:
        """``trajectories_url`` puts the parts and their manifest at ``s3://bucket/prefix``
        instead of ``root/trajectories`` (empty: the local folder); its S3 client is
        ``filesystem``, else the one ``settings`` describe. Nothing here reads the
        environment: the faces build a workspace from their settings (``from_settings``)."""
        self.root = Path(root)
        self.parts_dir = self.root / "trajectories"
        self._local = threading.local()
        self._shared = None
        self._shared_lock = threading.Lock()
        self._warm_tables = {}
        self.warm_thread = None
        url = trajectories_url
        #: The object store holding the parts (None: they are local files under parts_dir).
        self.remote: RemoteParts | None = None
        #: pyarrow filesystem for part paths (None: local paths, as plain Path objects).
        self._fs: pafs.FileSystem | None = None
        if url:
            if not is_remote(url):
                raise WorkspaceError(f"trajectories URL {url!r}: expected s3://bucket/prefix "
                                     "(leave it empty for the workspace's own folder)")
            location = S3Location.parse(url)
            if filesystem is None:
                if settings is None:
                    raise WorkspaceError(f"{url}: an object-store workspace needs its S3 "
                                         "client or the settings that describe it")
                filesystem = filesystem_from_settings(settings)
            self._fs = filesystem
            self.remote = RemoteParts(location, self._fs)
            # Part paths stay Path objects ("bucket/prefix/part-….parquet") read through _fs.
            self.parts_dir = Path(location.base)

    @classmethod
    def from_settings(cls, settings: Settings, root: Path | str | None = None) -> Workspace:
        """The workspace the settings describe: their folder (or ``root``), their trajectories
        URL and S3 client."""
        return cls(settings.workspace if root is None else root, settings.trajectories_url,
                   settings=settings)

    @property
    def trajectories_location(self) -> str:
        """Where the parts are, for messages: a folder or an s3:// URL."""
        return self.remote.location.url if self.remote else str(self.parts_dir)

    # --- layout and settings ---------------------------------------------------------------
    @property
    def settings_path(self) -> Path:
        return self.root / "workspace.json"

    def set_task_fields(self, rows: Sequence[dict[str, Any]]) -> int:
        """Store per-task overrides of intent / scope / template_id (one row per task id;
        a missing or empty field keeps the value resolved from the trajectories)."""
        table = pa.table(
            {
                "task_id": [str(r["task_id"]) for r in rows],
                **{
                    col: [(str(r[col]) if r.get(col) not in (None, "") else None) for r in rows]
                    for col in TASK_FIELDS
                },
            },
            schema=pa.schema([("task_id", pa.string()),
                              *[(c, pa.string()) for c in TASK_FIELDS]]),
        )
        with self._write_lock():
            tmp = self.root / ".task_fields.parquet.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, self.task_fields_path)
        self._invalidate()
        return len(rows)

    @property
    def default_annotations_url(self) -> str:
        return sqlite_store_url(self.root)

    def read_settings(self) -> dict[str, Any]:
        if not self.settings_path.exists():
            return {}
        try:
            data = json.loads(self.settings_path.read_text("utf-8"))
        except ValueError as err:
            raise WorkspaceError(f"{self.settings_path}: not valid JSON ({err})") from None
        return data if isinstance(data, dict) else {}

    def write_settings(self, **updates: Any) -> None:
        self.create()
        data = {**self.read_settings(), **updates}
        atomic_write_text(self.settings_path, json.dumps(data, indent=2, sort_keys=True))

    @property
    def ehr_path(self) -> Path | None:
        """The EHR database SQL is re-run against: the configured one, else the demo's."""
        configured = self.read_settings().get("ehr_database")
        if configured:
            path = Path(configured)
            return path if path.is_absolute() else (self.root / path)
        demo = self.root / "ehr.duckdb"
        return demo if demo.exists() else None

    def set_ehr_database(self, path: Path) -> None:
        if not path.exists():
            raise WorkspaceError(f"{path}: no such EHR database file")
        self.write_settings(ehr_database=str(path.resolve()))

    # --- writing ---------------------------------------------------------------------------
    def add(
        self, trajectories: Iterable[tuple[Trajectory, str | None]]
    ) -> tuple[int, int]:
        """Store new trajectories; returns (added, duplicates). Never rewrites existing parts."""
        with self._write_lock():
            batch = StagedRows(self, self.existing_ids())
            try:
                for traj, source in trajectories:
                    batch.offer(traj, source)
                batch.commit()
            except BaseException:
                batch.abort()
                raise
            finally:
                self._invalidate()
            return batch.added, batch.duplicates

    def _stage_part(self, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
        """Write rows to a hidden temporary part; ``StagedRows.commit`` renames it in."""
        if self.remote is not None:
            final = stage_rows(self.parts_dir, rows, self._fs)[1]
            return final, final
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        table = rows_table(rows)
        name = part_name()
        tmp = self.parts_dir / f".{name}.tmp"
        pq.write_table(table, tmp, **PART_OPTIONS)
        return tmp, self.parts_dir / name

    def import_files(
        self,
        paths: Sequence[Path],
        *,
        fmt: str = "auto",
        run: str | None = None,
        model: str | None = None,
        skip_invalid: bool = False,
        progress: Callable[[int, int, int], None] | None = None,
        mapping: Mapping | None = None,
        tasks: TaskFile | None = None,
        workers: int | None = None,
        require_tasks: bool = False,
    ) -> ImportReport:
        """Import files all-or-nothing: any invalid record (without ``skip_invalid``) raises its
        ``ImportProblem`` (the first one in file order; when several files have problems, an
        ``ImportProblems`` naming the first of each) and nothing is written.

        Files are parsed by ``workers`` processes (default: one per core; 1 parses here),
        each writing hidden staged parts; when every file has been read the parts are renamed
        into place together, so readers never see a partial import and memory stays bounded
        by a few parts per worker. Ids, rows and duplicate counts do not depend on
        ``workers``: a record seen in an earlier file (or already stored) is a duplicate.
        ``progress(files_done, files, records_read)`` is called after each file (and every
        1,000 records with one worker)."""
        spec = FileSpec(str(self.parts_dir), fmt, run, model, mapping, tasks, skip_invalid,
                        self._fs, require_tasks)
        return StagedImport(self, paths, spec, workers=workers, progress=progress).run()

    def _pending_rekeys(self) -> rekey_journal.PendingRekeys:
        try:
            return rekey_journal.read(self.root)
        except rekey_journal.JournalError as err:
            raise WorkspaceError(str(err)) from None

    def pending_rekeys(self) -> rekey_journal.PendingRekeys:
        """Re-keys published by imports whose labels the annotation store has not taken yet
        (all of this import's until the caller settles them)."""
        return self._pending_rekeys()

    def settle_rekeys(self, old_ids: Iterable[str]) -> None:
        """Forget pending re-keys the annotation store has taken (carried or reported)."""
        with self._write_lock():
            rekey_journal.write(self.root, rekey_journal.without(self._pending_rekeys(), old_ids))

    def remove(self, *, ids: Sequence[str] = (), runs: Sequence[str] = (),
               sources: Sequence[str] = (), confirm: bool = True) -> RemovalReport:
        """Retire the rows with any of these ids, runs or source files (the path as imported,
        or a file whose bytes were imported) in one publish; the old parts stay for the
        grace period like compaction's. ``confirm=False`` only reports what would go.

        The manifest forgets the imports the removed rows came from, so importing one of
        those files again reads it again (rows without provenance: every import is
        forgotten; re-reading costs time, never a duplicate)."""
        wanted_ids = pa.array(sorted(set(ids)), type=pa.string())
        wanted_runs = pa.array(sorted(set(runs)), type=pa.string())
        shas: list[str] = []
        paths: list[str] = []
        for source in sources:
            paths.append(source)
            with contextlib.suppress(OSError):
                if Path(source).is_file():
                    shas.append(_content_sha(Path(source)))
        report = RemovalReport()
        with self._write_lock():
            drop: dict[str, set[str]] = {}
            forgotten: set[str] = set()
            forget_all = False
            for part in self.part_files():
                table = read_part_columns(part, ("id", "run", "source_file", "source_sha",
                                                 "import_key"), self._fs)
                mask = pc.or_(pc.is_in(table.column("id"), value_set=wanted_ids),
                              pc.is_in(table.column("run"), value_set=wanted_runs))
                mask = pc.or_(mask, pc.is_in(table.column("source_file"),
                                             value_set=pa.array(paths, type=pa.string())))
                mask = pc.or_(mask, pc.is_in(table.column("source_sha"),
                                             value_set=pa.array(shas, type=pa.string())))
                hit = table.filter(pc.fill_null(mask, False))
                if not hit.num_rows:
                    continue
                drop[part.name] = set(hit.column("id").to_pylist())
                report.ids.extend(hit.column("id").to_pylist())
                for run_name in hit.column("run").to_pylist():
                    report.runs[str(run_name)] = report.runs.get(str(run_name), 0) + 1
                keys = hit.column("import_key").to_pylist()
                forgotten.update(k for k in keys if k is not None)
                forget_all = forget_all or any(k is None for k in keys)
            report.ids.sort()
            report.parts_rewritten = len(drop)
            if not confirm or not drop:
                return report
            staged, retired = self._rewrite_without(drop)
            try:
                for tmp, final in staged:
                    self._place(tmp, final)
                known = self.imported_sources()
                left = {} if forget_all else {k: n for k, n in known.items()
                                              if k not in forgotten}
                self._publish([f for _, f in staged], retired, left, replace_sources=True)
            except BaseException:
                for tmp, final in staged:
                    self._discard(tmp)
                    self._discard(final)
                raise
            finally:
                self._invalidate()
        return report


def _content_sha(path: Path) -> str:
    """The content hash provenance records (``import_workers.file_keys``)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:32]


