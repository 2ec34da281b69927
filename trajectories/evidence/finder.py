"""First-divergence finder: where a failed trajectory leaves the reference SQL's path.

Offline and deterministic. The reference SQL is decomposed into its parts
(:mod:`trajectories.evidence.parts`) and, when an EHR database is at hand, executed read-only in the
sandbox (:mod:`trajectories.evidence.probes`): the reference itself, each agent SQL step, and
look-ups of the medical codes either of them filters on. Each agent step is then compared with
the reference, in this order of decisiveness:

1. ``loop``: the same query run again and again without a new result.
2. ``execution``: a step failed because a name from an earlier cell was gone (variable scope).
3. ``answer``: a step's result already equals the reference's (executed) or the ground truth,
   yet the final answer differs: "answer correct in step N, final answer reformatted".
4. The parts of the last query over the reference's tables against the reference's parts:
   tables, codes (with the code versions and labels looked up), dictionary look-ups, time
   window, aggregation, grouping, ordering/limit, filters; the first step is the earliest one
   that already shows one of those differences.
5. ``result``: no part differs but the executed results do.

Whether the agent grounded the question's terms in the database's own names and values (a
search that never found the reference's name, a filter value no row holds, an abbreviation of
the concept) is :mod:`trajectories.evidence.grounding`'s.

The suggested category and its confidence come from the part (``CALIBRATION``): each
confidence is the share of demo failures, over the injected causes the demo generator knows,
in which that part went with that category (see docs/evidence.md for how it was measured).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajectories import signals as sg
from trajectories.evidence.answer import (
    answer_step,
    first_in_another_shape,
    lost_by,
    mentions,
    other_rows,
    right_by_chance,
)
from trajectories.evidence.codes import earlier_wrong_code, with_lookups
from trajectories.evidence.commit import (
    diverging_values,
    first_reaching,
    first_writing,
    left_answer,
    reported_steps,
)
from trajectories.evidence.empty import emptied_by_a_value, first_emptied
from trajectories.evidence.grounding import (
    coded_value_missing,
    coded_value_reason,
    first_naming,
    searched,
    ungrounded_search,
    unknown_value,
    value_reason,
)
from trajectories.evidence.loops import repeated_query, repeated_reply
from trajectories.evidence.noref import (
    absent_terms,
    answering_step,
    final_message,
    has_reference,
    unanswerable,
    unanswerable_reason,
    used_tools,
)
from trajectories.evidence.parts import (
    Divergence,
    EvidencePart,
    RefParts,
    compare,
    decompose,
    row_id_reason,
)
from trajectories.evidence.probes import Probe, Rows, in_another_shape, same_rows
from trajectories.evidence.typed_code import earliest_wrong_choice
from trajectories.evidence.unfound import unfound_term
from trajectories.model import StepKind, Trajectory
from trajectories.signals import has_final_answer

__all__ = ["CALIBRATION", "MEASURED_PARTS", "UNMEASURED_PARTS", "Evidence", "EvidencePart",
           "find_divergence"]

# part -> (suggested category, confidence). Each confidence is the part's precision for its
# category on demo failures, whose generator records every failure's injected cause (seeds 0, 2
# and 3, 72 tasks x 3 rollouts x every agent profile: 1,466 failures; the real hand-labelled set
# is never read), shrunk towards the uninformed prior 1/6 by two pseudo-failures, capped at 0.9
# because the demo's causes are cleaner than real ones, rounded down to 0.05
# (trajectories.evidence.calibrate; `bench/calibrate_evidence.py` prints the table). Parts the demo
# never decides get that prior, 0.15: nobody has measured them, so they claim nothing; the
# heuristic does not follow them. `lookup` is measured since the demo has tasks whose reference
# looks its codes up by name (trajectories/demo/templates_lookups.py). tests/labeling/
# test_evidence.py re-measures on another demo (seed 1) and fails when a measured part drifts;
# docs/evaluation.md has the table. `order_limit` stays at the prior on purpose: the
# calibration-only templates measure it 14/14 SQL logic, but on real failures a missing LIMIT
# is mostly the consequence of another error, and following it cost the held-out half an item.
_P = EvidencePart
CALIBRATION: dict[str, tuple[str, float]] = {
    _P.LOOP: (sg.STUCK_IN_LOOP, 0.9),  # 225/225
    _P.EXECUTION: (sg.VARIABLE_SCOPE, 0.9),  # 23/23
    _P.ANSWER: (sg.ANSWER_FORMAT, 0.9),  # 420/432
    _P.NO_DATA: (sg.SEMANTIC, 0.9),  # 198/198
    _P.CODES: (sg.CODE_LOOKUP, 0.9),  # 131/131
    _P.CONCEPT: (sg.SEMANTIC, 0.05),  # 0/2 (both demo cases were code errors)
    _P.AGGREGATIONS: (sg.SQL_LOGIC, 0.9),  # 137/139
    _P.RESULT: (sg.SQL_LOGIC, 0.65),  # 172/249
    _P.FILTERS: (sg.SEMANTIC, 0.8),  # 24/28
    _P.LOOKUP: (sg.CODE_LOOKUP, 0.85),  # 14/14
    _P.TABLES: (sg.SEMANTIC, 0.85),  # 10/10
    _P.TIMES: (sg.SQL_LOGIC, 0.75),  # 5/5
    _P.GROUP_BY: (sg.SQL_LOGIC, 0.15),  # not produced by the demo
    _P.ORDER_LIMIT: (sg.SQL_LOGIC, 0.15),  # see above
    # No query to compare: the taxonomy's least specific label, unmeasured (the demo's agents
    # always query), so it claims nothing.
    _P.UNQUERIED: (sg.SEMANTIC, 0.15),
}
#: Parts left at the uninformed prior because the demo never produces them.
UNMEASURED_PARTS = frozenset({_P.GROUP_BY, _P.ORDER_LIMIT, _P.UNQUERIED})
MEASURED_PARTS = frozenset(CALIBRATION) - UNMEASURED_PARTS
# Which part decides when several differ: the enum's order, the most specific evidence first.
_ORDER: tuple[str, ...] = tuple(EvidencePart)
_RE_SCOPE = re.compile(r"NameError|is not defined|UnboundLocalError", re.I)
_ROW_TEXT = 160


@dataclass(slots=True)
class Evidence:
    """What the finder found for one trajectory. ``category`` is None when nothing decides."""

    step: int | None
    divergences: list[Divergence] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)  # evidence lines: queries, results, look-ups
    category: str | None = None
    confidence: float = 0.0
    reason: str = ""
    executed: bool = False  # whether the sandbox ran the reference

    @property
    def part(self) -> str | None:
        return self.divergences[0].part if self.divergences else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """Evidence as ``to_dict`` stored it (beside a pre-label), so it can be reused without
        running the finder again. Each divergence gets its part's calibration back."""
        parts = [str(p) for p in data.get("parts") or []]
        reasons = [str(r) for r in data.get("divergences") or []]
        found = [
            _div(part, reason) if part in CALIBRATION else Divergence(part, reason, "", 0.0)
            for part, reason in zip(parts, reasons, strict=False)
        ]
        step = data.get("step")
        category = data.get("category")
        confidence = data.get("confidence")
        return cls(
            step=step if isinstance(step, int) else None,
            divergences=found,
            rows=[str(r) for r in data.get("rows") or []],
            category=str(category) if category else None,
            confidence=float(confidence) if isinstance(confidence, (int, float)) else 0.0,
            reason=str(data.get("reason") or ""),
            executed=bool(data.get("executed")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "category": self.category,
            "confidence": self.confidence,
            "reason": self.reason,
            "part": self.part,
            "parts": [d.part for d in self.divergences],
            "divergences": [d.reason for d in self.divergences],
            "rows": self.rows,
            "executed": self.executed,
        }


def _div(part: str, reason: str) -> Divergence:
    category, confidence = CALIBRATION[part]
    return Divergence(part, reason, category, confidence)


def _calibrated(found: list[Divergence]) -> list[Divergence]:
    out = [_div(d.part, d.reason) if d.part in CALIBRATION else d for d in found]
    return sorted(out, key=lambda d: _ORDER.index(d.part) if d.part in _ORDER else len(_ORDER))


def _sql_steps(trajectory: Trajectory) -> list[tuple[int, str]]:
    return [(v.index, v.sql) for v in sg.action_views(trajectory) if v.sql]


def _scope(trajectory: Trajectory) -> tuple[int, Divergence] | None:
    for i, step in enumerate(trajectory.steps):
        if step.kind != StepKind.PYTHON or not step.observation:
            continue
        match = _RE_SCOPE.search(step.observation)
        if match:
            line = next(
                (ln.strip() for ln in step.observation.splitlines() if _RE_SCOPE.search(ln)),
                match.group(0),
            )
            return i, _div("execution", f"step {i} failed: {line[:120]} (a name from an earlier "
                                        "step is gone)")
    return None


def find_divergence(
    trajectory: Trajectory, db_path: Path | None = None, *, probe: Probe | None = None
) -> Evidence:
    """Evidence for one (failed) trajectory.

    ``db_path`` (or an open ``probe`` shared over many trajectories) is the EHR database to
    execute on; without one, the comparison is structural plus the recorded observations.
    """
    if probe is None and db_path is not None:
        with Probe.open(db_path) as own:
            return find_divergence(trajectory, probe=own)
    steps = _sql_steps(trajectory)
    ref_sql = trajectory.task.reference_sql if has_reference(trajectory) else None
    reference = probe.run(ref_sql) if probe is not None and ref_sql else None
    executed = reference is not None
    rows: list[str] = []
    if reference is not None:
        rows.append("reference result: " + reference.text(_ROW_TEXT))

    looped = repeated_query(trajectory, steps)
    if looped is not None:
        return _evidence(trajectory, looped[0], [_div("loop", looped[1].reason)], rows, executed)
    scoped = _scope(trajectory)
    if scoped is not None:
        return _evidence(trajectory, scoped[0], [scoped[1]], rows, executed)
    if unanswerable(trajectory) and has_final_answer(trajectory.final_answer):
        return _unanswerable(trajectory, steps, probe, rows, executed)
    seen = answer_step(trajectory, steps, probe, reference)
    if seen is not None:
        held = _div(seen[1].part, seen[1].reason)
        if not held.reason.startswith("answer correct in step"):
            return _evidence(trajectory, seen[0], [held], rows, executed)
        replied = repeated_reply(trajectory, seen[0])
        if replied is not None:  # right, then the same reply until the turns ran out
            return _evidence(trajectory, replied[0], [_div("loop", replied[1].reason), held],
                             rows, executed, seen[0])
        # The step that held the answer did nothing wrong: the fault is where it was left.
        left = left_answer(trajectory, steps, seen[0])
        if steps and left == steps[-1][0] and trajectory.steps[left].error:
            # The taxonomy: a final query that fails to execute is a SQL Logic Error.
            failed = _div("result", f"step {left}, the last query, fails to execute: the "
                                    f"answer its step {seen[0]} held is not what was scored")
            return _evidence(trajectory, left, [failed, held], rows, executed, seen[0])
        # Without a reference SQL, the query whose rows were the answer is the reference the
        # later one is read against: what it changed is what lost the answer.
        lost = lost_by(steps, seen[0], ref_sql or dict(steps).get(seen[0]))
        if lost is not None:
            # A later query chose other rows: the values went wrong, not their rendering
            # (the taxonomy: label the step that made them wrong), unless the query that held
            # the answer already had that fault and matched by chance.
            chance = bool(ref_sql) and right_by_chance(steps, seen[0], ref_sql, lost)
            return _evidence(trajectory, seen[0] if chance else left,
                             [_div(lost.part, lost.reason), held], rows, executed, seen[0])
        moved = [_div(d.part, d.reason) for d in [other_rows(trajectory)] if d is not None]
        return _evidence(trajectory, left, [*moved, held], rows, executed,
                         seen[0] if left != seen[0] else None)

    ref = decompose(ref_sql)
    if not used_tools(trajectory):
        return _unqueried(trajectory, rows, executed)
    if ref is None and ref_sql:
        return Evidence(None, rows=rows, reason="reference SQL does not parse: no evidence",
                        executed=executed)
    if ref is None:  # no reference SQL: what the trajectory and the database show alone
        misread = earliest_wrong_choice(trajectory, steps, probe)
        if misread is not None:
            return _evidence(trajectory, misread[0], [_div(misread[1].part, misread[1].reason)],
                             rows, executed)
        emptied = emptied_by_a_value(trajectory, steps, probe)
        if emptied is not None:
            return _evidence(trajectory, emptied[0], [_div(emptied[1].part, emptied[1].reason)],
                             rows, True, emptied[2])
        unfound = unfound_term(trajectory) or first_emptied(trajectory, steps, probe)
        if unfound is not None:
            return _evidence(trajectory, unfound[0], [_div(unfound[1].part, unfound[1].reason)],
                             rows, executed)
        return Evidence(None, rows=rows, reason="no reference SQL: no evidence",
                        executed=executed)
    # Parse lazily: the last query over the reference's tables is usually the last step, and
    # parsing every step is the finder's main cost. A query can only read a table its text
    # names: steps that name none of the reference's tables are not parsed (same verdict).
    last_step: tuple[int, RefParts] | None = None
    for i, sql in reversed(steps):
        p = decompose(sql) if mentions(sql, ref.tables) else None
        if p is not None and p.tables & ref.tables:
            last_step = (i, p)
            break
    if last_step is None:  # none over the reference's tables: the last query that parses
        last_step = next(((i, p) for i, sql in reversed(steps)
                          if (p := decompose(sql)) is not None), None)
    if last_step is None:
        ungrounded = ungrounded_search(trajectory, ref)
        if ungrounded is not None:
            return _evidence(trajectory, ungrounded[0], _calibrated([ungrounded[1]]), rows,
                             executed)
        return Evidence(None, rows=rows, reason="no parsable agent SQL step: no evidence",
                        executed=executed)
    last_i, last = last_step
    unknown: tuple[str, str] | None = None
    final_div = compare(ref, last)
    if probe is not None:
        final_div = with_lookups(final_div, ref, last, probe, rows,
                                 lambda: searched(steps, last_i))
        row_ids = sorted(last.row_id_codes - ref.row_id_codes)
        if row_ids and not any(d.reason == row_id_reason(*row_ids[0]) for d in final_div):
            # The look-ups judge code literals; a row number joined in place of the code is
            # wrong whatever literals the query has, so it is not theirs to drop.
            final_div = [_div("codes", row_id_reason(*row_ids[0])), *final_div]
        unknown = None if any(d.part in ("tables", "codes", "lookup") for d in final_div) \
            else unknown_value(ref, last, probe)
        if unknown is not None:
            # A value the database does not hold leaves the path wherever else the query
            # differs: it is why the rows differ, at the first query that used it.
            final_div = [_div("codes", value_reason(*unknown, ref)), *final_div]
    coded = None if any(d.part in ("tables", "codes", "lookup") for d in final_div) \
        else coded_value_missing(trajectory, ref, last)
    if coded is not None:
        # The question's word has a code in the database that no query wrote: whatever else
        # differs (a LIMIT, other filters) follows from the rows that code would have chosen.
        final_div = [_div("lookup", coded_value_reason(*coded)), *final_div]
    if reference is not None and not reference.rows and has_final_answer(trajectory.final_answer):
        # The record holds no answer (the reference finds nothing), yet the agent gave one:
        # whatever else differs, answering anyway is the failure.
        final_div = [_div("no_data", f"the reference finds no rows; step {last_i} answered "
                                     "anyway from other rows"), *final_div]
    last_rows: Rows | None = None
    if not final_div and reference is not None:
        got = last_rows = probe.run(dict(steps)[last_i]) if probe is not None else None
        if got is not None and in_another_shape(got, reference):
            # Every part matches and the rows hold the reference's values, in another shape:
            # the answer was retrieved and rendered wrong, from the first query that did so.
            shaped = first_in_another_shape(trajectory, steps, last_i, ref, reference, probe)
            rows.append(f"step {last_i} result: " + got.text(_ROW_TEXT))
            return _evidence(trajectory, shaped, [_div(
                "answer", f"step {shaped}'s result holds the reference's values in another "
                          "shape (extra columns or rows, other rounding)")], rows, executed,
                last_i)
        if got is not None and not same_rows(got, reference):
            final_div = [_div("result", f"step {last_i} result differs from the reference's "
                                        f"({len(got.rows)} vs {len(reference.rows)} rows)")]
    if not final_div:
        return Evidence(last_i, rows=rows, executed=executed,
                        reason="final query matches every reference part: no evidence")
    final_div = _calibrated(final_div)
    if final_div[0].part == "filters" and final_div[0].reason.startswith("look-up of"):
        # The criterion was dropped after the agent's searches for its name found nothing:
        # the term was not grounded (the look-up), not the question misread.
        ungrounded = ungrounded_search(trajectory, ref)
        if ungrounded is not None:
            return _evidence(trajectory, ungrounded[0], _calibrated([ungrounded[1], *final_div]),
                             rows, executed, last_i)
    # Something wrong (a code, a window, a table) leaves the path where it first appears; a part
    # merely missing does not: exploring queries lack filters without being an answer. So a
    # missing part is placed at the query that answers (the first step's guideline: the first
    # action that leaves the answer's path).
    # The primary divergence (strongest first) is the one whose first appearance counts: an
    # exploring query that also lacks the LIMIT has not yet written the wrong code.
    kinds = {d.part for d in final_div if not _absent(d)}
    if not _absent(final_div[0]):
        kinds = {final_div[0].part}
    first = last_i
    sql_at = dict(steps)
    for i, sql in steps:
        if i >= last_i or not kinds:
            break
        if not mentions(sql, ref.tables):
            continue
        parts = decompose(sql)
        if parts is not None and parts.tables & ref.tables and _reads_events(parts) and (
            {d.part for d in compare(ref, parts) if not _absent(d)} & kinds
        ):
            first = i
            break
    if _absent(final_div[0]) and first == last_i:
        # Only missing: the agent committed to its absence in the first query it answered
        # from, when that query already lacked it.
        missing = {final_div[0].part}
        first = next((i for i in reported_steps(trajectory, steps) if i < last_i
                      and mentions(sql_at[i], ref.tables)
                      and (p := decompose(sql_at[i])) is not None and _reads_events(p)
                      and any(d.part in missing and _absent(d) for d in compare(ref, p))),
                     last_i)
    elif final_div[0].part == "tables":
        # Another entity is chosen where the agent first reaches for the table it answers from.
        other = {t for t in last.tables if not t.startswith("d_")} - ref.tables
        reached = first_reaching(trajectory, other, first)
        first = first if reached is None else reached
    elif final_div[0].part in ("codes", "lookup") and unknown is None:
        # A wrong value is committed to where it is first written, on whatever table.
        written = first_writing(steps, diverging_values(ref, last), first)
        first = first if written is None else written
    if coded is not None and final_div[0].part == "lookup":
        # Committed where the agent first went looking for the term elsewhere.
        named = first_naming(trajectory, coded[2], last_i)
        first = named if named is not None else first
    if unknown is not None and final_div[0].part == "codes":
        first = next((i for i, sql in steps if i <= last_i and unknown[1].lower() in sql.lower()
                      and (p := decompose(sql)) is not None
                      and unknown in p.filters | p.codes), first)
    if probe is not None and final_div[0].part != "no_data":
        # A code guessed for the reference's concept before the first diverging step is the
        # earliest error, whatever diverges later (another code or look-up included).
        early = earlier_wrong_code(ref, steps, first, probe)
        if early is not None:
            first, wrong = early[0], _div("codes", early[1])
            final_div = [wrong, *final_div]
    if last_rows is not None:
        # Shown only when the verdict needed the step executed: running a query just to show
        # its rows cannot change the verdict, and the step's recorded output is shown anyway.
        rows.append(f"step {last_i} result: " + last_rows.text(_ROW_TEXT))
    return _evidence(trajectory, first, final_div, rows, executed, last_i)


def _unanswerable(
    trajectory: Trajectory, steps: list[tuple[int, str]], probe: Probe | None, rows: list[str],
    executed: bool,
) -> Evidence:
    found = answering_step(trajectory, steps)
    step, how = found if found is not None else (final_message(trajectory), "")
    if step is None and trajectory.steps:
        step = len(trajectory.steps) - 1  # no message of its own: its last recorded step
    question = trajectory.task.question if isinstance(trajectory.task.question, str) else ""
    reason = unanswerable_reason(step if found is not None else None, how,
                                 absent_terms(question, probe))
    div = _div("no_data", reason)
    if step is None:  # only the final answer is recorded
        return Evidence(None, [div], rows, div.category, div.confidence,
                        f"final answer: {reason}", executed)
    return _evidence(trajectory, step, [div], rows, executed)


def _unqueried(trajectory: Trajectory, rows: list[str], executed: bool) -> Evidence:
    step = final_message(trajectory)
    if step is None and trajectory.steps:
        step = len(trajectory.steps) - 1  # no message of its own: its last recorded step
    div = _div("unqueried", "no tool used: the final answer is the agent's only action, and it "
                            "is not the verified answer")
    # What a person checks it against: the answer beside the verified one (and, executed, the
    # reference's rows above).
    shown = " ".join(str(trajectory.final_answer).split())[:_ROW_TEXT]
    rows = [*rows, f"final answer: {shown}",
            "verified answer: " + " ".join(str(trajectory.task.ground_truth).split())[:_ROW_TEXT]]
    if step is None:
        return Evidence(None, [div], rows, div.category, div.confidence,
                        f"final answer: {div.reason}", executed)
    return _evidence(trajectory, step, [div], rows, executed)


def _reads_events(parts: RefParts) -> bool:
    """Whether a query reads more than dictionaries: browsing ``d_icd_procedures`` is looking
    a name up, not yet an answer that can leave the reference's path by its tables."""
    return any(not t.startswith("d_") for t in parts.tables)


def _absent(d: Divergence) -> bool:
    return d.part in ("filters", "times") and d.reason.endswith("missing")


def _evidence(
    trajectory: Trajectory, first: int, found: list[Divergence], rows: list[str],
    executed: bool, last: int | None = None,
) -> Evidence:
    top = found[0]
    heads = [_head(trajectory, first)]
    if last is not None and last != first:
        heads.append(_head(trajectory, last))
    return Evidence(
        step=first,
        divergences=found,
        rows=heads + rows,
        category=top.category,
        confidence=top.confidence,
        reason=f"step {first}: {top.reason}",
        executed=executed,
    )


def _head(trajectory: Trajectory, index: int) -> str:
    step = trajectory.steps[index]
    if step.kind == StepKind.MESSAGE:  # a message is its words, not a call and its result
        words = " ".join((step.content or "").split())[:_ROW_TEXT]
        return f"step {index} ({step.role or 'assistant'}): {words}"
    code = " ".join((step.code or step.arguments or "").split())[:_ROW_TEXT]
    obs = " ".join((step.observation or "").split())[:_ROW_TEXT]
    return f"step {index}: {code} -> {obs}"
