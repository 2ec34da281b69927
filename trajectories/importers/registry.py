"""The import formats: each registers its name, how it recognises a file or a record, and its
reader; ``detect.py`` asks this registry which reader reads a file (no list of formats is written
anywhere else). A format reads either whole files (``read_file``: archives, tables, traces whose
trajectories span many records) or one parsed JSON record at a time (``read_record``), or both
(Inspect: ``.eval`` archives whole, ``.json`` logs as a record).

File detectors are asked first (each with a ``FileSniff``, which reads the head of the file
once, lazily), then record detectors on the first record, each kind in ``priority`` order
(never the order modules happened to register in); the record format without a detector
(``native``) is the fallback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.fast_chat import Prepared
from trajectories.importers.mapping import Mapping
from trajectories.model import Trajectory

#: The pseudo-format that asks the detectors.
AUTO = "auto"
#: How much of a file the sniffers read: enough for a first record of any trace we know
#: (spans with their captured messages), bounded so sniffing a large document stays cheap.
_HEAD_BYTES = 65536
_FIRST_VALUE_MAX = 8 * 1024 * 1024


@dataclass(frozen=True)
class Parsed:
    """One record's outcome: a trajectory, or a problem with the raw text kept for rejects."""

    location: str
    trajectory: Trajectory | None
    problem: ImportProblem | None
    raw: str
    #: The stored document, when ``iter_file(prepare=True)`` took the fast path (then
    #: ``trajectory`` is None: ``prepared.trajectory()`` builds it).
    prepared: Prepared | None = None


def rejected(path: Path, location: str, err: ValueError, raw: str) -> Parsed:
    """A record a parser refused; parsers say ``"field: message"``."""
    field_name, _, message = str(err).partition(": ")
    if not message:  # a message that names no field
        field_name, message = "", field_name
    return Parsed(location, None, ImportProblem(str(path), message, location, field_name or None),
                  raw)


@dataclass(frozen=True)
class ReadOptions:
    """What the user said on the command line that a reader may use."""

    run: str | None = None
    model: str | None = None
    mapping: Mapping | None = None
    #: Chat records may come back as ``Parsed.prepared`` (the fast path, ``fast_chat``).
    prepare: bool = False


@dataclass
class RecordContext:
    """One parsed record of a JSON/JSONL file, with what a record reader needs to say where."""

    path: Path
    location: str
    options: ReadOptions
    #: The record's own text (a JSONL line), or None for a record out of a whole document.
    line: str | None
    #: The record's values are plain JSON (no NaN, no long integers): the fast path may run.
    plain: bool
    #: Per-file state a reader wants to compute once (e.g. the run from the file name).
    file_state: dict[str, Any] = field(default_factory=dict)

    def raw(self, record: Any) -> str:
        return self.line if self.line is not None else json.dumps(record, ensure_ascii=False,
                                                                   default=str)


class FileSniff:
    """A file's head, read once and shared by every file detector."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @cached_property
    def head(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                return handle.read(_HEAD_BYTES)
        except OSError:
            return b""

    @cached_property
    def text(self) -> str:
        """The head as text (a cut multibyte character at the end dropped)."""
        return self.head.decode("utf-8-sig", errors="ignore")

    @cached_property
    def first_value(self) -> Any:
        """The file's first JSON value (the first line of JSONL, the first of several
        concatenated documents, a whole document; for a JSON list, its first item), or None
        when there is none within the first few megabytes. Only asked by detectors that saw
        their keys in ``text``."""
        start = self.text.lstrip()
        if not start.startswith(("{", "[")):
            return None
        decoder = json.JSONDecoder()
        size = _HEAD_BYTES
        while True:
            try:
                with open(self.path, "rb") as handle:
                    data = handle.read(size)
                text = data.decode("utf-8-sig", errors="ignore").lstrip()
                if text.startswith("["):  # a list of records: its first record says
                    at = len(text) - len(text[1:].lstrip())
                    if text[at:at + 1] == "]":
                        return None
                    value, _ = decoder.raw_decode(text, at)
                    return value
                value, _ = decoder.raw_decode(text)
                return value
            except (ValueError, RecursionError, OSError):
                if len(data) < size or size >= _FIRST_VALUE_MAX:
                    return None
                size *= 4


FileReader = Callable[[Path, ReadOptions], Iterator[Parsed]]
RecordReader = Callable[[Any, RecordContext], Iterator[Parsed]]


@dataclass(frozen=True)
class ImportFormat:
    """One import format: its name (what ``--format`` takes), detectors and readers."""

    name: str
    #: One line for help texts and error messages.
    summary: str
    #: True when a whole file is this format's (asked under ``auto``, and under ``--format
    #: NAME`` for a format that reads records too, to choose between its two readers).
    detect_file: Callable[[FileSniff], bool] | None = None
    read_file: FileReader | None = None
    #: True when a parsed record is this format's (asked on the first record, under ``auto``).
    detect_record: Callable[[Any], bool] | None = None
    read_record: RecordReader | None = None
    #: The file reader reads ``--map`` files itself (a mapped results table); for the other
    #: formats a mapping means JSON records read through the mapping.
    takes_mapping: bool = False
    #: Detectors are asked in this order (lower first), so a format whose records another
    #: format's detector would also take (an LM Studio export has ``messages`` as chat logs
    #: do) is asked first; names keep their registration order.
    priority: int = 100

    def __post_init__(self) -> None:
        if self.read_file is None and self.read_record is None:
            raise ValueError(f"format {self.name!r} has no reader")
        if self.read_file is not None and self.read_record is not None \
                and self.detect_file is None:
            raise ValueError(f"format {self.name!r} reads files and records: it needs "
                             "detect_file to choose between them")


_FORMATS: dict[str, ImportFormat] = {}


def register(fmt: ImportFormat) -> ImportFormat:
    """Add a format (a name registered twice is a programming error, refused)."""
    if fmt.name == AUTO or fmt.name in _FORMATS:
        raise ValueError(f"import format {fmt.name!r} is already registered")
    _FORMATS[fmt.name] = fmt
    return fmt


def names() -> tuple[str, ...]:
    """Every registered format's name, sorted: the list ``--format`` shows stays the same
    whichever module happened to register first."""
    return tuple(sorted(_FORMATS))


def get(name: str) -> ImportFormat:
    return _FORMATS[name]


def _by_priority() -> list[ImportFormat]:
    return sorted(_FORMATS.values(), key=lambda fmt: fmt.priority)


def file_format(sniff: FileSniff, *, mapping: bool) -> ImportFormat | None:
    """The first format that claims the whole file, or None (then records are sniffed)."""
    for fmt in _by_priority():
        if fmt.detect_file is None or fmt.read_file is None:
            continue
        if mapping and not fmt.takes_mapping:
            continue
        if fmt.detect_file(sniff):
            return fmt
    return None


def record_format(record: Any) -> ImportFormat:
    """The first record format whose detector takes this record (the fallback takes all)."""
    fallback: ImportFormat | None = None
    for fmt in _by_priority():
        if fmt.read_record is None:
            continue
        if fmt.detect_record is None:
            fallback = fallback or fmt
        elif fmt.detect_record(record):
            return fmt
    if fallback is None:
        raise LookupError("no record format registered")
    return fallback


__all__ = [
    "AUTO",
    "FileReader",
    "FileSniff",
    "ImportFormat",
    "Parsed",
    "ReadOptions",
    "RecordContext",
    "RecordReader",
    "file_format",
    "get",
    "names",
    "record_format",
    "register",
    "rejected",
]
