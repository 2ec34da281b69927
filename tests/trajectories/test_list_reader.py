"""The JSON-list reader parses one record at a time: the same records, values and errors as
parsing the whole list, without holding the whole parsed list."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import REAL_TRAJECTORIES, require_shared
from trajectories.importers import ImportProblem, json_documents
from trajectories.importers.detect import _records, iter_file
from trajectories.importers.json_documents import parse_document
from trajectories.workspace import Workspace


def _whole(path: Path) -> list[tuple[str, Any]] | str:
    """What parsing the whole list gives: each record with its location, or the error."""
    try:
        doc, _ = parse_document(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return type(err).__name__
    return [(f"record {i}", record) for i, record in enumerate(doc)]


def _streamed(path: Path) -> list[tuple[str, Any]] | str:
    try:
        return [(location, record) for location, record, _, _ in _records(path, "[")]
    except ImportProblem as err:
        assert str(path) in str(err) and "\n" not in str(err)
        return "JSONDecodeError" if "not valid JSON" in err.message else "UnicodeDecodeError"


def _same_as_whole(path: Path) -> list[tuple[str, Any]]:
    whole, streamed = _whole(path), _streamed(path)
    # NaN != NaN: compare the JSON text of the values (NaN written alike on both sides).
    assert json.dumps(streamed) == json.dumps(whole)
    assert isinstance(streamed, list)
    return streamed


def _record(key_first: str = "task_idx", **extra: Any) -> dict[str, Any]:
    return {key_first: 1, "messages": [{"role": "user", "content": "q"},
                                       {"role": "assistant", "content": "a"}], **extra}


def _no_whole_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the whole list was parsed")
    monkeypatch.setattr(json_documents, "whole_list", refuse)


def test_real_harness_files_are_read_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    expected = {path: _whole(path) for path in files}
    _no_whole_parse(monkeypatch)
    for path in files:
        assert json.dumps(_streamed(path)) == json.dumps(expected[path])


@pytest.mark.parametrize("indent", [None, 2, 4, "\t"])
def test_layouts_compact_and_indented_are_read_record_by_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | str | None) -> None:
    records = [_record(n=i, text="}, {\"task_idx\": 2}") for i in range(5)]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(records, indent=indent), "utf-8")
    expected = _whole(path)
    _no_whole_parse(monkeypatch)
    assert _streamed(path) == expected


def test_a_nested_object_with_the_records_first_key_is_not_a_boundary(tmp_path: Path) -> None:
    # The boundary pattern also matches inside a record here; the slice does not parse there.
    inner = [{"task_idx": 7, "x": [1, {"task_idx": 8}]}, {"task_idx": 9}]
    records = [{"task_idx": i, "nested": inner, "after": {"task_idx": i}} for i in range(4)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(records), "utf-8")
    assert [r for _, r in _same_as_whole(path)] == records


def test_many_false_boundaries_fall_back_to_the_whole_parse(tmp_path: Path) -> None:
    nested = [{"task_idx": i} for i in range(40)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps([{"task_idx": 0, "n": nested}, {"task_idx": 1}]), "utf-8")
    assert len(_same_as_whole(path)) == 2


@pytest.mark.parametrize("text", [
    b'[]', b'  [ ]  ', b'[1, 2, {"a": 1}]', b'[{"a": 1}, 2, {"a": 3}]',
    b'[{"a": 1}, {"b": 2}, {"a": 3}]', b'[{"a": 1}, [{"a": 2}], {"a": 3}]',
    b'\n[\n{"a" : 1}\t,\r\n {\n"a":2}\n]\n',
    b'[{"a": "\\"}, {\\"a\\": 1"}, {"a": "\\\\"}, {"a": "}"}]',
    b'[{"a": 1}, {"a": NaN}, {"a": 3}]', b'[{"a": 1}, {"a": 1e400}]',
    b'[{"a": 1}, {"a": 12345678901234567890123}]',
    b'[{"a": 1}, {"a": "\\ud800"}, {"a": "\\ud83d\\ude00"}]',
    b'\xef\xbb\xbf[{"a": 1}, {"a": 2}]',
    b'[{"\\u0061": 1}, {"\\u0061": 2}, {"a": 3}]',
])
def test_odd_lists_give_the_same_records(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(text)
    _same_as_whole(path)


@pytest.mark.parametrize("text", [
    b'[{"a": 1}, {"a": 2}', b'[{"a": 1}, {"a": 2}]]', b'[{"a": 1}, {"a": 2}] x',
    b'[{"a": 1}, {"a": 2,}, {"a": 3}]', b'[{"a": 1}, {"a": [}, {"a": 3}]',
    b'[{"a": 1}, {"a": "\xff"}, {"a": 3}]', b'[{"a": 1},, {"a": 3}]',
    b'[{"a": 1}, {"a": 2}, ]',
])
def test_damaged_lists_fail_as_a_whole_with_jsons_position(tmp_path: Path,
                                                           text: bytes) -> None:
    path = tmp_path / "damaged.json"
    path.write_bytes(text)
    whole = _whole(path)
    assert isinstance(whole, str)
    with pytest.raises(ImportProblem) as streamed:
        list(_records(path, "["))
    try:
        json.loads(text.decode("utf-8-sig"))
    except json.JSONDecodeError as err:
        assert streamed.value.message == (
            f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno});"
            " the file may be truncated")
    except UnicodeDecodeError as err:
        assert streamed.value.message == f"not UTF-8 text (byte {err.start})"


def test_random_lists_of_records_match_the_whole_parse(tmp_path: Path) -> None:
    rng = random.Random(14)
    pieces = ["}", "{", "]", "[", ",", "\"", "\\", ":", " ", "\n", "task_idx", "é", "\u2028"]
    for case in range(60):
        def value(depth: int) -> Any:
            kind = rng.randrange(6 if depth < 3 else 3)
            if kind == 0:
                return "".join(rng.choice(pieces) for _ in range(rng.randrange(8)))
            if kind == 1:
                return rng.choice([0, -1.5, 1e-7, True, None, 2**60])
            if kind == 2:
                return rng.randrange(100)
            if kind == 3:
                return [value(depth + 1) for _ in range(rng.randrange(4))]
            return {rng.choice(["task_idx", "a", "}, {"]): value(depth + 1)
                    for _ in range(rng.randrange(4))}
        records = [{"task_idx": value(1), **{f"k{j}": value(1) for j in range(3)}}
                   for _ in range(rng.randrange(1, 6))]
        path = tmp_path / f"random-{case}.json"
        path.write_text(json.dumps(records, indent=rng.choice([None, 1]),
                                   ensure_ascii=rng.random() < 0.5), "utf-8")
        assert [r for _, r in _same_as_whole(path)] == records


def test_a_record_problem_before_damage_further_on_still_fails_the_file_as_a_whole(
        tmp_path: Path) -> None:
    # Read whole, this file failed before its first record; read record by record, the
    # import reads on past the first bad record, so the file still fails as a whole.
    good = {"task_idx": 1, "trial": 0, "reward": 1.0, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    bad = {**good, "messages": [{"role": "tool", "name": 3, "content": "x"}]}
    text = json.dumps([good, bad, good])
    path = tmp_path / "mimic_iv-tool-calling-gpt-x-0.0_range_0--1_valid.json"
    path.write_text(text[:-30], "utf-8")
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(ImportProblem, match="the file may be truncated"):
        ws.import_files([path], workers=1)
    path.write_text(text, "utf-8")
    with pytest.raises(ImportProblem, match="record 1") as info:
        ws.import_files([path], workers=1)
    assert "not valid JSON" not in str(info.value)


def test_the_reader_stops_early_without_reading_on(tmp_path: Path) -> None:
    path = tmp_path / "mimic_iv-tool-calling-gpt-x-0.0_range_0--1_valid.json"
    path.write_text(json.dumps([_record(n=i) for i in range(3)]), "utf-8")
    items = iter_file(path, prepare=True)
    first = next(items)
    assert first.location == "record 0" and first.prepared is not None
    del items  # a reader let go early is closed
    assert len(list(iter_file(path, prepare=True))) == 3


@pytest.mark.parametrize("text", [
    b'"\\ud800"', b'"\\udfff"', b'"a\\uDBFF b"', b'"\\ude00\\ud83d"', b'"\\ud800\\u0041"',
    b'{"\\ud800": 1}',
])
def test_orjson_refuses_a_lone_surrogate_escape(text: bytes) -> None:
    # What lets a document orjson read skip the search for surrogate escapes (PLAIN_TEXT).
    with pytest.raises(json_documents.orjson.JSONDecodeError):
        json_documents.orjson.loads(text)
    assert json.loads(text) is not None  # the standard parser takes it (and is walked)


def test_orjson_refuses_an_encoded_surrogate() -> None:
    # Surrogates written as UTF-8 bytes are not UTF-8: both parsers refuse them.
    with pytest.raises(json_documents.orjson.JSONDecodeError):
        json_documents.orjson.loads(b'["\xed\xa0\x80"]')


def test_a_document_orjson_reads_is_not_searched_for_surrogates() -> None:
    pair = b'[{"a": "\\ud83d\\ude00"}]'
    assert parse_document(pair)[1] == json_documents.PLAIN_TEXT
    lone = b'[{"a": "\\ud800"}]'
    assert parse_document(lone)[1] == json_documents.DocumentText(False, True)
    assert parse_document(b'[{"a": NaN}]')[1] == json_documents.DocumentText(False, False)


def _long_integer_by_regex(data: bytes) -> bool:
    """The definition ``has_long_integer`` implements: a run of 19+ digits that is not a
    float's fraction or exponent nor followed by one."""
    for run in re.finditer(rb"[0-9]{19,}", data):
        before = data[max(run.start() - 2, 0):run.start()]
        if before[-1:] in (b".", b"e", b"E", b"+") or before in (b"e-", b"E-"):
            continue
        if data[run.end():run.end() + 1] not in (b".", b"e", b"E"):
            return True
    return False


@pytest.mark.parametrize("prescan_min", [0, json_documents._PRESCAN_MIN])
def test_long_integers_are_found_as_the_definition_says(monkeypatch: pytest.MonkeyPatch,
                                                        prescan_min: int) -> None:
    # 0: the vectorised pre-scan runs first on these short texts too.
    monkeypatch.setattr(json_documents, "_PRESCAN_MIN", prescan_min)
    rng = random.Random(19)
    pieces = [b"1", b"9", b"0", b"5", b".", b"e", b"E", b"+", b"-", b" ", b",", b'"', b"a"]
    for _ in range(20_000):
        data = b"".join(rng.choice(pieces[:4] * 6 + pieces) for _ in range(rng.randrange(50)))
        assert json_documents.has_long_integer(data) == _long_integer_by_regex(data), data


@pytest.mark.parametrize("before", [b" ", b"-", b":", b".", b"e", b"e-", b"+"])
def test_long_integers_are_found_across_the_scans_chunks(before: bytes) -> None:
    chunk = json_documents._CLASS_CHUNK
    for at in range(chunk - 25, chunk + 3):
        data = bytearray(b" " * (2 * chunk))
        data[at - len(before):at] = before
        data[at:at + 19] = b"1" * 19
        assert json_documents.has_long_integer(bytes(data)) == (before in (b" ", b"-", b":"))
    assert json_documents.has_long_integer(b"1" * 19)
    assert not json_documents.has_long_integer(b"1" * 18)


def test_record_boundaries_are_where_the_pattern_says() -> None:
    # The boundary, stated as a regular expression: '}' ',' '{' key ':' with JSON whitespace
    # between; the reader finds the leftmost one at or after a start, wholly before an end.
    space = rb"[ \t\n\r]*"
    rng = random.Random(7)
    for key in (b'"k"', b'"a\\"b"'):
        pattern = re.compile(rb"\}" + space + b"," + space + rb"(\{)" + space + re.escape(key)
                             + space + b":")
        # Whole and partial boundaries are common, so a start often falls inside one.
        pieces = [b"{", b"}", b",", b" ", b"\n", b"\t", b":", b'"k', b"k", b"x", key,
                  b"} ,", b", {", key + b" :", b"}, {" + key + b":"]
        for _ in range(20_000):
            data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(30)))
            start = rng.randrange(len(data) + 1)
            end = rng.randrange(start, len(data) + 1)
            found = pattern.search(data, start, end)
            assert json_documents._next_boundary(data, key, start, end) == (
                (found.start(), found.start(1)) if found else None), (data, start, end)
