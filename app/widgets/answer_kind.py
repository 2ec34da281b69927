"""Does an answer read as prose (rendered as Markdown) or as a value (a compact code line)?

A pure function with no Streamlit in it, so the choice is tested on its own: a model's
``* **Patient ID:** 10004235`` with a table under it is prose; ``6.357``, ``2100-12-24 14:02:00``,
``married`` and ``insulin; vial; glucagon`` are values, shown as today in a compact box.
"""

from __future__ import annotations

import re

#: Markdown structure a model writes: emphasis, list items, headings, tables, code, quotes.
_MARKDOWN = re.compile(r"\*\*|__|`|^\s{0,3}(?:[*+-]|\d+[.)]|#{1,6}|>)\s|\|.*\|", re.MULTILINE)
#: A one-line answer with more words than this reads as a sentence, not a value.
SENTENCE_WORDS = 12
#: A part of an ``a; b; c`` list longer than this is a sentence, not an item.
LIST_ITEM_CHARS = 60


def reads_as_prose(answer: object) -> bool:
    """True when ``answer`` is text written for a reader (Markdown structure, several lines or a
    sentence); False for a structured value (numbers, lists, JSON text) and short text values
    (a date, a name, an ``a; b; c`` list)."""
    if not isinstance(answer, str):
        return False
    text = answer.strip()
    if not text or text[:1] in ("[", "{"):
        return False  # JSON written as text is shown as JSON
    if "\n" in text or _MARKDOWN.search(text):
        return True
    parts = [p.strip() for p in text.split(";")]
    if len(parts) > 1 and all(len(p) <= LIST_ITEM_CHARS for p in parts):
        return False
    return len(text.split()) >= SENTENCE_WORDS
