"""OpenTelemetry trace files as trajectories: the ``otel-genai``, ``openinference`` and
``langfuse`` formats.

A file of spans or log records, in OTLP JSON lines or the console exporters' output
(``otlp``), is read trace by trace: one trace is one trajectory. A trace's spans and log
records may sit in two files (content captured as events goes to the logs file, the spans
stay in the spans file): every OpenTelemetry file in the same folder is read once per process
into an index by trace id, and each trace is built from all of its spans and records, joined
by trace and span id. So a spans file and its logs file give the same trajectory whichever is
read (imported together, the second is a duplicate of the first), and a spans file whose
content is in no file beside it says so in one line.

Which conventions a trace follows is read from its attributes: OpenInference spans carry
``openinference.span.kind``, Langfuse's ``langfuse.observation.type``; the rest is read as
OpenTelemetry GenAI (``genai``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.genai import NoContent, genai_run
from trajectories.importers.langfuse_spans import LANGFUSE_TYPE, langfuse_run
from trajectories.importers.openinference import OPENINFERENCE_KIND, openinference_run
from trajectories.importers.otlp import LogRecord, Span, kind_of, read_telemetry
from trajectories.importers.registry import (
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    register,
    rejected,
)
from trajectories.importers.trace_steps import TraceRun, trajectory_of

#: Markers one of which the head of any OpenTelemetry file we read holds.
_MARKERS = ('"resourceSpans"', '"resource_spans"', '"resourceLogs"', '"resource_logs"',
            '"resourceMetrics"', '"resource_metrics"', '"trace_id"')
_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".log", ".txt"})
#: What to do when a trace holds no content.
_NO_CONTENT = ("the trace's spans hold no message content and no logs file beside it holds "
               "the trace: export with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="
               "span_only (content on the spans), or event_only and keep the logs file in the "
               "same folder (with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental; "
               "'true' captures nothing with current instrumentations)")


@dataclass
class _Trace:
    spans: dict[str, Span] = field(default_factory=dict)
    logs: list[LogRecord] = field(default_factory=list)


def _attribute_keys(value: Any) -> set[str]:
    """Attribute keys of a file's first value (an OTLP request, a console span or record)."""
    keys: set[str] = set()
    if not isinstance(value, dict):
        return keys
    if isinstance(value.get("attributes"), dict):
        keys.update(str(k) for k in value["attributes"])
    for outer in ("resourceSpans", "resource_spans", "resourceLogs", "resource_logs"):
        for resource in value.get(outer) or []:
            if not isinstance(resource, dict):
                continue
            for scope in (resource.get("scopeSpans") or resource.get("scope_spans")
                          or resource.get("scopeLogs") or resource.get("scope_logs") or []):
                if not isinstance(scope, dict):
                    continue
                for item in (scope.get("spans") or scope.get("logRecords")
                             or scope.get("log_records") or []):
                    if isinstance(item, dict) and isinstance(item.get("attributes"), list):
                        keys.update(str(a.get("key")) for a in item["attributes"]
                                    if isinstance(a, dict))
    return keys


def _convention_of(keys: set[str]) -> str:
    """Which conventions spans with these attribute keys follow."""
    if OPENINFERENCE_KIND in keys:
        return "openinference"
    if LANGFUSE_TYPE in keys:
        return "langfuse"
    return "otel-genai"


def _convention(sniff: FileSniff) -> str | None:
    """``openinference``, ``langfuse``, ``otel-genai`` or None (not an OpenTelemetry file)."""
    if not any(marker in sniff.text for marker in _MARKERS):
        return None
    value = sniff.first_value
    if kind_of(value) is None:
        return None
    return _convention_of(_attribute_keys(value))


@lru_cache(maxsize=8)
def _folder_index(folder: str, listing: tuple[tuple[str, int, int], ...]
                  ) -> dict[str, _Trace]:
    """Every trace of every OpenTelemetry file in a folder (``listing`` makes the cache key
    change when a file does)."""
    index: dict[str, _Trace] = {}
    for name, _, _ in listing:
        path = Path(folder) / name
        if _convention(FileSniff(path)) is None:
            continue
        try:
            telemetry = read_telemetry(path)
        except ImportProblem:
            continue  # reported when that file itself is imported
        for span in telemetry.spans:
            index.setdefault(span.trace_id, _Trace()).spans.setdefault(span.span_id, span)
        for log in telemetry.logs:
            if log.trace_id is not None:
                index.setdefault(log.trace_id, _Trace()).logs.append(log)
    return index


def _listing(folder: Path) -> tuple[tuple[str, int, int], ...]:
    entries: list[tuple[str, int, int]] = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                if Path(entry.name).suffix.lower() in _SUFFIXES and entry.is_file():
                    stat = entry.stat()
                    entries.append((entry.name, stat.st_size, stat.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(entries))


def _read(path: Path, options: ReadOptions, convention: str | None) -> Iterator[Parsed]:
    telemetry = read_telemetry(path)  # whole-file problems raise here
    for location, message in telemetry.problems:
        yield Parsed(location, None, ImportProblem(str(path), message, location), "")
    own = list(dict.fromkeys([s.trace_id for s in telemetry.spans]
                             + [r.trace_id for r in telemetry.logs if r.trace_id]))
    if not own and not telemetry.problems and not telemetry.metrics:
        raise ImportProblem(str(path), "no spans or log records in the file")
    for trace_id in own:
        location = f"trace {trace_id}"
        try:
            found = _joined_run(path, trace_id, telemetry.spans, telemetry.logs, convention)
            traj = trajectory_of(found, path=path, run=options.run, model=options.model)
        except NoContent:
            yield Parsed(location, None, ImportProblem(str(path), _NO_CONTENT, location), "")
            continue
        except ValueError as err:
            yield rejected(path, location, err, "")
            continue
        yield Parsed(location, traj, None, "")


def _joined_run(path: Path, trace_id: str, spans: list[Span], logs: list[LogRecord],
                convention: str | None) -> TraceRun:
    """The run of a trace, from this file when it holds the trace whole (spans with their
    content), else from every file of the folder (a logs file's spans are elsewhere; a
    spans file's content may be in a logs file beside it). Looking only when needed keeps a
    folder of one-trace files linear."""
    own_spans = [s for s in spans if s.trace_id == trace_id]
    own_logs = [r for r in logs if r.trace_id == trace_id]
    if own_spans:
        try:
            return _run(trace_id, own_spans, own_logs, convention)
        except NoContent:
            pass
    folder = path.resolve().parent
    trace = _folder_index(str(folder), _listing(folder)).get(trace_id)
    if trace is None:
        return _run(trace_id, own_spans, own_logs, convention)
    return _run(trace_id, list(trace.spans.values()), trace.logs, convention)


def _run(trace_id: str, spans: list[Span], logs: list[LogRecord],
         convention: str | None) -> TraceRun:
    if convention is None:
        convention = _convention_of({k for s in spans for k in s.attributes})
    if convention == "openinference":
        return openinference_run(trace_id, spans)
    if convention == "langfuse":
        return langfuse_run(trace_id, spans)
    return genai_run(trace_id, spans, logs)


def _read_genai(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    yield from _read(path, options, None)


def _read_openinference(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    yield from _read(path, options, "openinference")


def _read_langfuse(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    yield from _read(path, options, "langfuse")


OTEL_GENAI = register(ImportFormat(
    "otel-genai", "OpenTelemetry GenAI traces (OTLP JSON lines or console exporter; spans "
    "and logs)", detect_file=lambda sniff: _convention(sniff) == "otel-genai",
    read_file=_read_genai, priority=50))
OPENINFERENCE = register(ImportFormat(
    "openinference", "OpenInference traces (Arize Phoenix; OTLP JSON lines or console)",
    detect_file=lambda sniff: _convention(sniff) == "openinference",
    read_file=_read_openinference, priority=50))
LANGFUSE = register(ImportFormat(
    "langfuse", "Langfuse traces (its span exporter's OpenTelemetry spans, OTLP JSON lines or "
    "console)", detect_file=lambda sniff: _convention(sniff) == "langfuse",
    read_file=_read_langfuse, priority=50))
