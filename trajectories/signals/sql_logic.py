"""SQL logic: wrong row sets or multiplicity, missing DISTINCT, failing final queries and
temporal conditions no query implements (plus ungrounded literals, a code-lookup signal)."""

from __future__ import annotations

import re

from trajectories.model import Trajectory
from trajectories.signals._answers import (
    Answers,
    _answer_step,
    _cite_step,
    _is_null_table,
    _match_rows,
    answers,
)
from trajectories.signals._common import (
    _RE_QUOTED,
    CODE_LOOKUP,
    SQL_LOGIC,
    ActionView,
    Signal,
    _cite,
    has_final_answer,
    snippet,
)
from trajectories.signals._reference import (
    compare_with_reference,
    counts_distinct,
    counts_rows,
    group_keys,
    intervals,
    is_time_key,
    join_keys,
    order_keys,
    time_comparisons,
)

_RE_COUNT_NONDISTINCT = re.compile(r"\bcount\s*\(\s*(?!distinct\b)", re.I)
_RE_JOIN = re.compile(r"\bjoin\b", re.I)
# The question counts patients, admissions or stays ("how many patients", "the number of
# unique admissions", "count the individuals"): a unit word after a counting phrase. A unit word
# elsewhere ("the tests most often done on patients who ...") ranks events, not units.
_RE_COUNTS_UNITS = re.compile(
    r"\b(?:how many|number of|count(?:s|ing)?|total of|tally)\s+(?:\w+\s+){0,3}?"
    r"(?:patients?|admissions?|stays?|individuals?|people|persons?|visits?|"
    r"distinct|unique|different)\b", re.I
)
_RE_TEMPORAL_WORDS = re.compile(
    r"\b(?:first|last|initial|second|third|previous|next|subsequent|following|prior|before|"
    r"after|earliest|latest|most recent|within|since)\b",
    re.I,
)
_RE_TEMPORAL_SQL = re.compile(
    r"\border\s+by\b|\bmin\s*\(|\bmax\s*\(|\brow_number\b|\b(?:dense_)?rank\s*\(|\blag\s*\("
    r"|\blead\s*\(|\bbetween\b|\binterval\b|\bjulianday\b|\bstrftime\b|\bdatetime\s*\("
    r"|\bdate\s*\(|(?:time|date)\w*\s*[<>]|[<>]=?\s*[\w.]*(?:time|date)",
    re.I,
)
_RE_DISTINCT = re.compile(r"\bdistinct\b", re.I)
_RE_EQ_LITERAL = re.compile(r"=\s*'([^'\n]{2,60})'")
_RE_IN_LIST = re.compile(r"\bin\s*\(([^()]{2,2000})\)", re.I)


def _ungrounded_literal(
    sql_views: list[ActionView], views: list[ActionView]
) -> tuple[str, ActionView] | None:
    """A string literal compared by equality in the final query that no earlier observation
    shows as a database value; returns it with the first query that used it."""
    final = sql_views[-1].sql or ""
    literals = _RE_EQ_LITERAL.findall(final)
    for group in _RE_IN_LIST.findall(final):
        if not group.lstrip().lower().startswith(("select", "with")):
            literals.extend(_RE_QUOTED.findall(group))
    for lit in literals:
        if "%" in lit:  # LIKE-style patterns, not values
            continue
        if re.fullmatch(r"[\d\s:./-]+", lit):  # dates and numbers are not terms to ground
            continue
        low = lit.lower()
        seen = any(low in v.observation.lower() for v in views if v.index < sql_views[-1].index)
        if seen:
            continue
        first = next((v for v in sql_views if lit in (v.sql or "")), sql_views[-1])
        return lit, first
    return None


def _reference_mechanics(views: list[ActionView], reference: object) -> list[Signal]:
    """Same tables, same identifiers, other mechanics than the reference SQL: SQL logic.

    Only differences that the texts show unambiguously are reported: COUNT over rows where the
    reference counts DISTINCT, other GROUP BY keys, time ordering replaced by a non-time key,
    missing, extra or different temporal filters. A flipped sort direction on the same time key
    is not reported: "first" read as "last" is as much a misreading as a query mistake.
    """
    cmp = compare_with_reference(views, reference)
    if cmp is None or not cmp.same_tables:
        return []
    if cmp.reference_codes and cmp.final_codes != cmp.reference_codes:
        return []  # other identifiers: the code-lookup rules judge that difference
    final, ref, v = cmp.final_sql, cmp.reference, cmp.final
    found: list[tuple[float, str]] = []
    if counts_distinct(ref) and not counts_distinct(final) and counts_rows(final):
        found.append((0.65, "counts rows where the reference counts DISTINCT units"))
    ref_groups, got_groups = group_keys(ref), group_keys(final)
    if ref_groups is not None and got_groups is not None and ref_groups != got_groups:
        want = "; ".join(sorted(", ".join(sorted(g)) for g in ref_groups)) or "none"
        got = "; ".join(sorted(", ".join(sorted(g)) for g in got_groups)) or "none"
        found.append((0.6, f"groups by {got} where the reference groups by {want}"))
    got_join = join_keys(final)
    if got_join == {"subject_id"} and "hadm_id" in ref.lower() and "hadm_id" not in got_join:
        found.append(
            (
                0.5,
                "joins on subject_id alone where the reference links rows by hadm_id (rows "
                "from the patient's other admissions join in)",
            )
        )
    ref_time_keys = {k for k, _ in order_keys(ref) if is_time_key(k)}
    got_keys = order_keys(final)
    if ref_time_keys and got_keys and not ref_time_keys & {k for k, _ in got_keys}:
        others = ", ".join(sorted({k for k, _ in got_keys}))
        found.append(
            (
                0.55,
                f"orders by {others} where the reference orders by time "
                f"({', '.join(sorted(ref_time_keys))})",
            )
        )
    ref_iv, got_iv = intervals(ref), intervals(final)
    ref_tc, got_tc = time_comparisons(ref), time_comparisons(final)
    if ref_iv and got_iv and ref_iv != got_iv:
        want = ", ".join(f"{n} {u}" for n, u in sorted(ref_iv))
        got = ", ".join(f"{n} {u}" for n, u in sorted(got_iv))
        found.append((0.6, f"a time window of {got} where the reference uses {want}"))
    elif ref_tc - got_tc:
        found.append(
            (0.5, f"no temporal condition on {', '.join(sorted(ref_tc - got_tc))} "
             "where the reference has one")
        )
    elif got_tc - ref_tc:
        found.append(
            (0.45, f"an extra temporal condition on {', '.join(sorted(got_tc - ref_tc))} "
             "that the reference does not have")
        )
    if not found:
        return []
    conf, detail = max(found)
    detail = "; ".join(d for _, d in sorted(found, reverse=True))
    return [
        Signal(
            SQL_LOGIC,
            conf,
            v.index,
            _cite(v, f"same tables and identifiers as the reference SQL, but {detail}."),
        )
    ]


def detect_sql_logic(
    views: list[ActionView], trajectory: Trajectory, ans: Answers | None = None
) -> list[Signal]:
    signals: list[Signal] = []
    question = trajectory.task.question or ""
    sql_views = [v for v in views if v.sql]
    ok_sql = [v for v in sql_views if not v.error]
    last_sql = sql_views[-1] if sql_views else None
    ans = ans or answers(trajectory)
    gold, pred = ans.gold, ans.pred
    answer_step = last_sql.index if last_sql else _answer_step(trajectory)

    if not _is_null_table(gold) and not _is_null_table(pred) and gold and pred:
        gold_set, pred_set = set(gold), set(pred)
        where = _cite_step(trajectory, answer_step, "") if answer_step is not None else ""
        if gold_set == pred_set and len(gold) != len(pred):
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.7,
                    answer_step,
                    where + f"the right rows with the wrong multiplicity ({len(pred)} rows for "
                    f"{len(gold)} expected): missing DISTINCT or wrong deduplication unit.",
                )
            )
        elif gold_set < pred_set:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.5,
                    answer_step,
                    where + f"all expected rows plus {len(pred_set - gold_set)} extra: a filter "
                    "is missing or too loose.",
                )
            )
        elif pred_set < gold_set:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.4,
                    answer_step,
                    where + f"only {len(pred_set)} of {len(gold_set)} expected rows: a filter "
                    "or join is too strict.",
                )
            )
        elif len(pred) > len(gold) and len(gold) <= 500:
            # Expected rows found inside wider rows, plus more rows: a filter is missing.
            matched, _ = _match_rows(gold, pred, "sub")
            if matched == len(gold):
                signals.append(
                    Signal(
                        SQL_LOGIC,
                        0.45,
                        answer_step,
                        where + f"the expected rows are among {len(pred)} returned rows: a "
                        "filter is missing or too loose.",
                    )
                )
    elif not _is_null_table(gold) and _is_null_table(pred) and last_sql is not None:
        # Nothing returned where the record holds an answer. A string literal compared by
        # equality is the usual culprit (a drug or route spelled differently in the database):
        # that is grounding a clinical term, not query logic.
        literal = _ungrounded_literal(sql_views, views)
        if literal is not None:
            lit, first = literal
            signals.append(
                Signal(
                    CODE_LOOKUP,
                    0.45,
                    first.index,
                    _cite(
                        first,
                        f"filters on the literal '{snippet(lit, 40)}', a value no earlier "
                        "output shows, and the final answer is empty although the record "
                        "holds one.",
                    ),
                )
            )
        else:
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.35,
                    last_sql.index,
                    _cite(
                        last_sql,
                        "the final query returns nothing although the record holds "
                        "an answer: a filter or join is too strict.",
                    ),
                )
            )

    ref = trajectory.task.reference_sql
    count_sqls = [v for v in ok_sql if "count" in (v.sql or "").lower()]
    # A reference that itself counts joined rows shows that rows are the unit asked for.
    ref_counts_joined_rows = (
        isinstance(ref, str)
        and bool(_RE_JOIN.search(ref))
        and counts_rows(ref)
        and not counts_distinct(ref)
    )
    if count_sqls and _RE_COUNTS_UNITS.search(question) and not ref_counts_joined_rows:
        last_count = count_sqls[-1]
        if _RE_JOIN.search(last_count.sql or "") and _RE_COUNT_NONDISTINCT.search(
            last_count.sql or ""
        ):
            first = next(
                v
                for v in count_sqls
                if _RE_JOIN.search(v.sql or "") and _RE_COUNT_NONDISTINCT.search(v.sql or "")
            )
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.6,
                    first.index,
                    _cite(
                        first,
                        "COUNT without DISTINCT over a JOIN while the question counts "
                        "patients or admissions.",
                    ),
                )
            )

    if isinstance(ref, str) and last_sql and not last_sql.error:
        final = last_sql.sql or ""
        if (
            _RE_DISTINCT.search(ref)
            and not _RE_DISTINCT.search(final)
            and "count" in (final.lower())
        ):
            signals.append(
                Signal(
                    SQL_LOGIC,
                    0.5,
                    last_sql.index,
                    _cite(
                        last_sql,
                        "the final query aggregates without the DISTINCT the reference needs.",
                    ),
                )
            )

    if last_sql and last_sql.error and not has_final_answer(trajectory.final_answer):
        signals.append(
            Signal(
                SQL_LOGIC,
                0.55,
                last_sql.index,
                _cite(last_sql, "the final query fails: " + snippet(last_sql.observation, 70)),
            )
        )

    signals.extend(_reference_mechanics(views, ref))

    if (
        ok_sql
        and _RE_TEMPORAL_WORDS.search(question)
        and not any(_RE_TEMPORAL_SQL.search(v.sql or "") for v in ok_sql)
    ):
        target = ok_sql[-1]
        signals.append(
            Signal(
                SQL_LOGIC,
                0.4,
                target.index,
                _cite(
                    target,
                    "the question has a temporal condition but no query orders or compares times.",
                ),
            )
        )
    return signals
