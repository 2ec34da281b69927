"""Turn recorded observations into structured values for display, without executing anything.

Observations are untrusted text. Nothing here evaluates code: Python-literal results such as
``[('insulin',), ('heparin', 3)]`` are read with ``ast.literal_eval``, which only accepts
literals, and only below a size limit.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

MAX_PARSE_CHARS = 200_000
COLLAPSE_CHARS = 1_500  # longer observations start collapsed in the viewer


@dataclass(frozen=True)
class Tabular:
    columns: list[str]
    rows: list[list[Any]]


def _rows_from(value: Any) -> Tabular | None:
    if isinstance(value, list | tuple) and value:
        if all(isinstance(r, dict) for r in value):
            columns = list(dict.fromkeys(k for r in value for k in r))
            return Tabular(columns, [[r.get(c) for c in columns] for r in value])
        if all(isinstance(r, list | tuple) for r in value):
            width = max(len(r) for r in value)
            columns = [f"col{i + 1}" for i in range(width)]
            return Tabular(columns, [list(r) + [None] * (width - len(r)) for r in value])
    return None


def _pipe_table(text: str) -> Tabular | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or not all("|" in ln for ln in lines[:2]):
        return None
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    header, body = cells[0], [r for r in cells[1:] if not all(set(c) <= set("-:+ ") for c in r)]
    if not body or any(len(r) != len(header) for r in body):
        return None
    return Tabular(header, [list(r) for r in body])


def parse_tabular(observation: str | None) -> Tabular | None:
    """A table when the observation clearly is one (JSON rows, Python literal rows, pipe table)."""
    if not observation or len(observation) > MAX_PARSE_CHARS:
        return None
    text = observation.strip()
    if text[:1] in "[(" and text[-1:] in "])":
        for reader in (json.loads, ast.literal_eval):
            try:
                value = reader(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            table = _rows_from(value)
            if table is not None:
                return table
    return _pipe_table(text)


def should_collapse(text: str | None) -> bool:
    return bool(text) and len(text or "") > COLLAPSE_CHARS


def preview(text: str | None, limit: int = 160) -> str:
    if not text:
        return ""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


#: An answer longer than this on one line is shown one item (row) per line.
ANSWER_LINE_CHARS = 60


def answer_text(value: object) -> str:
    """An answer (or a ground truth) as JSON with one row per line, so a list of rows reads like
    a table and fits a small box (indented JSON spent a line on every value: a three-row answer
    took fifteen lines). Short answers stay on one line."""
    one_line = compact_json(value)
    if not isinstance(value, list) or not value or len(one_line) <= ANSWER_LINE_CHARS:
        return one_line
    return "[\n" + ",\n".join(" " + compact_json(item) for item in value) + "\n]"


def compact_json(value: object) -> str:
    """JSON on one line, non-ASCII kept, anything JSON cannot encode as its text (a row of an
    answer diff: the table cell wraps it)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def pretty_arguments(raw: str | None) -> tuple[str, bool]:
    """Indented JSON for valid arguments; the raw text (flagged) when the agent emitted garbage."""
    if raw is None:
        return "", True
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False), True
    except ValueError:
        return raw, False
