"""The parts of a workspace: where they are (a folder or an object store), the manifest, the
write lock, publishing (one manifest replace makes an import, a compaction or a removal visible
all at once), cleaning what dead writers and retired parts leave behind, and rewriting parts
without some rows.

Parts are written to a hidden temporary name and renamed into place, then published together
by replacing the manifest in one rename, so a reader in another process (the app) never sees
half a file or half an import and never takes a lock; writers serialise on a lock file. In an
object store (``trajectories.objectstore``) a part is written under its final name and the
manifest alone keeps it hidden until it is published.

``Parts`` is the one object every other side of a ``trajectories.workspace.Workspace`` is
given (the queries, compaction, garbage collection, the score overlay, imports): each side
holds it instead of inheriting from it, so what each side owns is its own. A side that keeps
what it read (the queries' DuckDB databases) asks to be told when a writer in this process
changed the data (``when_changed``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from faillab_core.errors import FaillabError
from faillab_core.locks import MachineLock
from trajectories.objectstore import (
    ObjectStoreError,
    ObjectStoreUnreachableError,
    RemoteParts,
    S3Location,
    filesystem_from_settings,
    is_remote,
)
from trajectories.rows import INDEX_SCHEMA, PART_OPTIONS, part_name, rows_table, stage_rows

if TYPE_CHECKING:
    from faillab_core.settings import Settings

PART_GLOB = "part-*.parquet"
MANIFEST = "manifest.json"  # the visible parts; replaced atomically by each writer
#: Retired parts (replaced by compaction) stay this long for readers that still use them.
RETIRED_GRACE_S = 300.0


#: Reads of a manifest that fails its checksum before giving up (about 1.5 s in all).
MANIFEST_READS = 5
#: How long readers reuse an object store's manifest (``Parts.visible_parts``): a page run asks
#: the workspace's signature from each loader it calls, and each ask was a GET of the manifest.
#: Another process's import shows up at most this much later; this process's own at once.
REMOTE_MANIFEST_REUSE_S = 1.0
#: A reader asking after this share of the reuse time gets the kept manifest and starts one
#: read of the next in the background: with a team labelling, a page run came every few
#: tenths of a second and one in three waited for the GET (5% of a key's time on a replica).
REMOTE_MANIFEST_REFRESH_SHARE = 0.5


def _manifest_digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _checked_manifest(text: str) -> tuple[str | None, dict[str, Any]]:
    """(what is wrong with the manifest text, or None; its content). A manifest written
    before checksums has none and is taken as it is."""
    try:
        data = json.loads(text)
    except ValueError as err:
        return f"not valid JSON ({err})", {}
    if not isinstance(data, dict) or not isinstance(data.get("parts"), list):
        return 'expected {"parts": [...]}', {}
    digest = data.pop("sha256", None)
    if digest is not None and digest != _manifest_digest(data):
        return "content does not match its checksum (read while being replaced?)", {}
    return None, data


class WorkspaceError(FaillabError):
    """A workspace problem the user can act on (missing database, bad settings file)."""


class WorkspaceUnreachableError(WorkspaceError):
    """The workspace's object store did not answer: the same command can be run again."""


class Parts:
    """A workspace's parts, their manifest and their write lock (see the module docstring)."""

    def __init__(self, root: Path | str, trajectories_url: str = "",
                 filesystem: pafs.FileSystem | None = None,
                 settings: Settings | None = None) -> None:
        """``trajectories_url`` puts the parts and their manifest at ``s3://bucket/prefix``
        instead of ``root/trajectories`` (empty: the local folder); its S3 client is
        ``filesystem``, else the one ``settings`` describe."""
        self.root = Path(root)
        self.parts_dir = self.root / "trajectories"
        #: The object store holding the parts (None: they are local files under parts_dir).
        self.remote: RemoteParts | None = None
        #: pyarrow filesystem for part paths (None: local paths, as plain Path objects).
        self.fs: pafs.FileSystem | None = None
        #: Told after each change this process makes (``when_changed``), held weakly.
        self._listeners: list[weakref.WeakMethod[Callable[[], None]]] = []
        # The object store's manifest as last read for readers: (generation, when, manifest);
        # the generation counts this process's changes, so a read begun before one is not kept.
        self._recent_manifest: tuple[int, float, dict[str, Any] | None] | None = None
        self._generation = 0
        #: Whether a background read of the manifest is under way (at most one).
        self._refreshing = False
        #: The clock the manifest's age is told by (a test sets its own).
        self.clock: Callable[[], float] = time.monotonic
        self._refresh_lock = threading.Lock()
        url = trajectories_url
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
            self.fs = filesystem
            self.remote = RemoteParts(location, self.fs)
            # Part paths stay Path objects ("bucket/prefix/part-….parquet") read through fs.
            self.parts_dir = Path(location.base)

    @property
    def trajectories_location(self) -> str:
        """Where the parts are, for messages: a folder or an s3:// URL (never the local
        folder of an object-store workspace, which holds only settings and locks)."""
        return self.remote.location.url if self.remote is not None else str(self.parts_dir)

    def place(self, staged: Path, final: Path) -> None:
        """Make a staged part final: a rename on disk; in an object store it was written
        under its final name already (still invisible until the manifest lists it)."""
        if self.remote is None:
            os.replace(staged, final)

    def discard(self, part: Path) -> None:
        if self.remote is None:
            part.unlink(missing_ok=True)
        else:
            self.remote.delete(part.name)

    def create(self) -> Self:
        if self.remote is not None:
            self.root.mkdir(parents=True, exist_ok=True)  # settings and the write lock
            return self
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def scores_path(self) -> Path:
        """The scores overlay (``trajectories.overlay``)."""
        return self.root / "scores.parquet"

    @property
    def task_fields_path(self) -> Path:
        """Per-task overrides of intent / scope / template_id (``Workspace.set_task_fields``)."""
        return self.root / "task_fields.parquet"

    def exists(self) -> bool:
        if self.remote is not None:
            return self.read_manifest() is not None
        return self.parts_dir.is_dir()

    def when_changed(self, listener: Callable[[], None]) -> None:
        """Have ``listener`` (a bound method) called after each change this process makes to
        the parts or the overlays beside them. Held weakly: a listener's owner is not kept
        alive by the parts it reads (no reference cycle between the two)."""
        self._listeners.append(weakref.WeakMethod(listener))

    def changed(self) -> None:
        """Tell the listeners that this process changed the data (an import, a compaction,
        a removal, a re-score, new task fields); readers in other processes see it by the
        changed signature instead."""
        self._generation += 1
        self._recent_manifest = None
        for ref in list(self._listeners):
            listener = ref()
            if listener is not None:
                listener()

    @contextlib.contextmanager
    def write_lock(self, *, clean: bool = True) -> Iterator[None]:
        """This machine's exclusive write lock; ``clean`` first deletes what dead writers
        left (garbage collection, which only removes what is past the grace period, opts
        out)."""
        self.create()
        lock = MachineLock(self.root / ".write.lock",
                           busy_message=f"another writer holds {self.root}'s write lock")
        try:
            with lock.held():
                if clean:
                    self.clean_stale_staging()
                if self.remote is None and self.read_manifest() is None:
                    # Without a manifest every part file is visible, so a writer killed
                    # while renaming its parts into place would show some of them: list
                    # what is visible now, and the manifest write stays the one commit.
                    self.write_manifest(sorted(p.name for p in
                                               self.parts_dir.glob(PART_GLOB)), {})
                yield
        finally:
            lock.close()

    def clean_stale_staging(self) -> int:
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
            manifest = self.read_manifest()
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
                    self.write_manifest(manifest["parts"],
                                        {n: at for n, at in retired.items() if n not in expired})
        for path in stale:
            path.unlink(missing_ok=True)
        return len(stale) + removed

    def _clean_remote_parts(self) -> int:
        """The object-store side of ``clean_stale_staging``: retired parts past their grace
        period, and unlisted parts older than it. The write lock is per machine, so an unlisted
        part may belong to an import still running elsewhere: only age makes it stale."""
        assert self.remote is not None
        manifest = self.read_manifest()
        retired: dict[str, float] = dict(manifest.get("retired", {})) if manifest else {}
        visible = set(manifest["parts"]) if manifest else set()
        now = time.time()
        expired = {n for n, at in retired.items() if now - float(at) > RETIRED_GRACE_S}
        with store_errors():
            listed = self.remote.objects()
        gone = [name for name, mtime in listed
                if name not in visible and (name in expired
                                            or (name not in retired
                                                and now - mtime > RETIRED_GRACE_S))]
        with store_errors():
            for name in gone:
                self.remote.delete(name)
        if manifest is not None and expired:
            self.write_manifest(manifest["parts"],
                                {n: at for n, at in retired.items() if n not in expired})
        return len(gone)

    @property
    def manifest_path(self) -> Path:
        return self.parts_dir / MANIFEST

    def read_manifest(self) -> dict[str, Any] | None:
        """The list of visible parts (None for a workspace written before manifests: every
        part file is visible).

        An object store can hand a reader a manifest that is being replaced as a mix (the old
        object's length of the new one's bytes): every manifest carries the checksum of its
        own content, and a read that does not match it is read again after a short pause."""
        for attempt in range(MANIFEST_READS):
            try:
                if self.remote is not None:
                    with store_errors():
                        text = self.remote.read_text(MANIFEST)
                    if text is None:
                        return None
                else:
                    text = self.manifest_path.read_text("utf-8")
            except FileNotFoundError:
                return None
            problem, data = _checked_manifest(text)
            if problem is None:
                return data
            if attempt + 1 < MANIFEST_READS:
                time.sleep(0.05 * 2 ** attempt)
        where = self.remote.location.url + "/" + MANIFEST if self.remote is not None \
            else str(self.manifest_path)
        raise WorkspaceError(f"{where}: {problem}")

    def write_manifest(self, parts: Sequence[str], retired: dict[str, float],
                       sources: dict[str, int] | None = None) -> None:
        """Publish a new set of visible parts in one rename: the moment an import or a
        compaction becomes visible to every reader, all at once. ``sources`` (kept when
        None) maps each fully imported file's key to its record count."""
        if sources is None:
            sources = dict((self.read_manifest() or {}).get("sources", {}))
        body = {"parts": sorted(parts), "retired": retired, "sources": sources}
        text = json.dumps({**body, "sha256": _manifest_digest(body)}, indent=0)
        if self.remote is not None:
            with store_errors():
                self.remote.write_text(MANIFEST, text)
        else:
            atomic_write_text(self.manifest_path, text)

    def imported_sources(self) -> dict[str, int]:
        """Files imported whole before (by content, name and import options): a re-import
        of one reports its records as duplicates without parsing it again."""
        return dict((self.read_manifest() or {}).get("sources", {}))

    def part_files(self) -> list[Path]:
        if self.remote is None and not self.parts_dir.exists():
            return []
        manifest = self.read_manifest()
        if manifest is None:
            # Object-store workspaces always had a manifest: no manifest, nothing published.
            return [] if self.remote is not None else sorted(self.parts_dir.glob(PART_GLOB))
        return [self.parts_dir / name for name in manifest["parts"]]

    def visible_parts(self) -> list[Path]:
        """``part_files`` for readers: in an object store, a manifest whose read began less
        than ``REMOTE_MANIFEST_REUSE_S`` ago (and since this process last changed the parts)
        is used again instead of another GET; past half that age, the next is read in the
        background meanwhile. Writers read the manifest itself."""
        if self.remote is None:
            return self.part_files()
        recent = self._recent_manifest
        if recent is None or recent[0] != self._generation \
                or self.clock() - recent[1] > REMOTE_MANIFEST_REUSE_S:
            recent = self._read_recent()
        elif self.clock() - recent[1] > REMOTE_MANIFEST_REFRESH_SHARE * REMOTE_MANIFEST_REUSE_S:
            self._refresh_ahead()
        manifest = recent[2]
        return [] if manifest is None else [self.parts_dir / name for name in manifest["parts"]]

    def _read_recent(self) -> tuple[int, float, dict[str, Any] | None]:
        """Read the manifest for readers and keep it, unless this process changed the parts
        meanwhile or a read begun later was kept first. Its age counts from before the GET."""
        generation = self._generation
        recent = (generation, self.clock(), self.read_manifest())
        with self._refresh_lock:
            kept = self._recent_manifest
            if generation == self._generation and (
                    kept is None or kept[0] != generation or kept[1] < recent[1]):
                self._recent_manifest = recent
        return recent

    def _refresh_ahead(self) -> None:
        """One background read of the manifest at a time, for the readers that come next."""
        with self._refresh_lock:
            if self._refreshing:
                return
            self._refreshing = True

        def refresh() -> None:
            try:
                self._read_recent()
            except Exception:  # the next reader past the reuse time reads it, and says why
                pass
            finally:
                self._refreshing = False

        threading.Thread(target=refresh, name="faillab-manifest-refresh", daemon=True).start()

    def publish(self, added: Sequence[Path], removed: Sequence[Path] = (),
                sources: dict[str, int] | None = None, *,
                replace_sources: bool = False) -> None:
        """Make staged parts (already renamed to their final names) visible and retire
        ``removed``; retired files stay on disk a grace period for readers still on them.
        ``sources`` is merged into the imported-source list, or replaces it with
        ``replace_sources`` (a removal forgets imports)."""
        manifest = self.read_manifest()
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
        known = dict(manifest.get("sources", {})) if manifest and not replace_sources else {}
        self.write_manifest(parts, retired, {**known, **(sources or {})})

    def existing_ids(self) -> set[str]:
        files = self.part_files()
        if not files:
            return set()
        table = pq.ParquetDataset([str(f) for f in files],
                                  filesystem=self.fs).read(columns=["id"])
        return set(table.column("id").to_pylist())

    def parquet_file(self, part: Path) -> pq.ParquetFile:
        if self.fs is None:
            return pq.ParquetFile(part)
        return pq.ParquetFile(str(part), filesystem=self.fs)

    def rewrite_without(self, drop: dict[str, set[str]]) -> tuple[list[tuple[Path, Path]],
                                                                  list[Path]]:
        """Stage a copy of each named part without the given ids (none when nothing is
        left); returns the staged copies and the parts they replace, for one publish."""
        # Imported here: pyarrow.dataset pulls in pandas, ~150 ms that every CLI start paid.
        import pyarrow.dataset as ds

        staged: list[tuple[Path, Path]] = []
        replaced: list[Path] = []
        try:
            for name, ids in sorted(drop.items()):
                part = self.parts_dir / name
                table = ds.dataset(str(part), format="parquet", schema=INDEX_SCHEMA,
                                   filesystem=self.fs).to_table()
                keep = table.filter(pc.invert(pc.is_in(table.column("id"),
                                                       value_set=pa.array(sorted(ids)))))
                replaced.append(part)
                if keep.num_rows:
                    final = self.parts_dir / part_name()
                    tmp = final if self.remote else self.parts_dir / f".{final.name}.tmp"
                    pq.write_table(keep, str(tmp), **PART_OPTIONS, filesystem=self.fs)
                    staged.append((tmp, final))
        except BaseException:
            for tmp, _ in staged:
                self.discard(tmp)
            raise
        return staged, replaced

    def stage_part(self, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
        """Write rows to a hidden temporary part: (staged path, final path), for ``place``
        and ``publish`` (``trajectories.staged_import.StagedRows.commit``)."""
        if self.remote is not None:
            final = stage_rows(self.parts_dir, rows, self.fs)[1]
            return final, final
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        table = rows_table(rows)
        name = part_name()
        tmp = self.parts_dir / f".{name}.tmp"
        pq.write_table(table, tmp, **PART_OPTIONS)
        return tmp, self.parts_dir / name


@contextlib.contextmanager
def store_errors() -> Iterator[None]:
    """Object-store failures (no such bucket, refused credentials, no answer) as the one-line
    errors the CLI and the app show for workspace problems."""
    try:
        yield
    except ObjectStoreUnreachableError as err:
        raise WorkspaceUnreachableError(str(err)) from None
    except ObjectStoreError as err:
        raise WorkspaceError(str(err)) from None


@contextlib.contextmanager
def store_errors_from_os() -> Iterator[None]:
    """A part listed in the manifest that cannot be read (deleted by hand, access revoked)."""
    try:
        yield
    except OSError as err:
        raise WorkspaceError(f"cannot read a trajectory part: {err}") from None


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)

