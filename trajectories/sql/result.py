"""What a sandboxed query gives back: a ``QueryResult`` or one of the ``SandboxError`` kinds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faillab_core.errors import FaillabError
from trajectories.sql.cells import cell_text, json_cell

__all__ = [
    "QueryFailed",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "SandboxError",
    "WorkerRestarted",
    "one_line",
    "timeout_error",
]

_ONE_LINE_MAX = 500


class SandboxError(FaillabError):
    """Base class: the message is always a single line fit for showing to a reviewer."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    @property
    def message(self) -> str:
        return str(self)


class QueryRefused(SandboxError):
    """The SQL was not run because the sandbox does not allow it."""


class QueryTimeout(SandboxError):
    """The query was stopped after exceeding its time budget."""


class QueryFailed(SandboxError):
    """The database itself rejected or failed the query (its own message, on one line)."""


class WorkerRestarted(QueryFailed):
    """The isolated worker died before it started the query; nothing ran, so a retry is safe."""


def timeout_error(timeout_s: float) -> QueryTimeout:
    return QueryTimeout(f"stopped: exceeded {float(timeout_s):.1f} s")


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_ms: float
    #: The reference time the query's clock read (``trajectories.sql.clock``); None when the
    #: query reads no clock.
    ran_at: str | None = None

    @classmethod
    def from_fetch(cls, columns: list[str], fetched: Sequence[Sequence[Any]], row_cap: int,
                   started: float) -> QueryResult:
        """The result of a fetch of ``row_cap + 1`` rows begun at ``started``
        (``time.perf_counter()``): the extra row only tells that more were there."""
        return cls(columns=columns, rows=[tuple(r) for r in fetched[:row_cap]],
                   truncated=len(fetched) > row_cap,
                   elapsed_ms=(time.perf_counter() - started) * 1000.0)

    def json_rows(self) -> list[list[Any]]:
        """Rows with every value converted to something ``json.dumps`` accepts (strict JSON)."""
        return [[json_cell(v) for v in row] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "rows": self.json_rows(),
            "truncated": self.truncated,
            "elapsed_ms": self.elapsed_ms,
            **({"ran_at": self.ran_at} if self.ran_at else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False)

    def to_text(self, *, max_rows: int | None = None, max_col_width: int = 40) -> str:
        """A plain-text table with a header, a rule, the rows and a one-line footer."""
        shown = self.rows if max_rows is None else self.rows[: max(0, max_rows)]
        header = [_clip(str(c), max_col_width) for c in self.columns]
        body = [[_clip(cell_text(v), max_col_width) for v in row] for row in shown]
        widths = [len(h) for h in header]
        for row in body:
            for i, cell in enumerate(row):
                if i < len(widths):
                    widths[i] = max(widths[i], len(cell))
        lines = []
        if header:
            lines.append(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
            lines.append("-+-".join("-" * w for w in widths))
        for row in body:
            lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))
        n = len(self.rows)
        footer = f"({n} row{'s' if n != 1 else ''}"
        if self.truncated:
            footer += f"; stopped at the row cap of {n}, more rows exist"
        if len(shown) < n:
            footer += f"; showing the first {len(shown)}"
        if self.ran_at:
            footer += f"; ran at {self.ran_at}, the benchmark's clock"
        lines.append(footer + ")")
        return "\n".join(line.rstrip() for line in lines)


def _clip(text: str, width: int) -> str:
    width = max(width, 2)
    return text if len(text) <= width else text[: width - 1] + "…"


def one_line(message: str) -> str:
    """Collapse an engine message into one line, dropping DuckDB's caret pointer lines."""
    parts = []
    for raw in str(message).splitlines():
        line = raw.strip()
        if not line or set(line) <= {"^", " "}:
            continue
        parts.append(line)
    text = re.sub(r"\s+", " ", " ".join(parts)).strip()
    if len(text) > _ONE_LINE_MAX:
        text = text[: _ONE_LINE_MAX - 1] + "…"
    return text or "unknown error"
