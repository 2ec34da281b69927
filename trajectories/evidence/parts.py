"""The parts of an SQL query that the first-divergence finder compares, and their comparison.

Both the reference and each agent query are parsed with sqlglot (the product's one parser,
:func:`trajectories.sql.parse_sql`: SQLite dialect first, then DuckDB) and reduced to: base
tables, code filters and their literals, dictionary look-ups (``LIKE`` patterns on ``d_*``
tables), other filter literals, time literals (the time window, to the month), grouping,
aggregation, ordering/limit and output columns. Text that does not parse has no parts (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from sqlglot import exp

from trajectories import signals as sg
from trajectories.sql import parse_sql, tables_in_sql

__all__ = ["CASE_NOTE", "Divergence", "RefParts", "compare", "decompose", "row_id_reason"]

_CODE_COLS = frozenset({"icd_code", "itemid", "icd9_code", "icd10_code", "drug", "ndc", "label"})
_RE_TIME = re.compile(r"^\d{4}-\d{2}(-\d{2})?( \d{2}:\d{2}(:\d{2})?)?$")
_DICT_PREFIX = "d_"
#: The end of a case-only divergence's reason (the code look-ups keep such a divergence: it is
#: about the spelling of a value, which no dictionary look-up of codes can confirm or undo).
CASE_NOTE = ": values compare exactly, case included"
_RANKING = (exp.DenseRank, exp.Rank, exp.RowNumber)
# Dictionary columns that name a concept: `long_title = 'x'` in a d_* table is a look-up like LIKE.
_TITLE_COLS = frozenset({"long_title", "label", "short_title"})


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
    lookups: frozenset[tuple[str, str]] = frozenset()  # (dictionary table, LIKE pattern)
    star: bool = False  # an output is ``*`` or ``t.*``: the width is not known from the text
    out_columns: frozenset[str] = frozenset()  # columns the outermost SELECT outputs
    out_tables: frozenset[str] = frozenset()  # base tables those columns are read from
    columns: frozenset[str] = frozenset()  # every column the query names
    # Code columns equated with a dictionary's ``row_id`` (``itemid = d_labitems.row_id``):
    # (code column, dictionary table). A row number is no code, whatever the join returns.
    row_id_codes: frozenset[tuple[str, str]] = frozenset()
    distinct: bool = False  # the outermost SELECT removes duplicate rows


class EvidencePart(StrEnum):
    """Where a trajectory can leave the reference's path, declared in order of decisiveness:
    when several parts differ, the first one listed decides (the most specific evidence first).
    The finder's calibration has one entry per part (``trajectories.evidence.finder.CALIBRATION``).
    """

    LOOP = "loop"
    EXECUTION = "execution"
    ANSWER = "answer"
    NO_DATA = "no_data"
    CONCEPT = "concept"
    CODES = "codes"
    LOOKUP = "lookup"
    TABLES = "tables"
    TIMES = "times"
    AGGREGATIONS = "aggregations"
    GROUP_BY = "group_by"
    FILTERS = "filters"
    # After every part that chooses rows: a missing LIMIT is mostly the consequence of them.
    ORDER_LIMIT = "order_limit"
    RESULT = "result"
    UNQUERIED = "unqueried"  # no tool used: the final answer is the only action


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way a query leaves the reference's path; ``part`` is an ``EvidencePart`` value
    (a name outside it is refused, so a misspelt part cannot go uncalibrated)."""

    part: str
    reason: str
    category: str  # internal category key (trajectories.signals)
    confidence: float

    def __post_init__(self) -> None:
        EvidencePart(self.part)


_COMPARISONS = (exp.EQ, exp.In, exp.Like, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _literal_pairs(nodes: list[exp.Expr]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for node in nodes:
        if not isinstance(node, _COMPARISONS):
            continue
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            continue  # x IN (SELECT ...): the subquery's own comparisons are found by themselves
        if any(isinstance(side, (exp.Subquery, exp.Select))
               for side in (node.args.get("this"), node.args.get("expression"))):
            continue  # x = (SELECT ...): likewise; the inner literal is not a value of x
        if any(isinstance(side, exp.Expr) and side.find(exp.AggFunc) is not None
               for side in (node.args.get("this"), node.args.get("expression"))):
            continue  # HAVING COUNT(DISTINCT drug) = 2 bounds a count, not a value of drug
        col = node.find(exp.Column)
        name = col.name.lower() if col is not None else ""
        # `=`, IN and the bounds compare values exactly (`gender = 'F'` finds nothing where the
        # database writes 'f'), so their literals keep their case; LIKE folds case in SQLite,
        # the benchmark's engine, so a pattern is compared folded.
        pattern = isinstance(node, exp.Like)
        for lit in node.find_all(exp.Literal):
            text = str(lit.this).strip()
            if pattern:
                text = text.lower()
            if isinstance(lit.parent, exp.Func) and not _RE_TIME.match(text):
                continue  # a function's modifier ('start of year', '%Y-%m'), not a compared value
            out.append((name, text))
    return out


@lru_cache(maxsize=4096)
def decompose(sql: str | None) -> RefParts | None:
    """Parts of ``sql``, or None when it does not parse in either dialect."""
    if not sql or not sql.strip():
        return None
    tree = parse_sql(sql)
    if tree is None:
        return None
    tables = frozenset(t.rsplit(".", 1)[-1].lower() for t in tables_in_sql(sql))
    # One walk of the tree (each find_all is a walk; parsing and walking are the finder's cost).
    nodes = list(tree.walk())
    columns = [n for n in nodes if isinstance(n, exp.Column)]
    lookups: set[tuple[str, str]] = set()
    table_of = {n.alias_or_name.lower(): n.name.lower() for n in nodes if isinstance(n, exp.Table)}
    for like in nodes:
        if not isinstance(like, (exp.Like, exp.ILike, exp.EQ)):
            continue
        named = like.find(exp.Column)
        if isinstance(like, exp.EQ) and (named is None or named.name.lower() not in _TITLE_COLS):
            continue
        # The column's own table when it names one (``JOIN d_labitems d ... WHERE d.label =``
        # is a look-up too), else the first table of its SELECT.
        qualified = table_of.get(named.table.lower(), "") if named is not None else ""
        select = like.find_ancestor(exp.Select)
        first = select.find(exp.Table) if select is not None else None
        table = qualified or (first.name.lower() if first is not None else "")
        pattern = like.find(exp.Literal)
        if table.startswith(_DICT_PREFIX) and pattern:
            # An exact title (`label = 'Hemoglobin'`) finds only that spelling; a LIKE folds case.
            text = str(pattern.this)
            lookups.add((table, text if isinstance(like, exp.EQ) else text.lower()))
    codes: set[tuple[str, str]] = set()
    filters: set[tuple[str, str]] = set()
    times: set[str] = set()
    # Names the query defines itself (``DENSE_RANK() ... AS c1``): a bound on one is not a filter.
    aliases = {a.alias.lower() for a in nodes if isinstance(a, exp.Alias) and a.alias}
    titles = {lit for _, lit in lookups}
    for col, lit in _literal_pairs(nodes):
        if col in aliases or (col in _TITLE_COLS and lit in titles):
            continue  # a dictionary look-up is compared as a look-up, not as a filter
        if _RE_TIME.match(lit):
            times.add(lit[:7])
        elif col in _CODE_COLS:
            # Codes are looked up in the dictionaries in each spelling a database uses.
            codes.add((col, lit.lower()))
        elif col:
            filters.add((col, lit))
    group_by = frozenset(
        c.name.lower() for g in nodes if isinstance(g, exp.Group) for c in g.find_all(exp.Column)
    )
    aggs: set[str] = set()
    for fn in nodes:
        if not isinstance(fn, exp.AggFunc) or isinstance(fn, _RANKING):
            continue  # DENSE_RANK() <= 3 is a top-N, as ORDER BY ... LIMIT 3: not an aggregate
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
    star = select is None or any(
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
        for e in select.expressions
    )
    out_columns = frozenset(
        c.name.lower() for e in (select.expressions if select is not None else [])
        for c in e.find_all(exp.Column)
    )
    return RefParts(
        row_id_codes=_row_id_codes(nodes, table_of),
        tables=tables,
        codes=frozenset(codes),
        filters=frozenset(filters),
        times=frozenset(times),
        group_by=group_by,
        aggregations=frozenset(aggs),
        order_limit=(tree.find(exp.Order) is not None, limit),
        n_outputs=n_out,
        lookups=frozenset(lookups),
        star=star,
        out_columns=out_columns,
        out_tables=_sources(nodes, columns, out_columns, tables),
        columns=frozenset(c.name.lower() for c in columns),
        distinct=select is not None and bool(select.args.get("distinct")),
    )


def _row_id_codes(nodes: list[exp.Expr], table_of: dict[str, str]
                  ) -> frozenset[tuple[str, str]]:
    """(code column, dictionary) for every ``code column = dictionary.row_id`` comparison."""
    out: set[tuple[str, str]] = set()
    for eq in nodes:
        if not isinstance(eq, exp.EQ):
            continue
        left, right = eq.args.get("this"), eq.args.get("expression")
        if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
            continue
        for code, row in ((left, right), (right, left)):
            table = table_of.get(row.table.lower(), row.table.lower())
            if (row.name.lower() == "row_id" and code.name.lower() in _CODE_COLS
                    and table.startswith(_DICT_PREFIX)):
                out.add((code.name.lower(), table))
    return frozenset(out)


def _sources(nodes: list[exp.Expr], columns: list[exp.Column], names: frozenset[str],
             tables: frozenset[str]) -> frozenset[str]:
    """The base tables that columns called ``names`` are read from, wherever the query
    qualifies them with a table or its alias (``T3.x`` over a subquery resolves at the inner
    ``microbiologyevents.x``)."""
    alias = {t.alias_or_name.lower(): t.name.lower() for t in nodes if isinstance(t, exp.Table)}
    out = {alias.get(c.table.lower(), "") for c in columns if c.name.lower() in names and c.table}
    if len(tables) == 1:
        out |= tables  # unqualified columns of a one-table query
    return frozenset(out & tables)


def row_id_reason(column: str, table: str) -> str:
    """The reason a row_id-for-code divergence gives (the finder recognises it by this text)."""
    return f"{column} joined to {table}.row_id: a row number used as the code"


def _fmt(pairs: frozenset[tuple[str, str]] | set[tuple[str, str]]) -> str:
    return ", ".join(f"{c} {v}" for c, v in sorted(pairs)[:3])


def _case_only(missing: Iterable[tuple[str, str]], have: frozenset[tuple[str, str]]
               ) -> list[tuple[tuple[str, str], str]]:
    """((column, the reference's value), the query's value) where the two differ in case only."""
    out: list[tuple[tuple[str, str], str]] = []
    for col, want in sorted(missing):
        other = next((v for c, v in sorted(have) if c == col and v != want
                      and v.lower() == want.lower()), None)
        if other is not None:
            out.append(((col, want), other))
    return out


def compare(ref: RefParts, got: RefParts) -> list[Divergence]:
    """How ``got`` leaves the reference's path, strongest evidence first."""
    out: list[Divergence] = []
    row_ids = got.row_id_codes - ref.row_id_codes
    if row_ids:
        # The dictionary's row number stands in for its code: the identifiers are wrong
        # whatever else the query does (the gold's rule: row_id used as itemid is a code error).
        col, table = sorted(row_ids)[0]
        out.append(Divergence("codes", row_id_reason(col, table), sg.CODE_LOOKUP, 0.7))
    ref_base = {t for t in ref.tables if not t.startswith(_DICT_PREFIX)}
    got_base = {t for t in got.tables if not t.startswith(_DICT_PREFIX)}
    missing_tables = ref_base - got_base
    answer_missing = ref.out_tables - got.tables
    if (answer_missing and answer_missing == ref.out_tables and got_base - ref_base
            and not (ref.out_columns & got.columns)):
        # The answer comes from a table the query never reads, none of the answer's columns
        # appear, and the query reads another table in its place: it answers about another
        # entity (labevents for microbiology tests). A query that only lacks the table is
        # unfinished, not a misreading.
        out.append(
            Divergence(
                "tables",
                f"answers from {', '.join(sorted(got_base - ref_base))}; the reference's "
                f"{', '.join(sorted(ref.out_columns)[:2])} comes from "
                f"{', '.join(sorted(answer_missing))}",
                sg.SEMANTIC,
                0.55,
            )
        )
    elif missing_tables and not (ref_base & got_base):
        out.append(
            Divergence(
                "tables",
                f"reads {', '.join(sorted(got_base)) or 'no base table'} instead of "
                f"{', '.join(sorted(ref_base))}",
                sg.SEMANTIC,
                0.55,
            )
        )
    if any(d.part == "tables" for d in out):
        return out  # another entity altogether: code and logic differences follow from it
    miss_codes = ref.codes - got.codes
    other_codes = got.codes - ref.codes
    if miss_codes and got.codes:
        instead = f"; uses {_fmt(other_codes)} instead" if other_codes else ""
        out.append(
            Divergence(
                "codes",
                f"filter on {_fmt(miss_codes)} missing{instead}",
                sg.CODE_LOOKUP,
                0.7,
            )
        )
    elif miss_codes:
        # No code at all where the reference filters on one: a dropped filter, not a wrong code.
        out.append(
            Divergence("filters", f"filter on {_fmt(miss_codes)} missing", sg.SQL_LOGIC, 0.5)
        )
    miss_lookups = ref.lookups - got.lookups
    if miss_lookups and not miss_codes and not other_codes and not got.lookups:
        # The concept the question names is neither looked up nor coded: its criterion is
        # dropped, so the query answers about another cohort.
        table, pattern = sorted(miss_lookups)[0]
        out.append(Divergence("filters", f"look-up of {pattern!r} in {table} missing",
                              sg.SEMANTIC, 0.5))
    elif miss_lookups and not miss_codes and (other_codes or got.lookups):
        table, pattern = sorted(miss_lookups)[0]
        out.append(
            Divergence(
                "lookup",
                f"reference looks up {pattern!r} in {table}; the query uses "
                f"{_fmt(other_codes | (got.lookups - ref.lookups))} instead",
                sg.CODE_LOOKUP,
                0.6,
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
    cased = _case_only(miss_filters, got.filters) + _case_only(ref.lookups - got.lookups,
                                                               got.lookups)
    if cased:
        # The same word in another case is another value to the database: the term was not
        # written as the database holds it (a grounding error, not another criterion).
        (col, want), have = cased[0]
        out.insert(0, Divergence("codes", f"{col} {have!r} where the reference has {want!r}"
                                          + CASE_NOTE, sg.CODE_LOOKUP, 0.7))
        miss_filters = frozenset(f for f in miss_filters if f not in {c for c, _ in cased})
    if miss_filters and not miss_codes and len(miss_filters) <= 3 and not any(
        d.part == "filters" for d in out
    ):
        out.append(
            Divergence("filters", f"filter {_fmt(miss_filters)} missing", sg.SQL_LOGIC, 0.45)
        )
    return out
