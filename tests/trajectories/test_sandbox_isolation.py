"""Queries run in a worker process: same answers as in-process, and bombs cannot hurt the caller."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trajectories.sql import (
    QueryFailed,
    QueryRefused,
    QueryTimeout,
    SandboxError,
    WorkerRestarted,
    run_readonly,
)
from trajectories.sql.isolation import (
    MEMORY_MESSAGE,
    RESTARTED_MESSAGE,
    IsolatedSandbox,
    run_isolated,
    shutdown,
)

# Runs for minutes unless stopped: a plain scan DuckDB can interrupt between vectors.
LONG_QUERY = "SELECT sum(i) FROM range(1000000000000) t(i)"


@pytest.fixture(params=["duck_db", "lite_db"])
def db(request: pytest.FixtureRequest) -> Path:
    return Path(request.getfixturevalue(request.param))


@pytest.fixture()
def pool() -> Iterator[IsolatedSandbox]:
    sandbox = IsolatedSandbox(workers=2)
    yield sandbox
    sandbox.close()
    assert sandbox.worker_pids() == []


def _rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


# --------------------------------------------------------------------------- same answers


JOIN_SQL = (
    "SELECT p.subject_id, p.gender, count(a.hadm_id) AS n FROM patients p "
    "LEFT JOIN admissions a ON a.subject_id = p.subject_id "
    "GROUP BY p.subject_id, p.gender ORDER BY p.subject_id"
)


def test_select_matches_run_readonly(db: Path) -> None:
    expected = run_readonly(db, JOIN_SQL)
    got = run_isolated(db, JOIN_SQL)
    assert got.columns == expected.columns == ["subject_id", "gender", "n"]
    assert got.rows == expected.rows
    assert got.truncated is False

    capped = run_isolated(db, "SELECT subject_id FROM patients ORDER BY 1", row_cap=2)
    assert capped.rows == [(1,), (2,)] and capped.truncated is True


def test_duckdb_value_types_survive_the_trip(duck_db: Path) -> None:
    sql = (
        "SELECT 1.50::DECIMAL(10, 2) AS d, DATE '2020-01-02' AS day, "
        "TIMESTAMP '2020-01-02 03:04:05' AS ts, TIMESTAMPTZ '2020-01-02 03:04:05+02' AS tz, "
        "INTERVAL 3 DAY AS iv, '00000000-0000-0000-0000-000000000001'::UUID AS u, "
        "[1, 2] AS l, {'a': 1} AS s, 'ab'::BLOB AS b, NULL AS nothing, 'nan'::DOUBLE AS nan"
    )
    expected = run_readonly(duck_db, sql).rows[0]
    got = run_isolated(duck_db, sql).rows[0]
    assert got[:-1] == expected[:-1]
    assert [type(v) for v in got] == [type(v) for v in expected]
    assert got[-1] != got[-1]  # NaN


# --------------------------------------------------------------------------- same exceptions


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("DELETE FROM patients", QueryRefused),
        ("SELECT 1; SELECT 2", QueryRefused),
        ("   ", QueryRefused),
        ("SELECT no_such_column FROM patients", QueryFailed),
        ("SELECT * FROM no_such_table", QueryFailed),
    ],
)
def test_errors_have_the_same_class_and_message(db: Path, sql: str, error: type) -> None:
    with pytest.raises(error) as in_process:
        run_readonly(db, sql)
    with pytest.raises(error) as isolated:
        run_isolated(db, sql)
    assert str(isolated.value) == str(in_process.value)
    assert "\n" not in str(isolated.value)


def test_missing_database_fails_without_a_worker(tmp_path: Path, pool: IsolatedSandbox) -> None:
    with pytest.raises(QueryFailed, match="database file not found"):
        pool.run(tmp_path / "absent.duckdb", "SELECT 1")
    assert pool.worker_pids() == []


def test_interruptible_runaway_times_out_and_keeps_the_worker(
    duck_db: Path, pool: IsolatedSandbox
) -> None:
    assert pool.run(duck_db, "SELECT 1").rows == [(1,)]
    before = pool.worker_pids()
    start = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"^stopped: exceeded 1\.0 s$"):
        pool.run(duck_db, "SELECT count(*) FROM range(1000000000000) a", timeout_s=1.0)
    assert time.monotonic() - start < 1.0 + 10
    # The worker's own watchdog stopped it, so the same worker answers the next query.
    assert pool.worker_pids() == before
    assert pool.run(duck_db, "SELECT count(*) FROM patients").rows == [(5,)]


def test_sqlite_runaway_times_out(lite_db: Path, pool: IsolatedSandbox) -> None:
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT count(*) FROM c"
    )
    start = time.monotonic()
    with pytest.raises(QueryTimeout):
        pool.run(lite_db, sql, timeout_s=1.0)
    assert time.monotonic() - start < 1.0 + 10


# --------------------------------------------------------------------------- bombs


@pytest.mark.parametrize(
    "sql", ["SELECT length(repeat('x', 2000000000))", "SELECT repeat('x', 2000000000)"]
)
def test_memory_bomb_is_stopped_without_touching_the_parent(
    duck_db: Path, pool: IsolatedSandbox, sql: str
) -> None:
    assert pool.run(duck_db, "SELECT 1").rows == [(1,)]
    rss_before = _rss_kb()
    start = time.monotonic()
    with pytest.raises((QueryFailed, QueryTimeout)) as info:
        pool.run(duck_db, sql, timeout_s=5.0)
    assert time.monotonic() - start < 5.0 + 10
    # DuckDB 2.0 refuses the allocation at once; 1.5 (the line DuckLake's wheels match) builds
    # the string until the time limit ends it. Either way the worker's guard stopped it.
    assert str(info.value) in (MEMORY_MESSAGE, "stopped: exceeded 5.0 s")
    assert _rss_kb() - rss_before < 50_000  # kB
    assert pool.run(duck_db, "SELECT count(*) FROM patients").rows == [(5,)]


def test_unresponsive_worker_is_killed_and_replaced(duck_db: Path, pool: IsolatedSandbox) -> None:
    # Whether DuckDB can interrupt a given scalar call changes between its releases, so the
    # worker is made unresponsive for certain: stopped (SIGSTOP) while it runs a long query.
    # Only the parent's hard deadline can end that call, by killing the worker.
    assert pool.run(duck_db, "SELECT 1").rows == [(1,)]
    first = pool.worker_pids()
    assert len(first) == 1
    freeze = threading.Timer(0.3, os.kill, (first[0], signal.SIGSTOP))
    freeze.start()
    rss_before = _rss_kb()
    try:
        with pytest.raises(QueryTimeout, match=r"^stopped: exceeded 1\.0 s$"):
            pool.run(duck_db, LONG_QUERY, timeout_s=1.0)
    finally:
        freeze.cancel()
    assert _rss_kb() - rss_before < 50_000  # kB
    assert pool.worker_pids() == []  # killed, not left running
    assert pool.run(duck_db, "SELECT count(*) FROM patients").rows == [(5,)]
    second = pool.worker_pids()
    assert len(second) == 1 and second != first


def test_small_memory_limit_stops_a_big_value(duck_db: Path, pool: IsolatedSandbox) -> None:
    # 300 MB of text fits DuckDB's own limit, but not a worker allowed 1.5 GiB of address space
    # (the interpreter with DuckDB loaded already takes most of that).
    with pytest.raises(QueryFailed, match="more memory than the sandbox allows"):
        pool.run(duck_db, "SELECT repeat('x', 300000000)", memory_limit_bytes=3 << 29)
    assert pool.run(duck_db, "SELECT 2").rows == [(2,)]


def _wait_until_dead(pid: int, deadline_s: float = 30.0) -> None:
    """Poll until the killed child is waitable (without reaping it), instead of guessing a sleep."""
    import os

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return  # already reaped
        time.sleep(0.005)
    raise AssertionError(f"process {pid} still alive {deadline_s} s after SIGKILL")


def test_worker_killed_from_outside_is_replaced(duck_db: Path, pool: IsolatedSandbox) -> None:
    import os
    import signal

    assert pool.run(duck_db, "SELECT 1").rows == [(1,)]
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGKILL)
    _wait_until_dead(pid)
    assert pool.run(duck_db, "SELECT 3").rows == [(3,)]
    assert pool.worker_pids() != [pid]


def test_worker_killed_just_before_a_query_is_restarted_and_the_query_runs(
    duck_db: Path, pool: IsolatedSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the worker looks alive when picked, and is dead by the time it gets the query.

    The liveness check is made to miss the death so the race happens every time; the process
    itself is really killed. It used to surface as a memory or "result larger" error.
    """
    import os
    import signal

    assert pool.run(duck_db, "SELECT 1").rows == [(1,)]
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGKILL)
    _wait_until_dead(pid)
    (worker,) = [w for w in pool._workers if w._proc is not None]
    assert worker._proc is not None
    monkeypatch.setattr(worker._proc, "poll", lambda: None)
    assert pool.run(duck_db, "SELECT 4").rows == [(4,)]
    assert pid not in pool.worker_pids()


def test_worker_dying_before_every_attempt_gives_a_clear_restart_error(
    duck_db: Path, pool: IsolatedSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from trajectories.sql import isolation

    started = isolation._Worker._ensure_started

    def start_then_die(self: isolation._Worker, startup_timeout_s: float) -> object:
        conn = started(self, startup_timeout_s)
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGKILL)
        _wait_until_dead(self._proc.pid)
        return conn

    monkeypatch.setattr(isolation._Worker, "_ensure_started", start_then_die)
    with pytest.raises(WorkerRestarted) as caught:
        pool.run(duck_db, "SELECT 5")
    assert str(caught.value) == RESTARTED_MESSAGE
    assert "memory" not in str(caught.value) and "larger" not in str(caught.value)
    monkeypatch.undo()
    assert pool.run(duck_db, "SELECT 6").rows == [(6,)]


# --------------------------------------------------------------------------- concurrency, shutdown


def test_concurrent_callers_get_their_own_answers(duck_db: Path, lite_db: Path) -> None:
    sandbox = IsolatedSandbox(workers=2)
    results: dict[int, object] = {}

    def ask(i: int) -> None:
        path = duck_db if i % 2 else lite_db
        sql = f"SELECT {i} AS i, count(*) AS n FROM patients WHERE subject_id <= {i % 6}"
        try:
            results[i] = sandbox.run(path, sql).rows
        except SandboxError as err:  # pragma: no cover - reported by the assert below
            results[i] = err

    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert results == {i: [(i, min(i % 6, 5))] for i in range(12)}
        assert 1 <= len(sandbox.worker_pids()) <= 2
    finally:
        sandbox.close()


def test_shutdown_stops_the_shared_worker_and_the_next_call_restarts_it(duck_db: Path) -> None:
    assert run_isolated(duck_db, "SELECT 1").rows == [(1,)]
    shutdown()
    assert run_isolated(duck_db, "SELECT 2").rows == [(2,)]
    shutdown()
