"""SQL replies written as Python literals, and the harness's note on a cut listing.

The tau-bench harness prints a query's result as ``str(list_of_tuples)``, e.g.
``[('insulin', 3), ('heparin', 2)]``, and cuts it at 100 rows with a note after it:
``Note: There are 73 results not shown (out of 173 total results).`` Everything here reads
that text exactly as ``ast.literal_eval`` does; the note has one parser, used by the importers
and by the trajectory page. ``trajectories.reading.result_table`` reads the other layouts.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: The harness's note after a cut listing (the count shown, then the full count).
_CUT_NOTE = re.compile(
    r"Note: There are (\d+) results not shown \(out of (\d+) total results\)\.?\s*")
_CUT_MARK = "Note: There are "
#: The other common note, on its own last line: ``... (370 total rows, showing first 50)``.
_SHOWING_NOTE = re.compile(
    r"\n[ \t]*(?:\.\.\.|…)?[ \t]*\(?(\d+) total rows?,? showing (?:the )?first (\d+)\)?\.?\s*$",
    re.I)


def split_cut_note(text: str) -> tuple[str, str, int | None]:
    """``(rows text, note, full row count)``: the listing before a tool's note that it printed
    only some rows, the note itself and the total it states; ``(text, "", None)`` when the
    text ends in no such note. Two notes are known: the tau-bench harness's ("Note: There are
    73 results not shown (out of 173 total results).") and a last line such as "... (370 total
    rows, showing first 50)"."""
    mark = text.rfind(_CUT_MARK)
    if mark != -1:
        note = _CUT_NOTE.fullmatch(text, mark)
        if note is not None:
            return text[:mark], note.group(0).strip(), int(note.group(2))
    tail = text[-200:]
    showing = _SHOWING_NOTE.search(tail)
    if showing is not None:
        cut = len(text) - len(tail) + showing.start()
        return text[:cut], showing.group(0).strip(), int(showing.group(1))
    return text, "", None


# ------------------------------------------------------------------ the Python-literal reader

#: One scalar as ``repr`` writes it, once every string literal has become ``\x00`` (see
#: ``literal_rows``): a string, None/True/False, an integer or a float in JSON's number syntax.
#: (An integer of at most 18 digits: orjson reads longer ones as floats.)
_SCALAR = (r"(?:\x00|None|True|False|-?(?:0|[1-9][0-9]{0,17})(?![0-9.eE])"
           r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+))")
#: A row: a tuple of scalars as ``repr`` writes it (``()``, ``(1,)``, ``(1, 'a')``) or a scalar.
_ROW = rf"(?:\(\)|\({_SCALAR},\)|\({_SCALAR}(?:, {_SCALAR})+\)|{_SCALAR})"
#: The whole reply: ``repr`` of a list of rows, nothing else.
_ROWS = re.compile(rf"\[(?:{_ROW}(?:, {_ROW})*)?\]")
#: Tuples become JSON arrays; a one-element tuple loses its trailing comma below.
_TO_JSON = str.maketrans({"(": "[", ")": "]"})


def literal_rows(text: str) -> list[Any] | None:
    """``ast.literal_eval(text)`` for the common reply, ``repr`` of a list of flat tuples of
    strings, numbers, None and booleans, read as JSON (compiled code, several times faster);
    None for anything else, which the caller reads with ``ast.literal_eval``.

    Exact, not approximate: only text of that grammar is read here, where JSON and Python agree
    on every value. A string holds no quote or backslash (checked here) and no control
    character or lone surrogate (orjson refuses those), so its JSON and Python spellings are
    the same characters; numbers use the syntax both share and orjson rounds floats correctly;
    an integer of more than 18 digits, which orjson would read as a float, falls back. Rows
    come back as lists, as ``sql_result`` makes them anyway."""
    if '"' in text or "\\" in text or "\x00" in text:
        return None  # a string repr'd with escapes or double quotes: literal_eval reads it
    # Between quotes (odd pieces) lie strings, which cannot hold a quote here; the even
    # pieces are the structure between them.
    pieces = text.split("'")
    if len(pieces) % 2 == 0:
        return None
    structure = "\x00".join(pieces[0::2])
    if _ROWS.fullmatch(structure) is None:
        return None
    pieces[0::2] = (structure.replace(",)", ")").translate(_TO_JSON)
                    .replace("None", "null").replace("True", "true")
                    .replace("False", "false").split("\x00"))
    try:
        value = orjson.loads('"'.join(pieces))
    except orjson.JSONDecodeError:  # a control character in a string, an integer past 64 bits
        return None
    return value if type(value) is list else None
