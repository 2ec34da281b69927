"""The worker side of :mod:`trajectories.sql.isolation`, and the reply format both sides share.

The parent starts a fresh interpreter whose boot line imports this module and calls
``worker_main``. The worker answers each request with a pickled reply built from plain data
(``_plain``); the parent reads it with ``load_reply`` (an allow-list of classes) and turns it
into a result or an exception with ``decode_reply``. Both ends of the reply format live here so
they stay in step.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import pickle
import resource
import uuid
import zoneinfo
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from trajectories.sql.result import (
    QueryFailed,
    QueryRefused,
    QueryResult,
    QueryTimeout,
    SandboxError,
)

__all__ = [
    "ACK",
    "MEMORY_MESSAGE",
    "READY",
    "decode_reply",
    "load_reply",
    "too_large_message",
    "worker_main",
]

MEMORY_MESSAGE = "stopped: the query needed more memory than the sandbox allows"
_ERRORS: dict[str, type[SandboxError]] = {
    cls.__name__: cls for cls in (QueryRefused, QueryTimeout, QueryFailed, SandboxError)
}
# Words in an engine message that mean an allocation failed.
_OOM_MARKERS = ("out of memory", "bad allocation", "bad_alloc", "cannot allocate memory")
# What the worker sends once it is ready, and before it runs each request.
READY = b"ready"
ACK = b"go"


def too_large_message(limit: int) -> str:
    return (
        f"stopped: the result is larger than the sandbox passes back "
        f"(limit {limit / (1 << 20):.0f} MiB); select fewer rows or columns"
    )


# --------------------------------------------------------------------------- parent's reading


def decode_reply(reply: tuple[Any, ...]) -> QueryResult:
    kind = reply[0]
    if kind == "ok":
        _, columns, rows, truncated, elapsed_ms, _retire = reply
        return QueryResult(
            columns=[str(c) for c in columns],
            rows=[tuple(r) for r in rows],
            truncated=bool(truncated),
            elapsed_ms=float(elapsed_ms),
        )
    if kind == "error":
        _, name, message, _retire = reply
        raise _ERRORS.get(str(name), QueryFailed)(str(message))
    raise QueryFailed("the sandbox worker sent a reply it should not have")


# Classes a reply may name. Everything else in a reply is built from pickle's own opcodes
# (None, bool, int, float, str, bytes, list, tuple, dict, set).
_REPLY_CLASSES = {
    ("datetime", "date"): dt.date,
    ("datetime", "datetime"): dt.datetime,
    ("datetime", "time"): dt.time,
    ("datetime", "timedelta"): dt.timedelta,
    ("datetime", "timezone"): dt.timezone,
    ("decimal", "Decimal"): decimal.Decimal,
    ("uuid", "UUID"): uuid.UUID,
    ("zoneinfo", "ZoneInfo"): zoneinfo.ZoneInfo,
}


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _REPLY_CLASSES[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a reply") from None


def load_reply(raw: bytes) -> tuple[Any, ...]:
    try:
        reply = _ReplyUnpickler(io.BytesIO(raw)).load()
    except Exception as exc:
        raise QueryFailed(f"the sandbox worker sent an unreadable reply: {exc}") from None
    if not isinstance(reply, tuple) or len(reply) not in (4, 6):
        raise QueryFailed("the sandbox worker sent a reply it should not have")
    return reply


# --------------------------------------------------------------------------- worker side


def worker_main(fd: int) -> None:
    """Entry point of the worker process: answer requests until the pipe closes."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    conn = Connection(fd)
    from trajectories.sql.run import run_readonly  # loads DuckDB before any limit applies

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    conn.send_bytes(READY)
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            return
        request = pickle.loads(raw)  # from our parent only
        if request is None:
            return
        try:
            conn.send_bytes(ACK)
        except (EOFError, OSError):
            return
        db_path, sql, timeout_s, row_cap, memory_limit, max_reply = request
        soft = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            reply, retire = _answer(run_readonly, Path(db_path), sql, timeout_s,
                                    row_cap, max_reply)
        except MemoryError:
            reply, retire = _error_reply("QueryFailed", MEMORY_MESSAGE, retire=True), True
        try:
            conn.send_bytes(reply)
        except (EOFError, OSError):
            return
        if retire:
            # After an allocation failure the heap may be in a poor state: start afresh.
            return


def _answer(run: Any, path: Path, sql: str, timeout_s: float, row_cap: int,
            max_reply: int) -> tuple[bytes, bool]:
    """The pickled reply for one request, and whether the worker should exit after it."""
    try:
        result = run(path, sql, timeout_s=timeout_s, row_cap=row_cap)
    except MemoryError:
        return _error_reply("QueryFailed", MEMORY_MESSAGE, retire=True), True
    except SandboxError as err:
        message = str(err)
        if isinstance(err, QueryFailed) and any(m in message.lower() for m in _OOM_MARKERS):
            return _error_reply("QueryFailed", MEMORY_MESSAGE, retire=True), True
        return _error_reply(type(err).__name__, message), False
    except Exception as exc:  # a bug, not the query's fault: report it on one line
        text = f"sandbox worker error: {type(exc).__name__}: {exc}"
        return _error_reply("QueryFailed", text), False
    rows = [tuple(_plain(v) for v in row) for row in result.rows]
    payload = ("ok", [str(c) for c in result.columns], rows, bool(result.truncated),
               float(result.elapsed_ms), False)
    buf = io.BytesIO()
    _ReplyPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(payload)
    if buf.tell() > max_reply:
        return _error_reply("QueryFailed", too_large_message(max_reply)), False
    return buf.getvalue(), False


def _error_reply(name: str, message: str, *, retire: bool = False) -> bytes:
    return pickle.dumps(("error", name, message, retire), protocol=pickle.HIGHEST_PROTOCOL)


def _reduce_zoneinfo(tz: zoneinfo.ZoneInfo) -> tuple[Any, tuple[str]]:
    return (zoneinfo.ZoneInfo, (str(tz.key),))


class _ReplyPickler(pickle.Pickler):
    # ZoneInfo pickles through getattr() by default; rebuild it from its key instead, so the
    # parent's allow-list needs only the class itself.
    dispatch_table = {zoneinfo.ZoneInfo: _reduce_zoneinfo}


_SCALARS = frozenset({
    type(None), bool, int, float, str, bytes, decimal.Decimal, dt.date, dt.datetime, dt.time,
    dt.timedelta, uuid.UUID,
})  # fmt: skip


def _plain(value: Any) -> Any:
    """``value`` built only from the types a reply may carry; anything else becomes text."""
    kind = type(value)
    if (kind is dt.datetime or kind is dt.time) and value.tzinfo is not None:
        tz = value.tzinfo
        if type(tz) is dt.timezone or (type(tz) is zoneinfo.ZoneInfo and tz.key):
            return value
        offset = value.utcoffset()
        return value.replace(tzinfo=dt.timezone(offset)) if offset is not None else str(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return kind(_plain(v) for v in value)
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is set or kind is frozenset:
        return kind(_plain(v) for v in value)
    if kind is bytearray or kind is memoryview:
        return bytes(value)
    return str(value)
