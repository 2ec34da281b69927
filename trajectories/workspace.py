"""The workspace: imported trajectories as immutable Parquet parts, queried with DuckDB.

Layout under the workspace root::

    trajectories/part-*.parquet  one row per trajectory (index columns + the full JSON payload)
    scores.parquet               optional re-score overlay written by ``faillab score``
    workspace.json               settings of this workspace (the EHR database to re-run SQL on)
    ehr.duckdb                   the demo's synthetic EHR database, when built by ``faillab demo``
    annotations.sqlite           the annotation store (default; PostgreSQL for teams)

Parts are written to a hidden temporary name and renamed into place, so a reader in another
process (the app) never sees half a file and never takes a lock; writers serialise on a lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
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
import pyarrow.parquet as pq

from trajectories.importers import ImportProblem
from trajectories.importers.detect import iter_file
from trajectories.importers.mapping import Mapping
from trajectories.model import Trajectory
from trajectories.scoring import SCORER_VERSION, score_task

PART_GLOB = "part-*.parquet"
ROW_GROUP_SIZE = 1024  # small groups: a lookup by id reads one group thanks to min/max stats

INDEX_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("run", pa.string()),
        ("model", pa.string()),
        ("temperature", pa.float64()),
        ("rollout", pa.int32()),
        ("task_id", pa.string()),
        ("question", pa.string()),
        ("intent", pa.string()),
        ("scope", pa.string()),
        ("template_id", pa.string()),
        ("split", pa.string()),
        ("pair_id", pa.string()),
        ("noise_type", pa.string()),
        ("variant", pa.string()),
        ("reference_sql", pa.string()),
        ("answer_format", pa.string()),
        ("ground_truth", pa.string()),
        ("final_answer", pa.string()),
        ("n_steps", pa.int32()),
        ("n_turns", pa.int32()),
        ("n_errors", pa.int32()),
        ("recorded_success", pa.bool_()),
        ("recorded_reward", pa.float64()),
        ("exact_match", pa.bool_()),
        ("scorer_version", pa.string()),
        ("source_file", pa.string()),
        ("payload", pa.string()),
    ]
)
INDEX_COLUMNS = [f.name for f in INDEX_SCHEMA if f.name != "payload"]
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
    rejects_file: Path | None = None
    problems: list[ImportProblem] = field(default_factory=list)

    def as_json(self) -> dict[str, int]:
        return {"imported": self.imported, "duplicates": self.duplicates, "rejected": self.rejected}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _reject_line(reject: dict[str, str]) -> str:
    """One rejects-file line; text that is not valid Unicode (lone surrogates) is escaped."""
    line = _json(reject)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(reject, ensure_ascii=True)
    return line + "\n"


def score(traj: Trajectory) -> bool | None:
    """Exact match under the task's own rules; None when the task has no ground truth."""
    return score_task(traj.final_answer, traj.task)


def index_row(traj: Trajectory, source_file: str | None = None) -> dict[str, Any]:
    """The flat row stored for a trajectory (CONTRACTS.md lists the columns)."""
    task, run = traj.task, traj.run
    outcome = traj.outcome
    return {
        "id": traj.id,
        "run": run.name,
        "model": run.model,
        "temperature": run.temperature,
        "rollout": run.rollout,
        "task_id": task.id,
        "question": task.question,
        "intent": task.intent,
        "scope": task.scope,
        "template_id": task.template_id,
        "split": task.split,
        "pair_id": task.pair_id,
        "noise_type": task.noise_type,
        "variant": task.variant,
        "reference_sql": task.reference_sql,
        "answer_format": task.answer_format,
        "ground_truth": _json(task.ground_truth),
        "final_answer": _json(traj.final_answer),
        "n_steps": len(traj.steps),
        "n_turns": traj.n_turns,
        "n_errors": sum(1 for s in traj.steps if s.error),
        "recorded_success": outcome.success if outcome else None,
        "recorded_reward": outcome.reward if outcome else None,
        "exact_match": score(traj),
        "scorer_version": SCORER_VERSION,
        "source_file": source_file,
        "payload": traj.model_dump_json(),
    }


class Workspace:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.parts_dir = self.root / "trajectories"
        self._local = threading.local()

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
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        return self

    def exists(self) -> bool:
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
        if self.parts_dir.exists():
            stale += self.parts_dir.glob(".part-*.tmp")
        for path in stale:
            path.unlink(missing_ok=True)
        return len(stale)

    def part_files(self) -> list[Path]:
        return sorted(self.parts_dir.glob(PART_GLOB)) if self.parts_dir.exists() else []

    def existing_ids(self) -> set[str]:
        files = self.part_files()
        if not files:
            return set()
        table = pq.ParquetDataset([str(f) for f in files]).read(columns=["id"])
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
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        rows.sort(key=lambda r: r["id"])
        table = pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
        name = f"part-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.parts_dir / f".{name}.tmp"
        pq.write_table(table, tmp, row_group_size=ROW_GROUP_SIZE, compression="zstd")
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
    ) -> ImportReport:
        """Import files all-or-nothing: any invalid record (without ``skip_invalid``) raises its
        ``ImportProblem`` and nothing is written. Records stream into hidden staged parts that
        are renamed into place only when every file has been read, so memory stays bounded.
        ``progress(files_done, files, records_read)`` is called after each file and every
        1,000 records."""
        report = ImportReport(files=len(paths))
        rejects: list[dict[str, str]] = []
        records = 0
        with self._write_lock():
            batch = _StagedImport(self, self.existing_ids())
            try:
                for done, path in enumerate(paths, start=1):
                    for item in iter_file(Path(path), fmt, run=run, model=model,
                                           mapping=mapping, tasks=tasks):
                        records += 1
                        if progress and records % 1000 == 0:
                            progress(done - 1, len(paths), records)
                        if item.problem is not None:
                            if not skip_invalid:
                                raise item.problem
                            report.problems.append(item.problem)
                            rejects.append({"file": str(path), "location": item.location,
                                            "error": str(item.problem), "record": item.raw})
                        elif item.trajectory is not None:
                            batch.offer(item.trajectory, str(path))
                    if progress:
                        progress(done, len(paths), records)
                batch.commit()
            except BaseException:
                batch.abort()
                raise
            finally:
                self._invalidate()
            if rejects:
                # Written under the lock with a unique name: two imports in the same second
                # each keep their own rejects file.
                stamp = time.strftime("%Y%m%dT%H%M%S")
                rejects_path = self.root / f"rejects-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
                _atomic_write_text(rejects_path, "".join(_reject_line(r) for r in rejects))
                report.rejects_file = rejects_path
        report.imported, report.duplicates = batch.added, batch.duplicates
        report.rejected = len(rejects)
        return report

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
            pf = pq.ParquetFile(part)
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
        if con is None:
            con = duckdb.connect(":memory:")
            self._local.con = con
        files = [str(f) for f in self.parts_dir.glob(PART_GLOB)] if self.exists() else []
        if files:
            file_list = "[" + ", ".join(_sql_str(f) for f in sorted(files)) + "]"
            con.execute(f"CREATE OR REPLACE VIEW parts AS SELECT * FROM read_parquet({file_list})")
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
                           if c != "exact_match" and c not in resolved)
        fields = ", ".join(
            f"coalesce(o.{c}, t.{c}, p.{c}) AS {c}" for c in TASK_FIELDS
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
        con.execute(
            f"""CREATE OR REPLACE VIEW task_consensus AS
            SELECT task_id, {picks}
            FROM (SELECT task_id, {", ".join(TASK_FIELDS)}, {counts} FROM parts)
            GROUP BY task_id"""
        )
        # An overlay row replaces the stored exact match even when it is NULL (unscored).
        exact = "CASE WHEN s.id IS NOT NULL THEN s.exact_match ELSE p.exact_match END"
        con.execute(
            f"""CREATE OR REPLACE VIEW trajectories AS
            SELECT {select}, {fields},
                   {exact} AS exact_match,
                   coalesce(p.recorded_success, {exact}) AS success
            FROM parts p LEFT JOIN scores s USING (id)
            LEFT JOIN task_consensus t USING (task_id)
            LEFT JOIN task_overrides o USING (task_id)"""
        )
        self._local.signature = signature
        return con

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
               FROM trajectories"""
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
        sql = f"SELECT id, run, model, task_id, {success} AS success FROM trajectories"
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
            os.replace(tmp, final)
        self.staged = []

    def abort(self) -> None:
        for tmp, _ in self.staged:
            tmp.unlink(missing_ok=True)
        self.staged = []
        self.rows = []


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
