"""Answers and ground truths as text: one row per line, short answers on one line."""

from __future__ import annotations

import json

from trajectories.render import ANSWER_LINE_CHARS, answer_text, compact_json


def test_rows_read_one_per_line_and_parse_back() -> None:
    rows = [["E11.9", "Type 2 diabetes mellitus without complications", 412],
            ["I10", "Essential (primary) hypertension", 388],
            ["N17.9", "Acute kidney failure, unspecified", 201]]
    text = answer_text(rows)
    lines = text.splitlines()
    assert lines[0] == "[" and lines[-1] == "]"
    assert len(lines) == len(rows) + 2
    assert lines[1] == ' ["E11.9", "Type 2 diabetes mellitus without complications", 412],'
    assert json.loads(text) == rows


def test_short_answers_and_scalars_stay_on_one_line() -> None:
    assert answer_text([["4"]]) == '[["4"]]'
    assert answer_text(12.5) == "12.5"
    assert answer_text(None) == "null"
    assert answer_text([]) == "[]"
    assert answer_text({"count": 3}) == '{"count": 3}'


def test_text_is_kept_as_written() -> None:
    # Non-ASCII stays readable, markup stays text for the HTML escaping that follows.
    value = ["Öl <script>alert(1)</script>" * 3]
    text = answer_text(value)
    assert "Öl <script>" in text
    assert json.loads(text) == value
    assert len(json.dumps(value, ensure_ascii=False)) > ANSWER_LINE_CHARS
    assert text.count("\n") == 2


def test_values_json_cannot_encode_are_shown_as_text() -> None:
    from datetime import date

    assert answer_text([[date(2180, 1, 2), 1]]) == '[["2180-01-02", 1]]'


def test_a_diff_row_stays_on_one_line_however_long() -> None:
    row = ["Type 2 diabetes mellitus without complications", 412, "E11.9", "2180-01-02"]
    assert compact_json(row) == json.dumps(row, ensure_ascii=False)
    assert "\n" not in compact_json(row)
