"""Executing the reference's parts and the agent's queries read-only, for the evidence finder.

Everything runs through the SQL sandbox (:mod:`trajectories.sql`): one read-only session per
probe, every statement guarded, time-limited (``TIMEOUT_S``) and row-capped (``ROW_CAP``).
Results are cached per SQL text, because agents repeat queries and many trajectories share a
task. A query the sandbox refuses, stops or fails gives None: for evidence, a failed query is
simply no result.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajectories.signals import as_table
from trajectories.sql import (
    QueryResult,
    SandboxError,
    describe_tables,
    json_cell,
    open_readonly,
    run_isolated,
)

__all__ = ["ROW_CAP", "TIMEOUT_S", "CodeInfo", "Probe", "Rows", "same_rows"]

TIMEOUT_S = 2.0
ROW_CAP = 200
# Results shared by every probe of a process, keyed by the database file's identity (path, size,
# modification time) and the SQL text: the app opens a probe per page run and the pre-labeller
# one per batch, and the same references and agent queries come back. Bounded (rows are capped
# at ROW_CAP, so an entry is small); a changed file is a new key.
_SHARED_MAX = 4096
_shared: OrderedDict[tuple[str, int, int, str], Rows | None] = OrderedDict()
_shared_lock = threading.Lock()
# Codes are agent-written literals spliced into a look-up query: only these shapes qualify.
_RE_CODE = re.compile(r"^[A-Za-z0-9._|-]{1,20}$")  # "|": EHRSQL writes codes as icd9|5491
_RE_VERSIONED = re.compile(r"^icd(\d+)\|", re.I)
_RE_PATTERN = re.compile(r"^[^'\\]{1,80}$")
# Dictionary tables: (table, code column, version column or None, label column).
_DICTIONARIES = (
    ("d_icd_diagnoses", "icd_code", "icd_version", "long_title"),
    ("d_icd_procedures", "icd_code", "icd_version", "long_title"),
    ("d_labitems", "itemid", None, "label"),
    ("d_items", "itemid", None, "label"),
)


@dataclass(frozen=True, slots=True)
class Rows:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool

    def text(self, limit: int) -> str:
        shown = "; ".join(", ".join(str(v) for v in row) for row in self.rows[:5])
        more = f" (+{len(self.rows) - 5} more rows)" if len(self.rows) > 5 else ""
        text = f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}: {shown}{more}"
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    table: str
    version: str | None
    label: str

    def describe(self) -> str:
        version = f"ICD-{self.version} " if self.version else ""
        return f"{version}{self.label!r} in {self.table}"


def same_rows(a: Rows, b: Rows) -> bool:
    """Same values row for row, whatever the column names and row order (numbers to 2 dp)."""
    if a.truncated or b.truncated:
        return False
    return sorted(as_table(list(a.rows)) or []) == sorted(as_table(list(b.rows)) or [])


_Execute = Callable[[str], QueryResult]


class Probe:
    """Sandboxed execution on one EHR database plus a result cache. One thread only.

    ``Probe.open`` runs in this process over one read-only session (fast: batch work in the
    CLI, the benchmark and the pre-labelling worker); ``Probe.isolated`` sends every query to
    the sandbox's worker processes, so a memory bomb in agent SQL cannot touch a long-lived
    caller such as the app.
    """

    def __init__(self, execute: _Execute, path: Path) -> None:
        self._execute = execute
        self.path = path
        self._cache: dict[str, Rows | None] = {}
        self._db = _identity(self.path)
        self._dicts: list[tuple[str, str, str | None, str]] | None = None
        self._schema: frozenset[str] | None = None
        self._codes: dict[tuple[str, str], CodeInfo | None] = {}  # (table, code) -> what it is
        self.queries = 0  # how many statements reached the sandbox (for the benchmark)

    @classmethod
    @contextmanager
    def open(cls, db_path: Path) -> Iterator[Probe]:
        with open_readonly(db_path) as session:
            yield cls(lambda sql: session.run(sql, timeout_s=TIMEOUT_S, row_cap=ROW_CAP),
                      Path(db_path))

    @classmethod
    def isolated(cls, db_path: Path) -> Probe:
        path = Path(db_path)
        return cls(lambda sql: run_isolated(path, sql, timeout_s=TIMEOUT_S, row_cap=ROW_CAP),
                   path)

    def run(self, sql: str) -> Rows | None:
        if sql in self._cache:
            return self._cache[sql]
        key = (*self._db, sql) if self._db else None
        if key is not None:
            with _shared_lock:
                if key in _shared:
                    _shared.move_to_end(key)
                    out = self._cache[sql] = _shared[key]
                    return out
        self.queries += 1
        try:
            res = self._execute(sql)
            out = Rows(
                tuple(res.columns),
                tuple(tuple(json_cell(v) for v in row) for row in res.rows),
                res.truncated,
            )
        except SandboxError:
            out = None
        self._cache[sql] = out
        if key is not None:
            with _shared_lock:
                _shared[key] = out
                while len(_shared) > _SHARED_MAX:
                    _shared.popitem(last=False)
        return out

    def _dictionaries(self) -> list[tuple[str, str, str | None, str]]:
        if self._dicts is None:
            found = []
            for table, code, version, label in _DICTIONARIES:
                # EHRSQL's tables have no version column (the version is in the code itself).
                for ver in dict.fromkeys((version, None)):
                    cols = ", ".join(c for c in (code, ver, label) if c)
                    if self.run(f"SELECT {cols} FROM {table} LIMIT 0") is not None:
                        found.append((table, code, ver, label))
                        break
            self._dicts = found
        return self._dicts

    def codes(self, codes: list[str], column: str | None = None,
              dictionary: str | None = None) -> dict[str, CodeInfo]:
        """What each code is, from the dictionary tables the database has. Each code is looked
        up once per probe, and only in tables whose codes have its shape: ICD codes contain a
        digit, itemids are all digits (a label or drug name can be neither, so it is not
        scanned for: the answer would be the same, without a full scan of a dictionary).

        ``column``, the column the query compared the code with, narrows the tables further:
        a literal compared with ``itemid`` is an item, never an ICD code, so the two ICD
        dictionaries (about 190,000 rows, a full scan each: 70 ms of a deep link's 120 ms of
        evidence on EHRSQL's SQLite) are not read for it, and it is never described as a
        diagnosis whose code happens to share its digits. ``dictionary`` narrows them to one
        table (a code a query compares on ``procedures_icd`` is a procedure's)."""
        safe = [c for c in codes if _RE_CODE.match(c)][:20]
        wanted = _TABLE_CODE_OF.get(column or "")
        out: dict[str, CodeInfo] = {}
        for table, code, version, label in self._dictionaries():
            if (wanted is not None and code != wanted) or dictionary not in (None, table):
                continue
            fits = [c for c in safe if _fits(code, c)]
            todo = [c for c in fits if (table, c.lower()) not in self._codes]
            if todo:
                cols = ", ".join(c for c in (code, version or "NULL", label))
                got = self.run(f"SELECT {cols} FROM {table} WHERE {_code_match(code, todo)} "
                               "ORDER BY 1")
                for c in todo:
                    self._codes[(table, c.lower())] = None
                for value, ver, text in got.rows if got is not None else ():
                    key = (table, str(value).lower())
                    if self._codes.get(key) is None:
                        self._codes[key] = CodeInfo(table, _ver(ver, value), str(text))
            for c in sorted(fits):
                info = self._codes.get((table, c.lower()))
                if info is not None:
                    out.setdefault(c.lower(), info)
        return out

    def schema_words(self) -> frozenset[str]:
        """The database's table and column names and their ``_``-separated parts, lower case
        (read through the sandbox's own introspection; empty when it cannot be read)."""
        if self._schema is None:
            try:
                tables = describe_tables(self.path)
            except (SandboxError, OSError, ValueError):
                tables = {}
            names = {t.rsplit(".", 1)[-1].lower() for t in tables}
            names |= {c.lower() for cols in tables.values() for c, _ in cols}
            self._schema = frozenset(names | {p for n in names for p in n.split("_") if p})
        return self._schema

    def dictionary_holds(self, stem: str) -> bool:
        """Whether any dictionary title (diagnoses, procedures, lab items, items) contains
        ``stem`` (letters only)."""
        if not re.fullmatch(r"[a-z]{3,20}", stem):
            return False
        for name, _code, _version, label in self._dictionaries():
            got = self.run(f"SELECT 1 FROM {name} WHERE lower({label}) LIKE '%{stem}%' LIMIT 1")
            if got is not None and got.rows:
                return True
        return False

    def lookup(self, table: str, pattern: str) -> dict[str, CodeInfo]:
        """The codes a reference's dictionary look-up (``label LIKE pattern``) finds."""
        if not _RE_PATTERN.match(pattern):
            return {}
        out: dict[str, CodeInfo] = {}
        for name, code, version, label in self._dictionaries():
            if name != table:
                continue
            got = self.run(
                f"SELECT {code}, {version or 'NULL'}, {label} FROM {name} "
                f"WHERE lower({label}) LIKE '{pattern.lower()}' ORDER BY 1 LIMIT 50"
            )
            for value, ver, text in got.rows if got is not None else ():
                out.setdefault(str(value).lower(), CodeInfo(name, _ver(ver, value), str(text)))
        return out


#: The dictionary code column a compared column's literals are looked up in.
_TABLE_CODE_OF = {"itemid": "itemid", "icd_code": "icd_code", "icd9_code": "icd_code",
                  "icd10_code": "icd_code"}


def _spellings(code: str) -> list[str]:
    """How a code (lower-cased by the parser) may be stored: MIMIC-IV writes ICD codes upper
    case, EHRSQL lower case with a version prefix (``icd9|e0043``)."""
    head, bar, tail = code.partition("|")
    forms = [code.lower(), code.upper()]
    if bar:
        forms.append(f"{head.lower()}|{tail.upper()}")
    return list(dict.fromkeys(forms))


def _code_match(column: str, codes: list[str]) -> str:
    """The WHERE clause that finds ``codes`` (shape-checked by ``_RE_CODE``) in ``column``.

    Text codes are compared as stored, in each spelling a database uses, so the engine scans
    the plain column instead of computing ``upper(CAST(...))`` for every row (40 -> 17 ms on
    EHRSQL's 106,000 diagnoses); itemids are numbers, compared as text after a cast."""
    if column == "itemid":
        listed = ", ".join(f"'{c}'" for c in codes)
        return f"CAST({column} AS VARCHAR) IN ({listed})"
    listed = ", ".join(f"'{s}'" for c in codes for s in _spellings(c))
    return f"{column} IN ({listed})"


def _fits(column: str, code: str) -> bool:
    """Whether ``code`` has the shape of the dictionary column's codes."""
    if column == "itemid":
        return code.isdigit()
    return any(ch.isdigit() for ch in code)


def _identity(path: Path) -> tuple[str, int, int] | None:
    """Which database file this is, for the shared cache; None (no sharing) if it cannot be
    stat-ed."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _ver(value: Any, code: Any = None) -> str | None:
    if value is None:
        match = _RE_VERSIONED.match(str(code or ""))
        return match.group(1) if match else None
    text = str(value).strip()
    return text[:-2] if text.endswith(".0") else text or None


def _numbers_match(want: Any, got: Any) -> bool:
    """Whether ``got`` is ``want`` as an answer may render it: the same value, or the same
    number rounded or cut to fewer decimals (3 or 3.383 for 3.3826)."""
    if str(want).strip().lower() == str(got).strip().lower():
        return True
    try:
        w, g = float(want), float(got)
    except (TypeError, ValueError):
        return False
    if w == g:
        return True
    text = str(got)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    cut = int(w * 10**decimals) / 10**decimals
    return abs(round(w, decimals) - g) < 1e-9 or abs(cut - g) < 1e-9


def _row_within(want: tuple[Any, ...], got: tuple[Any, ...]) -> bool:
    return all(any(_numbers_match(w, g) for g in got) for w in want)


def in_another_shape(got: Rows, reference: Rows) -> bool:
    """Whether ``got`` holds the reference's answer in another shape, which the taxonomy calls
    an Answer Format Error (right values, wrong structure: extra columns, a ranking not cut
    to its top rows, other rounding): every reference row's values appear in the row at the
    same place of ``got``, which has as many rows, or more rows after the reference's (its
    first rows are the reference's, in order). More rows anywhere else are another cohort,
    not another shape."""
    if got.truncated or reference.truncated or not reference.rows or not got.rows:
        return False
    if len(got.rows) < len(reference.rows):
        return False
    if same_rows(got, reference):
        return False
    pairs = zip(reference.rows, got.rows[: len(reference.rows)], strict=True)
    if len(got.rows) == len(reference.rows):
        # Same row count: in any order (an unordered answer may come back in any order).
        remaining = list(got.rows)
        for want in reference.rows:
            match = next((g for g in remaining if _row_within(want, g)), None)
            if match is None:
                return False
            remaining.remove(match)
        return True
    return all(_row_within(w, g) for w, g in pairs)
