"""Run sandbox queries in a separate worker process, so no query can hurt the caller.

``run_readonly`` (in :mod:`trajectories.sql.run`) already refuses writes, interrupts long queries
and caps rows, but it runs inside the calling process. A single scalar expression that builds an
enormous value (``SELECT repeat('x', 2000000000)``) cannot be interrupted there and can take tens
of seconds and several GB of the app's memory. ``run_isolated`` sends the query to a long-lived
worker process instead:

* The worker is a fresh Python interpreter started with ``subprocess`` (fork immediately
  followed by exec: the "spawn" start method, done directly). Nothing of the parent's memory, in
  particular no DuckDB connection, is carried over. ``multiprocessing``'s own spawn context is
  not used because it re-imports the parent's ``__main__`` in the child, and under Streamlit
  ``__main__`` is the page script being run, which must not run again in the worker.
* The worker lowers its address-space limit (``RLIMIT_AS``, 3 GiB by default) before every
  query and calls ``run_readonly``. Running out of that space, or dying, becomes
  ``QueryFailed("stopped: the query needed more memory than the sandbox allows")`` and the
  worker is replaced.
* The parent enforces a hard deadline of ``timeout_s`` plus a short grace. On overrun it kills
  the worker (SIGKILL) and raises ``QueryTimeout`` with the usual message; the next call starts a
  new worker.
* The worker acknowledges each request before it runs it. A worker that dies before that
  acknowledgement (killed from outside between two queries, say) never ran the query, so the
  parent starts a new worker and sends the query once more; should that one die unacknowledged
  too, the caller gets ``WorkerRestarted`` ("run the query again"), never a misleading memory or
  result-size message.
* Results come back as plain data: the fields of ``QueryResult`` (values limited to the types
  DuckDB and SQLite produce, anything else turned into text) or an error class name plus its
  one-line message. The parent unpickles with an allow-list of classes and refuses replies
  larger than ``MAX_REPLY_BYTES``.

Workers start lazily on first use and are reused. A pool of two lets two callers (threads of
the app) run at once; further callers wait for a free worker. ``shutdown`` stops the workers and
runs at interpreter exit; a worker whose parent disappears sees its pipe close and exits after
the query at hand.

This module is the parent's side. The worker's side (its entry point, and the reply format both
sides share) is :mod:`trajectories.sql.isolation_worker`.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import pickle
import queue
import subprocess
import sys
import threading
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from trajectories.sql.clock import at_reference_time
from trajectories.sql.guard import check_db_path, check_sql_text
from trajectories.sql.isolation_worker import (
    ACK,
    MEMORY_MESSAGE,
    READY,
    decode_reply,
    load_reply,
    too_large_message,
)
from trajectories.sql.result import QueryFailed, QueryResult, WorkerRestarted, timeout_error

__all__ = [
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "MEMORY_MESSAGE",
    "RESTARTED_MESSAGE",
    "IsolatedSandbox",
    "run_isolated",
    "shutdown",
]

# Address space the worker may use while running a query. The interpreter with DuckDB loaded
# already maps about 1.2 GB of it (mostly reserved, not resident), and DuckDB's own memory limit
# is 2 GB, so 3 GiB lets every query DuckDB itself would run through.
DEFAULT_MEMORY_LIMIT_BYTES = 3 << 30
# Extra seconds the parent waits beyond ``timeout_s`` before it kills the worker. The worker's
# own watchdog normally answers with a timeout well inside this.
GRACE_S = 2.0
# Longest wait for a new worker to report that it is ready.
STARTUP_TIMEOUT_S = 60.0
# Largest reply the parent accepts; a bigger result is refused in the worker already.
MAX_REPLY_BYTES = 64 << 20
DEFAULT_WORKERS = 2

RESTARTED_MESSAGE = (
    "the sandbox worker stopped before it ran the query and has been restarted; "
    "nothing was run, run the query again"
)
# The worker's program: a fresh interpreter that runs the entry point in ``isolation_worker``.
_BOOT = "import sys; from trajectories.sql.isolation_worker import worker_main; " \
        "worker_main(int(sys.argv[1]))"


# --------------------------------------------------------------------------- public entry points


def run_isolated(
    db_path: Path,
    sql: str,
    *,
    timeout_s: float = 5.0,
    row_cap: int = 1000,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    now: str | None = None,
) -> QueryResult:
    """``run_readonly`` in a worker process: same result, same exceptions, one-line messages
    (and the same clock: ``now``, default the benchmark's).

    Whatever the query does, this returns or raises within about ``timeout_s + GRACE_S``
    seconds (plus the worker's start-up on first use) and the calling process's memory is not
    touched beyond the (row-capped) result.
    """
    return _default_sandbox().run(
        db_path, sql, timeout_s=timeout_s, row_cap=row_cap,
        memory_limit_bytes=memory_limit_bytes, now=now,
    )


def shutdown() -> None:
    """Stop the shared workers (registered with ``atexit``); a later call starts new ones."""
    global _default
    with _default_lock:
        sandbox, _default = _default, None
    if sandbox is not None:
        sandbox.close()


_default: IsolatedSandbox | None = None
_default_lock = threading.Lock()


def _default_sandbox() -> IsolatedSandbox:
    global _default
    with _default_lock:
        if _default is None:
            _default = IsolatedSandbox()
        return _default


atexit.register(shutdown)


# --------------------------------------------------------------------------- parent side


class IsolatedSandbox:
    """A small pool of worker processes; thread-safe. Most code wants ``run_isolated``."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        grace_s: float = GRACE_S,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.grace_s = max(float(grace_s), 0.0)
        self.startup_timeout_s = float(startup_timeout_s)
        # LIFO: a lone caller keeps reusing the same warm worker.
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._workers = [_Worker() for _ in range(max(int(workers), 1))]
        for worker in self._workers:
            self._idle.put(worker)

    def run(
        self,
        db_path: Path,
        sql: str,
        *,
        timeout_s: float = 5.0,
        row_cap: int = 1000,
        memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
        now: str | None = None,
    ) -> QueryResult:
        # The cheap checks run here, so a missing file or empty SQL starts no worker. The clock
        # is set here too: the worker gets SQL that reads no clock any more.
        path = check_db_path(db_path)
        sql, ran_at = at_reference_time(check_sql_text(sql), now)
        request = (
            os.path.abspath(path),  # the worker's working directory is ours, but be explicit
            sql,
            max(float(timeout_s), 0.0),
            max(int(row_cap), 0),
            int(memory_limit_bytes),
            MAX_REPLY_BYTES,
        )
        worker = self._idle.get()
        try:
            reply = worker.call(
                request,
                deadline_s=max(float(timeout_s), 0.0) + self.grace_s,
                startup_timeout_s=self.startup_timeout_s,
                timeout_s=float(timeout_s),
            )
        finally:
            self._idle.put(worker)
        result = decode_reply(reply)
        return dataclasses.replace(result, ran_at=ran_at) if ran_at else result

    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (for tests and diagnostics)."""
        return [pid for w in self._workers if (pid := w.pid()) is not None]

    def close(self) -> None:
        """Stop every worker process. The pool stays usable: a later call starts new workers."""
        for worker in self._workers:
            worker.stop()


class _Worker:
    """One worker process and the parent's end of its pipe. Used by one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards against close() racing a call
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(
        self, request: tuple[Any, ...], *, deadline_s: float, startup_timeout_s: float,
        timeout_s: float,
    ) -> tuple[Any, ...]:
        with self._lock:
            try:
                return self._call_once(request, deadline_s, startup_timeout_s, timeout_s)
            except _DiedBeforeQuery:
                pass
            # Nothing ran, so sending the same read-only query to a fresh worker is safe.
            try:
                return self._call_once(request, deadline_s, startup_timeout_s, timeout_s)
            except _DiedBeforeQuery:
                raise WorkerRestarted(RESTARTED_MESSAGE) from None

    def _call_once(
        self, request: tuple[Any, ...], deadline_s: float, startup_timeout_s: float,
        timeout_s: float,
    ) -> tuple[Any, ...]:
        conn = self._ensure_started(startup_timeout_s)
        finished = False
        try:
            try:
                conn.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
                acked = conn.poll(deadline_s) and conn.recv_bytes(16) == ACK
            except (EOFError, OSError):
                acked = False
            if not acked:
                # Dead before it took the query (or hung without reading it): the query never
                # started, whatever the reason.
                self._kill()
                finished = True
                raise _DiedBeforeQuery
            if not conn.poll(deadline_s):
                self._kill()
                finished = True
                raise timeout_error(timeout_s)
            try:
                raw = conn.recv_bytes(MAX_REPLY_BYTES + 65536)
            except (EOFError, ConnectionError):
                # The worker died mid-query: killed by the kernel or crashed while
                # allocating. Either way the query asked for too much.
                self._kill()
                finished = True
                raise QueryFailed(MEMORY_MESSAGE) from None
            except OSError:
                # recv_bytes refuses a message longer than its limit with a plain OSError.
                self._kill()
                finished = True
                raise QueryFailed(too_large_message(MAX_REPLY_BYTES + 65536)) from None
            reply = load_reply(raw)
            if reply[-1]:  # the worker retires itself after a memory failure
                self._reap()
            finished = True
            return reply
        finally:
            if not finished:
                # Interrupted (KeyboardInterrupt, broken pipe, bad reply): the worker's
                # state is unknown, so replace it.
                self._kill()

    def stop(self) -> None:
        with self._lock:
            conn = self._conn
            if conn is not None and self._proc is not None and self._proc.poll() is None:
                try:
                    conn.send_bytes(pickle.dumps(None))
                    self._proc.wait(timeout=1.0)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._kill()

    # -- internals (call with self._lock held)

    def _ensure_started(self, startup_timeout_s: float) -> Connection:
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._kill()
        parent_end, child_end = Pipe(duplex=True)
        fd = child_end.fileno()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(fd)],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                # Own session: a Ctrl-C in the terminal goes to the parent, which then stops
                # the worker itself.
                start_new_session=True,
            )
        except OSError as exc:
            parent_end.close()
            raise QueryFailed(f"cannot start the sandbox worker: {exc}") from None
        finally:
            child_end.close()
        self._proc, self._conn = proc, parent_end
        try:
            ready = parent_end.poll(startup_timeout_s) and parent_end.recv_bytes(64) == READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            code = proc.poll()
            self._kill()
            detail = f"exit code {code}" if code is not None else "no answer"
            raise QueryFailed(f"the sandbox worker did not start ({detail})")
        return parent_end

    def _reap(self) -> None:
        """Wait briefly for a worker that is exiting by itself, then make sure it is gone."""
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2.0)
        self._kill()

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.kill()
            proc.wait()


class _DiedBeforeQuery(Exception):
    """The worker was gone before it acknowledged the request."""
