"""Storage-format spike (issue 45, item 1): today's Parquet parts + manifest against two open
table formats, DuckLake and Apache Iceberg (pyiceberg), measured on this machine with the
project's own importer and synthetic real-layout trajectories.

Each format runs in its own interpreter, because the DuckLake extension needs the DuckDB it
was built for (1.5.x) while the project's venv has DuckDB 2.x (pyproject allows >=1.1,<3):

    # once: the real-layout files and the 1M-row query set, in a folder outside the repo
    .venv/bin/python bench/bench_storage_formats.py --format today --data /tmp/spike-data
    # DuckLake in a venv of its own (duckdb 1.5.x + duckdb-extension-ducklake, -sqlite-scanner,
    # -postgres-scanner, pyarrow, pydantic, orjson, sqlglot, psutil, pytz)
    /tmp/spike-ducklake/bin/python bench/bench_storage_formats.py --format ducklake \
        --data /tmp/spike-data --catalog duckdb,sqlite,postgres
    # Iceberg: pyiceberg[sql-sqlite,sql-postgres] (installs beside duckdb 2.x)
    .venv/bin/python bench/bench_storage_formats.py --format iceberg --data /tmp/spike-data \
        --catalog sqlite,postgres

What each run measures (``--checks``, default all):

- ``import``: 50,000 real-layout trajectories (the project's ``parse_files`` workers, as
  ``faillab import`` runs them) committed into a fresh table: wall and peak PSS of the
  importing process and its workers. ``register`` commits the workers' Parquet parts as they
  are (DuckLake ``ducklake_add_data_files``, Iceberg ``add_files``); ``rewrite`` has the
  format write its own files (DuckLake ``INSERT ... SELECT`` with an anti-join on id, Iceberg
  ``append``). ``today`` is ``Workspace.import_files``, the product's import.
- ``query``: a Browse-like page on 1,000,000 rows through DuckDB (failures of one model
  ordered by id, limit 50; a count by outcome; a fetch by id), median of 5 warm runs.
- ``concurrent``: two importer processes with overlapping files (10 files of 1,000; A takes
  0-6, B takes 3-9) that parse, meet at a barrier, then commit at the same moment (each holds
  its transaction open 1 s, as a slow upload would): rows, distinct ids, retries. Once as the
  format resolves it by itself, once "guarded": DuckLake imports also rewrite one row of a
  guard table (so two imports conflict), Iceberg's own retry is turned off
  (``commit.retry.num-retries`` 0); the loser then drops what the winner stored and commits
  again.
- ``crash``: a writer killed with SIGKILL at several delays after its commit began; the
  table must then be at the snapshot before or after, never between.
- ``timetravel``: a second import, then the page and the count read as of the first snapshot.

A PostgreSQL catalog (``--catalog postgres``, ``--pg``) lives in a schema of its own that the
run drops afterwards. Never imported by tests; not a dependency of the project.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

PG_DSN = "dbname=test host=127.0.0.1 port=5432 user=postgres"
PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
QUERY_ROWS = 1_000_000
#: Seconds a concurrent writer waits between reading the table and committing (``--hold``).
HOLD = 0.0


# ---------------------------------------------------------------------------------------------
# Measuring a process tree


class PeakMemory:
    """Peak PSS (and RSS) summed over this process and every descendant, sampled every 100 ms
    (import workers come from a forkserver: they are grandchildren)."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.pss = 0
        self.rss = 0
        self.cpu: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = self._psutil.Process()
        procs = [me, *me.children(recursive=True)]
        pss = rss = 0
        for p in procs:
            try:
                info = p.memory_full_info()
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                continue
            pss += getattr(info, "pss", info.rss)
            rss += info.rss
            try:
                t = p.cpu_times()
                self.cpu[p.pid] = t.user + t.system
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                pass
        self.pss, self.rss = max(self.pss, pss), max(self.rss, rss)

    def _run(self) -> None:
        self._sampler_cpu = 0.0
        while not self._done.is_set():
            self._sample()
            self._sampler_cpu = time.thread_time()
            time.sleep(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self._sample()

    def cpu_seconds(self) -> float:
        """CPU of every process seen (workers' last sample), less the sampler's own."""
        return sum(self.cpu.values()) - self.sampler_cpu

    @property
    def sampler_cpu(self) -> float:
        return self._sampler_cpu


# ---------------------------------------------------------------------------------------------
# Parsing with the product's importer (format-independent stage)


def parse_to_parts(files: list[Path], staging: Path, stored: set[str],
                   workers: int | None = None) -> list[Path]:
    """The product's parse stage: workers read the files and stage Parquet parts of new rows
    (duplicates of ``stored`` and of earlier records dropped, first file wins)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from trajectories.import_workers import FileSpec, parse_files

    spec = FileSpec(str(staging), "auto", None, None, None, None, False)
    parts: list[Path] = []
    seen: set[str] = set()
    for result in parse_files(spec, files, (stored, set()), workers, None):
        if result.rejected:
            raise SystemExit(f"rejected records: {result.rejected[:1]}")
        for tmp, final, ids in result.parts:
            clash = seen.intersection(ids)
            if clash:  # an earlier file of this import holds them: first file wins
                table = pq.read_table(tmp)
                table = table.filter(pc.invert(pc.is_in(table["id"], pa_array(clash))))
                pq.write_table(table, tmp)
            seen.update(ids)
            tmp.rename(final)
            parts.append(final)
    return parts


def pa_array(values: set[str]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), type=pa.string())


def filter_parts(parts: list[Path], drop: set[str]) -> list[Path]:
    """Parts without the rows whose id is in ``drop`` (rewritten only where they hold any)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = []
    for part in parts:
        table = pq.read_table(part)
        mask = pc.is_in(table["id"], pa_array(drop))
        if pc.any(mask).as_py():
            table = table.filter(pc.invert(mask))
            new = part.with_name(part.stem + "-r.parquet")
            pq.write_table(table, new, row_group_size=1024, compression="zstd")
            part = new
        if pq.ParquetFile(part).metadata.num_rows:
            out.append(part)
    return out


# ---------------------------------------------------------------------------------------------
# Backends


class Today:
    """Today's workspace: Parquet parts listed by manifest.json (``Workspace``)."""

    name = "today"

    def __init__(self, root: Path, catalog: str) -> None:
        self.root = root
        self.catalog = "manifest.json"

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def import_files(self, files: list[Path], mode: str, staging: Path) -> dict[str, Any]:
        from trajectories.workspace import Workspace

        r = Workspace(self.root / "ws").import_files(files).as_json()
        return {k: r[k] for k in ("imported", "duplicates")}

    def relation(self, con: Any, snapshot: Any = None) -> str:
        files = sorted(glob.glob(str(self.root / "ws" / "trajectories" / "*.parquet")))
        return f"read_parquet({files!r})"

    def register_query_files(self, files: list[str]) -> None:
        self._query_files = files

    def query_relation(self, con: Any) -> str:
        return f"read_parquet({self._query_files!r})"

    def drop(self) -> None:
        pass


class DuckLake:
    name = "ducklake"

    def __init__(self, root: Path, catalog: str) -> None:
        self.root = root
        self.catalog = catalog
        self.schema = f"spike_ducklake_{os.getpid()}"
        self._con: Any = None

    def attach_sql(self) -> str:
        data = self.root / "data"
        if self.catalog == "duckdb":
            return f"ATTACH 'ducklake:{self.root}/catalog.ducklake' AS lake (DATA_PATH '{data}/')"
        if self.catalog == "sqlite":
            return (f"ATTACH 'ducklake:sqlite:{self.root}/catalog.sqlite' AS lake "
                    f"(DATA_PATH '{data}/')")
        return (f"ATTACH 'ducklake:postgres:{PG_DSN}' AS lake "
                f"(DATA_PATH '{data}/', METADATA_SCHEMA '{self.schema}')")

    def connect(self) -> Any:
        import duckdb

        con = duckdb.connect()
        site = Path(duckdb.__file__).resolve().parents[1]
        for ext in ("ducklake", "sqlite_scanner", "postgres_scanner"):
            found = glob.glob(str(site / f"duckdb_extension_{ext}" / "extensions" / "*" /
                                  f"{ext}.duckdb_extension"))
            if found:
                con.execute(f"INSTALL '{found[0]}'")
                con.execute(f"LOAD {ext}")
        con.execute(self.attach_sql())
        return con

    @property
    def con(self) -> Any:
        if self._con is None:
            self._con = self.connect()
        return self._con

    def create(self) -> None:
        import pyarrow as pa

        from trajectories.rows import INDEX_SCHEMA

        self.root.mkdir(parents=True, exist_ok=True)
        empty = pa.table({f.name: pa.array([], type=f.type) for f in INDEX_SCHEMA})  # noqa: F841
        self.con.execute("CREATE TABLE IF NOT EXISTS lake.trajectories AS SELECT * FROM empty")
        self.con.execute("CREATE TABLE IF NOT EXISTS lake.import_guard (n BIGINT)")
        self.con.execute("CALL lake.set_option('data_inlining_row_limit', 0, "
                         "table_name => 'import_guard')")
        if not self.con.execute("SELECT count(*) FROM lake.import_guard").fetchone()[0]:
            self.con.execute("INSERT INTO lake.import_guard VALUES (0)")

    def stored_ids(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT id FROM lake.trajectories").fetchall()}

    def commit(self, parts: list[Path], mode: str, guard: bool = False,
               on_commit: Any = None) -> dict[str, Any]:
        """One transaction; with ``guard`` every import also rewrites the one row of
        ``import_guard`` (kept in a Parquet file, not inlined), so two imports at once conflict
        and the loser is rolled back, drops the rows the winner stored and tries again."""
        import duckdb

        con = self.con
        if on_commit:
            on_commit()
        retries, errors = 0, []
        while True:
            try:
                con.execute("BEGIN")
                if mode == "register":
                    stored = {r[0] for r in con.execute(
                        "SELECT id FROM lake.trajectories WHERE id IN (SELECT id FROM "
                        f"read_parquet({[str(p) for p in parts]!r}))").fetchall()}
                    if stored:
                        parts = filter_parts(parts, stored)
                    for part in parts:
                        con.execute("CALL ducklake_add_data_files('lake', 'trajectories', ?)",
                                    [str(part)])
                else:
                    con.execute("INSERT INTO lake.trajectories SELECT * FROM read_parquet("
                                f"{[str(p) for p in parts]!r}) WHERE id NOT IN "
                                "(SELECT id FROM lake.trajectories)")
                if guard:
                    con.execute("UPDATE lake.import_guard SET n = n + 1")
                time.sleep(HOLD)  # a slow commit (uploads): both transactions in flight
                con.execute("COMMIT")
                break
            except duckdb.Error as e:
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[-1][:160]}")
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                retries += 1
                if retries > 20:
                    raise
                time.sleep(0.1 * retries)
        return {"snapshot": self.snapshot(), "retries": retries, "errors": errors[:3]}

    def import_files(self, files: list[Path], mode: str, staging: Path) -> dict[str, Any]:
        parts = parse_to_parts(files, staging, self.stored_ids())
        out = self.commit(parts, mode)
        if mode == "rewrite":
            shutil.rmtree(staging, ignore_errors=True)
        return out

    def snapshot(self) -> int:
        return int(self.con.execute(
            "SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])

    def relation(self, con: Any, snapshot: Any = None) -> str:
        return ("lake.trajectories" if snapshot is None
                else f"lake.trajectories AT (VERSION => {int(snapshot)})")

    def register_query_files(self, files: list[str]) -> None:
        con = self.con
        con.execute("CREATE TABLE lake.q AS SELECT * FROM read_parquet(?) LIMIT 0", [files[0]])
        con.execute("BEGIN")
        for f in files:
            con.execute("CALL ducklake_add_data_files('lake', 'q', ?)", [f])
        con.execute("COMMIT")

    def query_relation(self, con: Any) -> str:
        return "lake.q"

    def drop(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        if self.catalog == "postgres":
            subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "test",
                            "-c", f"DROP SCHEMA IF EXISTS {self.schema} CASCADE"],
                           capture_output=True, check=False)


class Iceberg:
    name = "iceberg"

    def __init__(self, root: Path, catalog: str) -> None:
        self.root = root
        self.catalog = catalog
        self.schema = f"spike_iceberg_{os.getpid()}"
        self._cat: Any = None

    @property
    def cat(self) -> Any:
        if self._cat is None:
            from pyiceberg.catalog.sql import SqlCatalog

            if self.catalog == "sqlite":
                uri = f"sqlite:///{self.root}/catalog.db"
            else:
                uri = f"{PG_URL}?options=-csearch_path%3D{self.schema}"
            self._cat = SqlCatalog("spike", uri=uri, warehouse=f"file://{self.root}/warehouse")
        return self._cat

    def create(self) -> None:
        from trajectories.rows import INDEX_SCHEMA

        self.root.mkdir(parents=True, exist_ok=True)
        if self.catalog == "postgres":
            subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "test",
                            "-c", f"CREATE SCHEMA IF NOT EXISTS {self.schema}"],
                           capture_output=True, check=True)
        self.cat.create_namespace_if_not_exists("faillab")
        self.cat.create_table_if_not_exists("faillab.trajectories", schema=INDEX_SCHEMA)

    def table(self) -> Any:
        return self.cat.load_table("faillab.trajectories")

    def files(self, table: Any, snapshot: Any = None) -> list[str]:
        scan = table.scan(snapshot_id=snapshot) if snapshot is not None else table.scan()
        return [t.file.file_path.removeprefix("file://") for t in scan.plan_files()]

    def ids_of(self, table: Any) -> set[str]:
        import duckdb

        files = self.files(table)
        if not files:
            return set()
        return {r[0] for r in duckdb.sql(f"SELECT id FROM read_parquet({files!r})").fetchall()}

    def stored_ids(self) -> set[str]:
        return self.ids_of(self.table())

    def ids_among(self, table: Any, parts: list[Path]) -> set[str]:
        """Ids of ``parts`` the table (as loaded) already holds."""
        import duckdb

        files = self.files(table)
        if not files or not parts:
            return set()
        return {r[0] for r in duckdb.sql(
            f"SELECT id FROM read_parquet({files!r}) WHERE id IN (SELECT id FROM "
            f"read_parquet({[str(p) for p in parts]!r}))").fetchall()}

    def no_auto_retry(self) -> None:
        """Commit conflicts reach the importer (which drops what the winner stored and tries
        again) instead of pyiceberg re-applying the append on the new snapshot."""
        with self.table().transaction() as tx:
            tx.set_properties({"commit.retry.num-retries": "0"})

    def commit(self, parts: list[Path], mode: str, guard: bool = False,
               on_commit: Any = None) -> dict[str, Any]:
        """Optimistic: on a concurrent commit, reload, drop the rows it stored, commit again."""
        import pyarrow.parquet as pq
        from pyiceberg.exceptions import CommitFailedException

        table = self.table()
        retries = 0
        base = table.current_snapshot()
        if on_commit:
            on_commit()
        while True:
            try:
                stored = self.ids_among(table, parts)
                if stored:
                    parts = filter_parts(parts, stored)
                if not parts:
                    break
                time.sleep(HOLD)  # a slow commit (uploads): both writers in flight
                if mode == "register":
                    table.add_files([str(p) for p in parts], check_duplicate_files=False)
                else:
                    with table.transaction() as tx:
                        for part in parts:
                            tx.append(pq.read_table(part))
                break
            except CommitFailedException:
                retries += 1
                table = self.table()
        snap = table.current_snapshot()
        return {"snapshot": snap.snapshot_id if snap else None, "retries": retries,
                "base": base.snapshot_id if base else None}

    def import_files(self, files: list[Path], mode: str, staging: Path) -> dict[str, Any]:
        parts = parse_to_parts(files, staging, self.stored_ids())
        return self.commit(parts, mode)

    def snapshot(self) -> int | None:
        snap = self.table().current_snapshot()
        return snap.snapshot_id if snap else None

    def relation(self, con: Any, snapshot: Any = None) -> str:
        files = self.files(self.table(), snapshot)
        return f"read_parquet({files!r})" if files else "(SELECT 1 AS id WHERE false)"

    def register_query_files(self, files: list[str]) -> None:
        import pyarrow.parquet as pq

        self.cat.create_table_if_not_exists("faillab.q", schema=pq.read_schema(files[0]))
        self.cat.load_table("faillab.q").add_files(files)

    def query_relation(self, con: Any) -> str:
        return f"read_parquet({self.files(self.cat.load_table('faillab.q'))!r})"

    def query_arrow(self, where: str) -> Any:
        """The other read path: pyiceberg's own scan to Arrow, then DuckDB over it."""
        return self.cat.load_table("faillab.q").scan(
            row_filter=where, selected_fields=("id", "run", "task_id", "rollout", "question",
                                               "model", "recorded_success")).to_arrow()

    def drop(self) -> None:
        if self.catalog == "postgres":
            if self._cat is not None:
                self._cat.engine.dispose()
            subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "test",
                            "-c", f"DROP SCHEMA IF EXISTS {self.schema} CASCADE"],
                           capture_output=True, check=False)


BACKENDS = {"today": Today, "ducklake": DuckLake, "iceberg": Iceberg}


def backend(fmt: str, root: Path, catalog: str, schema: str | None = None) -> Any:
    b = BACKENDS[fmt](root, catalog)
    if schema:
        b.schema = schema
    return b


def query_con(b: Any) -> Any:
    import duckdb

    con = b.con if b.name == "ducklake" else duckdb.connect()
    con.execute("SET parquet_metadata_cache = true")
    return con


# ---------------------------------------------------------------------------------------------
# Checks

OUTCOME = ("CASE WHEN recorded_success THEN 'success' WHEN NOT recorded_success THEN 'failure' "
           "ELSE coalesce(judge_verdict, 'unknown') END")


def page_sql(rel: str, model: str) -> str:
    return (f"SELECT id, run, task_id, rollout, question, n_steps, n_errors FROM {rel} "
            f"WHERE model = '{model}' AND recorded_success = false ORDER BY id LIMIT 50")


def count_sql(rel: str) -> str:
    return f"SELECT {OUTCOME} AS outcome, count(*) FROM {rel} GROUP BY 1 ORDER BY 1"


def _timed(fn: Any, runs: int = 5) -> dict[str, float]:
    t0 = time.perf_counter()
    fn()
    cold = (time.perf_counter() - t0) * 1000
    warm = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        warm.append((time.perf_counter() - t0) * 1000)
    return {"cold_ms": round(cold, 1), "warm_median_ms": round(statistics.median(warm), 1),
            "warm_max_ms": round(max(warm), 1)}


def check_import(args: argparse.Namespace, files: list[Path], catalog: str, mode: str,
                 ) -> dict[str, Any]:
    """In a child process, so its peak memory is its own."""
    cmd = [sys.executable, "-P", __file__, "--role", "import", "--format", args.format,
           "--catalog", catalog, "--mode", mode, "--data", str(args.data)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        return {"error": proc.stderr[-2000:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = round(wall, 2)
    return out


def role_import(args: argparse.Namespace) -> None:
    files = real_files(args.data)
    root = Path(tempfile.mkdtemp(prefix=f"spike-{args.format}-", dir=args.work))
    b = backend(args.format, root, args.catalog)
    try:
        b.create()
        if b.name == "ducklake":
            _ = b.con  # attach before the clock: a page load pays it once per process
        me = os.times()
        cpu0 = me.user + me.system
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            result = b.import_files(files, args.mode, root / "staging")
            wall = time.perf_counter() - t0
        count = rows_in(b)
        size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
        print(json.dumps({"import_s": round(wall, 2),
                          "cpu_s_all_processes": round(mem.cpu_seconds() - cpu0, 1),
                          "sampler_cpu_s_not_counted": round(mem.sampler_cpu, 1),
                          "peak_pss_mb": round(mem.pss / 2**20), "peak_rss_mb":
                          round(mem.rss / 2**20), "rows": count,
                          "parquet_mb_on_disk": round(size / 1e6), **result}))
    finally:
        b.drop()
        shutil.rmtree(root, ignore_errors=True)


def rows_in(b: Any, snapshot: Any = None) -> int:
    con = query_con(b)
    return int(con.execute(f"SELECT count(*) FROM {b.relation(con, snapshot)}").fetchone()[0])


def check_query(args: argparse.Namespace, catalog: str) -> dict[str, Any]:
    qfiles = sorted(glob.glob(str(args.data / "q1m" / "*.parquet")))
    model = (args.data / "q1m-model.txt").read_text().strip()
    root = Path(tempfile.mkdtemp(prefix=f"spike-q-{args.format}-", dir=args.work))
    b = backend(args.format, root, catalog)
    out: dict[str, Any] = {}
    try:
        b.create()
        b.register_query_files(qfiles)
        con = query_con(b)
        some_id = con.execute(f"SELECT id FROM read_parquet('{qfiles[len(qfiles) // 2]}') "
                              "LIMIT 1 OFFSET 77").fetchone()[0]

        def rel() -> str:  # resolved per query, as a page would (Iceberg: catalog + manifests)
            return b.query_relation(con)

        out["rows"] = con.execute(f"SELECT count(*) FROM {rel()}").fetchone()[0]
        out["page_failures_of_one_model_limit_50"] = _timed(
            lambda: con.execute(page_sql(rel(), model)).fetchall())
        out["count_by_outcome"] = _timed(lambda: con.execute(count_sql(rel())).fetchall())
        out["fetch_one_payload_by_id"] = _timed(lambda: con.execute(
            f"SELECT payload FROM {rel()} WHERE id = '{some_id}'").fetchall())
        t0 = time.perf_counter()
        rel()
        out["resolve_relation_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        # Control: the same files read as plain Parquet by this interpreter's DuckDB (separates
        # the format's cost from the DuckDB version's).
        plain = f"read_parquet({qfiles!r})"
        out["control_same_files_plain_parquet"] = {
            "page": _timed(lambda: con.execute(page_sql(plain, model)).fetchall()),
            "count_by_outcome": _timed(lambda: con.execute(count_sql(plain)).fetchall())}
        if b.name == "iceberg":
            def arrow_page() -> Any:
                tbl = b.query_arrow(  # noqa: F841 (read by DuckDB by name)
                    f"model == '{model}' and recorded_success == false")
                return con.execute("SELECT * FROM tbl ORDER BY id LIMIT 50").fetchall()
            out["page_via_pyiceberg_scan_to_arrow"] = _timed(arrow_page, runs=3)
    finally:
        b.drop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def _writer_cmd(args: argparse.Namespace, catalog: str, root: Path, schema: str,
                files: list[Path], extra: list[str]) -> list[str]:
    return [sys.executable, "-P", __file__, "--role", "writer", "--format", args.format,
            "--catalog", catalog, "--root", str(root), "--schema", schema, "--data",
            str(args.data), *extra, "--files", *map(str, files)]


def role_writer(args: argparse.Namespace) -> None:
    """One importer: parse (one worker), wait for ``--at``, then commit (printing when it
    starts, so a test can kill it mid-commit)."""
    global HOLD
    HOLD = args.hold
    b = backend(args.format, args.root, args.catalog, args.schema)
    staging = args.root / f"staging-{os.getpid()}"
    parts = parse_to_parts([Path(f) for f in args.files], staging, b.stored_ids(), workers=1)
    if args.barrier:  # both writers parse first, then commit together
        (args.barrier / str(os.getpid())).touch()
        give_up = time.time() + 120  # the other writer may have failed to start at all
        while len(list(args.barrier.iterdir())) < 2 and time.time() < give_up:
            time.sleep(0.01)

    def started() -> None:
        print("COMMITTING", flush=True)
    t0 = time.perf_counter()
    started_at = time.time()
    try:
        out = b.commit(parts, args.mode, guard=args.guard, on_commit=started)
        out["ok"] = True
    except Exception as e:  # the conflict as the writer sees it
        out = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    out["commit_s"] = round(time.perf_counter() - t0, 2)
    out["commit_started_at"] = started_at
    print(json.dumps(out), flush=True)


def check_concurrent(args: argparse.Namespace, catalog: str, guard: bool) -> dict[str, Any]:
    files = real_files(args.data)[:10]
    root = Path(tempfile.mkdtemp(prefix=f"spike-c-{args.format}-", dir=args.work))
    schema = f"spike_{args.format}_c{os.getpid()}"
    b = backend(args.format, root, catalog, schema)
    try:
        b.create()
        if b.name == "ducklake":
            b._con.close()
            b._con = None
        elif guard:
            b.no_auto_retry()
        barrier = root / "barrier"
        barrier.mkdir()
        extra = ["--mode", args.concurrent_mode, "--barrier", str(barrier), "--hold", "1.0"] + (
            ["--guard"] if guard else [])
        procs = [subprocess.Popen(_writer_cmd(args, catalog, root, schema, fs, extra),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for fs in (files[0:7], files[3:10])]
        outs = []
        for p in procs:
            so, se = p.communicate(timeout=300)
            lines = [ln for ln in so.splitlines() if ln.startswith("{")]
            outs.append(json.loads(lines[-1]) if lines else {"error": se[-1500:]})
        con = query_con(b)
        rel = b.relation(con)
        total, distinct = con.execute(
            f"SELECT count(*), count(DISTINCT id) FROM {rel}").fetchone()
        starts = [o.get("commit_started_at", 0) for o in outs]
        return {"writers": outs, "rows": total, "distinct_ids": distinct,
                "expected_distinct": 10_000, "duplicated_rows": total - distinct,
                "commit_starts_apart_s": round(abs(starts[0] - starts[1]), 3)}
    finally:
        b.drop()
        shutil.rmtree(root, ignore_errors=True)


def check_crash(args: argparse.Namespace, catalog: str, delays: list[float]) -> dict[str, Any]:
    """A first import lands (snapshot A); then writers of a second import are killed -9 at
    ``delays`` after their commit began. After each: the table must read as A (or A + the
    second import when the kill came after the commit), never in between."""
    files = real_files(args.data)
    root = Path(tempfile.mkdtemp(prefix=f"spike-k-{args.format}-", dir=args.work))
    schema = f"spike_{args.format}_k{os.getpid()}"
    b = backend(args.format, root, catalog, schema)
    rounds = []
    try:
        b.create()
        staging = root / "staging-first"
        b.commit(parse_to_parts(files[:3], staging, set(), workers=1), args.concurrent_mode)
        before = rows_in(b)
        if b.name == "ducklake":
            b._con.close()
            b._con = None
        for delay in delays:
            cmd = _writer_cmd(args, catalog, root, schema, files[3:8],
                              ["--mode", args.concurrent_mode])
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
            assert p.stdout is not None
            line = p.stdout.readline()
            t_commit = time.perf_counter()
            killed_at = None
            if line.startswith("COMMITTING"):
                time.sleep(delay)
                p.send_signal(signal.SIGKILL)
                killed_at = round(time.perf_counter() - t_commit, 3)
            p.wait()
            rest = p.stdout.read()
            finished = any(ln.startswith("{") for ln in rest.splitlines())
            after_b = backend(args.format, root, catalog, schema)
            try:
                now = rows_in(after_b)
                snap = after_b.snapshot()
                err = None
            except Exception as e:
                now, snap, err = -1, None, f"{type(e).__name__}: {str(e)[:300]}"
            if after_b.name == "ducklake" and after_b._con is not None:
                after_b._con.close()
            rounds.append({"kill_after_s": delay, "writer_finished_first": finished,
                           "rows_before": before, "rows_after": now,
                           "state": ("previous" if now == before else
                                     "next" if now == before + 5000 else "HALF/ERROR"),
                           "snapshot": snap, "error": err,
                           "killed_at_s_after_commit_start": killed_at})
            before = now if now >= 0 else before
        orphans = sum(f.stat().st_size for f in root.rglob("*.parquet"))
        return {"rounds": rounds, "parquet_mb_on_disk_incl_orphans": round(orphans / 1e6)}
    finally:
        b.drop()
        shutil.rmtree(root, ignore_errors=True)


def check_timetravel(args: argparse.Namespace, catalog: str) -> dict[str, Any]:
    files = real_files(args.data)
    root = Path(tempfile.mkdtemp(prefix=f"spike-t-{args.format}-", dir=args.work))
    b = backend(args.format, root, catalog)
    try:
        b.create()
        b.commit(parse_to_parts(files[:4], root / "s1", set(), workers=1), "register")
        s1 = b.snapshot()
        con = query_con(b)
        model = con.execute(f"SELECT model FROM {b.relation(con)} LIMIT 1").fetchone()[0]
        page1 = con.execute(page_sql(b.relation(con), model)).fetchall()
        count1 = con.execute(count_sql(b.relation(con))).fetchall()
        b.commit(parse_to_parts(files[4:8], root / "s2", b.stored_ids(), workers=1), "register")
        s2 = b.snapshot()
        t0 = time.perf_counter()
        page_old = con.execute(page_sql(b.relation(con, s1), model)).fetchall()
        ms = (time.perf_counter() - t0) * 1000
        count_old = con.execute(count_sql(b.relation(con, s1))).fetchall()
        count_new = con.execute(count_sql(b.relation(con))).fetchall()
        return {"snapshot_1": s1, "snapshot_2": s2,
                "as_of_1_equals_before": page_old == page1 and count_old == count1,
                "latest_differs": count_new != count1, "as_of_page_ms": round(ms, 1),
                "rows_as_of_1": rows_in(b, s1), "rows_latest": rows_in(b)}
    finally:
        b.drop()
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Data


def real_files(data: Path) -> list[Path]:
    files = sorted((data / "real").glob("*.json"))
    if not files:
        raise SystemExit(f"{data}/real: run --format today --data {data} first")
    return files


def prepare_data(args: argparse.Namespace) -> None:
    """The 50K real-layout files and the 1M query set (run under the project's venv)."""
    from synthetic import write_real_layout

    real = args.data / "real"
    if not sorted(real.glob("*.json")):
        write_real_layout(real, args.n)
    q = args.data / "q1m"
    if sorted(q.glob("*.parquet")):
        return
    import duckdb

    ws = Path(tempfile.mkdtemp(prefix="spike-q-src-", dir=args.work))
    try:
        files = real_files(args.data)[:10]
        parts = parse_to_parts(files, ws / "parts", set())
        con = duckdb.connect()
        src = f"read_parquet({[str(p) for p in parts]!r})"
        model = con.execute(f"SELECT model, count(*) c FROM {src} GROUP BY 1 ORDER BY 2 DESC "
                            "LIMIT 1").fetchone()[0]
        (args.data / "q1m-model.txt").write_text(model)
        copies = QUERY_ROWS // con.execute(f"SELECT count(*) FROM {src}").fetchone()[0]
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        sel = ", ".join("md5(id || '-' || k::VARCHAR) AS id" if c == "id" else
                        "left(payload, 2000) AS payload" if c == "payload" else
                        "run || '-' || (k % 10)::VARCHAR AS run" if c == "run" else c
                        for c in cols)
        q.mkdir(parents=True, exist_ok=True)
        # Today's compacted layout: parts sorted by id, row groups of 1,024 rows.
        con.execute(f"COPY (SELECT {sel} FROM {src}, range({copies}) r(k) ORDER BY 1) TO "
                    f"'{q}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1024, "
                    f"FILE_SIZE_BYTES '3MB', FILENAME_PATTERN 'part-{{i}}')")
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--format", choices=tuple(BACKENDS), required=True)
    p.add_argument("--catalog", default="duckdb",
                   help="Comma-separated: duckdb, sqlite, postgres (Iceberg: sqlite, postgres).")
    p.add_argument("--data", type=Path, required=True,
                   help="Generated inputs (kept and reused between runs; outside the repo).")
    p.add_argument("--work", default=None, help="Temporary tables go here (default: /tmp).")
    p.add_argument("--n", type=int, default=50_000)
    p.add_argument("--checks", default="import,query,concurrent,crash,timetravel")
    p.add_argument("--modes", default="register,rewrite", help="Import commit modes.")
    p.add_argument("--concurrent-mode", default="register")
    p.add_argument("--delays", default="0,0.02,0.05,0.1,0.3")
    # Internal: child roles.
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", default="register", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--schema", default=None, help=argparse.SUPPRESS)
    p.add_argument("--barrier", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--guard", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--hold", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--files", nargs="*", default=[], help=argparse.SUPPRESS)
    args = p.parse_args()
    args.data = args.data.resolve()
    if args.role == "import":
        return role_import(args)
    if args.role == "writer":
        return role_writer(args)
    if args.format == "today":
        prepare_data(args)
    import duckdb

    checks = args.checks.split(",")
    report: dict[str, Any] = {"format": args.format, "duckdb": duckdb.__version__,
                              "cores": os.cpu_count(), "load_before": os.getloadavg()[0],
                              "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    if args.format == "iceberg":
        import pyiceberg

        report["pyiceberg"] = pyiceberg.__version__
    catalogs = ["manifest"] if args.format == "today" else args.catalog.split(",")
    for catalog in catalogs:
        r: dict[str, Any] = {}
        if "import" in checks:
            modes = ["product"] if args.format == "today" else args.modes.split(",")
            for mode in modes:
                r[f"import_{mode}"] = check_import(args, real_files(args.data), catalog, mode)
                print(json.dumps({catalog: {f"import_{mode}": r[f"import_{mode}"]}}),
                      file=sys.stderr, flush=True)
        if "query" in checks:
            r["query_1m"] = check_query(args, catalog)
            print(json.dumps({catalog: {"query_1m": r["query_1m"]}}), file=sys.stderr,
                  flush=True)
        if args.format != "today":
            if "concurrent" in checks:
                r["concurrent"] = check_concurrent(args, catalog, guard=False)
                r["concurrent_guarded"] = check_concurrent(args, catalog, guard=True)
                print(json.dumps({catalog: {"concurrent": r["concurrent"]}}), file=sys.stderr,
                      flush=True)
            if "crash" in checks:
                for mode in args.modes.split(","):
                    args.concurrent_mode, saved = mode, args.concurrent_mode
                    r[f"crash_{mode}"] = check_crash(
                        args, catalog, [float(d) for d in args.delays.split(",")])
                    args.concurrent_mode = saved
            if "timetravel" in checks:
                r["timetravel"] = check_timetravel(args, catalog)
        report[catalog] = r
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
