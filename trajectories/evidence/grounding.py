"""Whether the agent grounded the question's terms in the database's own names and values.

The taxonomy's Medical-Code Lookup Error is a failure to ground a clinical term in a
database-native identifier. Three observable forms of it that the part-by-part comparison does
not see, each decided from the trajectory and the database, never from the task at hand:

- the agent searched the dictionaries and never found the name the reference grounds (its
  searches for an abbreviation or a synonym came back empty) and so never wrote an answering
  query (:func:`ungrounded_search`);
- the agent filtered a column on a value that no row of the database holds, where the
  reference's value for the same column is there (:func:`unknown_value`: ``route =
  'inhalation'`` where the database writes ``'ih'``);
- an abbreviation of the reference's concept ("COPD" for chronic obstructive pulmonary
  disease) names the same concept, not another one (:func:`related`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from trajectories import signals as sg
from trajectories.evidence.parts import Divergence, RefParts, decompose
from trajectories.evidence.probes import Probe
from trajectories.model import StepKind, Trajectory

TEXT_CODE_COLS = frozenset({"label", "long_title", "short_title", "drug"})
_RE_DICT_NAME = re.compile(r"\bd_")  # a dictionary table's name (not hadm_id's "d_")
# Words that say nothing about which clinical concept is meant.
_STOP = frozenset({"and", "the", "with", "for", "other", "unspecified", "not", "elsewhere",
                   "classified", "without", "test", "level", "procedure", "mention", "type", "icd"})
_RE_WORD = re.compile(r"[a-z]{3,}")
_RE_NUMBERISH = re.compile(r"^[\d.\-: ]+$")
_VALUE_MAX = 80  # longer literals are free text, not a coded value


def words(texts: Iterable[Any]) -> set[str]:
    return {w for t in texts for w in _RE_WORD.findall(str(t).lower()) if w not in _STOP}


def related(a: set[str], b: set[str], a_texts: Iterable[Any] = ()) -> bool:
    """Whether two concepts share a word (to its first five letters: plural, -ic, -ia), or a
    word of one begins the other's: a search for a partial name ('hem' for hemoglobin) looks
    for the same concept, only too widely. A word of ``b`` that spells the initials of
    consecutive words of one of ``a_texts`` is that concept's abbreviation."""
    if {w[:5] for w in a} & {w[:5] for w in b}:
        return True
    if any(x.startswith(y) or y.startswith(x) for x in a for y in b):
        return True
    return any(_abbreviates(w, t) for w in b for t in a_texts)


def _abbreviates(word: str, text: Any) -> bool:
    if not 2 <= len(word) <= 6:
        return False
    initials = "".join(w[0] for w in re.findall(r"[a-z]+", str(text).lower()))
    return word in initials


def is_dictionary_sql(sql: str) -> bool:
    """Whether a query could search for a text: only one that names a dictionary table or a
    text column can."""
    low = sql.lower()
    return bool(_RE_DICT_NAME.search(low)) or any(c in low for c in TEXT_CODE_COLS)


def searched(steps: list[tuple[int, str]], last: int) -> set[str]:
    """The texts the agent searched dictionaries for in SQL, up to step ``last``."""
    out: set[str] = set()
    for i, sql in steps:
        if i > last:
            break
        if not is_dictionary_sql(sql):
            continue
        parts = decompose(sql)
        if parts is None:
            continue
        out.update(p for _, p in parts.lookups)
        out.update(v for c, v in parts.codes if c in TEXT_CODE_COLS)
    return out


def ungrounded_search(trajectory: Trajectory, ref: RefParts) -> tuple[int, Divergence] | None:
    """For a trajectory with no query to compare: when the reference grounds a name (a
    dictionary title, a drug) and the agent's searches of the dictionaries (search tools, SQL
    on ``d_`` tables) never showed it, the term was not grounded, where the agent concluded
    from those searches. A name that did appear in a result was found: what went wrong after
    is not a look-up."""
    names = {p.strip("%").lower() for _, p in ref.lookups}
    names |= {v.strip("%").lower() for c, v in ref.codes if c in TEXT_CODE_COLS}
    names.discard("")
    if not names:
        return None
    views = sg.action_views(trajectory)
    searches = [v for v in views if v.tool_table is not None
                or (v.sql is not None and _RE_DICT_NAME.search(v.sql.lower()))]
    if not searches:
        return None
    # The whole output, not the view's clipped one: a long listing may show the name mid-way.
    outputs = (trajectory.steps[v.index].observation for v in views)
    if any(name in out.lower() for out in outputs if isinstance(out, str) for name in names):
        return None
    steps = ", ".join(str(v.index) for v in searches[:4])
    name = sorted(names)[0]
    concluded = concluded_from(trajectory, searches[0].index)
    return concluded, Divergence(
        "lookup", f"the reference grounds {name!r}; the agent's searches (steps {steps}) never "
                  "found it and no query used it", sg.CODE_LOOKUP, 0.0)


def unknown_value(ref: RefParts, got: RefParts, probe: Probe) -> tuple[str, str] | None:
    """(column, value) where the query filters a column on a value that no row of the
    reference's tables holds while the reference's own value for that column is there: the
    term was not mapped to the database's spelling of it (``route = 'inhalation'`` for
    ``'ih'``). Numbers, times and patterns are not terms."""
    ref_vals = {(c, v) for c, v in ref.filters | ref.codes if _term(v)}
    got_vals = {(c, v) for c, v in got.filters | got.codes if _term(v)}
    for col, value in sorted(got_vals - ref_vals):
        wanted = sorted(v for c, v in ref_vals if c == col and (c, v) not in got_vals)
        if not wanted or not re.fullmatch(r"[a-z_][a-z0-9_]*", col):
            continue
        for table in sorted(ref.tables & got.tables):
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", table):
                continue
            exact = (col, value) in got.filters  # codes are kept folded, filters as written
            there = probe.run(_holds(table, col, wanted[0], (col, wanted[0]) in ref.filters))
            if there is None or not there.rows:
                continue  # no such column there, or the reference's value is not there either
            absent = probe.run(_holds(table, col, value, exact))
            if absent is not None and not absent.rows:
                return col, value
    return None


def value_reason(col: str, value: str, ref: RefParts) -> str:
    wanted = sorted(v for c, v in ref.filters | ref.codes if c == col and _term(v))
    spelled = f"; the database spells it {wanted[0]!r}" if wanted else ""
    return f"{col} = {value!r} matches no row{spelled}: the term is not grounded"


def _term(value: str) -> bool:
    return (bool(value) and len(value) <= _VALUE_MAX and "%" not in value
            and not _RE_NUMBERISH.match(value))


def _holds(table: str, col: str, value: str, exact: bool) -> str:
    # A filter's literal keeps its case and is compared as the query compares it (`=` is exact);
    # a code is kept folded, and a database may store 'PO' or 'po': compared folded.
    quoted = "'" + value.replace("'", "''") + "'"
    column = f"CAST({col} AS VARCHAR)" if exact else f"LOWER(CAST({col} AS VARCHAR))"
    return f"SELECT 1 FROM {table} WHERE {column} = {quoted} LIMIT 1"


def coded_value_missing(
    trajectory: Trajectory, ref: RefParts, got: RefParts
) -> tuple[str, str, str] | None:
    """(column, value, question word) where the reference filters a column on the database's
    code for a word of the question (``route = 'ih'`` for "inhalation", ``gender = 'f'`` for
    "female": the code's letters in the word's order, from its first letter) and the agent's
    query has no such filter: the term was never grounded in the value the database holds.
    A value the question spells out is a criterion, not a code, and is left to the filters."""
    question = trajectory.task.question.lower()
    question_words = set(_RE_WORD.findall(question))
    have = {(c, v.lower()) for c, v in got.filters | got.codes}
    for col, value in sorted(ref.filters):
        code = value.lower()
        if not _term(code) or (col, code) in have or not code.isalpha() or len(code) > 6:
            continue
        if re.search(rf"\b{re.escape(code)}\b", question):
            continue  # spelled in the question: a dropped criterion, not a code
        word = next((w for w in sorted(question_words) if w not in _STOP
                     and len(w) > len(code) and _letters_in_order(code, w)), None)
        if word is not None:
            return col, value, word
    return None


def _letters_in_order(code: str, word: str) -> bool:
    if not code or code[0] != word[0]:
        return False
    rest = iter(word[1:])
    return all(ch in rest for ch in code[1:])


def first_naming(trajectory: Trajectory, word: str, before: int) -> int | None:
    """The first agent action at or before ``before`` whose text names ``word`` (to its first
    five letters: 'inhal' for inhalation, inhaler): where the agent went looking for the term
    (a search, a filter on another column) instead of the code the database holds for it."""
    stem = word[:5]
    for view in sg.action_views(trajectory):
        if view.index > before:
            return None
        if view.sql and stem in view.payload.lower():
            return view.index
    return None


def coded_value_reason(col: str, value: str, word: str) -> str:
    return (f"the reference filters {col} = {value!r}, the database's code for {word!r}; "
            "no query of the agent wrote it: the term is not grounded")


def concluded_from(trajectory: Trajectory, search: int) -> int:
    """Where the agent acted on a look-up that found nothing: a search that finds nothing is a
    question asked, not yet an error; concluding from it is. The agent's first message after
    the search (giving up, or answering without the term), else the search itself when the
    agent never spoke after it."""
    return next((i for i in range(search + 1, len(trajectory.steps))
                 if is_agent_message(trajectory, i)), search)


def is_agent_message(trajectory: Trajectory, index: int) -> bool:
    step = trajectory.steps[index]
    return step.kind == StepKind.MESSAGE and (step.role or "assistant") == "assistant"
