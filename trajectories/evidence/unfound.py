"""An answer exists, but every search the agent made for a term of the question found nothing,
and the agent concluded there is none.

Without a reference SQL there is no grounded name to compare with, but the trajectory itself
shows the look-up failing: the agent searched the database for a term the question uses
("COPD"), every search for it came back empty or failed, no search after the first one for it
found anything (the agent never found the concept another way), and its final answer is that
nothing exists. The term was not grounded to the database's own spelling of it ("chronic
obstructive pulmonary disease"), which the taxonomy calls a Medical-Code Lookup Error. The
first faulty step is where the agent concluded from its first search for it (its next message),
as with a reference SQL (:func:`trajectories.evidence.grounding.concluded_from`): a search that
finds nothing is a question asked, not yet an error. An agent that went on to answer from other
rows misread something after its searches; that is left to the other rules.

A search is a search tool's call (a table argument and a text to find) or SQL that matches a
dictionary's text column (``d_icd_diagnoses.long_title LIKE '%copd%'``).
"""

from __future__ import annotations

import re

from trajectories import signals as sg
from trajectories.evidence.grounding import TEXT_CODE_COLS, concluded_from, is_dictionary_sql
from trajectories.evidence.noref import final_message, has_answer
from trajectories.evidence.parts import Divergence, decompose
from trajectories.model import Trajectory
from trajectories.reading import parse_arguments
from trajectories.signals import CODE_LOOKUP, as_table

_RE_WORD = re.compile(r"[a-z]{3,}")
# An answer saying that nothing was found (in its opening sentences).
_RE_NONE = re.compile(r"\b(?:no|none|nothing|unable to|could ?n[o']t|can ?n[o']t|cannot|"
                      r"did ?n[o']t|does ?n[o']t|not (?:find|found|any|able|available|recorded))\b")
#: Tool arguments that name where to search, not what to search for.
_WHERE_KEYS = frozenset({"table", "column", "table_name", "table_names", "schema", "limit"})


def _terms(view: sg.ActionView, args: object) -> set[str]:
    """What one search looked for (lower case, ``%`` dropped); empty for other actions."""
    if view.tool_table is not None and isinstance(args, dict):
        return {v.strip().lower() for k, v in args.items()
                if isinstance(v, str) and v.strip() and str(k).lower() not in _WHERE_KEYS}
    if view.sql is None or not is_dictionary_sql(view.sql):
        return set()
    parts = decompose(view.sql)
    if parts is None:
        return set()
    found = {p for _, p in parts.lookups} | {v for c, v in parts.codes if c in TEXT_CODE_COLS}
    return {t.strip("%").strip().lower() for t in found if t.strip("%").strip()}


def searched_terms(trajectory: Trajectory, before: int) -> set[str]:
    """Everything the agent searched the database for before step ``before``."""
    return {term for view in sg.action_views(trajectory) if view.index < before
            for term in _terms(view, parse_arguments(trajectory.steps[view.index].arguments))}


def _in_question(term: str, question: str) -> bool:
    """Whether the term is one the question uses (each of its words, to five letters)."""
    words = _RE_WORD.findall(term)
    return bool(words) and all(w[:5] in question for w in words)


def _says_there_is_none(trajectory: Trajectory) -> bool:
    """Whether the final answer is that nothing was found: empty, NULL, or words saying none
    exists, with none of the verified answer's values in it."""
    final = trajectory.final_answer
    if not sg.has_final_answer(final):
        return True
    gold = as_table(trajectory.task.ground_truth) or []
    if not isinstance(final, str):
        # Rows were scored (a harness that takes the last query's result as the answer); what
        # the agent concluded is its last message to the user, when the rows hold none of the
        # verified values.
        if any(v and v in row for g in gold for v in g for row in as_table(final) or []):
            return False
        at = final_message(trajectory)
        final = str(trajectory.steps[at].content or "") if at is not None else ""
    low = final.lower()
    if any(v and v.lower() in low for row in gold for v in row):
        return False
    return bool(_RE_NONE.search(low[:400]))


def unfound_term(trajectory: Trajectory) -> tuple[int, Divergence] | None:
    """(where the agent concluded from its first search for the term, divergence) when the
    task has an answer, the agent answered that there is none, every search for a term of the
    question found nothing and no search after the first one for it found anything; None
    otherwise. Uncalibrated (the finder gives the part's category and confidence)."""
    if not has_answer(trajectory) or not _says_there_is_none(trajectory):
        return None
    question = str(trajectory.task.question or "").lower()
    views = sg.action_views(trajectory)
    searches: list[tuple[sg.ActionView, set[str]]] = []
    for view in views:
        terms = _terms(view, parse_arguments(trajectory.steps[view.index].arguments))
        if terms:
            searches.append((view, terms))
    for view, terms in searches:
        for term in sorted(terms):
            if not _in_question(term, question):
                continue
            for_it = [v for v, t in searches if term in t]
            if any(not (v.empty or v.error) for v in for_it):
                continue  # found at least once: what went wrong came after
            if any(v.index > for_it[0].index and not (v.empty or v.error)
                   for v, _ in searches):
                continue  # a later search found something: the agent went on from there
            where = ", ".join(str(v.index) for v in for_it[:4])
            return concluded_from(trajectory, view.index), Divergence(
                "lookup", f"the task has an answer, but every search for {term!r} (a term of "
                          f"the question; steps {where}) found nothing and the agent never "
                          "found it another way: the term was not grounded to the database's "
                          "own spelling of it", CODE_LOOKUP, 0.0)
    return None


__all__ = ["searched_terms", "unfound_term"]
