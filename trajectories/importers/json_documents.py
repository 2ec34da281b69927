"""Reading whole JSON documents and JSON lists of records for the importers.

orjson where it reads the text exactly as the standard parser would (several times faster),
else ``json``, whose acceptance (NaN, integers beyond 64 bits, lone surrogate escapes) and error
messages are the import's contract; a harness's JSON list is read one record at a time so a
worker holds the file's bytes and one record, not the whole parsed list. Every parsed value is
refused when it nests deeper than ``MAX_DEPTH`` levels.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from trajectories.importers.errors import ImportProblem

#: An escape that can decode to a surrogate (such a document's strings are checked when the
#: standard parser read it: orjson refuses a lone surrogate escape, and a pair decodes to one
#: character in both parsers).
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

#: The deepest nesting of arrays and objects an imported file may have, counted from the top
#: of the file (or of a JSONL line): a JSON list's records start at level 2. Real logs nest 7
#: (tau-bench) to 20 (LM Studio) levels. Far deeper text is broken or hostile, and the tools
#: after the parser give out in their own ways: the standard parser and encoder recurse (a
#: RecursionError near 1,000 levels), orjson stops at 1,024, pydantic's serializer at 255.
MAX_DEPTH = 100


class NestingTooDeep(ValueError):
    """A JSON text nested deeper than ``MAX_DEPTH``; ``where`` says where in the text (line
    and column, or column in a JSONL line) and ``record`` which element of a top-level list
    holds it, when known."""

    def __init__(self, where: str = "", record: int | None = None) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels of arrays and objects"
                         + (f" ({where})" if where else ""))
        self.record = record


def nests_within(value: Any, levels: int = MAX_DEPTH) -> bool:
    """True when ``value`` (parsed JSON) holds no array or object deeper than ``levels``
    (``value`` itself, if one, is level 1). Level by level, without recursion. Every record
    pays it: for the real tau-bench records 0.4-0.7 CPU ms per MB, against 1.5-2 for
    orjson's parse (and about 24 for the whole import)."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(levels):
        if not level:
            return True
        deeper: list[Any] = []
        keep = deeper.append
        for container in level:
            for item in (container.values() if type(container) is dict else container):
                kind = type(item)
                if kind is dict or kind is list:
                    keep(item)
        level = deeper
    return not level


#: The bytes the nesting scan reads (every other byte maps to 0).
_IS_QUOTE, _IS_OPEN, _IS_CLOSE, _IS_BACKSLASH, _IS_COMMA = 1, 2, 3, 4, 5
_STRUCTURE = bytearray(256)
for _byte, _code in ((b'"', _IS_QUOTE), (b"[", _IS_OPEN), (b"{", _IS_OPEN), (b"]", _IS_CLOSE),
                     (b"}", _IS_CLOSE), (b"\\", _IS_BACKSLASH), (b",", _IS_COMMA)):
    _STRUCTURE[_byte[0]] = _code
_SCAN_CHUNK = 1 << 20


def _too_deep_at(data: bytes, start: int = 0, end: int | None = None, *,
                 depth: int = 0, levels: int = MAX_DEPTH) -> tuple[int, int] | None:
    """Where JSON text first nests deeper than ``levels`` (brackets inside strings do not
    count), as (offset in ``data``, commas at level 1 before it: the index of the top-level
    list element it is in); None when it never does. ``depth``: the level ``start`` is at.

    Only for telling where a value refused by ``nests_within`` (or by a parser) nests too
    deep: the text is read a megabyte at a time, vectorised, but more slowly than orjson
    parses it (3.5 against 2.7 ms per MB), so it is not the check itself."""
    import numpy as np  # here: the importers load without numpy

    end = len(data) if end is None else end
    inside = commas = 0
    while start < end:
        stop = min(start + _SCAN_CHUNK, end)
        while stop < end and data[stop - 1] == 0x5C:  # a chunk never ends inside an escape
            stop += 1
        codes = np.frombuffer(data[start:stop].translate(_STRUCTURE), np.uint8)
        where = np.flatnonzero(codes)
        kinds = codes[where]
        quote = kinds == _IS_QUOTE
        backslash = kinds == _IS_BACKSLASH
        if backslash.any():
            # A quote right after an odd run of backslashes is escaped.
            follows = np.zeros(len(kinds), bool)
            follows[1:] = backslash[:-1] & (where[1:] == where[:-1] + 1)
            index = np.arange(len(kinds))
            run_start = np.maximum.accumulate(np.where(backslash & ~follows, index, 0))
            odd_run = np.zeros(len(kinds), bool)
            odd_run[1:] = (index[:-1] - run_start[:-1]) % 2 == 0
            quote &= ~(follows & odd_run)
        in_string = ((np.cumsum(quote) + inside) & 1).astype(bool)
        steps = (kinds == _IS_OPEN).astype(np.int64) - (kinds == _IS_CLOSE)
        steps[in_string] = 0
        level = np.cumsum(steps) + depth
        top_commas = (kinds == _IS_COMMA) & ~in_string & (level == 1)
        over = np.flatnonzero(level > levels)
        if over.size:
            first = int(over[0])
            return start + int(where[first]), commas + int(np.count_nonzero(
                top_commas[:first]))
        if len(kinds):
            depth, inside = int(level[-1]), int(in_string[-1])
            commas += int(np.count_nonzero(top_commas))
        start = stop
    return None


_LIST_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\n\r]*\[")


def _nesting_error(data: bytes, start: int = 0, end: int | None = None, *, depth: int = 0,
                   line_only: bool = False) -> NestingTooDeep:
    """``NestingTooDeep`` for text known to nest too deep, saying where (line and column in
    ``data``, or only the column for a JSONL line) and, for a list, in which element."""
    found = _too_deep_at(data, start, end, depth=depth)
    if found is None:  # a parser refused it for its own limit, below this one
        return NestingTooDeep()
    offset, commas = found
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", "replace")) + 1
    if line_only:
        return NestingTooDeep(f"column {column}")
    line = data.count(b"\n", 0, offset) + 1
    # The element index means something only for a whole text that is a list.
    is_list = not start and _LIST_START.match(data) is not None
    return NestingTooDeep(f"line {line}, column {column}", commas if is_list else None)


def line_nesting_problem(line: bytes) -> str:
    """The message for a JSONL line that nests deeper than ``MAX_DEPTH``."""
    return str(_nesting_error(line, line_only=True))


def first_line_nests_too_deep(path: Path) -> bool:
    """True when the file's first non-blank line alone nests deeper than ``MAX_DEPTH``."""
    with open(path, "rb") as handle:
        first = next((line for line in handle if line.strip()), b"")
    return _too_deep_at(first) is not None


#: orjson reads integers beyond 64 bits as floats; such files go to the standard parser so a
#: record's values (and so its content hash) never depend on the parser.
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19
#: ``_may_have_long_integer`` classes bytes as 1 (a digit), 2 ('.') or 0 (anything else) and
#: looks for a run of 19 digits after a byte of class 0, this many bytes at a time (small
#: enough for its three work arrays to stay in the CPU's cache).
_CLASS_CHUNK = 1 << 18
_INTEGER_START = b"\x00" + b"\x01" * len(_LONG_RUN)
#: Below this size (a JSONL line, a small document) the exact check alone is about as cheap as
#: the pre-scan or cheaper (measured: 0.5 against 8 us at 500 bytes, 11 against 47 at 16 KB,
#: 40 against 28 at 64 KB).
_PRESCAN_MIN = 64 * 1024


def _may_have_long_integer(data: bytes) -> bool:
    """False when no run of 19+ digits starts after a byte other than '.' (nor at the start):
    then ``has_long_integer`` is False, since every run it accepts starts so. A run after a
    '.' is a float's fraction, as every 19-digit run in a harness's costs and rewards is, so
    the exact (and per run, slow) check is left to the rare text that has an integer-like
    run. Vectorised a chunk at a time: about half the time of folding the digits with
    ``bytes.translate`` (a copy of the file) and a fifth of a regular expression."""
    import numpy as np  # here: the importers load without numpy (a file's scan needs it)

    if data[:len(_LONG_RUN)].isdigit():
        return True
    array = np.frombuffer(data, np.uint8)
    work = np.empty(min(len(array), _CLASS_CHUNK + len(_INTEGER_START)), np.uint8)
    digit = np.empty(len(work), np.bool_)
    dot = np.empty(len(work), np.bool_)
    # Chunks overlap by a needle's length less one, so a run across a seam is seen whole.
    for start in range(0, len(array), _CLASS_CHUNK):
        chunk = array[max(start - len(_INTEGER_START) + 1, 0):start + _CLASS_CHUNK]
        size = len(chunk)
        np.subtract(chunk, 48, out=work[:size])  # digits to 0-9, every other byte above 9
        np.less(work[:size], 10, out=digit[:size])
        np.equal(chunk, 46, out=dot[:size])
        classes = digit[:size].view(np.uint8)
        classes += dot[:size].view(np.uint8)
        classes += dot[:size].view(np.uint8)
        if classes.tobytes().find(_INTEGER_START) != -1:
            return True
    return False


def has_long_integer(data: bytes) -> bool:
    """True when a run of 19+ digits is a whole integer (not a float's fraction or exponent).
    Digits inside strings count too: those files just take the slower parser. (Digits are
    folded to '0' so the scan is a plain substring search, far faster than a regex; a
    vectorised scan rules most texts out first.)"""
    if len(data) >= _PRESCAN_MIN and not _may_have_long_integer(data):
        return False
    folded = data.translate(_ZERO_DIGITS)
    start = folded.find(_LONG_RUN)
    while start != -1:
        end = start + len(_LONG_RUN)
        while folded[end:end + 1] == b"0":
            end += 1
        before = data[start - 1:start] if start else b""
        if before == b"-" and start >= 2:
            before = data[start - 2:start - 1]
            fraction_or_exponent = before in (b"e", b"E")
        else:
            fraction_or_exponent = before in (b".", b"e", b"E", b"+")
        if not fraction_or_exponent and data[end:end + 1] not in (b".", b"e", b"E"):
            return True
        start = folded.find(_LONG_RUN, end)
    return False


def loads_plain(data: bytes) -> tuple[Any, bool]:
    """Parse a whole JSON document: orjson when it accepts the text (several times faster),
    else the standard parser, whose acceptance (NaN, huge integers, lone surrogate escapes)
    and error messages are the import's contract. The flag says orjson read it (so its
    values are plain JSON: no NaN, no integer beyond 64 bits).
    Raises ``NestingTooDeep`` for a value nested deeper than ``MAX_DEPTH`` (orjson itself
    stops at 1,024 levels, the standard parser where Python's recursion limit is)."""
    if not has_long_integer(data):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if not nests_within(doc):
                raise _nesting_error(data)
            return doc, True
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except RecursionError:
        raise _nesting_error(data) from None
    if not nests_within(doc):
        raise _nesting_error(data)
    return doc, False


@dataclass(frozen=True)
class DocumentText:
    """What is known of a whole document's text once it is parsed (its bytes are let go)."""

    plain: bool  # read by orjson (``loads_plain``)
    #: Read by the standard parser and holds an escape that can decode to a lone surrogate.
    surrogate_hint: bool


#: What is known of a document orjson read: it has no lone surrogate (orjson refuses one, a
#: test checks), so its strings need no walk and its text no search for escapes.
PLAIN_TEXT = DocumentText(True, False)


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The cycle collector off while a whole document is parsed: parsing a 25 MB file makes
    millions of containers, and each collection run while they are made walks all made so far
    (about a tenth of the import's CPU). Parsed JSON holds no reference cycles to collect."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_document(data: bytes) -> tuple[Any, DocumentText]:
    """A whole document's values, and what is known of its text."""
    with no_cycle_collection():
        doc, plain = loads_plain(data)
    return doc, PLAIN_TEXT if plain else DocumentText(False, bool(SURROGATE_ESCAPE.search(data)))


def read_document(path: Path) -> tuple[Any, DocumentText]:
    """A whole document (one JSON object) and what is known of its text; one nested too
    deep is an ``ImportProblem`` (the parsers' own errors are the caller's to word)."""
    # The surrogate scan is made from these bytes, not from a second read of the file while
    # the parsed records are held (that was one more file-sized buffer at the worker's peak).
    try:
        return parse_document(path.read_bytes())
    except NestingTooDeep as err:
        raise ImportProblem(str(path), str(err), "document") from None


def document_problem(path: Path,
                      err: json.JSONDecodeError | UnicodeDecodeError) -> ImportProblem:
    """A whole document the parsers refuse, said the one way (``json``'s position)."""
    if isinstance(err, UnicodeDecodeError):
        return ImportProblem(str(path), f"not UTF-8 text (byte {err.start})")
    return ImportProblem(
        str(path), f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno});"
        " the file may be truncated")


#: JSON's whitespace (``\s`` would take more).
_WS = rb"[ \t\n\r]*"
#: The start of a JSON list whose first record is an object: its first key is captured.
_LIST_HEAD = re.compile(_WS + rb"\[" + _WS + rb"(\{)" + _WS + rb'("(?:[^"\\]|\\.)*")' + _WS
                        + b":")
_JSON_SPACE = b" \t\n\r"


def _list_end(data: bytes) -> int | None:
    """Where the last record of a list of objects ends (just past its '}'), when the text ends
    with '}', ']' and only whitespace; else None. (Read from the end: a regular expression
    anchored at the end still tries every '}' of the file.)"""
    end = _before_space(data, len(data))
    if end == 0 or data[end - 1:end] != b"]":
        return None
    end = _before_space(data, end - 1)
    return end if end and data[end - 1:end] == b"}" else None


def _before_space(data: bytes, end: int) -> int:
    while end and data[end - 1] in _JSON_SPACE:
        end -= 1
    return end


#: The bytes around a record boundary, as ``data[i]`` gives them (ints).
_COLON, _OPEN, _COMMA, _CLOSE = b":{,}"


def _next_boundary(data: bytes, key: bytes, start: int, end: int) -> tuple[int, int] | None:
    """The first place at or after ``start`` where one record ends and the next begins with
    ``key``: '}', ',', '{', the key and ':' with only JSON whitespace between, all before
    ``end``; as (the '}', the '{'). The key is found with a plain substring search and the
    rest read around it (a regular expression starting at '}' stopped at every brace of the
    file: 15 ms of 25 MB)."""
    at = data.find(key, start, end)
    while at != -1:
        found = _boundary_at(data, at, len(key), start, end)
        if found:
            return found
        at = data.find(key, at + 1, end)
    return None


def _boundary_at(data: bytes, at: int, key_size: int, start: int,
                 end: int) -> tuple[int, int] | None:
    """``_next_boundary`` for the key found at ``at``."""
    after = at + key_size
    while after < end and data[after] in _JSON_SPACE:
        after += 1
    if after == end or data[after] != _COLON:
        return None
    brace = _before_space(data, at) - 1
    if brace < start or data[brace] != _OPEN:
        return None
    comma = _before_space(data, brace) - 1
    if comma < start or data[comma] != _COMMA:
        return None
    close = _before_space(data, comma) - 1
    if close < start or data[close] != _CLOSE:
        return None
    return close, brace


#: A record whose parse fails at more boundaries than this sends its file to the whole parse.
_MAX_FALSE_BOUNDARIES = 8


def list_records(path: Path) -> Iterator[tuple[int, Any, DocumentText]]:
    """A JSON list's records one at a time, parsed by orjson from the file's bytes, so a
    worker holds the file's bytes and one record rather than the whole parsed list (a 25 MB
    file is about 300 MB of Python objects).

    A record ends at a closing brace followed by a comma and the next object's first key as
    the first record spells it (a harness writes every record with the same first key). A key
    inside a string cannot match (a string holds no bare quote), so the only false boundaries
    are nested objects that start with that key; those are found out because the slice does
    not parse: a slice from a value's start parses only when it ends exactly at that value's
    end. Anything else (no object first, another first key, text after the list, a damaged
    record, values orjson reads differently from ``json``) sends the rest of the file to the
    whole-document parse the import always used, so records, values and errors are the same:
    a damaged file still fails as a whole with ``json``'s line and column."""
    data = path.read_bytes()
    head = _LIST_HEAD.match(data)
    last_end = _list_end(data) if head else None
    if head is None or last_end is None or has_long_integer(data):
        yield from whole_list(path, data, 0)
        return
    key = head[2]
    view = memoryview(data)
    start, index = head.start(1), 0
    while start < last_end:
        scan_from, false_boundaries = start, 0
        while True:
            found = _next_boundary(data, key, scan_from, last_end)
            end = found[0] + 1 if found else last_end
            try:
                record = orjson.loads(view[start:end])
                break
            except orjson.JSONDecodeError:
                false_boundaries += 1
                if found is None or false_boundaries > _MAX_FALSE_BOUNDARIES:
                    view.release()
                    yield from whole_list(path, data, index)
                    return
                scan_from = end
        if not nests_within(record, MAX_DEPTH - 1):  # the list is level 1
            view.release()
            raise ImportProblem(str(path), str(_nesting_error(data, start, end, depth=1)),
                                f"record {index}")
        yield index, record, PLAIN_TEXT
        del record  # let each record go once it is read: bounded memory
        index += 1
        start = found[1] if found else last_end
    view.release()


def whole_list(path: Path, data: bytes, first: int) -> Iterator[tuple[int, Any, DocumentText]]:
    """A JSON list parsed whole (the reader for every file the record reader does not take),
    from record ``first`` on."""
    try:
        doc, known = parse_document(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise document_problem(path, err) from None
    except NestingTooDeep as err:
        raise ImportProblem(str(path), str(err), None if err.record is None
                            else f"record {err.record}") from None
    del data
    if not isinstance(doc, list):
        raise ImportProblem(str(path), "expected a JSON list of records")
    # The parsed records are set aside from the cycle collector while they are read (they
    # are freed by reference counting as each is let go): otherwise every full collection
    # walks the whole parsed file again.
    gc.freeze()
    try:
        for i in range(first, len(doc)):
            rec, doc[i] = doc[i], None  # let each record go once it is read: bounded memory
            yield i, rec, known
    finally:
        gc.unfreeze()
