"""The import's file workers: each parses whole files (in a process pool, or in-process for one
worker), drops records already stored, and stages its new rows as hidden parts; the workspace
publishes what they staged in one commit."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import multiprocessing
import os
import sys
import threading
import types
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from trajectories.importers import ImportProblem
from trajectories.importers.detect import iter_file
from trajectories.importers.mapping import Mapping
from trajectories.importers.tasks import TaskFile
from trajectories.model import Trajectory
from trajectories.rows import (
    SCHEMA_KEY,
    Provenance,
    document_row,
    index_row,
    remove_part,
    stage_rows,
)

#: Schema keys of importers before this one: a file whose key under one of them is among the
#: workspace's imported sources was read before by an older importer (its rows may be stale).
OLDER_SCHEMA_KEYS = ("1", "2")


@dataclass(frozen=True)
class FileSpec:
    """What every worker needs to read files the same way (picklable)."""

    parts_dir: str
    fmt: str
    run: str | None
    model: str | None
    mapping: Mapping | None
    tasks: TaskFile | None
    skip_invalid: bool
    #: The object store's pyarrow filesystem (None: parts_dir is a local folder).
    filesystem: pafs.FileSystem | None = None
    #: With ``tasks``: a trajectory no task row matches is a rejected record, not imported.
    require_tasks: bool = False


@dataclass(frozen=True)
class FileKeys:
    """A file's identity: ``content`` (sha256 of its bytes) and ``key`` (bytes, name and
    import options, ``source_key``)."""

    content: str
    key: str
    #: The keys older importers (``OLDER_SCHEMA_KEYS``) gave the same bytes, name and options.
    older: tuple[str, ...] = ()


#: Stored ids an earlier import of the same file wrote (by an older importer or other
#: options): the re-import writes those records again instead of taking them as duplicates,
#: and the workspace retires the old rows in the same publish.
PriorIds = Callable[[Path, FileKeys], frozenset[str]]


@dataclass
class FileResult:
    """One file's import: staged parts with their ids, duplicates of stored records, rejects."""

    records: int = 0
    duplicates: int = 0
    source_key: str | None = None
    content_sha: str | None = None
    #: Not parsed: imported whole before by this importer with these options.
    skipped: bool = False
    #: The stored rows this import replaces (``PriorIds``), as given to the worker.
    prior: frozenset[str] = frozenset()
    #: When ``prior`` is not empty: each record's (id, run, task_id, rollout) by position
    #: (None for a rejected record), so old rows can be matched to their new ids.
    positions: list[tuple[str, str, str, int | None] | None] = field(default_factory=list)
    parts: list[tuple[Path, Path, list[str]]] = field(default_factory=list)
    rejected: list[tuple[ImportProblem, str, str]] = field(default_factory=list)
    #: Records read, by the run they belong to (new rows and duplicates alike).
    runs: dict[str, int] = field(default_factory=dict)
    #: With a task file: trajectories it matched, and where the others are (with why).
    task_matched: int = 0
    task_unmatched: list[str] = field(default_factory=list)


#: Ids stored before this import, as each worker was given them.
_STORED_IDS: set[str] = set()
#: Keys of files imported whole before (``Parts.imported_sources``).
_KNOWN_SOURCES: set[str] = set()
#: A staged part is written once its rows' payloads reach this size: bounded worker memory.
_PART_BYTES = 64 * 1024 * 1024


def _worker_init(stored: tuple[set[str], set[str]]) -> None:
    global _STORED_IDS, _KNOWN_SOURCES
    _STORED_IDS, _KNOWN_SOURCES = stored


def _pool_worker_init(stored: tuple[set[str], set[str]]) -> None:
    """A pool worker's start: it dies with the importing process, then takes the ids."""
    _exit_with_importer()
    _worker_init(stored)


def _exit_with_importer() -> None:
    """End this worker when the process that started it (the import) ends, however it ends,
    ``kill -9`` included.

    A worker does not notice the import's death by itself: it waits for work on queues whose
    write ends the other workers hold too, so it never reads end-of-file (killed imports left
    3-4 processes each, workers, the fork server and the resource tracker, running for
    minutes and still writing staged parts). ``PR_SET_PDEATHSIG`` is no help: a worker's OS
    parent is the fork server, not the import, and the fork server's parent is whichever
    thread of the import started it (a Streamlit script thread ends after every run, killing
    a fork server another session's import may be using). multiprocessing gives every child
    a sentinel that becomes readable when its creator's end of a pipe closes, which the
    kernel does when the creator dies: a daemon thread waits on it and exits the process.
    The fork server and the resource tracker then exit by themselves, as each does once every
    process holding its pipe (the import and its workers) has gone. Works on every platform
    multiprocessing runs on; the exit waits for the main thread's current C call (a parse, a
    part write) to let go of the interpreter lock, tens of milliseconds for real files."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    sentinel = parent.sentinel
    threading.Thread(target=_exit_when_ready, args=(sentinel,), daemon=True,
                     name="exit-with-importer").start()


def _exit_when_ready(sentinel: int) -> None:
    from multiprocessing.connection import wait

    wait([sentinel])
    # No cleanup: the import is gone, nothing here is wanted, and the next import removes the
    # staged parts this worker may leave (``Parts.clean_stale_staging``).
    os._exit(1)


def _parse_file_in_worker(spec: FileSpec, path: Path, *, keys: FileKeys | None,
                          prior: frozenset[str]) -> FileResult:
    """``_parse_file`` in a pool worker, which then gives the file's freed memory back."""
    try:
        return _parse_file(spec, path, keys=keys, prior=prior)
    finally:
        return_freed_memory()


#: A worker keeps the memory its last file freed while it is resident below this size.
TRIM_ABOVE_MB = 288


def return_freed_memory(above_mb: float = TRIM_ABOVE_MB) -> bool:
    """Hand memory freed by the last file back to the system once the worker holds more than
    ``above_mb`` (True when it did). Without this a worker's resident size only grew from file
    to file (about 300 -> 490 MB over 25 files): glibc keeps freed heap pages (and raises its
    mmap threshold after the first large buffer is freed, so the next file's bytes come from
    the heap too), and Arrow's allocator keeps its own. Not after every file: the next file
    faults the returned pages in again. For 50,000 real-layout records (2 workers) returning
    after every file cost 3.7-4.0 CPU s of system time, above 288 MB 2.1-2.3 s, for a peak of
    716-760 MB PSS in all instead of 646-661."""
    if _resident_mb() < above_mb:
        return False
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return True


def _resident_mb() -> float:
    """This process's resident size (infinite where /proc is missing: memory is then always
    returned)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return math.inf


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (None elsewhere). Looked up on first use: ctypes is not loaded
    for commands that never import."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


def _no_prior(path: Path, keys: FileKeys) -> frozenset[str]:
    return frozenset()


def parse_files(spec: FileSpec, paths: list[Path], stored: tuple[set[str], set[str]],
                 workers: int | None,
                 progress: Callable[[int, int, int], None] | None,
                 prior: PriorIds = _no_prior) -> Generator[FileResult]:
    """Each file's result, in file order; files are parsed in parallel by forked workers.
    A file imported whole before is not parsed again unless ``prior`` names rows of it that
    this import replaces."""
    count = min(workers or os.cpu_count() or 1, len(paths))
    if count <= 1:
        _worker_init(stored)
        try:
            for done, path in enumerate(paths):
                def tick(records: int, done: int = done) -> None:
                    if progress:
                        progress(done, len(paths), records)
                keys = file_keys(spec, path)
                own = prior(path, keys) if keys else frozenset()
                if keys is not None and keys.key in stored[1] and not own:
                    yield FileResult(source_key=keys.key, content_sha=keys.content,
                                     skipped=True)
                    continue
                yield _parse_file(spec, path, tick, keys=keys, prior=own)
        finally:
            _worker_init((set(), set()))
        return
    # The files' keys are read here, before any worker starts: a re-import of files imported
    # whole before then starts no process at all (starting the pool and its fork server costs
    # seconds on a loaded machine), and a worker is never sent a file only to skip it. Hashing
    # here overlaps the workers' parsing of the files submitted before.
    # (Threads: sha256 lets go of the GIL on large buffers, so the files hash on every core.)
    pool: ProcessPoolExecutor | None = None
    pending: list[Future[FileResult] | FileResult] = []
    hashers = ThreadPoolExecutor(count)
    try:
        all_keys = hashers.map(lambda path: file_keys(spec, path), paths)
        for path, keys in zip(paths, all_keys, strict=True):
            own = prior(path, keys) if keys else frozenset()
            if keys is not None and keys.key in stored[1] and not own:
                pending.append(FileResult(source_key=keys.key, content_sha=keys.content,
                                          skipped=True))
                continue
            if pool is None:
                pool = _start_pool(count, stored)
            with _without_main_script():  # a submit may start a worker
                pending.append(pool.submit(_parse_file_in_worker, spec, path, keys=keys,
                                           prior=own))
        for item in pending:
            yield item if isinstance(item, FileResult) else item.result()
    finally:
        hashers.shutdown(wait=True, cancel_futures=True)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _start_pool(count: int, stored: tuple[set[str], set[str]]) -> ProcessPoolExecutor:
    # forkserver, not fork: this process may run DuckDB or Arrow threads, and a forked copy of
    # a threaded process can hang or crash. The server preloads this module, so workers start
    # in milliseconds; the stored ids reach each worker once, pickled.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(count, mp_context=context, initializer=_pool_worker_init,
                               initargs=(stored,))


@contextlib.contextmanager
def _without_main_script() -> Iterator[None]:
    """Start workers without re-running the caller's main script in them.

    A new worker (and the fork server) imports the parent's ``__main__`` file before it runs
    anything. Under the CLI that is harmless, but a Streamlit page, or a test that ran one, is a
    script without a ``__name__`` guard, and importing it in a worker crashes that worker. The
    workers only need this module, so they get an empty main while they start (each submit
    may start one)."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _parse_file(spec: FileSpec, path: Path, tick: Callable[[int], None] | None = None, *,
                keys: FileKeys | None, prior: frozenset[str] = frozenset()) -> FileResult:
    """Parse one file and stage its new rows as hidden parts (runs in a worker). ``keys``:
    the file's (None: unreadable, the parser says why); ``prior``: stored ids of an earlier
    import of this file, written again (with this import's provenance) as the old rows go."""
    result = FileResult(source_key=keys.key if keys else None,
                        content_sha=keys.content if keys else None, prior=prior)
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    size = 0
    try:
        items = iter_file(path, spec.fmt, run=spec.run, model=spec.model,
                          mapping=spec.mapping, tasks=spec.tasks, prepare=True)
        for item in items:
            position = result.records
            result.records += 1
            if tick and result.records % 1000 == 0:
                tick(result.records)
            if item.problem is not None:
                if prior:
                    result.positions.append(None)
                result.rejected.append((item.problem, item.location, item.raw))
                if not spec.skip_invalid:
                    # The whole import fails on this problem: stop using records, but read
                    # to the end, so a file damaged further on fails as a whole, as it did
                    # when a JSON list was parsed whole before its first record.
                    for _ in items:
                        pass
                    break
                continue
            prepared, traj = item.prepared, item.trajectory
            if traj is not None and spec.tasks is not None:
                unmatched = _count_task_match(result, traj, f"{path.name} {item.location}")
                if unmatched is not None and spec.require_tasks:
                    problem = ImportProblem(str(path), unmatched, item.location, "task")
                    if prior:
                        result.positions.append(None)
                    result.rejected.append((problem, item.location, traj.task.question))
                    if not spec.skip_invalid:
                        for _ in items:
                            pass
                        break
                    continue
            if prepared is not None:
                tid = prepared.id
            elif traj is not None:
                if traj.id is None:
                    traj = traj.with_id()
                tid = str(traj.id)
            else:
                continue
            provenance = (Provenance(keys.content, position, keys.key) if keys is not None
                          else None)
            row = (document_row(prepared.doc, prepared.payload, str(path), provenance)
                   if prepared else index_row(traj, str(path), provenance))  # type: ignore[arg-type]
            result.runs[row["run"]] = result.runs.get(row["run"], 0) + 1
            if prior:
                result.positions.append((tid, row["run"], row["task_id"], row["rollout"]))
            if tid in seen or (tid in _STORED_IDS and tid not in prior):
                result.duplicates += 1
                continue
            seen.add(tid)
            rows.append(row)
            size += len(row["payload"])
            if size >= _PART_BYTES:
                result.parts.append(stage_rows(Path(spec.parts_dir), rows, spec.filesystem))
                rows, size = [], 0
        if rows:
            result.parts.append(stage_rows(Path(spec.parts_dir), rows, spec.filesystem))
    except ImportProblem as problem:
        # The file as a whole cannot be read (not JSON, nested too deep, an unknown layout):
        # it is one rejected "record", so a folder of files reports every bad file, and
        # --skip-invalid imports the others.
        for tmp, _, _ in result.parts:
            remove_part(tmp, spec.filesystem)
        result.parts = []
        result.rejected.append((problem, problem.location or "file", ""))
        return result
    except BaseException:
        for tmp, _, _ in result.parts:
            remove_part(tmp, spec.filesystem)
        raise
    if result.rejected and not spec.skip_invalid:
        for tmp, _, _ in result.parts:
            remove_part(tmp, spec.filesystem)
        result.parts = []
    return result


def _count_task_match(result: FileResult, traj: Trajectory, location: str) -> str | None:
    """Count whether a task row matched ``traj``; for one that did not, say why (also kept in
    ``result.task_unmatched``)."""
    extra = traj.model_extra or {}
    if extra.get("task_match"):
        result.task_matched += 1
        return None
    question = " ".join((traj.task.question or "").split())
    why = str(extra.get("task_match_problem") or "no task row matches it")
    message = f"{why}: {question[:80]!r}"
    result.task_unmatched.append(f"{location}: {message}")
    return message


def source_key(spec: FileSpec, path: Path) -> str | None:
    """What decides a file's trajectories: its bytes, its name (run identity comes from it)
    and the import options. None when unreadable (the parser then says why)."""
    keys = file_keys(spec, path)
    return keys.key if keys else None


def file_keys(spec: FileSpec, path: Path) -> FileKeys | None:
    """The file's content hash, its ``source_key`` and the keys older importers gave it.
    None when unreadable."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return FileKeys(digest.copy().hexdigest()[:32],
                    _with_options(digest.copy(), spec, path, SCHEMA_KEY),
                    tuple(_with_options(digest.copy(), spec, path, older)
                          for older in OLDER_SCHEMA_KEYS))


def _with_options(digest: Any, spec: FileSpec, path: Path, schema_key: str) -> str:
    options = json.dumps([path.name, spec.fmt, spec.run, spec.model, repr(spec.mapping),
                          spec.tasks, schema_key]
                         + ([True] if spec.require_tasks else []), sort_keys=True, default=str)
    digest.update(options.encode("utf-8", "surrogatepass"))
    return str(digest.hexdigest()[:32])
