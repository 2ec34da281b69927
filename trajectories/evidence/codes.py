"""Medical codes by execution: what the codes a query and the reference filter on are.

The part-by-part comparison (:mod:`trajectories.evidence.parts`) sees that two queries filter on
different literals; these checks look the codes up in the EHR's dictionary tables through the
sandbox probe and say what the difference means: another ICD version, a code the reference's
look-up does not find, a name matched as text where a code was needed, or (when what the agent
searched for shares no word with the reference's concept) another concept altogether.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from trajectories import signals as sg
from trajectories.evidence.grounding import TEXT_CODE_COLS, related, words
from trajectories.evidence.parts import CASE_NOTE, Divergence, RefParts, decompose
from trajectories.evidence.probes import CodeInfo, Probe


def _looked_up(probe: Probe, pairs: frozenset[tuple[str, str]]) -> dict[str, CodeInfo]:
    """The codes of ``(column, literal)`` pairs, each looked up where its column points."""
    by_column: dict[str, list[str]] = {}
    for column, value in sorted(pairs):
        by_column.setdefault(column, []).append(value)
    out: dict[str, CodeInfo] = {}
    for column, values in by_column.items():
        for code, info in probe.codes(values, column).items():
            out.setdefault(code, info)
    return out


def with_lookups(
    found: list[Divergence], ref: RefParts, got: RefParts, probe: Probe, rows: list[str],
    searched: Callable[[], set[str]],
) -> list[Divergence]:
    """Make code divergences concrete by looking the codes up in the dictionary tables. A value
    written in another case than the reference's stays whatever the codes say."""
    cased = [d for d in found if d.part == "codes" and d.reason.endswith(CASE_NOTE)]
    out = _with_lookups([d for d in found if d not in cased], ref, got, probe, rows, searched)
    return cased + out


def _with_lookups(
    found: list[Divergence], ref: RefParts, got: RefParts, probe: Probe, rows: list[str],
    searched: Callable[[], set[str]],
) -> list[Divergence]:
    ref_codes = {v for c, v in ref.codes}
    used = {v for c, v in got.codes}
    got_codes = used - ref_codes
    missing = ref_codes - used
    if not got_codes and not missing and not ref.lookups:
        return found
    ref_info = _looked_up(probe, ref.codes)
    for pattern_table, pattern in sorted(ref.lookups):
        ref_info.update(probe.lookup(pattern_table, pattern))
    got_info = _looked_up(probe, got.codes)
    for code, what in sorted(got_info.items())[:3]:
        rows.append(f"agent code {code}: {what.describe()}")
    for code, what in sorted(ref_info.items())[:3]:
        rows.append(f"reference code {code}: {what.describe()}")
    if any(d.part == "tables" for d in found):
        # The query answers about another entity (compare's rule): its codes follow from that
        # reading, so they are cited above but do not decide.
        return found
    ref_versions = {w.version for w in ref_info.values() if w.version}
    got_versions = {w.version for w in got_info.values() if w.version}
    # Codes the reference's look-ups find and the query does not use are missing too: a
    # title listed under both ICD versions needs both, whichever one the query kept.
    not_used = (missing | (set(ref_info) - used)) if used else missing
    miss_versions = {w.version for c, w in ref_info.items() if c in not_used and w.version}
    out = [d for d in found if d.part != "codes"]
    before = next((d.reason for d in found if d.part == "codes"), "")
    note = f" ({before})" if before else ""
    versions_differ = bool(
        (got_versions and ref_versions and not (got_versions & ref_versions))
        or (got_versions and miss_versions and not (got_versions & miss_versions))
    )
    if not versions_differ and got_info and set(got_info) <= set(ref_info):
        # Every code the query uses is one the reference's look-up finds: the concept and its
        # identifiers are right, whatever literal spelled them. Not a code divergence.
        return [d for d in out if d.part != "lookup"]
    if got_versions and ref_versions and not (got_versions & ref_versions):
        reason = (f"ICD-{'/'.join(sorted(got_versions))} code looked up, task needs "
                  f"ICD-{'/'.join(sorted(ref_versions))}{note}")
        out.insert(0, Divergence("codes", reason, sg.CODE_LOOKUP, 0.0))
    elif got_versions and miss_versions and not (got_versions & miss_versions):
        reason = (f"only ICD-{'/'.join(sorted(got_versions))} codes looked up, task needs "
                  f"ICD-{'/'.join(sorted(miss_versions))} too{note}")
        out.insert(0, Divergence("codes", reason, sg.CODE_LOOKUP, 0.0))
    elif before:
        named = [f"{c} ({got_info[c].label[:40]})" for c in sorted(got_codes)[:2] if c in got_info]
        extra = f"; the query's {', '.join(named)}" if named else ""
        out.insert(0, Divergence("codes", before + extra, sg.CODE_LOOKUP, 0.0))
    elif got_codes and not got_info and not any(d.part == "lookup" for d in out):
        out.insert(0, _unlisted(got, got_codes, ref))
    if versions_differ or not any(d.part in ("codes", "lookup") for d in out):
        return out
    # Concept understood but identifier wrong is a code error; concept itself misread is
    # Semantic Misunderstanding (the taxonomy's rule). What the agent searched the dictionaries
    # for (its LIKE patterns and label texts) names the concept it had in mind: when that shares
    # no word with the reference's concept (its look-up text, else its codes' titles), it looked
    # for another concept. Codes written without a search say nothing about the reading: they
    # stay a code divergence.
    wanted_texts = [p for _, p in ref.lookups] or [w.label for w in ref_info.values()]
    wanted = words(wanted_texts)
    sought = words(searched()) if wanted else set()  # parses earlier steps: only if needed
    if wanted and sought and not related(wanted, sought, wanted_texts):
        out = [d for d in out if d.part not in ("codes", "lookup")]
        out.insert(0, Divergence(
            "concept", f"looks for {', '.join(sorted(sought)[:3])}; the question's concept is "
                       f"{', '.join(sorted(wanted)[:3])}", sg.SEMANTIC, 0.0))
    return out


# A code column compared with a literal (ICD codes are quoted, itemids are numbers).
_RE_CODE_LITERAL = {
    "icd_code": re.compile(r"icd_code\s*(?:=|in\s*\()\s*'"),
    "itemid": re.compile(r"itemid\s*(?:=|in\s*\()\s*\d"),
}
# Which events tables a dictionary's codes are filtered in.
_CODED_IN = {
    "d_icd_procedures": ("icd_code", frozenset({"procedures_icd"})),
    "d_icd_diagnoses": ("icd_code", frozenset({"diagnoses_icd"})),
    "d_labitems": ("itemid", frozenset({"labevents"})),
    "d_items": ("itemid", frozenset({"chartevents", "inputevents", "outputevents",
                                     "procedureevents"})),
}


def earlier_wrong_code(
    ref: RefParts, steps: list[tuple[int, str]], before: int, probe: Probe,
) -> tuple[int, str] | None:
    """The earliest step before ``before`` that filters an events table on codes the
    reference's look-up of that table's dictionary does not find, and why: the concept was
    named, its code was not the one the name has. The first error decides the category (the
    taxonomy's first-faulty-step guideline), so a later misreading does not hide it."""
    wanted: dict[str, tuple[str, frozenset[str], set[str], str]] = {}
    for table, pattern in sorted(ref.lookups):
        if table in _CODED_IN:
            column, events = _CODED_IN[table]
            found = set(probe.lookup(table, pattern))
            if found:
                wanted[table] = (column, events, found, pattern)
    if not wanted:
        return None
    for i, sql in steps:
        if i >= before:
            break
        low = sql.lower()
        # Only a query that names an events table and compares its code column with a literal
        # can filter on codes: the others are not parsed to find out (parsing is the finder's
        # main cost).
        if not any(e in low and _RE_CODE_LITERAL[column].search(low)
                   for column, events, _, _ in wanted.values() for e in events):
            continue
        parts = decompose(sql)
        if parts is None:
            continue
        for table, (column, events, found, pattern) in wanted.items():
            used = {v for c, v in parts.codes if c == column}
            if used and parts.tables & events and not used & found:
                return i, (f"filters {column} {', '.join(sorted(used)[:3])}, not a code the "
                           f"reference's look-up of {pattern!r} in {table} finds "
                           f"({', '.join(sorted(found)[:3])})")
    return None


def _unlisted(got: RefParts, values: set[str], ref: RefParts) -> Divergence:
    """The query filters on values no dictionary lists. Only code-shaped values were looked up
    (``Probe.codes``); a drug name or a label text is not a code, so "in no dictionary" would
    be a claim nobody checked: it is named as text matched in place of the reference's codes."""
    texts = sorted({v for c, v in got.codes
                    if v in values and (c in TEXT_CODE_COLS or not any(ch.isdigit() for ch in v))})
    codes = sorted(values - set(texts))
    if codes:
        reason = f"codes {', '.join(codes[:3])} are in no dictionary table"
    else:
        cols = sorted({c for c, v in got.codes if v in values})
        wanted = sorted({v for _, v in ref.codes} | {p for _, p in ref.lookups})
        instead = f"; the reference filters on {', '.join(wanted[:3])}" if wanted else ""
        reason = (f"matches {'/'.join(cols)} text {', '.join(repr(t) for t in texts[:3])} "
                  f"(a name, not a looked-up code){instead}")
    return Divergence("codes", reason, sg.CODE_LOOKUP, 0.0)
