"""Read one producer file: sniff its format, parse every record, collect precise problems."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trajectories.importers.errors import ImportProblem
from trajectories.importers.native import parse_native
from trajectories.importers.openai_chat import identity_from_filename, parse_openai_chat
from trajectories.model import Trajectory

Format = Literal["auto", "native", "openai-chat"]
FORMATS: tuple[str, ...] = ("auto", "native", "openai-chat")


@dataclass
class ParsedFile:
    path: Path
    format: str
    trajectories: list[tuple[str, Trajectory]] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    raw_rejects: list[tuple[str, str]] = field(default_factory=list)  # (location, raw text)


def _records(path: Path, text: str) -> tuple[str, Iterator[tuple[str, Any, str]]]:
    """Yield (location, record, raw) triples; 'list' files are one JSON document."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ImportProblem(
                str(path), f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno});"
                " the file may be truncated"
            ) from None

        def list_items() -> Iterator[tuple[str, Any, str]]:
            for i, rec in enumerate(doc):
                yield f"record {i}", rec, json.dumps(rec, ensure_ascii=False)

        return "list", list_items()

    def lines() -> Iterator[tuple[str, Any, str]]:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                rec = _BadJson(f"not valid JSON ({err.msg} at column {err.colno})")
            yield f"line {lineno}", rec, line

    return "jsonl", lines()


@dataclass(frozen=True)
class _BadJson:
    message: str


def _sniff(record: Any) -> str:
    if isinstance(record, dict):
        if "messages" in record and "steps" not in record:
            return "openai-chat"
        if "task" in record or "steps" in record:
            return "native"
    return "native"


def read_file(
    path: Path,
    fmt: str = "auto",
    *,
    run: str | None = None,
    model: str | None = None,
) -> ParsedFile:
    """Parse a file completely. Whole-file problems raise ``ImportProblem``; record problems are
    collected in ``problems`` so the caller can reject the file or skip those records."""
    if fmt not in FORMATS:
        raise ImportProblem(str(path), f"unknown format '{fmt}' (use one of {', '.join(FORMATS)})")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ImportProblem(str(path), f"cannot read file: {err.strerror or err}") from None
    if not data.strip():
        raise ImportProblem(str(path), "file is empty")
    if b"\x00" in data[:8192]:
        raise ImportProblem(str(path), "binary file, not JSON or JSONL")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportProblem(str(path), f"not UTF-8 text (byte {err.start})") from None
    if text.lstrip()[:1] not in ("[", "{"):
        raise ImportProblem(str(path), "not JSON or JSONL: expected '[' or '{' at the start")

    _, records = _records(path, text)
    identity = identity_from_filename(path, run, model)
    parsed = ParsedFile(path=path, format=fmt)
    for location, record, raw in records:
        if isinstance(record, _BadJson):
            parsed.problems.append(ImportProblem(str(path), record.message, location))
            parsed.raw_rejects.append((location, raw))
            continue
        if parsed.format == "auto":
            parsed.format = _sniff(record)
        try:
            if parsed.format == "openai-chat":
                traj = parse_openai_chat(record, identity)
            else:
                if run or model:
                    record = _override_run(record, run, model)
                traj = parse_native(record)
        except ValueError as err:
            field_name, _, message = str(err).partition(": ")
            parsed.problems.append(ImportProblem(str(path), message, location, field_name))
            parsed.raw_rejects.append((location, raw))
            continue
        parsed.trajectories.append((location, traj))
    if parsed.format == "auto":
        parsed.format = "native"
    return parsed


def _override_run(record: Any, run: str | None, model: str | None) -> Any:
    if not isinstance(record, dict) or not isinstance(record.get("run"), dict):
        return record
    new_run = dict(record["run"])
    if run:
        new_run["name"] = run
    if model:
        new_run["model"] = model
    return {**record, "run": new_run}
