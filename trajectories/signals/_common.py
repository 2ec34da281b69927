"""Shared pieces of the signal detectors: category keys, the ``Signal`` result, the
``ActionView`` reduction of a step, and text helpers.

Everything here is pure and tolerant: steps may lack code, carry non-JSON arguments or huge
observations, and nothing may raise on them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from taxonomy import keys
from trajectories.model import Step, StepKind, Trajectory
from trajectories.reading import is_error_output, is_sql, parse_arguments, sql_argument
from trajectories.sql.tables import tables_in_sql

# Internal category keys: the EHR-Complex taxonomy's (named once, in taxonomy.keys).
SEMANTIC = keys.SEMANTIC_MISUNDERSTANDING
CODE_LOOKUP = keys.MEDICAL_CODE_LOOKUP_ERROR
SQL_LOGIC = keys.SQL_LOGIC_ERROR
VARIABLE_SCOPE = keys.VARIABLE_SCOPE_ERROR
ANSWER_FORMAT = keys.ANSWER_FORMAT_ERROR
STUCK_IN_LOOP = keys.STUCK_IN_LOOP
# Clean/Noise keys, only emitted when the target taxonomy has them.
FALSE_NULL = keys.FALSE_NULL
NULL_NOT_RETURNED = keys.NULL_NOT_RETURNED
NOISE_NOT_DETECTED = keys.NOISE_NOT_DETECTED

# Long observations are cut before any regex runs: errors and empty results show at the start,
# and a few kilobytes are plenty to find identifiers, while keeping the labeller fast.
_OBS_HEAD = 4000
_OBS_TAIL = 1000
_CODE_MAX = 20000
_MAX_ROWS = 2000
_MAX_CLUSTERS = 40
_MAX_LOOKUPS = 20

DICTIONARY_TABLES: dict[str, tuple[str, ...]] = {
    "d_icd_diagnoses": ("diagnoses_icd",),
    "d_icd_procedures": ("procedures_icd",),
    "d_labitems": ("labevents",),
    "d_items": (
        "chartevents",
        "inputevents",
        "outputevents",
        "procedureevents",
        "datetimeevents",
        "ingredientevents",
    ),
}

PYTHON_ARG_KEYS = ("code", "script", "python", "source")

_RE_EMPTY = re.compile(
    r"^\s*(?:\[\s*\]|\(\s*\)|\{\s*\}|none|null|nan|empty(?: dataframe| result| set)?\b.*"
    r"|0 rows?\b.*|no (?:rows|results?|records?|values?|match(?:es|ing)?|entries)\b.*|)\s*$",
    re.I | re.S,
)
_RE_STRING_LIT = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"")
_RE_QUOTED = re.compile(r"'([^'\n]{1,40})'")
NULL_TEXTS = frozenset(
    {"", "null", "none", "nan", "n/a", "na", "no data", "no answer", "unknown", "[]", "{}"}
)


@dataclass(frozen=True)
class Signal:
    category: str
    confidence: float
    step: int | None
    rationale: str


@dataclass(slots=True)  # not frozen: frozen __init__ is measurably slower on hot paths
class ActionView:
    """One action step, reduced to what the detectors need (treat as read-only)."""

    index: int  # into Trajectory.steps
    label: str  # "sql", "python" or the tool name, for rationales
    sql: str | None
    python: str | None
    payload: str  # normalised action text, for repetition checks
    observation: str  # cut to head + tail
    error: bool
    empty: bool
    tool_table: str | None  # table argument of a lookup tool (e.g. substring search)
    tool_column: str | None

    @property
    def tables(self) -> frozenset[str]:
        """Tables the SQL reads, schema prefixes dropped. Computed on use (parsing is the
        costly part of a view, and most detectors never ask); the parse itself is cached."""
        return frozenset(sql_tables(self.sql)) if self.sql else frozenset()


def clip(text: str | None, limit: int = _OBS_HEAD) -> str:
    if not text:
        return ""
    if len(text) <= limit + _OBS_TAIL:
        return text
    return text[:limit] + "\n...\n" + text[-_OBS_TAIL:]


def snippet(text: str | None, limit: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _first_str(args: dict[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def view_step(index: int, step: Step) -> ActionView:
    kind = step.kind
    code = step.code if isinstance(step.code, str) else None
    sql: str | None = None
    python: str | None = None
    tool_table: str | None = None
    tool_column: str | None = None
    name = step.name if isinstance(step.name, str) else None
    label = str(kind.value if isinstance(kind, StepKind) else kind)
    args = parse_arguments(step.arguments)
    if isinstance(args, str):
        args = args.strip()
    if kind == StepKind.SQL:
        found = sql_argument(args) if isinstance(args, dict) else None
        sql = code or (found[1] if found else None)
        if sql is None and isinstance(args, str):
            sql = args
    elif kind == StepKind.PYTHON:
        python = code or (_first_str(args, PYTHON_ARG_KEYS) if isinstance(args, dict) else None)
        if python is None and isinstance(args, str):
            python = args
    else:
        label = name or "tool_call"
        lowered = (name or "").lower()
        if isinstance(args, dict):
            # A tool whose argument is SQL is a SQL step in all but name (the one rule of
            # trajectories.reading, which the importers apply too).
            found = sql_argument(args)
            sql = found[1] if found else None
            if sql is None:
                python = _first_str(args, PYTHON_ARG_KEYS)
            table = args.get("table")
            column = args.get("column")
            tool_table = table.lower() if isinstance(table, str) else None
            tool_column = column.lower() if isinstance(column, str) else None
        elif isinstance(args, str) and args:
            if is_sql(args):
                sql = args
            elif "python" in lowered or "code" in lowered:
                python = args
        if code and sql is None and python is None:
            if is_sql(code):
                sql = code
            else:
                python = code
    body = sql if sql is not None else python
    if body is None and isinstance(args, dict):
        # Lookup tools: keep the argument values as words so that searches for different
        # terms do not look like repetitions of one another.
        body = " ".join(f"{k}={args[k]}" for k in sorted(args, key=str))
    if body is None:
        body = step.arguments if isinstance(step.arguments, str) else (code or "")
    payload = f"{name or label} {' '.join(body[:_CODE_MAX].lower().split())}"
    observation = clip(step.observation if isinstance(step.observation, str) else None)
    head = observation[:600]
    error = bool(step.error) or is_error_output(head)
    # Empty results are short; skipping the regex on long outputs keeps labelling fast.
    empty = not error and len(observation) < 200 and bool(_RE_EMPTY.match(observation))
    return ActionView(
        index=index,
        label=label,
        sql=sql[:_CODE_MAX] if sql else None,
        python=python[:_CODE_MAX] if python else None,
        payload=payload,
        observation=observation,
        error=error,
        empty=empty,
        tool_table=tool_table,
        tool_column=tool_column,
    )


def action_views(trajectory: Trajectory) -> list[ActionView]:
    views: list[ActionView] = []
    for i, step in enumerate(trajectory.steps):
        if step.kind == StepKind.MESSAGE:
            continue
        views.append(view_step(i, step))
    return views


def sql_tables(sql: str | None) -> set[str]:
    """Bare, lower-case names of the tables ``sql`` reads; empty when it does not parse."""
    if not sql:
        return set()
    return {name.rsplit(".", 1)[-1].lower() for name in tables_in_sql(sql)}


def _cite(view: ActionView, detail: str) -> str:
    return f"step {view.index} ({view.label}): {detail}"


def has_final_answer(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().casefold() not in NULL_TEXTS
    if isinstance(value, list | tuple | dict | set):
        return len(value) > 0
    return True


def _lookup_dict(view: ActionView) -> str | None:
    if view.tool_table in DICTIONARY_TABLES:
        return view.tool_table
    for table in view.tables:
        if table in DICTIONARY_TABLES:
            return table
    return None


# SQL passed as a string literal inside a Python cell (con.sql("""SELECT ..."""), pd.read_sql).
_RE_PY_SQL = re.compile(
    r"(\"\"\"|'''|\"|')\s*((?:select|with)\b(?:(?!\1).){10,}?)\1", re.I | re.S
)
_RE_ITEMID_FILTER = re.compile(r"\bitemid\s*(?:=\s*(\d+)|in\s*\(([^()]*)\))", re.I)
_RE_ICD_FILTER = re.compile(
    r"\bicd_code\s*(?:=\s*'([^']*)'|in\s*\(([^()]*)\)|like\s*'([^']*)')", re.I
)
_RE_INT = re.compile(r"\b\d+\b")


def query_text(view: ActionView) -> str | None:
    """The SQL an action ran: its own SQL, else the last SQL string literal in a Python cell."""
    if view.sql:
        return view.sql
    if view.python and ("select" in view.python.lower()):
        found = _RE_PY_SQL.findall(view.python)
        if found:
            return str(found[-1][1])
    return None


def code_literals(sql: str | None) -> frozenset[str]:
    """Identifier literals a query filters on: itemids and ICD codes (upper-cased)."""
    if not sql:
        return frozenset()
    out: set[str] = set()
    for single, group in _RE_ITEMID_FILTER.findall(sql):
        out.update(_RE_INT.findall(single or group))
    for eq, group, like in _RE_ICD_FILTER.findall(sql):
        if group:
            out.update(q.strip().upper() for q in _RE_QUOTED.findall(group))
        else:
            out.add((eq or like).strip().upper())
    return frozenset(out)
