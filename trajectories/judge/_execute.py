"""The judge's way into the sandbox: an ``Executor`` that runs SQL read-only, in the isolated
worker, at the task's reference time, and tells a wrong query from one the sandbox stopped."""

from __future__ import annotations

from pathlib import Path

from trajectories.judge._profiles import Execution, Executor
from trajectories.sql import (
    MEMORY_MESSAGE,
    QueryFailed,
    SandboxError,
    WorkerRestarted,
    run_isolated,
)

__all__ = ["EXECUTION_ROW_CAP", "sandbox_executor"]

#: Rows a judged query may return: a benchmark's scorer compares whole results, so a cut one
#: decides nothing (and is undecided rather than wrong).
EXECUTION_ROW_CAP = 100_000
#: How the sandbox's messages begin when the failure is its own, not the query's.
_NOT_THE_QUERY = ("stopped:", "cannot open database", "sandbox worker error")


def sandbox_executor(db_path: Path, *, timeout_s: float, row_cap: int = EXECUTION_ROW_CAP,
                     default_now: str | None = None) -> Executor:
    """An ``Executor`` over the EHR database at ``db_path``; a task that names no reference
    time runs at ``default_now`` (the workspace's), else at the sandbox's default clock."""

    def execute(sql: str, now: str | None) -> Execution:
        try:
            result = run_isolated(db_path, sql, timeout_s=timeout_s, row_cap=row_cap,
                                  now=now or default_now)
        except WorkerRestarted as err:
            return Execution(stopped=str(err))
        except QueryFailed as err:
            # The database's own error means the query is wrong; the sandbox's own limits
            # (memory, the reply's size: "stopped: ..."), a database it cannot open or a fault
            # of its worker say nothing about the query's result.
            message = str(err)
            if message == MEMORY_MESSAGE or message.startswith(_NOT_THE_QUERY):
                return Execution(stopped=message)
            return Execution(error=message)
        except SandboxError as err:  # refused or timed out: never ran to the end
            return Execution(stopped=str(err))
        if result.truncated:
            return Execution(stopped=f"more than {row_cap} rows (the row cap)")
        return Execution(rows=[list(row) for row in result.rows])

    return execute
