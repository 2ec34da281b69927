"""The benchmark's clock: the time a query that asks for "now" runs at.

EHRSQL and the benchmarks built on it (EHR-Complex, EHR-RobustGym, the m3 tasks) ask every
question at a fixed moment, ``2100-12-31 23:59:00``: MIMIC-IV's dates are shifted into the
2100s, so a question about "this year" or "yesterday" means that year and that day, and its gold
SQL says ``current_time``. Run against the machine's clock such a query finds nothing.

The sandbox puts the reference time in place of the clock in every query it runs (agent SQL,
reference SQL, the evidence finder, the judge's re-execution, the page's Re-run), on SQLite and
DuckDB alike, by the same textual replacements the EHRSQL-2024 scorer's post-processing makes:

* ``current_time`` and the literal ``'now'`` and ``NOW()`` become the reference time;
* ``current_date`` and ``CURDATE()`` become its date, ``CURTIME()`` its time of day.

The replacements are case-sensitive and textual, as the scorer's are, so a query means under
faillab exactly what it meant when the benchmark scored it; other spellings (``CURRENT_TIMESTAMP``,
``date('NOW')``) are left to the engine's own clock, as the scorer left them. A task (or its
task file) may name another reference time in its ``reference_time`` field; a task that names
none runs at the workspace's (``faillab sandbox use --reference-time``), else at EHRSQL's.
Every result says the time it ran at (``QueryResult.ran_at``), or nothing
when the query reads no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trajectories.sql.result import QueryRefused

__all__ = [
    "BENCHMARK_NOW",
    "at_reference_time",
    "check_reference_time",
    "reads_clock",
    "reference_time_of",
    "workspace_reference_time",
]

#: EHRSQL's "now", shared by the benchmarks built on it.
BENCHMARK_NOW = "2100-12-31 23:59:00"

# The reference time goes into SQL text, so only this exact shape is accepted: nothing a task
# file says can end the quoted literal it is put in.
_TIME_SHAPE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def check_reference_time(value: str) -> str:
    """``value`` when it is a real ``YYYY-MM-DD HH:MM:SS`` time, else ``QueryRefused``."""
    text = str(value).strip()
    if not _TIME_SHAPE.fullmatch(text):
        raise QueryRefused(f"refused: a reference time is written YYYY-MM-DD HH:MM:SS, "
                           f"not {text[:40]!r}")
    try:
        # A wall time without a zone, as the databases store theirs.
        datetime.strptime(text, "%Y-%m-%d %H:%M:%S")  # noqa: DTZ007
    except ValueError:
        raise QueryRefused(f"refused: {text!r} is not a real time") from None
    return text


def _replacements(now: str) -> tuple[tuple[str, str], ...]:
    day, time_of_day = now.split(" ")
    # The scorer's order; no token is a part of another's replacement, so order only matters
    # for reading the two side by side.
    return (("current_time", f"'{now}'"), ("current_date", f"'{day}'"), ("'now'", f"'{now}'"),
            ("NOW()", f"'{now}'"), ("CURDATE()", f"'{day}'"), ("CURTIME()", f"'{time_of_day}'"))


def reads_clock(sql: str) -> bool:
    """Whether ``sql`` asks for the current time in one of the replaced spellings."""
    return any(token in sql for token, _ in _replacements(BENCHMARK_NOW))


def at_reference_time(sql: str, now: str | None = None) -> tuple[str, str | None]:
    """``(the SQL as it runs, the time it runs at)``: every clock token replaced by ``now``
    (default ``BENCHMARK_NOW``); the time is None, and the SQL unchanged, when it reads no
    clock."""
    if not reads_clock(sql):
        return sql, None
    when = BENCHMARK_NOW if now is None else check_reference_time(now)
    for token, literal in _replacements(when):
        sql = sql.replace(token, literal)
    return sql, when


def reference_time_of(task: Mapping[str, Any] | None) -> str | None:
    """The task's own reference time (its ``reference_time`` field), or None for the default.
    A malformed one is refused rather than silently replaced by the default."""
    value = None if task is None else task.get("reference_time")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_reference_time(str(value))


def workspace_reference_time(settings: Mapping[str, Any]) -> str | None:
    """A workspace's own reference time (its settings' ``reference_time``, set with ``faillab
    sandbox use --reference-time``), or None for the default."""
    value = settings.get("reference_time")
    return check_reference_time(value) if isinstance(value, str) and value.strip() else None
