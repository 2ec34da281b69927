"""The workspace: imported trajectories as immutable Parquet parts, queried with DuckDB.

Layout under the workspace root::

    trajectories/part-*.parquet  one row per trajectory (index columns + the full JSON payload)
    trajectories/manifest.json   which parts are visible (absent in older workspaces: all are)
    scores.parquet               optional re-score overlay written by ``faillab score``
    workspace.json               settings of this workspace (the EHR database to re-run SQL on)
    ehr.duckdb                   the demo's synthetic EHR database, when built by ``faillab demo``
    annotations.sqlite           the annotation store (default; PostgreSQL for teams)

Parts are written to a hidden temporary name and renamed into place, then published together
by replacing the manifest in one rename, so a reader in another process (the app) never sees
half a file or half an import and never takes a lock; writers serialise on a lock file.
Imports parse files in worker processes (one part per file or per 64 MB of payloads);
compaction merges small parts into id-sorted parts and retires the old ones after a grace
period, so a reader still on them keeps working.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from trajectories.import_workers import FileSpec, parse_files
from trajectories.importers import ImportProblem
from trajectories.importers.mapping import Mapping
from trajectories.model import Trajectory
from trajectories.objectstore import (
    ObjectStoreError,
    RemoteParts,
    S3Location,
    configured_trajectories_url,
    filesystem_from_settings,
    is_remote,
)
from trajectories.prior_rows import PriorRows, Replacement, match_records, read_part_columns
from trajectories.rows import (
    INDEX_COLUMNS,
    INDEX_SCHEMA,
    PART_OPTIONS,
    PROVENANCE_COLUMNS,
    index_row,
    part_name,
    reject_line,
    remove_part,
    rows_table,
    score,
    stage_rows,
)
from trajectories.scoring import SCORER_VERSION

PART_GLOB = "part-*.parquet"
MANIFEST = "manifest.json"  # the visible parts; replaced atomically by each writer
#: Retired parts (replaced by compaction) stay this long for readers that still use them.
RETIRED_GRACE_S = 300.0
#: Compacted parts hold about this many rows; smaller parts are merged by compaction.
COMPACT_ROWS = 131_072
#: ... and about this many MB uncompressed (payloads dominate), so one fits in memory.
COMPACT_PART_MB = 128
#: An import that leaves more small parts than this compacts them.
COMPACT_AT_PARTS = 64
#: Part of every imported file's key: bump it when parsing changes what a file yields, so
#: files imported before are parsed again instead of being taken as known.

#: Task fields resolved per task id across runs (and overridable from a task file).
TASK_FIELDS = ("intent", "scope", "template_id")


#: Where a trajectory's success comes from (docs/scoring.md): ``recorded`` prefers the
#: producer's verdict, ``exact_match`` our re-score (as EHR-Complex scores); each falls back to
#: the other, and a trajectory with neither is unscored (NULL).
SUCCESS_SOURCES = ("recorded", "exact_match")
DEFAULT_SUCCESS_SOURCE = "recorded"


def success_expression(source: str) -> str:
    """SQL for ``success`` under a success source (a fixed expression, never user text)."""
    if source == "recorded":
        return "coalesce(recorded_success, exact_match)"
    if source == "exact_match":
        return "coalesce(exact_match, recorded_success)"
    choices = ", ".join(SUCCESS_SOURCES)
    raise ValueError(f"unknown success source {source!r} (choose from {choices})")


class WorkspaceError(Exception):
    """A workspace problem the user can act on (missing database, bad settings file)."""


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

    def as_json(self) -> dict[str, int]:
        return {"imported": self.imported, "duplicates": self.duplicates,
                "rejected": self.rejected, "replaced": self.replaced}


@dataclass
class RemovalReport:
    """Rows ``Workspace.remove`` retired (or would retire, when not confirmed)."""

    ids: list[str] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)
    parts_rewritten: int = 0


class Workspace:
    def __init__(self, root: Path | str, trajectories_url: str | None = None,
                 filesystem: pafs.FileSystem | None = None) -> None:
        """``trajectories_url`` (default: the ``trajectories_url`` setting) puts the parts
        and their manifest at ``s3://bucket/prefix`` instead of ``root/trajectories``;
        ``filesystem`` replaces the S3 client the settings describe."""
        self.root = Path(root)
        self.parts_dir = self.root / "trajectories"
        self._local = threading.local()
        url = configured_trajectories_url() if trajectories_url is None else trajectories_url
        #: The object store holding the parts (None: they are local files under parts_dir).
        self.remote: RemoteParts | None = None
        #: pyarrow filesystem for part paths (None: local paths, as plain Path objects).
        self._fs: pafs.FileSystem | None = None
        if url:
            if not is_remote(url):
                raise WorkspaceError(f"trajectories URL {url!r}: expected s3://bucket/prefix "
                                     "(leave it empty for the workspace's own folder)")
            location = S3Location.parse(url)
            self._fs = filesystem if filesystem is not None else filesystem_from_settings()
            self.remote = RemoteParts(location, self._fs)
            # Part paths stay Path objects ("bucket/prefix/part-….parquet") read through _fs.
            self.parts_dir = Path(location.base)

    @property
    def trajectories_location(self) -> str:
        """Where the parts are, for messages: a folder or an s3:// URL."""
        return self.remote.location.url if self.remote else str(self.parts_dir)

    def _place(self, staged: Path, final: Path) -> None:
        """Make a staged part final: a rename on disk; in an object store it was written
        under its final name already (still invisible until the manifest lists it)."""
        if self.remote is None:
            os.replace(staged, final)

    def _discard(self, part: Path) -> None:
        if self.remote is None:
            part.unlink(missing_ok=True)
        else:
            self.remote.delete(part.name)

    # --- layout and settings ---------------------------------------------------------------
    @property
    def settings_path(self) -> Path:
        return self.root / "workspace.json"

    @property
    def scores_path(self) -> Path:
        return self.root / "scores.parquet"

    @property
    def task_fields_path(self) -> Path:
        return self.root / "task_fields.parquet"

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
        return f"sqlite:///{(self.root / 'annotations.sqlite').resolve()}"

    def create(self) -> Workspace:
        if self.remote is not None:
            self.root.mkdir(parents=True, exist_ok=True)  # settings and the write lock
            return self
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        return self

    def exists(self) -> bool:
        if self.remote is not None:
            return self._read_manifest() is not None
        return self.parts_dir.is_dir()

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
        _atomic_write_text(self.settings_path, json.dumps(data, indent=2, sort_keys=True))

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
    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        self.create()
        with open(self.root / ".write.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self._clean_stale_staging()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _clean_stale_staging(self) -> int:
        """Delete staging files left by a writer that died (``kill -9``, power loss).

        Every writer stages only while it holds the exclusive write lock, so a staging file
        found by the new lock holder cannot belong to a live writer. Returns how many went.
        """
        stale = [*self.root.glob(".scores.parquet.tmp"), *self.root.glob(".rejects-*.tmp")]
        removed = 0
        if self.remote is not None:
            removed = self._clean_remote_parts()
        elif self.parts_dir.exists():
            stale += self.parts_dir.glob(".part-*.tmp")
            manifest = self._read_manifest()
            if manifest is not None:
                # Parts renamed into place by a writer that died before publishing them, and
                # retired parts past their grace period.
                retired = manifest.get("retired", {})
                now = time.time()
                expired = {n for n, at in retired.items() if now - float(at) > RETIRED_GRACE_S}
                visible = set(manifest["parts"])
                stale += [p for p in self.parts_dir.glob(PART_GLOB)
                          if p.name not in visible and (p.name not in retired
                                                        or p.name in expired)]
                if expired:
                    self._write_manifest(manifest["parts"],
                                         {n: at for n, at in retired.items() if n not in expired})
        for path in stale:
            path.unlink(missing_ok=True)
        return len(stale) + removed

    def _clean_remote_parts(self) -> int:
        """The object-store side of ``_clean_stale_staging``: retired parts past their grace
        period, and unlisted parts older than it. The write lock is per machine, so an unlisted
        part may belong to an import still running elsewhere: only age makes it stale."""
        assert self.remote is not None
        manifest = self._read_manifest()
        retired: dict[str, float] = dict(manifest.get("retired", {})) if manifest else {}
        visible = set(manifest["parts"]) if manifest else set()
        now = time.time()
        expired = {n for n, at in retired.items() if now - float(at) > RETIRED_GRACE_S}
        with _store_errors():
            listed = self.remote.objects()
        gone = [name for name, mtime in listed
                if name not in visible and (name in expired
                                            or (name not in retired
                                                and now - mtime > RETIRED_GRACE_S))]
        with _store_errors():
            for name in gone:
                self.remote.delete(name)
        if manifest is not None and expired:
            self._write_manifest(manifest["parts"],
                                 {n: at for n, at in retired.items() if n not in expired})
        return len(gone)

    @property
    def manifest_path(self) -> Path:
        return self.parts_dir / MANIFEST

    def _read_manifest(self) -> dict[str, Any] | None:
        """The list of visible parts (None for a workspace written before manifests: every
        part file is visible)."""
        try:
            if self.remote is not None:
                with _store_errors():
                    text = self.remote.read_text(MANIFEST)
                if text is None:
                    return None
            else:
                text = self.manifest_path.read_text("utf-8")
            data = json.loads(text)
        except FileNotFoundError:
            return None
        except ValueError as err:
            raise WorkspaceError(f"{self.manifest_path}: not valid JSON ({err})") from None
        if not isinstance(data, dict) or not isinstance(data.get("parts"), list):
            raise WorkspaceError(f"{self.manifest_path}: expected {{\"parts\": [...]}}")
        return data

    def _write_manifest(self, parts: Sequence[str], retired: dict[str, float],
                        sources: dict[str, int] | None = None) -> None:
        """Publish a new set of visible parts in one rename: the moment an import or a
        compaction becomes visible to every reader, all at once. ``sources`` (kept when
        None) maps each fully imported file's key to its record count."""
        if sources is None:
            sources = dict((self._read_manifest() or {}).get("sources", {}))
        text = json.dumps({"parts": sorted(parts), "retired": retired, "sources": sources},
                          indent=0)
        if self.remote is not None:
            with _store_errors():
                self.remote.write_text(MANIFEST, text)
        else:
            _atomic_write_text(self.manifest_path, text)

    def imported_sources(self) -> dict[str, int]:
        """Files imported whole before (by content, name and import options): a re-import
        of one reports its records as duplicates without parsing it again."""
        return dict((self._read_manifest() or {}).get("sources", {}))

    def part_files(self) -> list[Path]:
        if self.remote is None and not self.parts_dir.exists():
            return []
        manifest = self._read_manifest()
        if manifest is None:
            # Object-store workspaces always had a manifest: no manifest, nothing published.
            return [] if self.remote is not None else sorted(self.parts_dir.glob(PART_GLOB))
        return [self.parts_dir / name for name in manifest["parts"]]

    def _publish(self, added: Sequence[Path], removed: Sequence[Path] = (),
                 sources: dict[str, int] | None = None) -> None:
        """Make staged parts (already renamed to their final names) visible and retire
        ``removed``; retired files stay on disk a grace period for readers still on them."""
        manifest = self._read_manifest()
        if manifest is not None:
            current = list(manifest["parts"])
        elif self.remote is not None:
            current = []
        else:
            current = [p.name for p in sorted(self.parts_dir.glob(PART_GLOB))]
        retired: dict[str, float] = dict(manifest.get("retired", {})) if manifest else {}
        gone = {p.name for p in removed}
        now = time.time()
        for name in gone:
            retired[name] = now
        new = [p.name for p in added]
        parts = [n for n in current if n not in gone and n not in new] + new
        known = dict(manifest.get("sources", {})) if manifest else {}
        self._write_manifest(parts, retired, {**known, **(sources or {})})

    def existing_ids(self) -> set[str]:
        files = self.part_files()
        if not files:
            return set()
        table = pq.ParquetDataset([str(f) for f in files],
                                  filesystem=self._fs).read(columns=["id"])
        return set(table.column("id").to_pylist())

    def add(
        self, trajectories: Iterable[tuple[Trajectory, str | None]]
    ) -> tuple[int, int]:
        """Store new trajectories; returns (added, duplicates). Never rewrites existing parts."""
        with self._write_lock():
            batch = _StagedImport(self, self.existing_ids())
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
        """Write rows to a hidden temporary part; ``_StagedImport.commit`` renames it in."""
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
        tasks: dict[str, dict[str, Any]] | None = None,
        workers: int | None = None,
    ) -> ImportReport:
        """Import files all-or-nothing: any invalid record (without ``skip_invalid``) raises its
        ``ImportProblem`` (the first one in file order) and nothing is written.

        Files are parsed by ``workers`` processes (default: one per core; 1 parses here),
        each writing hidden staged parts; when every file has been read the parts are renamed
        into place together, so readers never see a partial import and memory stays bounded
        by a few parts per worker. Ids, rows and duplicate counts do not depend on
        ``workers``: a record seen in an earlier file (or already stored) is a duplicate.
        ``progress(files_done, files, records_read)`` is called after each file (and every
        1,000 records with one worker)."""
        report = ImportReport(files=len(paths))
        rejects: list[dict[str, str]] = []
        added = duplicates = records = 0
        spec = FileSpec(str(self.parts_dir), fmt, run, model, mapping, tasks, skip_invalid,
                         self._fs)
        replacement = Replacement()
        with self._write_lock():
            known = self.imported_sources()
            prior = PriorRows.read(self.part_files(), self._fs, [Path(p) for p in paths],
                                   set(known))
            seen = prior.ids
            sources: dict[str, int] = {}
            staged: list[tuple[Path, Path]] = []
            emptied: set[Path] = set()  # staged parts that held only duplicates (deleted)
            results = parse_files(spec, [Path(p) for p in paths], (seen, set(known)), workers,
                                   progress, prior.prior_ids)
            try:
                # closing(): on a failure every worker has stopped before staging is cleaned.
                with contextlib.closing(results):
                    for done, (path, result) in enumerate(zip(paths, results, strict=True),
                                                          start=1):
                        records += result.records
                        for problem, location, raw in result.rejected:
                            if not skip_invalid:
                                raise problem
                            report.problems.append(problem)
                            rejects.append({"file": problem.path, "location": location,
                                            "error": str(problem), "record": raw})
                        duplicates += result.duplicates
                        if result.skipped:  # read before: all duplicates
                            duplicates += known.get(str(result.source_key), 0)
                            records += known.get(str(result.source_key), 0)
                        elif result.source_key and not result.rejected:
                            sources[result.source_key] = result.records
                        if result.prior:
                            # This file's old rows go; its records are written again.
                            seen -= result.prior
                            match_records(prior.rows_of(str(Path(path))), result, replacement)
                        for tmp, final, ids in result.parts:
                            # Workers only know what was stored before: a record an earlier
                            # file of this import holds is a duplicate too (first file wins,
                            # as in a single-process import).
                            again = [i for i in ids if i in seen]
                            if again:
                                if not _drop_rows(tmp, set(again), self._fs):
                                    emptied.add(tmp)
                                duplicates += len(again)
                            seen.update(ids)
                            rewritten = sum(1 for i in ids if i in result.prior)
                            added += len(ids) - len(again) - rewritten
                            duplicates += rewritten  # stored before, under the same id
                            staged.append((tmp, final))
                        if progress:
                            progress(done, len(paths), records)
                retired: list[Path] = []
                if replacement.retire:
                    # The parts holding replaced rows are written again without them and
                    # retired in the same publish: readers see the old rows or the new ones.
                    kept, retired = self._rewrite_without(replacement.retire)
                    staged.extend(kept)
                published = []
                for tmp, final in staged:
                    if self.remote is not None:
                        if tmp not in emptied:
                            published.append(final)
                    elif tmp.exists():
                        os.replace(tmp, final)
                        published.append(final)
                if published or sources or retired:
                    self._publish(published, removed=retired, sources=sources)
            except BaseException:
                if self.remote is not None:
                    # Unlisted objects are only aged out, so delete what this import staged.
                    for tmp, _ in staged:
                        if tmp not in emptied:
                            self.remote.delete(tmp.name)
                # Every worker has stopped: any staged part left is this import's.
                self._clean_stale_staging()
                raise
            finally:
                self._invalidate()
            if rejects:
                # Written under the lock with a unique name: two imports in the same second
                # each keep their own rejects file.
                stamp = time.strftime("%Y%m%dT%H%M%S")
                rejects_path = self.root / f"rejects-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
                _atomic_write_text(rejects_path, "".join(reject_line(r) for r in rejects))
                report.rejects_file = rejects_path
        report.imported, report.duplicates = added, duplicates
        report.rejected = len(rejects)
        report.replaced = replacement.replaced
        report.rekeyed, report.orphaned = replacement.rekeyed, replacement.orphaned
        if added:
            self.maybe_compact()
        return report

    def _rewrite_without(self, drop: dict[str, set[str]]) -> tuple[list[tuple[Path, Path]],
                                                                   list[Path]]:
        """Stage a copy of each named part without the given ids (none when nothing is
        left); returns the staged copies and the parts they replace, for one publish."""
        staged: list[tuple[Path, Path]] = []
        replaced: list[Path] = []
        try:
            for name, ids in sorted(drop.items()):
                part = self.parts_dir / name
                table = ds.dataset(str(part), format="parquet", schema=INDEX_SCHEMA,
                                   filesystem=self._fs).to_table()
                keep = table.filter(pc.invert(pc.is_in(table.column("id"),
                                                       value_set=pa.array(sorted(ids)))))
                replaced.append(part)
                if keep.num_rows:
                    final = self.parts_dir / part_name()
                    tmp = final if self.remote else self.parts_dir / f".{final.name}.tmp"
                    pq.write_table(keep, str(tmp), **PART_OPTIONS, filesystem=self._fs)
                    staged.append((tmp, final))
        except BaseException:
            for tmp, _ in staged:
                self._discard(tmp)
            raise
        return staged, replaced

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
                self._publish_replacing_sources([f for _, f in staged], retired, left)
            except BaseException:
                for tmp, final in staged:
                    self._discard(tmp)
                    self._discard(final)
                raise
            finally:
                self._invalidate()
        return report

    def _publish_replacing_sources(self, added: Sequence[Path], removed: Sequence[Path],
                                   sources: dict[str, int]) -> None:
        """``_publish`` whose imported-source list is ``sources`` (not merged)."""
        manifest = self._read_manifest()
        current = (list(manifest["parts"]) if manifest is not None
                   else [] if self.remote is not None
                   else [p.name for p in sorted(self.parts_dir.glob(PART_GLOB))])
        retired: dict[str, float] = dict(manifest.get("retired", {})) if manifest else {}
        gone = {p.name for p in removed}
        now = time.time()
        for name in gone:
            retired[name] = now
        new = [p.name for p in added]
        parts = [n for n in current if n not in gone and n not in new] + new
        self._write_manifest(parts, retired, sources)

    # --- compaction --------------------------------------------------------------------------
    def compaction_candidates(self) -> list[Path]:
        """Visible parts below ``COMPACT_ROWS`` rows: what compaction merges."""
        return [p for p in self.part_files()
                if self._parquet_file(p).metadata.num_rows < COMPACT_ROWS]

    def _parquet_file(self, part: Path) -> pq.ParquetFile:
        if self._fs is None:
            return pq.ParquetFile(part)
        return pq.ParquetFile(str(part), filesystem=self._fs)

    def maybe_compact(self) -> dict[str, int] | None:
        """Compact when small parts have piled up (more than ``COMPACT_AT_PARTS``)."""
        if len(self.compaction_candidates()) <= COMPACT_AT_PARTS:
            return None
        return self.compact()

    def compact(self, *, part_mb: int = COMPACT_PART_MB) -> dict[str, int]:
        """Merge every small part into parts sorted by id that cover disjoint id ranges (a
        lookup by id then opens one file), each at most ``COMPACT_ROWS`` rows and about
        ``part_mb`` MB uncompressed. One id range is read at a time (row-group statistics
        skip the rest), so memory stays near one output part whatever the workspace size.
        The result is published in one manifest rename and the old parts are deleted after
        a grace period: readers are never blocked or broken."""
        with self._write_lock():
            small = self.compaction_candidates()
            if len(small) < 2:
                return {"merged_parts": 0, "new_parts": 0, "rows": 0}
            all_ids = pa.chunked_array(
                [pq.read_table(str(p), columns=["id"], filesystem=self._fs).column("id")
                 for p in small]).combine_chunks()
            ordered = pc.array_sort_indices(all_ids)
            sorted_ids = all_ids.take(ordered)
            rows = len(sorted_ids)
            metas = [self._parquet_file(p).metadata for p in small]
            raw_bytes = sum(m.row_group(i).total_byte_size
                            for m in metas for i in range(m.num_row_groups))
            n_out = max(1, -(-rows // COMPACT_ROWS), -(-raw_bytes // (part_mb * 1024 * 1024)))
            bounds = [sorted_ids[(k * rows) // n_out].as_py() for k in range(1, n_out)]
            del all_ids, ordered, sorted_ids
            dataset = ds.dataset([str(p) for p in small], format="parquet",
                                 schema=INDEX_SCHEMA, filesystem=self._fs)
            finals: list[Path] = []
            staged: list[tuple[Path, Path]] = []
            try:
                for i, (lo, hi) in enumerate(zip([None, *bounds], [*bounds, None],
                                                 strict=True)):
                    expr = None
                    if lo is not None:
                        expr = pc.field("id") >= lo
                    if hi is not None:
                        upper = pc.field("id") < hi
                        expr = upper if expr is None else expr & upper
                    table = dataset.to_table(filter=expr).sort_by("id")
                    name = part_name().replace(".parquet", f"-c{i:04d}.parquet")
                    final = self.parts_dir / name
                    tmp = final if self.remote else self.parts_dir / f".{name}.tmp"
                    pq.write_table(table, str(tmp), **PART_OPTIONS, filesystem=self._fs)
                    staged.append((tmp, final))
                    del table
                for tmp, final in staged:
                    self._place(tmp, final)
                    finals.append(final)
                self._publish(finals, removed=small)
            except BaseException:
                for tmp, _ in staged:
                    self._discard(tmp)
                raise
            self._invalidate()
            return {"merged_parts": len(small), "new_parts": len(finals), "rows": rows}

    def write_scores(self) -> dict[str, int]:
        """Re-score every trajectory with the current scorer into the overlay file."""
        ids: list[str] = []
        matches: list[bool | None] = []
        changed = 0
        for batch in self.iter_payload_batches():
            for tid, payload, stored in batch:
                traj = Trajectory.model_validate_json(payload)
                result = score(traj)
                changed += int(result != stored)
                ids.append(tid)
                matches.append(result)
        table = pa.table({"id": ids, "exact_match": matches,
                          "scorer_version": [SCORER_VERSION] * len(ids)},
                         schema=pa.schema([("id", pa.string()), ("exact_match", pa.bool_()),
                                           ("scorer_version", pa.string())]))
        with self._write_lock():
            tmp = self.root / ".scores.parquet.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, self.scores_path)
        self._invalidate()
        return {"scored": len(ids), "changed": changed}

    def iter_payload_batches(self, batch_size: int = 2048) -> Iterator[list[tuple[str, str, bool]]]:
        for part in self.part_files():
            pf = self._parquet_file(part)
            for rb in pf.iter_batches(batch_size=batch_size,
                                      columns=["id", "payload", "exact_match"]):
                cols = rb.to_pydict()
                yield list(zip(cols["id"], cols["payload"], cols["exact_match"], strict=True))

    # --- reading ---------------------------------------------------------------------------
    def _invalidate(self) -> None:
        self._local.__dict__.pop("con", None)
        self._local.__dict__.pop("signature", None)

    def signature(self) -> tuple[Any, ...]:
        """Cheap identity of the workspace's data, the one every cache keys on (this class's
        DuckDB views, the app's loaders): the root, the part files (name, size, mtime) and the
        score and task-field overlays. Parts are immutable and only ever added, so an equal
        signature means equal data."""

        def stamp(path: Path) -> tuple[int, int]:
            try:
                st = path.stat()
            except FileNotFoundError:
                return (0, 0)
            return (int(st.st_size), int(st.st_mtime_ns))

        if self.remote is not None:
            # Listed parts are immutable objects with unique names: the names say it all.
            parts: tuple[Any, ...] = (self.remote.location.url,
                                      *(f.name for f in self.part_files()))
        else:
            parts = tuple((f.name, *stamp(f)) for f in self.part_files())
        return (str(self.root.resolve()), parts, stamp(self.scores_path),
                stamp(self.task_fields_path))

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A per-thread in-memory DuckDB connection whose views read the Parquet parts.

        The views are rebuilt when parts appear (another process imported), so long-lived
        readers see new data without reopening anything."""
        signature = self.signature()
        con: duckdb.DuckDBPyConnection | None = getattr(self._local, "con", None)
        if con is not None and getattr(self._local, "signature", None) == signature:
            return con
        if con is None or self.remote is not None:
            # An object-store workspace gets a new connection per change of the parts: an
            # Arrow dataset cannot be registered while a caller's result is still open on the
            # old one, and whoever holds the old connection keeps reading the old parts.
            con = duckdb.connect(":memory:")
            # Parts are immutable files with unique names, so their footers (schema, row-group
            # statistics) can be kept: a fetch by id then prunes to one row group without
            # reading any footer again (13 -> 4 ms at 300,000 rows; summary and Browse gain too).
            con.execute("SET parquet_metadata_cache = true")
            self._local.con = con
        files = [str(f) for f in self.part_files()] if self.exists() else []
        if files and self.remote is not None:
            # DuckDB reads the objects through an Arrow dataset (module docstring of
            # trajectories.objectstore says why not httpfs); projections and filters are
            # pushed into the scan, so a lookup by id reads one row group per part.
            con.register("parts_arrow", self._remote_dataset(sorted(files)))
            con.execute("CREATE OR REPLACE VIEW parts AS SELECT * FROM parts_arrow")
        elif files:
            file_list = "[" + ", ".join(_sql_str(f) for f in sorted(files)) + "]"
            # By name: parts written before the provenance columns lack them (read as NULL).
            source = f"read_parquet({file_list}, union_by_name = true)"
            present = {str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}")
                       .fetchall()}
            columns = ", ".join(f.name if f.name in present
                                else f"NULL::{_duck_type(f.type)} AS {f.name}"
                                for f in INDEX_SCHEMA)
            con.execute(f"CREATE OR REPLACE VIEW parts AS SELECT {columns} FROM {source}")
        else:
            cols = ", ".join(f"NULL::{_duck_type(f.type)} AS {f.name}" for f in INDEX_SCHEMA)
            con.execute(f"CREATE OR REPLACE VIEW parts AS SELECT {cols} WHERE false")
        if self.scores_path.exists():
            con.execute(
                "CREATE OR REPLACE VIEW scores AS SELECT * FROM read_parquet("
                f"{_sql_str(str(self.scores_path))})"
            )
        else:
            con.execute("CREATE OR REPLACE VIEW scores AS SELECT NULL::VARCHAR AS id, "
                        "NULL::BOOLEAN AS exact_match WHERE false")
        if self.task_fields_path.exists():
            con.execute(
                "CREATE OR REPLACE VIEW task_overrides AS SELECT * FROM read_parquet("
                f"{_sql_str(str(self.task_fields_path))})"
            )
        else:
            con.execute("CREATE OR REPLACE VIEW task_overrides AS SELECT NULL::VARCHAR AS task_id, "
                        + ", ".join(f"NULL::VARCHAR AS {c}" for c in TASK_FIELDS) + " WHERE false")
        resolved = set(TASK_FIELDS)
        select = ", ".join(f"p.{c}" for c in INDEX_COLUMNS
                           if c != "exact_match" and c not in resolved
                           and c not in PROVENANCE_COLUMNS)
        overridden = self.task_fields_path.exists()  # else no join with the empty overlay
        fields = ", ".join(
            f"coalesce({f'o.{c}, ' if overridden else ''}t.{c}, p.{c}) AS {c}"
            for c in TASK_FIELDS
        )
        # A task's intent / scope / template are properties of the task: every run sharing a
        # task id shows the same values (a task file's override, else the most frequent known
        # value across runs, ties alphabetical; "Other" only counts when nothing else is known).
        picks = ", ".join(
            f"first({c} ORDER BY n_{c} DESC, {c}) FILTER (WHERE {c} IS NOT NULL"
            + (f" AND {c} <> 'Other'" if c == "intent" else "") + f") AS {c}"
            for c in TASK_FIELDS
        )
        counts = ", ".join(
            f"count(*) OVER (PARTITION BY task_id, {c}) AS n_{c}" for c in TASK_FIELDS
        )
        # Materialised once per change of the parts (a temporary table of one row per task):
        # as a view, its window functions ran again in every query, seconds at a million rows.
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE task_consensus AS
            SELECT task_id, {picks}
            FROM (SELECT task_id, {", ".join(TASK_FIELDS)}, {counts} FROM parts)
            GROUP BY task_id"""
        )
        # An overlay row replaces the stored exact match even when it is NULL (unscored).
        exact = "CASE WHEN s.id IS NOT NULL THEN s.exact_match ELSE p.exact_match END"
        scored = "LEFT JOIN scores s USING (id)"
        if not self.scores_path.exists():
            # No overlay (nothing re-scored): no join. Probing a million ids against an
            # empty table still cost a hash join per query (60 ms of a Browse count).
            exact, scored = "p.exact_match", ""
        con.execute(
            f"""CREATE OR REPLACE VIEW trajectories AS
            SELECT {select}, {fields},
                   {exact} AS exact_match,
                   coalesce(p.recorded_success, {exact}) AS success
            FROM parts p {scored}
            LEFT JOIN task_consensus t USING (task_id)
            {"LEFT JOIN task_overrides o USING (task_id)" if overridden else ""}"""
        )
        # Outcomes only (no task consensus, whose window functions dominate at a million
        # rows): what counts and outcome lists need.
        con.execute(
            f"""CREATE OR REPLACE VIEW outcomes AS
            SELECT p.id, p.run, p.model, p.task_id, p.rollout, p.recorded_success,
                   {exact} AS exact_match
            FROM parts p {scored}"""
        )
        self._local.signature = signature
        return con

    def _remote_dataset(self, files: list[str]) -> ds.Dataset:
        """The listed parts as one Arrow dataset whose footers are read once, here: every
        later query then skips a HEAD and a footer GET per part (parts never change), and row
        groups are pruned by their id statistics without touching the store."""
        assert self.remote is not None
        fmt = ds.ParquetFileFormat()
        fragments = []
        with _store_errors():
            sizes = self.remote.sizes()
        with _store_errors_from_os():
            for path in files:
                fragment = fmt.make_fragment(path, filesystem=self._fs,
                                             file_size=sizes.get(Path(path).name))
                fragment.ensure_complete_metadata()
                fragments.append(fragment)
        return ds.FileSystemDataset(fragments, schema=INDEX_SCHEMA, format=fmt,
                                    filesystem=self._fs)

    def query_df(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run a read query over the ``trajectories`` view and return a pandas DataFrame."""
        return self.connect().execute(sql, params or []).df()

    def frame(self) -> Any:
        """Every trajectory's index columns (no payloads): what statistics work on."""
        return self.query_df("SELECT * FROM trajectories")

    def get(self, trajectory_id: str) -> Trajectory | None:
        row = self.connect().execute(
            "SELECT payload FROM parts WHERE id = ? LIMIT 1", [trajectory_id]
        ).fetchone()
        if row is None:
            return None
        return Trajectory.model_validate_json(row[0])

    def summary(self, success_source: str = "recorded") -> dict[str, int]:
        """Counts; ``failed`` and ``unscored`` follow ``success_source`` (see docs/scoring.md)."""
        success = success_expression(success_source)
        row = self.connect().execute(
            f"""SELECT count(*), count(DISTINCT task_id), count(DISTINCT run),
                      count(*) FILTER (WHERE NOT {success}),
                      count(*) FILTER (WHERE {success} IS NULL),
                      count(*) FILTER (WHERE recorded_success IS NOT NULL
                                       AND recorded_success <> exact_match)
               FROM outcomes"""
        ).fetchone()
        assert row is not None
        keys = ("trajectories", "tasks", "runs", "failed", "unscored", "outcome_disagreements")
        return {k: int(v or 0) for k, v in zip(keys, row, strict=True)}

    def list(self, *, failed: bool = False, unscored: bool = False, run: str | None = None,
             limit: int | None = None,
             success_source: str = DEFAULT_SUCCESS_SOURCE) -> list[dict[str, Any]]:
        """Trajectories with ``success`` (None when unscored) and ``outcome``
        (``success`` | ``failure`` | ``unscored``)."""
        success = success_expression(success_source)
        where, params = [], []
        if failed:
            where.append(f"NOT {success}")
        if unscored:
            where.append(f"{success} IS NULL")
        if run:
            where.append("run = ?")
            params.append(run)
        sql = f"SELECT id, run, model, task_id, {success} AS success FROM outcomes"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY run, task_id, rollout, id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        rows = self.connect().execute(sql, params).fetchall()
        keys = ("id", "run", "model", "task_id", "success")
        return [{**dict(zip(keys, r, strict=True)), "outcome": outcome_name(r[4])}
                for r in rows]


def outcome_name(success: bool | None) -> str:
    """How an outcome is shown: ``success``, ``failure`` or ``unscored`` (no ground truth and
    no recorded outcome)."""
    if success is None or (isinstance(success, float) and success != success):
        return "unscored"
    return "success" if success else "failure"


class _StagedImport:
    """Rows on their way into the workspace: deduplicated, written to hidden parts in chunks,
    and made visible together by ``commit`` (or deleted by ``abort``)."""

    CHUNK = 10_000

    def __init__(self, ws: Workspace, seen: set[str]) -> None:
        self.ws = ws
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
            self.staged.append(self.ws._stage_part(self.rows))
            self.rows = []

    def commit(self) -> None:
        self._flush()
        for tmp, final in self.staged:
            self.ws._place(tmp, final)
        if self.staged:
            self.ws._publish([final for _, final in self.staged])
        self.staged = []

    def abort(self) -> None:
        for tmp, _ in self.staged:
            self.ws._discard(tmp)
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


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """Object-store failures (no such bucket, refused credentials, no answer) as the one-line
    errors the CLI and the app show for workspace problems."""
    try:
        yield
    except ObjectStoreError as err:
        raise WorkspaceError(str(err)) from None


@contextlib.contextmanager
def _store_errors_from_os() -> Iterator[None]:
    """A part listed in the manifest that cannot be read (deleted by hand, access revoked)."""
    try:
        yield
    except OSError as err:
        raise WorkspaceError(f"cannot read a trajectory part: {err}") from None


def _content_sha(path: Path) -> str:
    """The content hash provenance records (``import_workers.file_keys``)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        return "INTEGER"
    if pa.types.is_floating(t):
        return "DOUBLE"
    return "VARCHAR"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)
