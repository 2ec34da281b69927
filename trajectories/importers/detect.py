"""Read one producer file: sniff its format, parse every record, collect precise problems."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Every format module, imported so that it registers its format. A new format: a module that
# calls ``registry.register``, imported here.
from trajectories.importers import (
    anthropic_messages,  # noqa: F401
    builtin,  # noqa: F401
    langsmith_runs,  # noqa: F401
    openai_agents,  # noqa: F401
    registry,
    smolagents_runs,  # noqa: F401
    traces,  # noqa: F401
)
from trajectories.importers.errors import ImportProblem
from trajectories.importers.json_documents import (
    DocumentText,
    document_problem,
    first_line_nests_too_deep,
    has_long_integer,
    line_nesting_problem,
    list_records,
    nests_within,
    read_document,
)
from trajectories.importers.mapping import Mapping, parse_mapped
from trajectories.importers.registry import (
    AUTO,
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    RecordContext,
    rejected,
)
from trajectories.importers.run_names import run_for_file
from trajectories.importers.tasks import TaskFile, apply_task
from trajectories.model import Trajectory


def formats() -> tuple[str, ...]:
    """What ``--format`` takes: ``auto`` and every registered format."""
    return (AUTO, *registry.names())


#: ``formats()`` once every format module above has registered.
FORMATS = formats()


@dataclass
class ParsedFile:
    path: Path
    format: str
    trajectories: list[tuple[str, Trajectory]] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    raw_rejects: list[tuple[str, str]] = field(default_factory=list)  # (location, raw text)


def _plain_line(line: bytes) -> bool:
    """True when the standard parser reads this JSONL line to values orjson would give too."""
    return b"NaN" not in line and b"Infinity" not in line and not has_long_integer(line)


def _raw(record: Any) -> str:
    """A record's text for the rejects file (only made for records that are rejected)."""
    return json.dumps(record, ensure_ascii=False, default=str)


def _records(path: Path, first: str) -> Iterator[tuple[str, Any, str | None, DocumentText | bool]]:
    """Yield (location, record, raw, source) tuples; raw is None when the record came out of a
    whole document (its text is made only if it is rejected); source is that document's
    ``DocumentText``, or for a JSONL line whether its values are plain JSON (``_plain_line``).
    A JSON list is one document (read whole); JSONL is streamed line by line so memory stays
    bounded by one record."""
    if first == "[":
        for i, rec, known in list_records(path):
            yield f"record {i}", rec, None, known
        return
    try:
        single = _single_document(path)
    except RecursionError:
        # Nested too deep for the standard parser. JSONL when the first line alone is (the
        # line is refused below), else one document (``read_document`` refuses it).
        single = not first_line_nests_too_deep(path)
    if single:
        try:
            doc, known = read_document(path)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise document_problem(path, err) from None
        if not isinstance(doc, dict):
            raise ImportProblem(
                str(path), "expected a JSON object, a JSON list of records, or JSONL")
        yield "document", doc, None, known
        return
    with open(path, "rb") as handle:
        for lineno, raw_line in enumerate(handle, start=1):
            if not raw_line.strip():
                continue
            try:
                line = raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                yield (f"line {lineno}", _BadJson(f"not UTF-8 text (byte {err.start})"), "",
                       False)
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                rec = _BadJson(f"not valid JSON ({err.msg} at column {err.colno})")
            except RecursionError:
                rec = _BadJson(line_nesting_problem(raw_line))
            else:
                if not nests_within(rec):
                    rec = _BadJson(line_nesting_problem(raw_line))
            yield f"line {lineno}", rec, line, _plain_line(raw_line)


def _single_document(path: Path) -> bool:
    """True when a file starting with '{' is one JSON object spread over several lines (pretty
    printed), not JSONL: its first non-blank line is not a complete JSON value, but the whole
    file is. Decided by parsing, so a broken JSONL file still gets per-line problems."""
    with open(path, "rb") as handle:
        for raw_line in handle:
            if raw_line.strip():
                first = raw_line
                break
        else:
            return False
    try:
        json.loads(first.decode("utf-8-sig"))
        return False
    except (ValueError, UnicodeDecodeError):
        pass
    try:
        json.loads(path.read_bytes().decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        return False
    return True


@dataclass(frozen=True)
class _BadJson:
    message: str


_SURROGATE = re.compile("[\ud800-\udfff]")
#: Cheap test on the raw text before walking a record: an escaped or a decoded surrogate.
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def _surrogate_field(value: Any, path: str = "") -> str | None:
    """Dotted path of the first string holding a lone surrogate (``"\\ud800"`` escaped in
    JSON decodes to one; it is not Unicode text and cannot be stored), else None."""
    if isinstance(value, str):
        return (path or "(record)") if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if _SURROGATE.search(str(key)):
                return here
            found = _surrogate_field(item, here)
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _surrogate_field(item, f"{path}.{i}" if path else str(i))
            if found:
                return found
    return None


def _first_char(path: Path) -> str:
    """Check the start of a file and return its first non-blank character ('[' or '{')."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
            if b"\x00" in head[:8192]:
                raise ImportProblem(str(path), "binary file, not JSON or JSONL")
            while head and not head.strip():
                head = handle.read(65536)
    except OSError as err:
        raise ImportProblem(str(path), f"cannot read file: {err.strerror or err}") from None
    stripped = head.lstrip()
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:].lstrip()
    if not stripped:
        raise ImportProblem(str(path), "file is empty")
    first = stripped[:1].decode("latin-1")
    if first not in ("[", "{"):
        if stripped[:1] >= b"\x80":
            raise ImportProblem(str(path), "binary file, not JSON or JSONL")
        raise ImportProblem(str(path), "not JSON or JSONL: expected '[' or '{' at the start")
    return first


def iter_file(
    path: Path,
    fmt: str = "auto",
    *,
    run: str | None = None,
    model: str | None = None,
    mapping: Mapping | None = None,
    tasks: TaskFile | None = None,
    prepare: bool = False,
) -> Iterator[Parsed]:
    """Parse a file record by record (memory stays bounded by one record for JSONL).
    Whole-file problems raise ``ImportProblem`` before the first record. With ``prepare``,
    well-formed chat records come back as ``Parsed.prepared`` documents, built without the
    pydantic models (``fast_chat``); every other record as before. With ``tasks``, every
    trajectory of every format is matched to its task row (``tasks.apply_task``)."""
    items = _items(path, fmt, run=run, model=model, mapping=mapping,
                   prepare=prepare and tasks is None)
    if tasks is None:
        yield from items
        return
    for item in items:
        if item.trajectory is None:
            yield item
            continue
        extra = item.trajectory.model_extra or {}
        try:
            traj = apply_task(item.trajectory, tasks, path,
                              names=[extra.get("conversation_name")])
        except ValueError as err:
            yield rejected(path, item.location, err, item.raw)
            continue
        yield Parsed(item.location, traj, None, item.raw)


def _items(path: Path, fmt: str, *, run: str | None, model: str | None,
           mapping: Mapping | None, prepare: bool) -> Iterator[Parsed]:
    if fmt != AUTO and fmt not in registry.names():
        raise ImportProblem(str(path), f"unknown format '{fmt}' (use one of {', '.join(FORMATS)})")
    options = ReadOptions(run=run, model=model, mapping=mapping, prepare=prepare)
    chosen = registry.get(fmt) if fmt != AUTO else None
    whole = _file_reader(path, chosen, mapping)
    if whole is not None:
        yield from whole(path, options)
        return
    records = _records(path, _first_char(path))
    state: dict[str, Any] = {}
    for location, record, line, source in records:
        if isinstance(record, _BadJson):
            yield Parsed(location, None, ImportProblem(str(path), record.message, location),
                         line or "")
            continue
        # A record from a whole document has no text of its own: walk it only when its file
        # could hold a surrogate escape at all (decided once per file).
        if line is None:
            assert isinstance(source, DocumentText)
            hint, plain = source.surrogate_hint, source.plain
        else:
            plain = bool(source)
            hint = bool(_SURROGATE_HINT.search(line))
        bad_text = _surrogate_field(record) if hint else None
        if bad_text is not None:
            yield Parsed(location, None, ImportProblem(
                str(path), "lone surrogate escape (e.g. \\ud800) is not valid Unicode text",
                location, bad_text), line if line is not None else _raw(record))
            continue
        if mapping is not None:
            try:
                traj = parse_mapped(record, mapping, run or _mapped_run(path, location), model)
            except ValueError as err:
                yield rejected(path, location, err, line if line is not None else _raw(record))
                continue
            yield Parsed(location, traj, None, "")
            continue
        if chosen is None:  # the first record decides the file's format
            chosen = registry.record_format(record)
        if chosen.read_record is None:
            raise ImportProblem(str(path), f"the {chosen.name} format does not read JSON "
                                "records one by one")
        yield from chosen.read_record(record, RecordContext(path, location, options, line,
                                                            plain, state))


def _file_reader(path: Path, chosen: ImportFormat | None,
                 mapping: Mapping | None) -> registry.FileReader | None:
    """The reader that reads this file whole, or None when its records are read one by one:
    the named format's file reader (for a format that reads records too, only when its file
    detector claims the file), else under ``auto`` the first format whose detector does."""
    if chosen is None:
        found = registry.file_format(FileSniff(path), mapping=mapping is not None)
        return found.read_file if found is not None else None
    if chosen.read_file is None or (mapping is not None and not chosen.takes_mapping):
        return None
    if chosen.read_record is not None:
        assert chosen.detect_file is not None  # ImportFormat refuses it otherwise
        return chosen.read_file if chosen.detect_file(FileSniff(path)) else None
    return chosen.read_file


def _mapped_run(path: Path, location: str) -> str:
    """A mapped file's run: its stem, or, for a file that is one record (a conversation),
    its folder's run name (``run_names``): a folder of such files is one run."""
    return run_for_file(None, path) if location == "document" else path.stem


def read_file(
    path: Path,
    fmt: str = "auto",
    *,
    run: str | None = None,
    model: str | None = None,
    mapping: Mapping | None = None,
    tasks: TaskFile | None = None,
) -> ParsedFile:
    """Parse a file completely. Whole-file problems raise ``ImportProblem``; record problems are
    collected in ``problems`` so the caller can reject the file or skip those records."""
    parsed = ParsedFile(path=path, format=fmt)
    for item in iter_file(path, fmt, run=run, model=model, mapping=mapping,
                          tasks=tasks):
        if item.trajectory is not None:
            parsed.trajectories.append((item.location, item.trajectory))
            if parsed.format == "auto":
                parsed.format = item.trajectory.model_extra.get("source_format", "native") \
                    if item.trajectory.model_extra else "native"
        elif item.problem is not None:
            parsed.problems.append(item.problem)
            parsed.raw_rejects.append((item.location, item.raw))
    if parsed.format == "auto":
        parsed.format = "native"
    return parsed
