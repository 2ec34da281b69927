"""Where the right data went wrong after it was retrieved: an answer a step held (and where it
was left, or which query lost it), and rows that hold the reference's values in another shape.

The taxonomy's Answer Format Error is "the retrieved values are right or nearly right, but the
final answer has the wrong structure"; and "if the values themselves are wrong, label the step
that made them wrong". These functions find the step and the part; the finder calibrates what
they return (their divergences carry no category of their own).
"""

from __future__ import annotations

import re

from trajectories import signals as sg
from trajectories.evidence.parts import Divergence, RefParts, compare, decompose
from trajectories.evidence.probes import Probe, Rows, in_another_shape, same_rows
from trajectories.model import StepKind, Trajectory
from trajectories.reading import sql_result
from trajectories.signals import NULL_TEXTS, as_table


def _answer(reason: str) -> Divergence:
    return Divergence("answer", reason, sg.ANSWER_FORMAT, 0.0)


def answer_step(
    trajectory: Trajectory, steps: list[tuple[int, str]], probe: Probe | None,
    reference: Rows | None,
) -> tuple[int, Divergence] | None:
    gold = as_table(trajectory.task.ground_truth)
    pred = as_table(trajectory.final_answer)
    # The run failed, so an answer with the right values was failed for its shape.
    shape_only = pred is not None and gold is not None and sorted(pred) == sorted(gold)
    last = steps[-1][0] if steps else len(trajectory.steps) - 1
    final = trajectory.final_answer
    # An empty answer says nothing: it is not "none" written as text.
    if gold is None and isinstance(final, str) and final.strip() \
            and final.strip().lower() in NULL_TEXTS:
        no_rows = reference is not None and not reference.rows
        if no_rows or reference is None:
            return last, _answer(f"no rows is the right answer, final answer "
                                        f"{trajectory.final_answer[:20]!r} is text instead of null")
    expected = gold if gold else (as_table(list(reference.rows)) if reference else None)
    wanted = {v for row in expected or [] for v in _values(row)}
    by_index = dict(steps)
    for i, step in enumerate(trajectory.steps):
        if step.kind == StepKind.MESSAGE or step.error or not step.observation or not wanted:
            continue
        obs = step.observation.lower()
        if not all(v.lower() in obs for v in wanted):
            continue
        if probe is None:
            # No database: the recorded observations are the only results there are. An output
            # with another number of rows than the answer mentions its values among others: a
            # wider cohort or another listing, not the answer held.
            recorded, total = sql_result(step.observation)
            if recorded is not None and expected and (total or len(recorded)) != len(expected):
                continue
            return i, _answer(f"answer correct in step {i} (seen in its recorded "
                                     "output), final answer reformatted or changed")
        # The recorded output holds every expected value; executing the step confirms it
        # returns exactly the reference's rows, not just a superset that mentions them.
        if i not in by_index:
            continue
        exact_possible = _could_match(by_index[i], reference, gold)
        # Without a reference, a result with the verified answer's rows, one result row for
        # each and every value among them, holds it too (a column more, such as the date
        # beside a value, still holds the answer; a longer listing does not).
        by_rows = bool(gold) and reference is None
        if not (exact_possible or by_rows):
            continue
        got = probe.run(by_index[i])
        if got is None or not got.rows:
            continue
        if exact_possible and (
            (reference is not None and same_rows(got, reference))
            or (gold and sorted(as_table(list(got.rows)) or []) == sorted(gold))
        ):
            equals = "the reference's" if reference is not None else "the verified answer"
            return i, _answer(f"answer correct in step {i} (its result equals {equals}), "
                              "final answer reformatted or changed")
        # Read as the verified answer is (numbers to two decimals): 3.382638 holds 3.38.
        cells = {v.lower() for row in as_table(list(got.rows)) or [] for v in row}
        if by_rows and len(got.rows) == len(gold or ()) and all(v.lower() in cells
                                                               for v in wanted):
            return i, _answer(f"answer correct in step {i} (its result holds the verified "
                              "answer's rows), final answer reformatted or changed")
    if shape_only:
        return last, _answer("final answer has the reference's values in another shape")
    return None


def other_rows(trajectory: Trajectory) -> Divergence | None:
    """What the final answer did to the verified answer's rows, for an answer a step once held:
    every verified row and others besides is a wider question (a condition of the question
    dropped: the filters part), the same rows repeated is a dropped DISTINCT, and only some
    of them is a narrower one (a filter or a limit that cuts answer rows: the result part).
    None for the same rows in another shape, which is the answer's formatting."""
    gold = [row for row in as_table(trajectory.task.ground_truth) or [] if _values(row)]
    pred = as_table(trajectory.final_answer) or []
    if not gold or not pred:
        return None
    in_gold = [any(_values(g) <= _values(p) for g in gold) for p in pred]
    if len(pred) > len(gold) and all(any(_values(g) <= _values(p) for p in pred)
                                     for g in gold):
        if all(in_gold):
            return Divergence("aggregations", f"final answer repeats the verified answer's "
                              f"rows ({len(pred)} rows for {len(gold)})", sg.SQL_LOGIC, 0.0)
        return Divergence("filters", f"final answer holds the verified answer's {len(gold)} "
                          f"row(s) among {len(pred)}: a condition of the question dropped",
                          sg.SEMANTIC, 0.0)
    if len(pred) < len(gold) and all(in_gold):
        return Divergence("result", f"final answer keeps {len(pred)} of the verified answer's "
                          f"{len(gold)} rows: a filter or limit cut answer rows", sg.SQL_LOGIC,
                          0.0)
    return None


def _values(row: tuple[str, ...]) -> set[str]:
    return {v for v in row if v not in {"none", "null", ""}}


def _could_match(sql: str, reference: Rows | None, gold: list[tuple[str, ...]] | None) -> bool:
    """Whether executing ``sql`` could show the reference's rows or the ground truth: a query
    whose output width (read from its text) fits neither cannot, whatever its rows, so it is not
    run. Unknown widths (``*``, text that does not parse) are run."""
    parts = decompose(sql)
    if parts is None or parts.star:
        return True
    widths = {len(row) for row in gold or []}
    if reference is not None and reference.rows:
        widths.add(len(reference.rows[0]))
    elif reference is not None:
        widths.add(len(reference.columns))
    return not widths or parts.n_outputs in widths


# Parts that change which rows a query returns (not how they are shown).
ROW_PARTS = frozenset({"codes", "lookup", "times", "aggregations", "filters"})


def lost_by(steps: list[tuple[int, str]], seen: int, ref_sql: str | None) -> Divergence | None:
    """Why the last query after step ``seen`` (which held the answer) returns other rows than
    the reference: a part that chooses rows (a filter, a code, a window, the table) or the
    duplicate rows a dropped DISTINCT lets through. None when it only shows them otherwise."""
    ref = decompose(ref_sql)
    later = [sql for i, sql in steps if i > seen]
    got = decompose(later[-1]) if later and ref is not None else None
    if ref is None or got is None or not (got.tables & ref.tables) \
            or not ref.out_columns <= got.out_columns:
        return None  # another question's query (a follow-up), or the answer shown otherwise
    found = [d for d in compare(ref, got) if d.part in ROW_PARTS]
    if found:
        return found[0]
    if ref.distinct and not got.distinct and not got.aggregations:
        return Divergence("aggregations", "DISTINCT dropped: the last query repeats rows the "
                                          "reference removes", sg.SQL_LOGIC, 0.0)
    return None


def right_by_chance(steps: list[tuple[int, str]], seen: int, ref_sql: str | None,
                    lost: Divergence) -> bool:
    """Whether the query at step ``seen``, whose result held the answer, already carries what
    later lost it (the same divergence from the reference): its result was right by chance,
    so the error was written there, not where the answer was left."""
    ref = decompose(ref_sql)
    held = decompose(dict(steps).get(seen))
    if ref is None or held is None:
        return False
    if not any(d.part == lost.part and d.reason == lost.reason for d in compare(ref, held)):
        return False
    # A pattern that takes in the reference's value (LIKE '%x%' for x) chose the right rows
    # on purpose: only a value the reference's is not was right by chance.
    return any(not any(col == c and _covers(v, value) for c, v in held.codes)
               for col, value in ref.codes - held.codes)


def _covers(pattern: str, value: str) -> bool:
    """Whether SQL ``LIKE pattern`` (ASCII case ignored, as SQLite and DuckDB's ILIKE do)
    takes in ``value``."""
    if pattern == value:
        return True
    if "%" not in pattern and "_" not in pattern:
        return False
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, flags=re.IGNORECASE | re.DOTALL) is not None


def first_in_another_shape(
    trajectory: Trajectory, steps: list[tuple[int, str]], last_i: int, ref: RefParts,
    reference: Rows, probe: Probe | None,
) -> int:
    """The first query over the reference's tables whose result holds the reference's answer
    in another shape (the last one does)."""
    if probe is None:
        return last_i
    for i, sql in steps:
        if i >= last_i:
            break
        if trajectory.steps[i].error or not mentions(sql, ref.tables):
            continue
        got = probe.run(sql)
        if got is not None and in_another_shape(got, reference):
            return i
    return last_i



def mentions(sql: str, tables: frozenset[str]) -> bool:
    """Whether the text names any of ``tables`` (lower-case base names): a cheap test that
    spares parsing a query that cannot read them."""
    low = sql.lower()
    return any(t in low for t in tables)
