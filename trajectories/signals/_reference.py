"""The agent's final query set against the task's reference SQL.

When a task carries its reference SQL, the difference between the query that produced the answer
and the reference is honest evidence of where the error lies: other identifiers (a code-lookup
question), the same tables and identifiers with other mechanics (aggregation keys, DISTINCT,
time ordering, temporal filters: SQL logic). The parsing here is deliberately shallow, regexes
over the text, and every comparison is skipped when the two queries do not read the same base
tables, because then the texts are not comparable clause by clause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from trajectories.signals._common import (
    DICTIONARY_TABLES,
    ActionView,
    code_literals,
    query_text,
    sql_tables,
)

_RE_CTE_NAME = re.compile(r"(?:\bwith\b|,)\s*(?:recursive\s+)?(\w+)\s+as\s*\(", re.I)
_RE_COUNT_DISTINCT = re.compile(r"\bcount\s*\(\s*distinct\b", re.I)
_RE_COUNT_PLAIN = re.compile(r"\bcount\s*\(\s*(?!distinct\b)", re.I)
_RE_GROUP_BY = re.compile(
    r"\bgroup\s+by\s+(.+?)(?=\bhaving\b|\border\b|\blimit\b|\bunion\b|\bintersect\b|\bexcept\b"
    r"|\bwindow\b|\)|;|$)",
    re.I | re.S,
)
_RE_ORDER_BY = re.compile(
    r"\border\s+by\s+(.+?)(?=\blimit\b|\boffset\b|\bunion\b|\bintersect\b|\bexcept\b"
    r"|\browss?\b|\brange\b|\)|;|$)",
    re.I | re.S,
)
_RE_INTERVAL = re.compile(r"\binterval\s*'?\s*(\d+(?:\.\d+)?)\s*'?\s*([a-z]+?)s?\b", re.I)
_RE_TIME_COL = r"[\w.]*(?:time|date)\w*"
_RE_TIME_CMP = re.compile(
    rf"\b({_RE_TIME_COL})\s*\)?\s*(?:as\s+\w+\s*\)\s*)?(?:[<>]=?|=|\bbetween\b)"
    rf"|(?:[<>]=?)\s*\(?\s*({_RE_TIME_COL})\b",
    re.I,
)
_RE_JOIN_ON = re.compile(
    r"\bjoin\s+[\w.]+(?:\s+(?:as\s+)?\w+)?\s+on\s+(.+?)(?=\bjoin\b|\bwhere\b|\bgroup\b"
    r"|\border\b|\blimit\b|\bunion\b|\bintersect\b|\)|;|$)",
    re.I | re.S,
)
_RE_EQ_COLS = re.compile(r"([\w.]+)\s*=\s*([\w.]+)")
_RE_TIME_NAME = re.compile(r"(?:time|date)", re.I)


@dataclass(frozen=True)
class ReferenceComparison:
    final: ActionView  # the step that ran the final query
    final_sql: str
    reference: str
    same_tables: bool  # both read the same base (non-dictionary, non-CTE) tables
    final_codes: frozenset[str]
    reference_codes: frozenset[str]


@lru_cache(maxsize=4096)  # the same SQL recurs across steps and rollouts of a task
def base_tables(sql: str) -> frozenset[str]:
    """Tables a query reads, without CTE names and dictionary tables."""
    ctes = {m.lower() for m in _RE_CTE_NAME.findall(sql)}
    return frozenset(sql_tables(sql) - ctes - set(DICTIONARY_TABLES))


def compare_with_reference(
    views: list[ActionView], reference: object
) -> ReferenceComparison | None:
    """The last successful query (SQL step or SQL inside a Python cell) next to the reference."""
    if not isinstance(reference, str) or not reference.strip():
        return None
    for v in reversed(views):
        if v.error:
            continue
        text = query_text(v)
        if not text:
            continue
        return ReferenceComparison(
            final=v,
            final_sql=text,
            reference=reference,
            same_tables=base_tables(text) == base_tables(reference),
            final_codes=code_literals(text),
            reference_codes=code_literals(reference),
        )
    return None


def _strip_alias(item: str) -> str:
    return " ".join(item.split()).split(".")[-1].lower()


def group_keys(sql: str) -> frozenset[frozenset[str]] | None:
    """The key set of every GROUP BY clause; None when a positional key makes names unknown."""
    out: set[frozenset[str]] = set()
    for clause in _RE_GROUP_BY.findall(sql):
        keys = frozenset(_strip_alias(k) for k in clause.split(",") if k.strip())
        if any(k.isdigit() or not k for k in keys):
            return None
        out.add(keys)
    return frozenset(out)


def order_keys(sql: str) -> list[tuple[str, bool]]:
    """The leading key of every ORDER BY clause (window ones included), with DESC."""
    out: list[tuple[str, bool]] = []
    for clause in _RE_ORDER_BY.findall(sql):
        first = clause.split(",", 1)[0].strip()
        desc = bool(re.search(r"\bdesc\b", first, re.I))
        key = re.sub(r"\b(?:asc|desc|nulls\s+(?:first|last))\b", "", first, flags=re.I)
        out.append((_strip_alias(key), desc))
    return out


def intervals(sql: str) -> frozenset[tuple[str, str]]:
    return frozenset((n, unit.lower()) for n, unit in _RE_INTERVAL.findall(sql))


def time_comparisons(sql: str) -> frozenset[str]:
    """Time/date columns a query compares (filters or joins on time)."""
    out = set()
    for a, b in _RE_TIME_CMP.findall(sql):
        name = _strip_alias(a or b)
        if name and name not in {"datetime", "date", "time"}:
            out.add(name)
    return frozenset(out)


def counts_distinct(sql: str) -> bool:
    return bool(_RE_COUNT_DISTINCT.search(sql))


def counts_rows(sql: str) -> bool:
    return bool(_RE_COUNT_PLAIN.search(sql))


def is_time_key(key: str) -> bool:
    return bool(_RE_TIME_NAME.search(key))


def join_keys(sql: str) -> frozenset[str]:
    """Columns that JOIN ... ON conditions equate (same name on both sides)."""
    out = set()
    for cond in _RE_JOIN_ON.findall(sql):
        for a, b in _RE_EQ_COLS.findall(cond):
            ka, kb = _strip_alias(a), _strip_alias(b)
            if ka == kb and not ka.isdigit():
                out.add(ka)
    return frozenset(out)
