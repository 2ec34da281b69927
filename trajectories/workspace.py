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
``trajectories.staged_import.StagedImport`` transaction.

A ``Workspace`` is composed of one object per concern, each in its own module, as the annotation
store is (``store.labels``, ``store.verdicts``...): ``parts`` (``trajectories.parts``: where the
parts are, the manifest, the write lock, publishing; parts in an S3 bucket through
``trajectories.objectstore``), ``queries`` (``trajectories.queries``: the DuckDB views and the
queries), ``compaction`` (``trajectories.compaction``: merging small parts), ``garbage``
(``trajectories.gc``: leftovers of killed writers) and ``overlay`` (``trajectories.overlay``: the
re-score overlay). Each of the others is given the ``parts`` object and owns only its own
state, so no class sets attributes another declares and each can be read (and tested) alone;
the queries are told by the parts when this process changed them. The methods the rest of the
code calls are kept here as thin delegations; the rest is reached on the object that owns it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from faillab_core.settings import Settings, sqlite_store_url
from trajectories import rekey_journal
from trajectories.compaction import COMPACT_AT_PARTS, COMPACT_PART_MB, COMPACT_ROWS, Compaction
from trajectories.gc import GarbageCollection, GarbageReport
from trajectories.import_workers import FileSpec
from trajectories.importers.mapping import Mapping as FieldMapping
from trajectories.importers.tasks import TaskFile
from trajectories.judge import Judgement
from trajectories.model import Trajectory
from trajectories.objectstore import RemoteParts
from trajectories.outcome import (
    DEFAULT_SUCCESS_SOURCE,
    NO_PEOPLE,
    SUCCESS_SOURCES,
    PeopleVerdicts,
    outcome_name,
    success_expression,
)
from trajectories.overlay import ScoreOverlay
from trajectories.parts import (
    MANIFEST,
    PART_GLOB,
    RETIRED_GRACE_S,
    Parts,
    WorkspaceError,
    atomic_write_text,
)
from trajectories.prior_rows import read_part_columns
from trajectories.queries import TASK_FIELDS, Queries
from trajectories.staged_import import ImportReport, StagedImport, StagedRows, pending_rekeys

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


class Workspace:
    """Imported trajectories and what is asked of them: the parts, their queries, compaction,
    garbage collection and the score overlay, composed (see the module docstring)."""

    def __init__(self, root: Path | str, trajectories_url: str = "",
                 filesystem: pafs.FileSystem | None = None,
                 settings: Settings | None = None) -> None:
        """``trajectories_url`` puts the parts and their manifest at ``s3://bucket/prefix``
        instead of ``root/trajectories`` (empty: the local folder); its S3 client is
        ``filesystem``, else the one ``settings`` describe. Nothing here reads the
        environment: the faces build a workspace from their settings (``from_settings``)."""
        self.parts = Parts(root, trajectories_url, filesystem, settings)
        self.queries = Queries(self.parts)
        self.compaction = Compaction(self.parts)
        self.garbage = GarbageCollection(self.parts)
        self.overlay = ScoreOverlay(self.parts)

    @classmethod
    def from_settings(cls, settings: Settings, root: Path | str | None = None) -> Workspace:
        """The workspace the settings describe: their folder (or ``root``), their trajectories
        URL and S3 client."""
        return cls(settings.workspace if root is None else root, settings.trajectories_url,
                   settings=settings)

    # --- the parts (``Parts``) -------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.parts.root

    @property
    def parts_dir(self) -> Path:
        """The parts' folder, or their ``bucket/prefix`` in an object store."""
        return self.parts.parts_dir

    @property
    def remote(self) -> RemoteParts | None:
        """The object store holding the parts (None: they are local files under parts_dir)."""
        return self.parts.remote

    @property
    def trajectories_location(self) -> str:
        """Where the parts are, for messages: a folder or an s3:// URL."""
        return self.parts.trajectories_location

    def create(self) -> Self:
        self.parts.create()
        return self

    def exists(self) -> bool:
        return self.parts.exists()

    def part_files(self) -> list[Path]:
        return self.parts.part_files()

    def existing_ids(self) -> set[str]:
        return self.parts.existing_ids()

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
        with self.parts.write_lock():
            tmp = self.root / ".task_fields.parquet.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, self.parts.task_fields_path)
        self.parts.changed()
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
        with self.parts.write_lock():
            batch = StagedRows(self.parts, self.parts.existing_ids())
            try:
                for traj, source in trajectories:
                    batch.offer(traj, source)
                batch.commit()
            except BaseException:
                batch.abort()
                raise
            finally:
                self.parts.changed()
            return batch.added, batch.duplicates

    def import_files(
        self,
        paths: Sequence[Path],
        *,
        fmt: str = "auto",
        run: str | None = None,
        model: str | None = None,
        skip_invalid: bool = False,
        progress: Callable[[int, int, int], None] | None = None,
        mapping: FieldMapping | None = None,
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
                        self.parts.fs, require_tasks)
        return StagedImport(self.parts, paths, spec, maybe_compact=self.maybe_compact,
                            workers=workers, progress=progress).run()

    def pending_rekeys(self) -> rekey_journal.PendingRekeys:
        """Re-keys published by imports whose labels the annotation store has not taken yet
        (all of this import's until the caller settles them)."""
        return pending_rekeys(self.root)

    def settle_rekeys(self, old_ids: Iterable[str]) -> None:
        """Forget pending re-keys the annotation store has taken (carried or reported)."""
        with self.parts.write_lock():
            rekey_journal.write(self.root, rekey_journal.without(pending_rekeys(self.root),
                                                                 old_ids))

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
        parts = self.parts
        with parts.write_lock():
            drop: dict[str, set[str]] = {}
            forgotten: set[str] = set()
            forget_all = False
            for part in parts.part_files():
                table = read_part_columns(part, ("id", "run", "source_file", "source_sha",
                                                 "import_key"), parts.fs)
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
            staged, retired = parts.rewrite_without(drop)
            try:
                for tmp, final in staged:
                    parts.place(tmp, final)
                known = parts.imported_sources()
                left = {} if forget_all else {k: n for k, n in known.items()
                                              if k not in forgotten}
                parts.publish([f for _, f in staged], retired, left, replace_sources=True)
            except BaseException:
                for tmp, final in staged:
                    parts.discard(tmp)
                    parts.discard(final)
                raise
            finally:
                parts.changed()
        return report


    # --- compaction (``Compaction``), garbage (``GarbageCollection``) ----------------------
    def compact(self, *, part_mb: int = COMPACT_PART_MB) -> dict[str, int]:
        return self.compaction.compact(part_mb=part_mb)

    def maybe_compact(self) -> dict[str, int] | None:
        return self.compaction.maybe_compact()

    def collect_garbage(self, *, dry_run: bool = False, grace_s: float = RETIRED_GRACE_S,
                        now: float | None = None) -> GarbageReport:
        return self.garbage.collect_garbage(dry_run=dry_run, grace_s=grace_s, now=now)

    # --- the score overlay (``ScoreOverlay``) ----------------------------------------------
    def iter_payload_batches(self, batch_size: int = 2048
                             ) -> Iterator[list[tuple[str, str, bool]]]:
        return self.overlay.iter_payload_batches(batch_size)

    def write_scores(self, rerun: Callable[[str], list[list[Any]] | None] | None = None
                     ) -> dict[str, int]:
        return self.overlay.write_scores(rerun)

    def record_judgements(self, judgements: Mapping[str, Judgement], version: str) -> int:
        return self.overlay.record_judgements(judgements, version)

    # --- queries (``Queries``) -------------------------------------------------------------
    @property
    def warm_thread(self) -> threading.Thread | None:
        """The last background build of the kept-warm tables (tests and benchmarks wait)."""
        return self.queries.warm_thread

    def signature(self) -> tuple[Any, ...]:
        return self.queries.signature()

    def connect(self) -> duckdb.DuckDBPyConnection:
        return self.queries.connect()

    def shared_table(self, name: str, select: str) -> duckdb.DuckDBPyConnection:
        return self.queries.shared_table(name, select)

    def keep_warm(self, name: str, select: str, *,
                  build_now: bool = True) -> threading.Thread | None:
        return self.queries.keep_warm(name, select, build_now=build_now)

    def query_df(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        return self.queries.query_df(sql, params)

    def frame(self) -> Any:
        return self.queries.frame()

    def get(self, trajectory_id: str) -> Trajectory | None:
        return self.queries.get(trajectory_id)

    def get_many(self, trajectory_ids: Sequence[str]) -> dict[str, Trajectory]:
        return self.queries.get_many(trajectory_ids)

    def verdict_of(self, trajectory_id: str) -> dict[str, Any] | None:
        return self.queries.verdict_of(trajectory_id)

    def summary(self, success_source: str = DEFAULT_SUCCESS_SOURCE,
                people: PeopleVerdicts = NO_PEOPLE) -> dict[str, int]:
        """Counts, with ``people``'s verdicts winning (``trajectories.outcome``)."""
        return self.queries.summary(success_source, people)

    # Last in the class: below it, ``list`` would name this method.
    def list(self, *, failed: bool = False, unscored: bool = False, run: str | None = None,
             limit: int | None = None, success_source: str = DEFAULT_SUCCESS_SOURCE,
             people: PeopleVerdicts = NO_PEOPLE, needing_a_person: bool = False,
             ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Trajectories and their outcomes, resolved with ``people``'s verdicts."""
        return self.queries.list(failed=failed, unscored=unscored, run=run, limit=limit,
                                 success_source=success_source, people=people,
                                 needing_a_person=needing_a_person, ids=ids)


def _content_sha(path: Path) -> str:
    """The content hash provenance records (``import_workers.file_keys``)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:32]


