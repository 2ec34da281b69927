"""A diagnosis or procedure code the agent wrote that, in the database's own dictionary, names
something the agent never looked for.

The taxonomy's Medical-Code Lookup Error is "the concept understood but mapped to the wrong
database identifier". An agent that searched for "percutaneous abdominal drainage" and then
filtered ``procedures_icd`` on ``icd9|3614`` (a coronary bypass) typed a code instead of using
the one its search found. Without a reference SQL the dictionary still says what the code is:
when its title holds no text the agent searched for and shares no word with its searches or
the question, the code names another concept, and the first query that wrote it is the first
faulty step. Left alone: codes whose title is related (the found code, a broader one); a code
written beside a related one (the same concept in the other ICD version under its older name,
``Hypopotassemia`` beside ``Hypokalemia``); codes the dictionary does not hold (other rules
read an empty result); and a query the agent then ran again and again, since the taxonomy
lets the repetition dominate (Stuck-in-Loop), whatever the code.
"""

from __future__ import annotations

from trajectories import signals as sg
from trajectories.evidence.commit import DICTIONARY_OF
from trajectories.evidence.grounding import related, words
from trajectories.evidence.loops import LOOP_MIN_RUNS, query_runs, same_query
from trajectories.evidence.parts import Divergence, decompose
from trajectories.evidence.probes import Probe
from trajectories.evidence.unfound import searched_terms
from trajectories.evidence.wrong_table import wrong_event_table
from trajectories.model import Trajectory

#: Words of counting and comparing that titles share with questions by chance ("bypass of four
#: or more coronary arteries", "if there is more than one result").
_COUNTING = frozenset({"one", "two", "three", "four", "five", "six", "more", "less", "than",
                       "most", "least", "same", "first", "last", "single", "multiple", "all",
                       "any", "each", "only", "both"})
#: Events tables whose ``icd_code`` one dictionary names.
_ICD_DICTIONARY_OF = {t: d for t, d in DICTIONARY_OF.items() if d.startswith("d_icd_")}


def code_of_another_concept(trajectory: Trajectory, steps: list[tuple[int, str]],
                            probe: Probe | None) -> tuple[int, Divergence] | None:
    """(first query writing such a code, divergence), or None."""
    if probe is None:
        return None
    question = trajectory.task.question if isinstance(trajectory.task.question, str) else ""
    runs = query_runs(steps)
    for i, sql in steps:
        low = sql.lower()
        if "icd_code" not in low or not any(t in low for t in _ICD_DICTIONARY_OF):
            continue  # no code of a diagnosis or procedure compared: not parsed to find out
        if runs[same_query(sql)] >= LOOP_MIN_RUNS:
            return None  # run again and again: the loop dominates
        parts = decompose(sql)
        tables = parts.tables & set(_ICD_DICTIONARY_OF) if parts is not None else set()
        if parts is None or len(tables) != 1:
            continue  # both kinds read: which dictionary names the code is not known
        dictionary = _ICD_DICTIONARY_OF[next(iter(tables))]
        codes = sorted(v for c, v in parts.codes if c == "icd_code")
        searched = searched_terms(trajectory, before=i)
        named = probe.codes(codes, "icd_code", dictionary)
        foreign = {code: info for code, info in named.items()
                   if not _names_it(info.label, searched, question)}
        if foreign and len(foreign) == len(named):  # beside a related code: both versions
            code, info = min(foreign.items())
            against = "nothing the question names" + (
                f" or the agent searched for ({', '.join(sorted(searched)[:3])[:80]})"
                if searched else "")
            return i, Divergence("codes", f"filters on {code}, which {dictionary} names "
                                          f"{info.label!r}: {against}", sg.CODE_LOOKUP, 0.0)
    return None


def _names_it(title: str, searched: set[str], question: str) -> bool:
    """Whether a code's title is what the agent looked for: a searched text inside it (as the
    search's LIKE would find it; three letters at least), or a word shared with the searches or
    the question."""
    low = title.lower()
    if any(len(term) >= 3 and term in low for term in searched):
        return True
    return related(words([title]) - _COUNTING, words(searched | {question}) - _COUNTING,
                   [title])


def earliest_wrong_choice(trajectory: Trajectory, steps: list[tuple[int, str]],
                          probe: Probe | None) -> tuple[int, Divergence] | None:
    """Without a reference SQL: the earlier of another event table read instead of the one the
    question names (:func:`wrong_event_table`, Semantic) and a code of another concept (this
    module, a look-up error), since the first faulty step decides; on a tie, the table."""
    found = [f for f in (wrong_event_table(trajectory, probe),
                         code_of_another_concept(trajectory, steps, probe)) if f is not None]
    return min(found, key=lambda f: f[0]) if found else None


__all__ = ["code_of_another_concept", "earliest_wrong_choice"]
