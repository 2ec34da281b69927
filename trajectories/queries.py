"""The read side of a workspace: a per-thread DuckDB connection whose views read the visible
parts (rebuilt when they change), and the queries the CLI and the app ask of it.

``Queries`` is given the workspace's ``Parts`` and reads through it; what it keeps (the
process's shared database, each thread's connection, the tables kept warm) is its own, and the
parts tell it when this process changed them (``Parts.when_changed``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from trajectories import columns as col
from trajectories.model import Trajectory
from trajectories.outcome import (
    DEFAULT_SUCCESS_SOURCE,
    NO_PEOPLE,
    PeopleVerdicts,
    count_outcomes,
    list_outcomes,
)
from trajectories.parts import Parts, store_errors, store_errors_from_os
from trajectories.rows import INDEX_COLUMNS, INDEX_SCHEMA, JUDGE_COLUMNS, PROVENANCE_COLUMNS

if TYPE_CHECKING:
    import pyarrow.dataset as ds

#: Task fields resolved per task id across runs (and overridable from a task file).
TASK_FIELDS = col.TASK_FIELDS


#: Outcomes kept per state of the data (``Queries.verdict_of``). The Annotate page asks one on
#: every label key; in an object store each ask read a row group of every part over the network
#: (a third of the key's server time with a team on two replicas). An outcome is a few short
#: fields, so thousands cost little.
OUTCOMES_KEPT = 4096
_OUTCOME_KEYS = (col.RECORDED_SUCCESS, col.EXACT_MATCH, col.JUDGED_SUCCESS, col.JUDGE_VERDICT,
                 col.JUDGE_METHOD, col.JUDGE_EVIDENCE)
#: The ``outcomes`` view: these stored columns as they are, then the exact match and the
#: judged outcome (overlaid by re-scoring) and these judge's columns.
_OUTCOMES_STORED = (col.ID, col.RUN, col.MODEL, col.TASK_ID, col.ROLLOUT, col.RECORDED_SUCCESS)
_OUTCOMES_JUDGED = (col.JUDGE_VERDICT, col.JUDGE_METHOD, col.JUDGE_EVIDENCE)


class TableBuild:
    """A shared table being built (``Queries.shared_table``); ``done`` once it is or failed."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.built = False


@dataclass(frozen=True)
class SharedDatabase:
    """The process's DuckDB database over one state of local parts (``Queries.connect``)."""

    #: The ``Queries.signature`` of the parts it reads.
    signature: tuple[Any, ...]
    database: duckdb.DuckDBPyConnection
    #: The shared tables built or being built in it, by name (``Queries.shared_table``).
    tables: dict[str, TableBuild]


class Queries:
    """The query side of a ``Workspace``, reading its ``Parts``."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        #: This thread's connection and the signature it was built for, its light database
        #: (``_outcomes_connection``) and its shared tables.
        self._local = threading.local()
        self._shared: SharedDatabase | None = None
        self._shared_lock = threading.Lock()
        #: Shared tables to build in the background after each change of the parts
        #: (``keep_warm``): name -> select.
        self._warm_tables: dict[str, str] = {}
        #: The last background build started (tests and benchmarks wait for it).
        self.warm_thread: threading.Thread | None = None
        #: Outcomes read (``verdict_of``) and the signature they were read under: parts are
        #: immutable, so an outcome holds until the signature changes.
        self._outcomes: OrderedDict[str, dict[str, Any] | None] = OrderedDict()
        self._outcomes_signature: tuple[Any, ...] | None = None
        self._outcomes_lock = threading.Lock()
        parts.when_changed(self._forget)

    @property
    def shared(self) -> SharedDatabase | None:
        """The process's database over the current local parts, once a query built it."""
        return self._shared

    @property
    def light_database(self) -> duckdb.DuckDBPyConnection | None:
        """This thread's light database (``_outcomes_connection``), if it built one."""
        light = getattr(self._local, "light", None)
        return None if light is None else light[1]

    def _forget(self) -> None:
        """Forget this thread's DuckDB connection and the process's shared database (their
        views name the parts they saw; readers still holding them keep reading those), and
        warm the kept tables again: this process has just changed the parts."""
        self._local.__dict__.pop("con", None)
        self._local.__dict__.pop("signature", None)
        with self._shared_lock:
            self._shared = None
        with self._outcomes_lock:
            self._outcomes.clear()
            self._outcomes_signature = None
        self._warm_in_background()

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

        if self.parts.remote is not None:
            # Listed parts are immutable objects with unique names: the names say it all.
            listed: tuple[Any, ...] = (self.parts.remote.location.url,
                                       *(f.name for f in self.parts.visible_parts()))
        else:
            listed = tuple((f.name, *stamp(f)) for f in self.parts.part_files())
        return (str(self.parts.root.resolve()), listed, stamp(self.parts.scores_path),
                stamp(self.parts.task_fields_path))

    def connect(self) -> duckdb.DuckDBPyConnection:
        """This thread's DuckDB connection whose views read the Parquet parts.

        The views are rebuilt when parts appear (another process imported), so long-lived
        readers see new data without reopening anything. For local parts every thread gets a
        cursor on one in-memory database per state of the parts, shared by the process: the
        views, the task consensus and the tables of ``shared_table`` are built once, not once
        per thread (the app runs each rerun in a new thread). An object-store workspace keeps
        a connection per thread (its Arrow dataset is registered on one connection)."""
        signature = self.signature()
        con: duckdb.DuckDBPyConnection | None = getattr(self._local, "con", None)
        if con is not None and getattr(self._local, "signature", None) == signature:
            return con
        if self.parts.remote is not None:
            # A new connection per change of the parts: an Arrow dataset cannot be registered
            # while a caller's result is still open on the old one, and whoever holds the old
            # connection keeps reading the old parts.
            con = self._build_database()
            self._local.tables = {}
        else:
            with self._shared_lock:
                changed = self._shared is None or self._shared.signature != signature
                if changed:
                    self._shared = SharedDatabase(signature, self._build_database(), {})
                assert self._shared is not None
                con = self._shared.database.cursor()
                self._local.tables = self._shared.tables
            if changed:
                self._warm_in_background()
        self._local.con = con
        self._local.signature = signature
        return con

    def _outcomes_connection(self) -> duckdb.DuckDBPyConnection:
        """A connection for what reads only ``parts`` and ``outcomes`` (summary, list, a fetch
        by id): the full one when the current parts have it in this process, else a light
        database without the task consensus and the ``trajectories`` view, kept per thread.
        The consensus's window functions over every row were most of a fresh process's
        ``faillab summary`` at a million rows (1-2.5 s before its first count)."""
        if self.parts.remote is not None:
            # Each database there reads every part's footer from the store: one per thread.
            return self.connect()
        signature = self.signature()
        con: duckdb.DuckDBPyConnection | None = getattr(self._local, "con", None)
        if con is not None and getattr(self._local, "signature", None) == signature:
            return con
        with self._shared_lock:
            full = self._shared is not None and self._shared.signature == signature
        if full:
            return self.connect()
        light = getattr(self._local, "light", None)
        if light is None or light[0] != signature:
            light = self._local.light = (signature, self._build_database(consensus=False))
        return light[1]

    def _build_database(self, *, consensus: bool = True) -> duckdb.DuckDBPyConnection:
        """A new in-memory database with the views (and the task consensus) over the parts;
        without ``consensus``, only ``parts``, ``scores`` and ``outcomes``."""
        con = duckdb.connect(":memory:")
        # Parts are immutable files with unique names, so their footers (schema, row-group
        # statistics) can be kept: a fetch by id then prunes to one row group without
        # reading any footer again (13 -> 4 ms at 300,000 rows; summary and Browse gain too).
        con.execute("SET GLOBAL parquet_metadata_cache = true")  # cursors too
        # The parts the signature names (an object store's manifest is read once for both).
        files = [str(f) for f in self.parts.visible_parts()]
        if files and self.parts.remote is not None:
            # DuckDB reads the objects through an Arrow dataset (module docstring of
            # trajectories.objectstore says why not httpfs); projections and filters are
            # pushed into the scan, so a lookup by id reads one row group per part.
            con.register("parts_arrow", self._remote_dataset(sorted(files)))
            con.execute(f"CREATE OR REPLACE VIEW {col.PARTS} AS SELECT * FROM parts_arrow")
        elif files:
            file_list = "[" + ", ".join(_sql_str(f) for f in sorted(files)) + "]"
            # By name: parts written before the provenance columns lack them (read as NULL).
            source = f"read_parquet({file_list}, union_by_name = true)"
            present = {str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {source}")
                       .fetchall()}
            columns = ", ".join(f.name if f.name in present
                                else f"NULL::{_duck_type(f.type)} AS {f.name}"
                                for f in INDEX_SCHEMA)
            con.execute(f"CREATE OR REPLACE VIEW {col.PARTS} AS SELECT {columns} FROM {source}")
        else:
            cols = ", ".join(f"NULL::{_duck_type(f.type)} AS {f.name}" for f in INDEX_SCHEMA)
            con.execute(f"CREATE OR REPLACE VIEW {col.PARTS} AS SELECT {cols} WHERE false")
        if self.parts.scores_path.exists():
            con.execute(
                "CREATE OR REPLACE VIEW scores AS SELECT * FROM read_parquet("
                f"{_sql_str(str(self.parts.scores_path))})"
            )
        else:
            con.execute(f"CREATE OR REPLACE VIEW scores AS SELECT NULL::VARCHAR AS {col.ID}, "
                        f"NULL::BOOLEAN AS {col.EXACT_MATCH} WHERE false")
        if self.parts.task_fields_path.exists():
            con.execute(
                "CREATE OR REPLACE VIEW task_overrides AS SELECT * FROM read_parquet("
                f"{_sql_str(str(self.parts.task_fields_path))})"
            )
        else:
            con.execute("CREATE OR REPLACE VIEW task_overrides AS SELECT NULL::VARCHAR AS "
                        f"{col.TASK_ID}, "
                        + ", ".join(f"NULL::VARCHAR AS {c}" for c in TASK_FIELDS) + " WHERE false")
        # An overlay row replaces the stored exact match even when it is NULL (unscored).
        exact = (f"CASE WHEN s.{col.ID} IS NOT NULL THEN s.{col.EXACT_MATCH} "
                 f"ELSE p.{col.EXACT_MATCH} END")
        scored = f"LEFT JOIN scores s USING ({col.ID})"
        judge = {c: f"p.{c}" for c in JUDGE_COLUMNS}
        if not self.parts.scores_path.exists():
            # No overlay (nothing re-scored): no join. Probing a million ids against an
            # empty table still cost a hash join per query (60 ms of a Browse count).
            exact, scored = f"p.{col.EXACT_MATCH}", ""
        else:
            overlaid = {str(r[0]) for r in con.execute("DESCRIBE scores").fetchall()}
            # An overlay written before the judge's columns keeps the stored verdicts.
            judge = {c: f"CASE WHEN s.{col.ID} IS NOT NULL THEN s.{c} ELSE p.{c} END"
                     if c in overlaid else f"p.{c}" for c in JUDGE_COLUMNS}
        # The judge's verdict as an outcome: undecided is NULL (a person decides); a row
        # imported before the judge existed has none and keeps its exact match.
        verdict = judge[col.JUDGE_VERDICT]
        judged = (f"CASE WHEN {verdict} IS NULL THEN {exact} "
                  f"WHEN {verdict} = 'correct' THEN true "
                  f"WHEN {verdict} = 'incorrect' THEN false END")
        # Outcomes only (no task consensus, whose window functions dominate at a million
        # rows): what counts and outcome lists need.
        con.execute(
            f"""CREATE OR REPLACE VIEW {col.OUTCOMES} AS
            SELECT {col.listed(_OUTCOMES_STORED, "p")},
                   {exact} AS {col.EXACT_MATCH}, {judged} AS {col.JUDGED_SUCCESS},
                   {", ".join(f"{judge[c]} AS {c}" for c in _OUTCOMES_JUDGED)}
            FROM {col.PARTS} p {scored}"""
        )
        if not consensus:
            return con
        resolved = set(TASK_FIELDS)
        select = ", ".join(f"p.{c}" for c in INDEX_COLUMNS
                           if c != col.EXACT_MATCH and c not in resolved
                           and c not in PROVENANCE_COLUMNS and c not in JUDGE_COLUMNS)
        overridden = self.parts.task_fields_path.exists()  # else no join with the empty overlay
        fields = ", ".join(
            f"coalesce({f'o.{c}, ' if overridden else ''}t.{c}, p.{c}) AS {c}"
            for c in TASK_FIELDS
        )
        # A task's intent / scope / template are properties of the task: every run sharing a
        # task id shows the same values (a task file's override, else the most frequent known
        # value across runs, ties alphabetical; "Other" only counts when nothing else is known).
        picks = ", ".join(
            f"first({c} ORDER BY n_{c} DESC, {c}) FILTER (WHERE {c} IS NOT NULL"
            + (f" AND {c} <> 'Other'" if c == col.INTENT else "") + f") AS {c}"
            for c in TASK_FIELDS
        )
        counts = ", ".join(
            f"count(*) OVER (PARTITION BY {col.TASK_ID}, {c}) AS n_{c}" for c in TASK_FIELDS
        )
        # Materialised once per change of the parts (a temporary table of one row per task):
        # as a view, its window functions ran again in every query, seconds at a million rows.
        con.execute(
            f"""CREATE OR REPLACE TABLE task_consensus AS
            SELECT {col.TASK_ID}, {picks}
            FROM (SELECT {col.TASK_ID}, {col.listed(TASK_FIELDS)}, {counts} FROM {col.PARTS})
            GROUP BY {col.TASK_ID}"""
        )
        con.execute(
            f"""CREATE OR REPLACE VIEW {col.TRAJECTORIES} AS
            SELECT {select}, {fields},
                   {exact} AS {col.EXACT_MATCH},
                   {", ".join(f"{expr} AS {c}" for c, expr in judge.items())},
                   {judged} AS {col.JUDGED_SUCCESS},
                   coalesce(p.{col.RECORDED_SUCCESS}, {judged}) AS {col.SUCCESS}
            FROM {col.PARTS} p {scored}
            LEFT JOIN task_consensus t USING ({col.TASK_ID})
            {f"LEFT JOIN task_overrides o USING ({col.TASK_ID})" if overridden else ""}"""
        )
        return con

    def shared_table(self, name: str, select: str) -> duckdb.DuckDBPyConnection:
        """This thread's connection with a table ``name`` holding ``select`` (a fixed query
        over the views, never user text) as of the current parts: built on first use, once
        per state of the parts (shared by the threads of a local workspace), like the task
        consensus. For a read path that pays for a layout of its own (Browse: its columns
        sorted by run). The build holds no lock other readers take: a thread that needs the
        same table waits for it, every other query goes on."""
        con = self.connect()
        builds: dict[str, TableBuild] = self._local.tables
        with self._shared_lock:
            build = builds.get(name)
            mine = build is None
            if build is None:
                build = builds[name] = TableBuild()
        if not mine:
            build.done.wait()
            if build.built:
                return con
            return self.shared_table(name, select)  # that build failed: try again here
        try:
            con.execute(f"CREATE OR REPLACE TABLE {name} AS {select}")
            build.built = True
        finally:
            if not build.built:
                with self._shared_lock:
                    builds.pop(name, None)
            build.done.set()
        return con

    def keep_warm(self, name: str, select: str, *,
                  build_now: bool = True) -> threading.Thread | None:
        """Have ``shared_table(name, select)`` built in the background now and after every
        change of the parts (this process's imports, or the next query after another
        process's), so the first reader that needs it does not wait for the whole build.
        Returns the thread started now (``build_now`` and the table not built or being built
        for the current parts)."""
        if self.parts.remote is not None:
            return None  # a connection per thread there: a table built aside would go unused
        self._warm_tables[name] = select
        return self._warm_in_background() if build_now else None

    def _warm_in_background(self) -> threading.Thread | None:
        if not self._warm_tables:
            return None
        with self._shared_lock:
            if self._shared is not None and self._shared.signature == self.signature() and all(
                    name in self._shared.tables for name in self._warm_tables):
                return None
        thread = threading.Thread(target=self._build_warm_tables, daemon=True,
                                  name="faillab-warm-tables")
        thread.start()
        self.warm_thread = thread
        return thread

    def _build_warm_tables(self) -> None:
        try:
            for name, select in list(self._warm_tables.items()):
                self.shared_table(name, select)
        except Exception:  # a reader that needs the table builds it and sees the error
            return

    def _remote_dataset(self, files: list[str]) -> ds.Dataset:
        """The listed parts as one Arrow dataset whose footers are read once, here: every
        later query then skips a HEAD and a footer GET per part (parts never change), and row
        groups are pruned by their id statistics without touching the store."""
        import pyarrow.dataset as ds  # here, not at the top: see Parts.rewrite_without

        assert self.parts.remote is not None
        fmt = ds.ParquetFileFormat()
        fragments = []
        with store_errors():
            sizes = self.parts.remote.sizes()
        with store_errors_from_os():
            for path in files:
                fragment = fmt.make_fragment(path, filesystem=self.parts.fs,
                                             file_size=sizes.get(Path(path).name))
                fragment.ensure_complete_metadata()
                fragments.append(fragment)
        return ds.FileSystemDataset(fragments, schema=INDEX_SCHEMA, format=fmt,
                                    filesystem=self.parts.fs)

    def query_df(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run a read query over the ``trajectories`` view and return a pandas DataFrame."""
        return self.connect().execute(sql, params or []).df()

    def frame(self) -> Any:
        """Every trajectory's index columns (no payloads): what statistics work on."""
        return self.query_df(f"SELECT * FROM {col.TRAJECTORIES}")

    def get(self, trajectory_id: str) -> Trajectory | None:
        row = self._outcomes_connection().execute(
            f"SELECT {col.PAYLOAD} FROM {col.PARTS} WHERE {col.ID} = ? LIMIT 1", [trajectory_id]
        ).fetchone()
        if row is None:
            return None
        return Trajectory.model_validate_json(row[0])

    def get_many(self, trajectory_ids: Sequence[str]) -> dict[str, Trajectory]:
        """The trajectories of ``trajectory_ids`` that exist, keyed by id, read in one scan of
        the parts: a look-up by id scans them anyway, so reading 854 failures one ``get`` at
        a time took 5.2 s on the demo where one scan takes a fraction of it."""
        wanted = list(dict.fromkeys(str(t) for t in trajectory_ids))
        if not wanted:
            return {}
        rows = self._outcomes_connection().execute(
            f"SELECT {col.ID}, any_value({col.PAYLOAD}) FROM {col.PARTS} "
            f"WHERE {col.ID} IN (SELECT unnest(?::VARCHAR[])) GROUP BY {col.ID}",
            [wanted]).fetchall()
        return {str(tid): Trajectory.model_validate_json(payload) for tid, payload in rows}

    def verdict_of(self, trajectory_id: str) -> dict[str, Any] | None:
        """The recorded and judged outcome of one trajectory (``judge_verdict``,
        ``judge_method``, ``judge_evidence``, ``judged_success``, ``recorded_success``,
        ``exact_match``; ``trajectories.outcome.resolve_recorded`` resolves it), or None
        when the id is unknown. Kept per state of the data (``OUTCOMES_KEPT``): asked on every
        key press, it is read once per item."""
        signature = self.signature()
        with self._outcomes_lock:
            if self._outcomes_signature == signature and trajectory_id in self._outcomes:
                self._outcomes.move_to_end(trajectory_id)
                known = self._outcomes[trajectory_id]
                return None if known is None else dict(known)
        row = self._outcomes_connection().execute(
            f"SELECT {col.listed(_OUTCOME_KEYS)} FROM {col.OUTCOMES} WHERE {col.ID} = ? LIMIT 1",
            [trajectory_id]).fetchone()
        outcome = None if row is None else dict(zip(_OUTCOME_KEYS, row, strict=True))
        with self._outcomes_lock:
            if self._outcomes_signature != signature:
                # Read under a newer state than the kept ones (or a first read): start over.
                self._outcomes.clear()
                self._outcomes_signature = signature
            self._outcomes[trajectory_id] = outcome
            while len(self._outcomes) > OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
        return None if outcome is None else dict(outcome)

    def summary(self, success_source: str = DEFAULT_SUCCESS_SOURCE,
                people: PeopleVerdicts = NO_PEOPLE) -> dict[str, int]:
        """Counts (``trajectories.outcome.count_outcomes``)."""
        return count_outcomes(self._outcomes_connection(), success_source, people)

    def list(self, *, failed: bool = False, unscored: bool = False, run: str | None = None,
             limit: int | None = None, success_source: str = DEFAULT_SUCCESS_SOURCE,
             people: PeopleVerdicts = NO_PEOPLE, needing_a_person: bool = False,
             ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Trajectories and their outcomes (``trajectories.outcome.list_outcomes``)."""
        return list_outcomes(self._outcomes_connection(), failed=failed, unscored=unscored,
                             run=run, limit=limit, success_source=success_source,
                             people=people, needing_a_person=needing_a_person, ids=ids)


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


