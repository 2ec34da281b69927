"""What a SQL tool printed: the compiled reader of Python-literal replies reads exactly what
``ast.literal_eval`` reads (or leaves the reply to it), and the harness's cut-result note has
one parser, shared by the import and the trajectory page (tests/app/test_cut_note.py)."""

from __future__ import annotations

import ast
import datetime
import decimal
import json
import random
from typing import Any

import pytest

from tests.support import REAL_TRAJECTORIES, require_shared
from trajectories.reading import literal_rows, split_cut_note, sql_result


def _reference(text: str) -> list[list[Any]] | None:
    """What the reply reads as by ``ast.literal_eval`` alone (rows as lists; a list of
    records gives each record's values under the first record's keys)."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list):
        return None
    if value and all(isinstance(row, dict) for row in value):
        keys = list(value[0])
        return [[row.get(k) for k in keys] for row in value]
    return [list(row) if isinstance(row, tuple | list) else [row] for row in value]


def _same(got: Any, expected: Any) -> bool:
    """Equal values of equal types all the way down (1 == 1.0 == True is not enough here;
    -0.0 and 0.0 differ too)."""
    return repr(got) == repr(expected)


def _agrees(text: str) -> bool:
    """Assert the fast reader, when it reads ``text``, reads what literal_eval reads, and that
    ``sql_result`` does either way; True when the fast reader took it."""
    fast = literal_rows(text.strip())
    expected = _reference(text)
    if fast is not None:
        wrapped = [row if type(row) is list else [row] for row in fast]
        assert expected is not None, f"fast reader read what literal_eval refuses: {text!r}"
        assert _same(wrapped, expected), text
    rows, total = sql_result(text)
    assert total is None
    assert _same(rows, expected), text
    return fast is not None


_ODD_STRINGS = ["", "it's", 'say "hi"', "both ' and \"", "back\\slash", "tab\there", "new\nline",
                "nul\x00", "é ü 日本 🎉", "\u2028\u2029", "None", "True, False", "(1,)", "'),('",
                "\x7f\x1b", "a" * 500, "\ud7ff\ue000\uffff"]
_ODD_NUMBERS: list[Any] = [0, -0, 1, -1, 2**63 - 1, -(2**63), 2**64, -(2**64) - 1, 10**17,
                           10**18, 10**19, 10**40, 0.0, -0.0, 1.5, -2.25, 0.1, 1e-5, 1e-4, 1e16,
                           1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
                           123456789.12345679, float("inf"), float("-inf"), float("nan"),
                           None, True, False]
_ODD_VALUES: list[Any] = [decimal.Decimal("1.50"), datetime.date(2150, 1, 2),
                          datetime.datetime(2150, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), b"bytes", 1j,
                          (1, 2), [3], {"a": 1}, {1, 2}]


def test_replies_of_every_kind_read_as_literal_eval_reads_them() -> None:
    replies = [repr([(v,) for v in _ODD_STRINGS]), repr([(v,) for v in _ODD_NUMBERS]),
               repr([(v, "x") for v in _ODD_VALUES]), repr([tuple(_ODD_STRINGS)]),
               "[]", "[()]", "[(1,)]", "[1, 'a', None]", "[(1, 2), 3]", "()", "(1, 2)",
               "[(1,),]", "[(1 ,)]", "[( 1,)]", "[(1,2)]", "[(1,  2)]", "[\n(1, 2)]",
               "[(1, 2)]\n", "[(1.,)]", "[(.5,)]", "[(1_000,)]", "[(0x1F,)]", "[(01,)]",
               "[(+1,)]", "[(- 1,)]", "[(--1,)]", "[(1e5,)]", "[(1E+05,)]", "[(1e400,)]",
               "[(-1e400,)]", "[(1e-400,)]", "[(0.1000000000000000055511151231257827,)]",
               "[(9007199254740993,)]", "[(9007199254740993.0,)]", "[(inf,)]", "[(nan,)]",
               "[('a' 'b',)]", "[(u'a',)]", "[(r'a',)]", "[(b'a',)]", "[(f'a',)]",
               "[('a\\'b',)]", '[("a\'b",)]', "[('\\x41\\u00e9\\N{BULLET}',)]",
               "[('unterminated,)]", "[('a', 'b'", "[('a', 'b')", "[('a',), ('b'",
               "[(None, True, False)]", "[(none,)]", "[(Null,)]", "[(null,)]", "[(true,)]",
               "[(1, 2)] + [(3,)]", "[(1+2j,)]", "[((1, 2),)]", "[([1, 2],)]", "[({},)]",
               "[('\ud800',)]", "[('a\tb',)]", "[('a\rb',)]", "[('\x7f\x85',)]"]
    for text in replies:
        _agrees(text)
    # The plain ones are read without literal_eval (one-element tuples, words and brackets
    # inside strings, exponents, integers up to 18 digits, exact float rounding).
    plain = ["[]", "[()]", "[(1,)]", "[1, 'a', None]", "[(1, 2), 3]", "[(1, 2)]\n",
             "[(1e5,)]", "[(1E+05,)]", "[(1e-400,)]", "[(None, True, False)]",
             "[(999999999999999999, -999999999999999999)]", "[(9007199254740993.0,)]",
             "[(0.1000000000000000055511151231257827,)]",
             repr([(v,) for v in ["", "None", "True, False", "(1,)", "),(", "é ü 日本 🎉"]])]
    assert all(_agrees(text) for text in plain)


def _scalar(rng: random.Random) -> Any:
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice(_ODD_NUMBERS + _ODD_VALUES)
    if kind == 1:
        return rng.randint(-(2**70), 2**70) >> rng.randrange(70)
    if kind == 2:
        return float(f"{rng.randint(1, 10**rng.randint(1, 20))}e{rng.randint(-340, 340)}")
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind == 4:
        return "".join(rng.choice("ab'\"\\\n\t(),; Nonex\x00é🎉") for _ in range(rng.randrange(6)))
    if kind == 5:
        return "".join(chr(rng.randrange(0x20, 0x2FFFF)) for _ in range(rng.randrange(6)))
    return rng.choice(_ODD_STRINGS)


def test_random_and_damaged_replies_read_as_literal_eval_reads_them() -> None:
    rng = random.Random(14)
    taken = 0
    for _ in range(4000):
        rows = [tuple(_scalar(rng) for _ in range(rng.randrange(4))) if rng.random() < 0.9
                else _scalar(rng) for _ in range(rng.randrange(5))]
        text = repr(rows)
        if rng.random() < 0.3:  # truncated, or a character added or changed
            cut = rng.randrange(len(text) + 1)
            text = text[:cut] + rng.choice(["", "", ",", " ", "'", '"', "(", ")", "-", "e",
                                            "0", "\n", "]", "+", "\\"]) + text[cut + 1:]
        taken += _agrees(text)
    assert 500 < taken < 4000  # both readers exercised


def test_real_replies_take_the_fast_reader() -> None:
    sql_replies = fast = 0
    for path in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json")):
        for record in json.loads(path.read_text("utf-8")):
            for message in record["messages"]:
                text = message.get("content")
                if message.get("role") != "tool" or not text or not text.startswith("[("):
                    continue
                sql_replies += 1
                fast += _agrees(split_cut_note(text)[0])
    assert sql_replies > 300
    assert fast == sql_replies  # every printed result list is plain enough to read compiled


@pytest.mark.parametrize(("text", "expected"), [
    ("[('a',)]\n\nNote: There are 73 results not shown (out of 173 total results).",
     ("[('a',)]\n\n", "Note: There are 73 results not shown (out of 173 total results).", 173)),
    ("[('a',)] Note: There are 1 results not shown (out of 2 total results)\n",
     ("[('a',)] ", "Note: There are 1 results not shown (out of 2 total results)", 2)),
    ("[('a',)]", ("[('a',)]", "", None)),
    # Not the harness's note: text after it, other wording, a note quoted inside the rows.
    ("[('a',)]\n\nNote: There are 73 results not shown (out of 173 total results). More",
     None),
    ("[('a',)]\n\nNote: There are many results not shown.", None),
    ("[('Note: There are 1 results not shown (out of 2 total results).',)]", None),
])
def test_the_cut_note_has_one_reading(text: str, expected: tuple[str, str, int | None] | None
                                      ) -> None:
    assert split_cut_note(text) == (expected or (text, "", None))
    rows, total = sql_result(text)
    assert total == (expected[2] if expected else None)
    if expected:
        assert rows == [["a"]]
