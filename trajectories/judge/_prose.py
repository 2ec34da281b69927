"""The prose layer: whether an answer's text states the gold (numbers, dates, yes/no, text,
lists; an explicitly stated result first). The rules are listed in docs/scoring.md."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trajectories.judge._values import (
    Moment,
    Number,
    as_number,
    asks_yes_or_no,
    contains_words,
    gold_moment,
    moments,
    number_agrees,
    number_near,
    numbers,
    plain,
    polarity,
    requested_count,
    words,
)
from trajectories.judge._verdict import (
    Judgement,
    Method,
    Verdict,
    _clip,
    _correct,
    _incorrect,
    _raw_rows,
    _undecided,
)


@dataclass(frozen=True)
class _Stated:
    text: str
    words: str
    moments: list[Moment]
    numbers: list[Number]
    question_numbers: list[float]
    decrease: bool


_DECREASE = ("decreas", "drop", "fell", "fall", "lower", "reduc", "declin", "less than the",
             "went down", "smaller")


#: An answer that states its result explicitly: "Answer: 4", "the final answer is 4",
#: "Result: 4" (the rest of that line is the statement).
_STATED_RESULT = re.compile(
    r"(?:^|[\n.!?]\s*)(?:(?:the\s+)?final\s+answer\s*(?:is\b|[:=])|the\s+answer\s+is\b"
    r"|answer\s*[:=]|result\s*[:=])\s*(?P<said>[^\n]+)", re.I)


def judge_prose(answer: str, gold: Any, question: str, decimals: int | None = None
                ) -> Judgement:
    """Layer 3: whether an answer's text states the gold (the module's rules). An answer that
    states its result explicitly ("Answer: ...") is judged by that statement alone: numbers
    elsewhere in the text (counts of rows looked at, a query's ids) are not its answer."""
    text = plain(answer)
    statements = [m for m in _STATED_RESULT.finditer(text) if m["said"].strip()]
    if statements:
        said = statements[-1]["said"].strip()
        verdict = _judge_text(said, gold, question, decimals)
        if verdict.verdict == Verdict.INCORRECT:
            return dataclasses.replace(verdict, evidence=f"the answer states its result as "
                                       f"'{_clip(said)}': {verdict.evidence}")
        if verdict.verdict == Verdict.CORRECT:
            return verdict
    return _judge_text(text, gold, question, decimals)




def _judge_text(text: str, gold: Any, question: str, decimals: int | None) -> Judgement:
    found_moments, rest = moments(text)
    asked = plain(question)
    stated = _Stated(text, words(text), found_moments, numbers(rest),
                     [n.value for n in numbers(moments(asked)[1])],
                     any(word in text.lower() for word in _DECREASE))
    values = _gold_values(gold)
    if asks_yes_or_no(question) and len(values) == 1 and _yes_no_gold(values[0]) is not None:
        expected = _yes_no_gold(values[0])
        said = polarity(text)
        if said is None:
            return _undecided(Method.PROSE, "a yes/no question; the answer says neither yes "
                              "nor no")
        word = "yes" if said else "no"
        if said == expected:
            return _correct(Method.PROSE, f"a yes/no question; the answer says {word} (gold "
                            f"{values[0]})")
        return _incorrect(Method.PROSE, f"a yes/no question; the answer says {word}, the gold "
                          f"is {values[0]}")
    k = requested_count(question)
    needed = min(k, len(values)) if k and len(values) > k else len(values)
    found: list[str] = []
    missing: list[Any] = []
    near: list[str] = []
    for value in values:
        where = _stated_as(value, stated, decimals)
        if where is not None:
            found.append(f"{value} as '{where}'" if where != str(value) else str(value))
            continue
        missing.append(value)
        close = _near(value, stated)
        if close:
            near.append(close)
    tie = f" (any {needed} of {len(values)} tied values)" if needed < len(values) else ""
    if len(found) >= needed:
        shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
        return _correct(Method.PROSE, f"the answer states the gold{tie}: {shown}")
    missed = "; ".join(map(str, missing[:5])) + ("..." if len(missing) > 5 else "")
    stranger = _listed_outside(text, values) if k else None
    if stranger is not None:
        return _incorrect(Method.PROSE, f"a top-{k} answer lists '{_clip(stranger)}', which is "
                          f"none of the gold values{tie}; not stated: {missed}")
    if near:
        return _undecided(Method.PROSE, f"close to the gold but not equal: {'; '.join(near)}")
    if needed >= 2 and 2 * len(found) >= needed:
        return _undecided(Method.PROSE, f"states {len(found)} of the {needed} gold values"
                          f"{tie}; not stated: {missed}")
    return _incorrect(Method.PROSE, f"the answer does not state the gold{tie}: {missed}"
                      + (f" (it states {len(found)} of {needed})" if found else ""))


def _gold_values(gold: Any) -> list[Any]:
    """The distinct values a gold answer holds (a list is a set here)."""
    values: list[Any] = []
    seen: set[str] = set()
    for row in _raw_rows(gold):
        for value in row:
            key = json.dumps(value, sort_keys=True, default=str).lower()
            if value is not None and key not in seen:
                seen.add(key)
                values.append(value)
    return values




def _yes_no_gold(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return {"1": True, "1.0": True, "true": True, "yes": True,
            "0": False, "0.0": False, "false": False, "no": False}.get(text)


def _stated_as(value: Any, stated: _Stated, decimals: int | None) -> str | None:
    """Where the answer states ``value`` (the text it is written as), or None."""
    moment = gold_moment(value) if isinstance(value, str) else None
    if moment is not None:
        match = next((m for m in stated.moments if m.agrees_with(moment)), None)
        return str(match) if match else None
    number = as_number(value)
    if number is not None:
        echoed = stated.question_numbers.count(number)
        hits = [n for n in stated.numbers if number_agrees(n, number, decimals)]
        if stated.decrease and number < 0:
            # A change stated in words: "decreased by 11" is -11.
            hits += [n for n in stated.numbers
                     if number_agrees(Number(-n.value, n.decimals, n.text), number, decimals)]
        # A number the question itself holds counts only when the answer says it again.
        return hits[0].text if len(hits) > echoed else None
    target = words(str(value))
    return str(value) if contains_words(stated.words, target) else None


_LIST_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+(?P<item>.+)$", re.M)


def _listed_outside(text: str, values: Sequence[Any]) -> str | None:
    """The first item of the answer's list (a bulleted or numbered line) that shares no word
    of four letters or more with any gold value, or None."""
    gold_words = {w for value in values for w in words(str(value)).split() if len(w) > 3}
    if not gold_words:
        return None
    for match in _LIST_ITEM.finditer(text):
        item = match["item"].strip()
        mine = {w for w in words(item).split() if len(w) > 3}
        if mine and not mine & gold_words:
            return item
    return None


def _abbreviates(short: str, word: str) -> bool:
    """``short`` is ``word`` cut short (at least 3 letters: ``surg`` for ``surgery``)."""
    return 3 <= len(short) < len(word) and word.startswith(short)


def _near(value: Any, stated: _Stated) -> str | None:
    number = as_number(value)
    if number is not None:
        close = next((n for n in stated.numbers if number_near(n, number)
                      and n.value not in stated.question_numbers), None)
        return f"{close.text} for {value}" if close else None
    target = words(str(value)).split()
    content = [w for w in target if len(w) > 3]
    if len(content) < 2:
        return None
    present = [w for w in content if contains_words(stated.words, w)]
    if 2 * len(present) >= len(content) + 1:
        return f"{len(present)} of the words of '{value}'"
    # An abbreviated answer: every long word of the gold written or cut short ("med/surg" for
    # "medicine/surgery"), in order.
    said = stated.words.split()
    for start in range(len(said)):
        window = said[start:start + len(content)]
        if len(window) == len(content) and all(
                s == w or _abbreviates(s, w) for s, w in zip(window, content, strict=True)):
            return f"'{' '.join(window)}' abbreviates '{value}'"
    return None


