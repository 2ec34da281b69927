"""The rows a SQL tool printed, whatever layout it printed them in.

Tools print results as a Python literal (``[('insulin', 3)]``, the tau-bench harness), JSON
(a list of objects or of lists, or ``{"columns": [...], "data": [...]}``), a markdown or
box-drawn table, ``psql``'s pipe layout, a pandas listing (``DataFrame.to_string``: columns
right-aligned under their names, what Python-based MCP servers return) or CSV. Each reader
accepts only text that is wholly its layout; the first that does gives the table. An error
output (``trajectories.reading.is_error_output``) is never a table. A short preamble line
("Query results:") before the table is skipped.
"""

from __future__ import annotations

import ast
import csv
import io
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from trajectories.reading._errors import is_error_output
from trajectories.reading._literal import literal_rows, split_cut_note

#: Cells read from text that mean no value.
NULL_CELLS = frozenset({"None", "NaN", "nan", "NaT", "<NA>", "NULL", "null", ""})
#: Most lines of preamble skipped before a table.
_MAX_PREAMBLE = 3
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_INTEGER = re.compile(r"^[+-]?\d{1,18}$")
_EMPTY = re.compile(
    r"^\s*(?:\[\s*\]|no (?:rows|results?|records?|data)(?: (?:found|returned))?\.?"
    r"|0 rows?(?: returned)?\.?|empty (?:result|set|dataframe)\.?|\(0 rows\))\s*$", re.I)
_PANDAS_EMPTY = re.compile(r"^Empty DataFrame\s*\nColumns: \[(?P<cols>.*)\]\s*\nIndex: \[\]\s*$")
_PANDAS_FOOTER = re.compile(r"^\[(\d+) rows x (\d+) columns\]$")
_PSQL_FOOTER = re.compile(r"^\((\d+) rows?\)$")
_BORDER = re.compile(r"^[\s\-+=:|─━┌┐└┘├┤┬┴┼╭╮╰╯═║╔╗╚╝╠╣╦╩╬│┃╞╡╪]+$")
_PIPE = re.compile(r"[|│┃║]")
#: A line a tool writes before its table: a heading, emphasis, an emoji, or text ending in ':'.
_PREAMBLE = re.compile(r"^\s*(?:#+\s|\*\*|[^\w\s\[{(|\-+]).*$|^[^\[{(|]*:\s*$")
#: Characters no column name of a listing holds (they make literals and JSON).
_NOT_IN_NAMES = re.compile(r"[\[\]{}'\"]")


@dataclass
class ResultTable:
    """A result read from text: its column names when the layout gives them, its rows (cells
    as numbers, text or None), and the full row count when the tool printed only some."""

    rows: list[list[Any]]
    columns: list[str] | None = None
    total: int | None = None
    layout: str = "literal"
    notes: list[str] = field(default_factory=list)

    @property
    def cut(self) -> bool:
        return self.total is not None and self.total != len(self.rows)


def cell(text: str) -> Any:
    """A printed cell as a value: an integer, a number, None, or the text itself."""
    value = text.strip()
    if value in NULL_CELLS:
        return None
    if _INTEGER.match(value):
        return int(value)
    if _NUMBER.match(value):
        return float(value)
    return value


def result_table(text: str | None) -> ResultTable | None:
    """The table ``text`` prints, or None when it is not a result (an error, prose, a listing
    that does not line up)."""
    if not text or not text.strip() or is_error_output(text):
        return None
    body, _, total = split_cut_note(text)
    fast = literal_rows(body.strip())
    if fast is not None:
        return ResultTable([row if type(row) is list else [row] for row in fast], total=total)
    stripped = body.strip()
    if stripped[:1] in "[(":
        # A list is read as JSON or as the Python literal it is, or not at all: a damaged
        # literal is not a listing of another layout.
        table = _python_literal(stripped) or _json(stripped)
        if table is not None:
            table.total = total
        return table
    # Only blank lines go: a listing's leading spaces are its alignment. (Split at line feeds
    # only: str.splitlines() also splits at characters a cell may hold, such as U+0085.)
    lines = [line.rstrip() for line in body.split("\n") if line.strip()]
    for skip in range(min(_MAX_PREAMBLE, len(lines) - 1) + 1):
        if skip and not _PREAMBLE.match(lines[skip - 1]):
            break
        table = _read("\n".join(lines[skip:]))
        if table is not None:
            if total is not None:
                table.total = total
            return table
    return None


def _read(text: str) -> ResultTable | None:
    if _EMPTY.match(text):
        return ResultTable([], layout="empty")
    for reader in (_json, _pandas_empty, _pipes, _csv, _scalar):
        table = reader(text.strip())
        if table is not None:
            return table
    return _pandas_listing(text)


def _python_literal(text: str) -> ResultTable | None:
    if text[:1] not in "[(" or len(text) > 5_000_000:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list):
        return None
    if value and all(isinstance(row, dict) for row in value):
        return _json_rows(value)  # a list of records, as JSON writes them
    return ResultTable([list(row) if isinstance(row, tuple | list) else [row] for row in value])


def _json(text: str) -> ResultTable | None:
    if text[:1] not in "[{":
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, dict):
        columns = value.get("columns")
        for key in ("data", "rows", "result", "results", "records"):
            if isinstance(value.get(key), list):
                table = _json_rows(value[key])
                if table is not None and isinstance(columns, list) and table.columns is None:
                    table.columns = [str(c) for c in columns]
                return table
        return None
    return _json_rows(value) if isinstance(value, list) else None


def _json_rows(items: list[Any]) -> ResultTable | None:
    if items and all(isinstance(item, dict) for item in items):
        columns = [str(k) for k in items[0]]
        return ResultTable([[item.get(c) for c in columns] for item in items], columns,
                           layout="json")
    if all(isinstance(item, list) for item in items):
        return ResultTable([list(item) for item in items], layout="json")
    if all(not isinstance(item, dict | list) for item in items):
        return ResultTable([[item] for item in items], layout="json")
    return None


def _pandas_empty(text: str) -> ResultTable | None:
    match = _PANDAS_EMPTY.match(text)
    if match is None:
        return None
    columns = [c.strip() for c in match["cols"].split(",") if c.strip()]
    return ResultTable([], columns, layout="pandas")


def _pipes(text: str) -> ResultTable | None:
    """Markdown, box-drawn and psql tables: cells between pipes, borders skipped, the row
    before the first border the header."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2 or not _PIPE.search(lines[0] if not _BORDER.match(lines[0]) else lines[1]):
        return None
    footer_total: int | None = None
    if _PSQL_FOOTER.match(lines[-1].strip()):
        footer_total = int(_PSQL_FOOTER.match(lines[-1].strip())[1])  # type: ignore[index]
        lines = lines[:-1]
    rows: list[list[str]] = []
    header: list[str] | None = None
    for line in lines:
        if _BORDER.match(line):
            if rows and header is None and len(rows) == 1:
                header = rows.pop()
            continue
        if not _PIPE.search(line):
            return None
        cells = _PIPE.split(line.strip())
        if cells and not cells[0].strip():
            cells = cells[1:]
        if cells and not cells[-1].strip():
            cells = cells[:-1]
        rows.append([c.strip() for c in cells])
    width = len(header) if header is not None else len(rows[0]) if rows else 0
    if width == 0 or any(len(row) != width for row in rows) or header is None:
        return None
    values = [[cell(_unmark(c)) for c in row] for row in rows]
    table = ResultTable(values, [_unmark(h) for h in header], layout="table")
    if footer_total is not None and footer_total != len(values):
        return None
    return table


def _unmark(text: str) -> str:
    """A markdown cell's text without emphasis and code marks."""
    return text.strip().strip("*_`").strip()


def _pandas_listing(text: str) -> ResultTable | None:
    """``DataFrame.to_string()``: columns separated by blank gutters that run through every
    line, each column's name over it (right-aligned by default). A gutter can also fall inside
    a column (the space of ``2100-08-19 11:00:00`` under a short name): a piece with no name
    over it belongs to the named piece beside it, to its right when names are right-aligned,
    else to its left. A leftmost unnamed piece counting 0, 1, 2... is the printed index."""
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    total: int | None = None
    if lines and _PANDAS_FOOTER.match(lines[-1].strip()):
        total = int(_PANDAS_FOOTER.match(lines[-1].strip())[1])  # type: ignore[index]
        lines = lines[:-1]
    data = [line for line in lines[1:] if not _ellipsis_row(line)]
    if len(lines) < 2 or not data or not lines[0].strip():
        return None
    header = lines[0]
    if header.lstrip()[:1] in "[{(" or _NOT_IN_NAMES.search(header):
        return None  # the start of a literal or JSON document, not a row of column names
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in [header, *data]]
    pieces: list[tuple[int, int]] = []
    start: int | None = None
    for pos in range(width + 1):
        blank = pos == width or all(line[pos] == " " for line in padded)
        if not blank and start is None:
            start = pos
        elif blank and start is not None:
            pieces.append((start, pos))
            start = None
    if pieces and _is_range_index(pieces[0], header, data):
        pieces = pieces[1:]
    for rightward in (True, False):
        columns = _name_pieces(pieces, header, rightward)
        if columns is None:
            continue
        rows = [[line[a:b] for a, b in columns] for line in padded[1:]]
        if all(c.strip() for row in rows for c in row) and _aligned(columns, padded):
            names = [header[a:b].strip() for a, b in columns]
            return ResultTable([[cell(c) for c in row] for row in rows], names, total=total,
                               layout="pandas")
    return None


def _aligned(columns: list[tuple[int, int]], lines: list[str]) -> bool:
    """Every column's cells, its name included, end where the column ends (right-aligned) or
    start where it starts (left-aligned): what makes a listing, not a block of text."""
    for a, b in columns:
        cells = [line[a:b] for line in lines]
        if not (all(c[-1] != " " for c in cells) or all(c[0] != " " for c in cells)):
            return False
    return True


def _is_range_index(piece: tuple[int, int], header: str, data: list[str]) -> bool:
    a, b = piece
    if header[a:b].strip():
        return False
    return [line[a:b].strip() for line in data] == [str(i) for i in range(len(data))] \
        and len(data) > 0


def _name_pieces(pieces: list[tuple[int, int]], header: str,
                 rightward: bool) -> list[tuple[int, int]] | None:
    """Pieces merged so that each has exactly one name over it; None when that fails."""
    merged: list[tuple[int, int]] = []
    pending: int | None = None  # start of unnamed pieces waiting for a named one
    order = pieces if rightward else list(reversed(pieces))
    for a, b in order:
        named = bool(header[a:b].strip())
        if not named:
            if pending is None:
                pending = a if rightward else b
            continue
        if pending is not None:
            a, b = (pending, b) if rightward else (a, pending)
            pending = None
        if len(header[a:b].split()) != 1:
            return None
        merged.append((a, b))
    if pending is not None or not merged:
        return None
    return merged if rightward else list(reversed(merged))


def _ellipsis_row(line: str) -> bool:
    return bool(line.strip()) and set(line.split()) <= {"...", "..", "…"}


def _csv(text: str) -> ResultTable | None:
    lines = text.split("\n")
    if len(lines) < 2:
        return None
    delimiter = "\t" if "\t" in lines[0] else ","
    if delimiter not in lines[0]:
        return None
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    rows = [row for row in rows if row]
    width = len(rows[0])
    if width < 2 or any(len(row) != width for row in rows):
        return None
    return ResultTable([[cell(c) for c in row] for row in rows[1:]],
                       [c.strip() for c in rows[0]], layout="csv")


def _scalar(text: str) -> ResultTable | None:
    """A lone value: a number printed alone is a one-cell result."""
    if "\n" in text or not _NUMBER.match(text.strip()):
        return None
    return ResultTable([[cell(text)]], layout="scalar")


def sql_result(observation: str | None) -> tuple[list[list[Any]] | None, int | None]:
    """The rows a SQL tool printed and, when it printed only some, the full row count; rows
    are None when the text is not a readable result."""
    table = result_table(observation)
    if table is None:
        return None, None
    return table.rows, table.total
