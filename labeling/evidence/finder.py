"""First-divergence finder: compare each agent SQL step with the parts of the reference SQL.

Offline and deterministic. The reference and every agent query are parsed with sqlglot (SQLite
dialect first, then DuckDB); each is reduced to its parts (base tables, filter literals, medical
codes, time literals, grouping, aggregation, ordering/limit, output width). The final agent query's
differences from the reference are the candidate reasons; the first diverging step is the earliest
step over the same tables that already shows one of those differences. When some observation
already holds every expected value but the final answer does not match, the divergence is the
answer step ("answer correct in step N, final answer reformatted").

Nothing is executed here: the comparison is structural plus the recorded observations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from labeling.prelabel import signals as sg
from labeling.prelabel.signals._answers import as_table
from trajectories.model import StepKind, Trajectory

DIALECTS = ("sqlite", "duckdb")
_CODE_COLS = frozenset({"icd_code", "itemid", "icd9_code", "icd10_code", "drug", "ndc", "label"})
_RE_TIME = re.compile(r"^\d{4}-\d{2}(-\d{2})?( \d{2}:\d{2}(:\d{2})?)?$")
_DICT_PREFIX = "d_"


@dataclass(frozen=True, slots=True)
class RefParts:
    """The parts of one SQL query that the comparison uses."""

    tables: frozenset[str]
    codes: frozenset[tuple[str, str]]  # (column, literal) on code columns
    filters: frozenset[tuple[str, str]]  # (column, literal) on other columns
    times: frozenset[str]  # date/time literals (the time window)
    group_by: frozenset[str]
    aggregations: frozenset[str]  # e.g. "count distinct", "avg"
    order_limit: tuple[bool, int | None]
    n_outputs: int


@dataclass(frozen=True, slots=True)
class Divergence:
    part: str  # tables | codes | filters | times | group_by | aggregations | order_limit | answer
    reason: str
    category: str  # internal category key (labeling.prelabel.signals)
    confidence: float


@dataclass(slots=True)
class Evidence:
    """What the finder found for one trajectory."""

    step: int | None
    divergences: list[Divergence] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)  # evidence lines (query/observation heads)
    category: str | None = None
    confidence: float = 0.0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "category": self.category,
            "confidence": self.confidence,
            "reason": self.reason,
            "parts": [d.part for d in self.divergences],
            "divergences": [d.reason for d in self.divergences],
            "rows": self.rows,
        }


def _parse(sql: str) -> exp.Expr | None:
    for dialect in DIALECTS:
        try:
            tree = sqlglot.parse_one(sql, read=dialect)
        except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
            continue
        if tree is not None:
            return tree
    return None


def _literal_pairs(tree: exp.Expr) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for node in tree.find_all(exp.EQ, exp.In, exp.Like, exp.GT, exp.GTE, exp.LT, exp.LTE):
        col = node.find(exp.Column)
        name = col.name.lower() if col is not None else ""
        for lit in node.find_all(exp.Literal):
            out.append((name, str(lit.this).strip().lower()))
    return out


def decompose(sql: str | None) -> RefParts | None:
    """Parts of ``sql``, or None when it does not parse in either dialect."""
    if not sql or not sql.strip():
        return None
    tree = _parse(sql)
    if tree is None:
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = frozenset(
        t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes
    )
    codes: set[tuple[str, str]] = set()
    filters: set[tuple[str, str]] = set()
    times: set[str] = set()
    for col, lit in _literal_pairs(tree):
        if _RE_TIME.match(lit):
            times.add(lit[:7])
        elif col in _CODE_COLS:
            codes.add((col, lit))
        elif col:
            filters.add((col, lit))
    group_by = frozenset(
        c.name.lower() for g in tree.find_all(exp.Group) for c in g.find_all(exp.Column)
    )
    aggs: set[str] = set()
    for fn in tree.find_all(exp.AggFunc):
        name = fn.key.lower()
        aggs.add(f"{name} distinct" if fn.find(exp.Distinct) else name)
    limit_node = tree.find(exp.Limit)
    limit: int | None = None
    if limit_node is not None:
        num = limit_node.find(exp.Literal)
        if num is not None and str(num.this).isdigit():
            limit = int(str(num.this))
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    n_out = len(select.expressions) if select is not None else 0
    return RefParts(
        tables=tables,
        codes=frozenset(codes),
        filters=frozenset(filters),
        times=frozenset(times),
        group_by=group_by,
        aggregations=frozenset(aggs),
        order_limit=(tree.find(exp.Order) is not None, limit),
        n_outputs=n_out,
    )


def _fmt(pairs: frozenset[tuple[str, str]] | set[tuple[str, str]]) -> str:
    return ", ".join(f"{c} {v}" for c, v in sorted(pairs)[:3])


def compare(ref: RefParts, got: RefParts) -> list[Divergence]:
    """How ``got`` leaves the reference's path, strongest evidence first."""
    out: list[Divergence] = []
    ref_base = {t for t in ref.tables if not t.startswith(_DICT_PREFIX)}
    got_base = {t for t in got.tables if not t.startswith(_DICT_PREFIX)}
    missing_tables = ref_base - got_base
    if missing_tables and not (ref_base & got_base):
        out.append(
            Divergence(
                "tables",
                f"reads {', '.join(sorted(got_base)) or 'no base table'} instead of "
                f"{', '.join(sorted(ref_base))}",
                sg.SEMANTIC,
                0.55,
            )
        )
    if out:  # another entity altogether: code and logic differences follow from it
        return out
    miss_codes = ref.codes - got.codes
    if miss_codes:
        other = got.codes - ref.codes
        detail = f"; uses {_fmt(other)} instead" if other else ""
        out.append(
            Divergence(
                "codes",
                f"filter on {_fmt(miss_codes)} missing{detail}",
                sg.CODE_LOOKUP,
                0.7 if other else 0.6,
            )
        )
    if ref.times and got.times and ref.times != got.times:
        out.append(
            Divergence(
                "times",
                f"time window {', '.join(sorted(got.times))} vs reference "
                f"{', '.join(sorted(ref.times))}",
                sg.SQL_LOGIC,
                0.65,
            )
        )
    elif ref.times and not got.times:
        out.append(
            Divergence(
                "times",
                f"time window {', '.join(sorted(ref.times))} missing",
                sg.SQL_LOGIC,
                0.55,
            )
        )
    ref_aggs = {a.split()[0] for a in ref.aggregations}
    if ref.aggregations and got.aggregations and ref.aggregations != got.aggregations:
        same_fn = ref_aggs == {a.split()[0] for a in got.aggregations}
        out.append(
            Divergence(
                "aggregations",
                f"aggregation {', '.join(sorted(got.aggregations))} vs reference "
                f"{', '.join(sorted(ref.aggregations))}",
                sg.SQL_LOGIC,
                0.6 if same_fn else 0.5,
            )
        )
    if ref.group_by and got.group_by != ref.group_by and got.aggregations:
        out.append(
            Divergence(
                "group_by",
                f"grouped by {', '.join(sorted(got.group_by)) or 'nothing'} vs reference "
                f"{', '.join(sorted(ref.group_by))}",
                sg.SQL_LOGIC,
                0.5,
            )
        )
    if ref.order_limit[1] is not None and got.order_limit[1] != ref.order_limit[1]:
        out.append(
            Divergence(
                "order_limit",
                f"limit {got.order_limit[1]} vs reference {ref.order_limit[1]}",
                sg.SQL_LOGIC,
                0.45,
            )
        )
    miss_filters = ref.filters - got.filters
    if miss_filters and not miss_codes and len(miss_filters) <= 3:
        out.append(
            Divergence("filters", f"filter {_fmt(miss_filters)} missing", sg.SQL_LOGIC, 0.45)
        )
    return out


def _values(rows: list[tuple[str, ...]] | None) -> set[str]:
    return {v for row in rows or [] for v in row if v and v not in {"none", "null", ""}}


def _answer_seen(trajectory: Trajectory) -> Divergence | None:
    gold = as_table(trajectory.task.ground_truth)
    pred = as_table(trajectory.final_answer)
    wanted = _values(gold)
    if not wanted or (pred is not None and sorted(pred) == sorted(gold or [])):
        return None
    for i, step in enumerate(trajectory.steps):
        if step.kind == StepKind.MESSAGE or step.error or not step.observation:
            continue
        obs = step.observation.lower()
        if all(v.lower() in obs for v in wanted):
            return Divergence(
                "answer",
                f"answer correct in step {i}, final answer reformatted or changed",
                sg.ANSWER_FORMAT,
                0.7,
            )
    return None


def _sql_steps(trajectory: Trajectory) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for view in sg.action_views(trajectory):
        if view.sql:
            out.append((view.index, view.sql))
    return out


def find_divergence(trajectory: Trajectory) -> Evidence:
    """Evidence for one (failed) trajectory; ``category`` is None when nothing decides."""
    ref_sql = trajectory.task.reference_sql
    ref = decompose(ref_sql) if isinstance(ref_sql, str) else None
    seen = _answer_seen(trajectory)
    if seen is not None:
        step = int(seen.reason.split()[4].rstrip(","))
        return Evidence(
            step, [seen], [_head(trajectory, step)], seen.category, seen.confidence, seen.reason
        )
    if ref is None:
        return Evidence(None, reason="no parsable reference SQL: no evidence")
    parsed = [(i, decompose(sql)) for i, sql in _sql_steps(trajectory)]
    parsed_ok = [(i, p) for i, p in parsed if p is not None]
    if not parsed_ok:
        return Evidence(None, reason="no parsable agent SQL step: no evidence")
    last_i, last = parsed_ok[-1]
    final_div = compare(ref, last)
    if not final_div:
        return Evidence(last_i, reason="final query matches every reference part: no evidence")
    kinds = {d.part for d in final_div}
    first = last_i
    for i, parts in parsed_ok:
        if not (parts.tables & ref.tables):
            continue
        if {d.part for d in compare(ref, parts)} & kinds:
            first = i
            break
    top = max(final_div, key=lambda d: d.confidence)
    return Evidence(
        first,
        final_div,
        [_head(trajectory, first), _head(trajectory, last_i)]
        if first != last_i
        else [_head(trajectory, first)],
        top.category,
        top.confidence,
        f"step {first}: {top.reason}",
    )


def _head(trajectory: Trajectory, index: int) -> str:
    step = trajectory.steps[index]
    code = " ".join((step.code or step.arguments or "").split())[:160]
    obs = " ".join((step.observation or "").split())[:160]
    return f"step {index}: {code} -> {obs}"
