"""The read-only SQL sandbox for re-running agent and reference SQL against an EHR database.

Agent SQL comes from LLM trajectories and is treated as hostile. Layers of defence: the common
statement guard (:mod:`.guard`), one locked-down module per engine (:mod:`.engine_duckdb`,
:mod:`.engine_sqlite`), a watchdog that stops long queries (:mod:`.watchdog`), and a worker
process that takes memory bombs and hard kills away from the caller (:mod:`.isolation`).
The benchmark's clock (what "now" is) is in :mod:`.clock`. Results and errors are in
:mod:`.result`, cell encoding in :mod:`.cells`, schema listing in :mod:`.introspection` and the
one SQL table extractor in :mod:`.tables`.

Import from here: the names below are the package's public surface.
"""

from __future__ import annotations

from trajectories.sql.cells import cell_text, json_cell
from trajectories.sql.clock import (
    BENCHMARK_NOW,
    at_reference_time,
    check_reference_time,
    reads_clock,
    reference_time_of,
    workspace_reference_time,
)
from trajectories.sql.introspection import describe_tables
from trajectories.sql.isolation import (
    DEFAULT_MEMORY_LIMIT_BYTES,
    MEMORY_MESSAGE,
    IsolatedSandbox,
    run_isolated,
    shutdown,
)
from trajectories.sql.result import (
    QueryFailed,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SandboxError,
    WorkerRestarted,
)
from trajectories.sql.run import ReadonlySession, detect_engine, open_readonly, run_readonly
from trajectories.sql.tables import parse_sql, tables_in_sql

__all__ = [
    "BENCHMARK_NOW",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "MEMORY_MESSAGE",
    "IsolatedSandbox",
    "QueryFailed",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "ReadonlySession",
    "SandboxError",
    "WorkerRestarted",
    "at_reference_time",
    "cell_text",
    "check_reference_time",
    "describe_tables",
    "detect_engine",
    "json_cell",
    "open_readonly",
    "parse_sql",
    "reads_clock",
    "reference_time_of",
    "run_isolated",
    "run_readonly",
    "shutdown",
    "tables_in_sql",
    "workspace_reference_time",
]
