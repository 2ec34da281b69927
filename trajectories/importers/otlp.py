"""OpenTelemetry files as spans and log records, whatever the encoding.

Two encodings are read, for spans and for logs alike:

- **OTLP JSON lines** (the OTLP/JSON mapping of ``ExportTraceServiceRequest`` /
  ``ExportLogsServiceRequest``, one request per line, as the collector's file exporter and the
  OTLP JSON file exporters write): ``resourceSpans[].scopeSpans[].spans[]`` with ids in hex
  (base64, what a generic protobuf JSON encoder gives, is taken too), times in nanoseconds,
  attribute values wrapped as ``{"stringValue": ...}``; lowerCamelCase keys, snake_case taken too.
- **The SDK's console exporters** (``ConsoleSpanExporter``, ``ConsoleLogRecordExporter``): each
  span or log record as a pretty-printed JSON object, one after another (the file as a whole is
  neither JSON nor JSONL): ``context.trace_id`` as ``0x`` hex, ISO times, plain attribute values.

Everything becomes ``Span`` and ``LogRecord`` values with plain Python attributes; which
semantic conventions the attributes follow is for the readers above this (``genai``,
``openinference``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.json_documents import MAX_DEPTH, nests_within

#: Keys that say a JSON value is an OTLP request or a console span / log record.
_OTLP_SPAN_KEYS = ("resourceSpans", "resource_spans")
_OTLP_LOG_KEYS = ("resourceLogs", "resource_logs")
_OTLP_METRIC_KEYS = ("resourceMetrics", "resource_metrics")
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    status_error: bool = False
    status_message: str | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float | None:
        if self.start_ns is None or self.end_ns is None or self.end_ns < self.start_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e6


@dataclass
class LogRecord:
    trace_id: str | None
    span_id: str | None
    time_ns: int | None
    event_name: str | None
    attributes: dict[str, Any]
    body: Any
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class Telemetry:
    """What one file holds."""

    spans: list[Span] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    #: Values that were neither (location, what): reported, never guessed at.
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: OTLP metrics requests seen (a file exporter writes them beside spans and logs; they
    #: hold no trajectory and are passed over).
    metrics: int = 0


# --------------------------------------------------------------------------- detection


def kind_of(value: Any) -> str | None:
    """``"spans"``, ``"logs"``, ``"metrics"`` or None for a file's first JSON value."""
    if not isinstance(value, dict):
        return None
    if any(key in value for key in _OTLP_METRIC_KEYS):
        return "metrics"
    if any(key in value for key in _OTLP_SPAN_KEYS):
        return "spans"
    if any(key in value for key in _OTLP_LOG_KEYS):
        return "logs"
    context = value.get("context")
    if isinstance(context, dict) and "trace_id" in context and "span_id" in context \
            and "name" in value:
        return "spans"
    if "trace_id" in value and "span_id" in value and "body" in value \
            and "attributes" in value:
        return "logs"
    return None


# --------------------------------------------------------------------------- the values


def json_values(path: Path) -> Iterator[tuple[str, Any]]:
    """Every top-level JSON value of the file with its location (``line N``): one per line
    for JSONL, or pretty-printed objects one after another. A value that cannot be parsed is
    yielded as an ``ImportProblem`` and reading goes on at the next line that starts an
    object; values nested deeper than the limit are refused the same way."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ImportProblem(str(path), f"cannot read file: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportProblem(str(path), f"not UTF-8 text (byte {err.start})") from None
    # Escaped surrogate pairs are fine (an emoji under ensure_ascii); a lone one decodes to a
    # code point that is not Unicode text and cannot be stored: such a value is refused.
    check_surrogates = bool(_SURROGATE_HINT.search(text))
    decoder = json.JSONDecoder()
    at, end, line = 0, len(text), 1
    while True:
        start = _skip_space(text, at)
        if start >= end:
            return
        line += text.count("\n", at, start)
        location = f"line {line}"
        try:
            value, stop = decoder.raw_decode(text, start)
        except json.JSONDecodeError as err:
            yield location, ImportProblem(str(path), f"not valid JSON ({err.msg})", location)
            stop = _next_object(text, start + 1)
        except RecursionError:
            yield location, ImportProblem(
                str(path), f"nested deeper than {MAX_DEPTH} levels of arrays and objects",
                location)
            stop = _next_object(text, start + 1)
        else:
            if not nests_within(value):
                value = ImportProblem(str(path), f"nested deeper than {MAX_DEPTH} levels of "
                                      "arrays and objects", location)
            elif check_surrogates and _lone_surrogate(value):
                value = ImportProblem(str(path), "lone surrogate escape (e.g. \\ud800) is not "
                                      "valid Unicode text", location)
            yield location, value
        line += text.count("\n", start, stop)
        at = stop


_LONE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> bool:
    """True when a string (or key) anywhere in the value holds a lone surrogate."""
    if isinstance(value, str):
        return bool(_LONE.search(value))
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _next_object(text: str, at: int) -> int:
    """Where the next value may start after a broken one: the next line that opens an object."""
    found = text.find("\n{", at)
    return len(text) if found < 0 else found + 1


def read_telemetry(path: Path) -> Telemetry:
    """Every span and log record of a file, in either encoding (problems kept, not raised)."""
    found = Telemetry()
    for location, value in json_values(path):
        if isinstance(value, ImportProblem):
            found.problems.append((location, value.message))
            continue
        kind = kind_of(value)
        if kind == "metrics":
            found.metrics += 1
        elif kind is None:
            found.problems.append((location, "not an OpenTelemetry span, log record or OTLP "
                                   "export request"))
        elif any(key in value for key in _OTLP_SPAN_KEYS):
            found.spans.extend(_otlp_spans(value))
        elif any(key in value for key in _OTLP_LOG_KEYS):
            found.logs.extend(_otlp_logs(value))
        elif kind == "spans":
            span = _console_span(value)
            if span is not None:
                found.spans.append(span)
        else:
            log = _console_log(value)
            if log is not None:
                found.logs.append(log)
    return found


# --------------------------------------------------------------------------- OTLP JSON


def _get(obj: Any, camel: str, snake: str) -> Any:
    if not isinstance(obj, dict):
        return None
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain value (kvlists as dicts, arrays as lists)."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key] if isinstance(value[key], str) else None
    for key in ("boolValue", "bool_value"):
        if key in value:
            return value[key] if isinstance(value[key], bool) else None
    for key in ("intValue", "int_value"):
        if key in value:
            return _int(value[key])
    for key in ("doubleValue", "double_value"):
        if key in value:
            number = value[key]
            return float(number) if isinstance(number, int | float) \
                and not isinstance(number, bool) else None
    array = _get(value, "arrayValue", "array_value")
    if array is not None:
        return [any_value(v) for v in _list(_get(array, "values", "values"))]
    kvlist = _get(value, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        return key_values(_get(kvlist, "values", "values"))
    if "bytesValue" in value or "bytes_value" in value:
        return _get(value, "bytesValue", "bytes_value")
    return None


def key_values(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` lists as a dict."""
    out: dict[str, Any] = {}
    for item in _list(items):
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = any_value(item.get("value"))
    return out


def _int(value: Any) -> int | None:
    """OTLP writes 64-bit integers as strings (JSON numbers lose precision past 2**53)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 25:
        return int(value)
    return None


def otlp_id(value: Any, size: int) -> str | None:
    """A trace id (16 bytes) or span id (8 bytes) as lowercase hex: OTLP/JSON writes hex; a
    generic protobuf JSON encoder writes base64; the console exporter ``0x`` hex."""
    if not isinstance(value, str) or not value:
        return None
    text = value[2:] if value.startswith("0x") else value
    if len(text) == 2 * size and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size else None


def _otlp_status(span: dict[str, Any]) -> tuple[bool, str | None]:
    status = span.get("status")
    if not isinstance(status, dict):
        return False, None
    code = status.get("code")
    message = status.get("message")
    return code in ("STATUS_CODE_ERROR", 2, "ERROR"), message if isinstance(message, str) \
        else None


def _otlp_spans(request: dict[str, Any]) -> Iterator[Span]:
    for resource_spans in _list(_get(request, "resourceSpans", "resource_spans")):
        resource = key_values(_get(_get(resource_spans, "resource", "resource"),
                                   "attributes", "attributes"))
        scopes = _get(resource_spans, "scopeSpans", "scope_spans") \
            or _get(resource_spans, "instrumentationLibrarySpans", "")
        for scope in _list(scopes):
            for raw in _list(_get(scope, "spans", "spans")):
                if not isinstance(raw, dict):
                    continue
                trace_id = otlp_id(_get(raw, "traceId", "trace_id"), 16)
                span_id = otlp_id(_get(raw, "spanId", "span_id"), 8)
                if trace_id is None or span_id is None:
                    continue
                error, message = _otlp_status(raw)
                events = [(str(_get(e, "name", "name") or ""),
                           key_values(_get(e, "attributes", "attributes")))
                          for e in _list(raw.get("events")) if isinstance(e, dict)]
                name = raw.get("name")
                yield Span(trace_id, span_id, otlp_id(_get(raw, "parentSpanId", "parent_span_id"),
                                                      8),
                           name if isinstance(name, str) else "",
                           _int(_get(raw, "startTimeUnixNano", "start_time_unix_nano")),
                           _int(_get(raw, "endTimeUnixNano", "end_time_unix_nano")),
                           key_values(raw.get("attributes")), error, message, events, resource)


def _otlp_logs(request: dict[str, Any]) -> Iterator[LogRecord]:
    for resource_logs in _list(_get(request, "resourceLogs", "resource_logs")):
        resource = key_values(_get(_get(resource_logs, "resource", "resource"),
                                   "attributes", "attributes"))
        for scope in _list(_get(resource_logs, "scopeLogs", "scope_logs")):
            for raw in _list(_get(scope, "logRecords", "log_records")):
                if not isinstance(raw, dict):
                    continue
                time_ns = _int(_get(raw, "timeUnixNano", "time_unix_nano")) or \
                    _int(_get(raw, "observedTimeUnixNano", "observed_time_unix_nano"))
                name = _get(raw, "eventName", "event_name")
                yield LogRecord(otlp_id(_get(raw, "traceId", "trace_id"), 16),
                                otlp_id(_get(raw, "spanId", "span_id"), 8), time_ns,
                                name if isinstance(name, str) else None,
                                key_values(raw.get("attributes")), any_value(raw.get("body")),
                                resource)


# --------------------------------------------------------------------------- console


def _iso_ns(value: Any) -> int | None:
    """The console exporter's ISO time (``2026-01-02T03:04:05.123456Z``) in nanoseconds."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _plain_dict(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _console_span(raw: dict[str, Any]) -> Span | None:
    context = raw.get("context")
    if not isinstance(context, dict):
        return None
    trace_id = otlp_id(context.get("trace_id"), 16)
    span_id = otlp_id(context.get("span_id"), 8)
    if trace_id is None or span_id is None:
        return None
    status = _plain_dict(raw.get("status"))
    description = status.get("description")
    events = [(str(e.get("name") or ""), _plain_dict(e.get("attributes")))
              for e in _list(raw.get("events")) if isinstance(e, dict)]
    name = raw.get("name")
    return Span(trace_id, span_id, otlp_id(raw.get("parent_id"), 8),
                name if isinstance(name, str) else "",
                _iso_ns(raw.get("start_time")), _iso_ns(raw.get("end_time")),
                _plain_dict(raw.get("attributes")), status.get("status_code") == "ERROR",
                description if isinstance(description, str) else None, events,
                _plain_dict((raw.get("resource") or {}).get("attributes")
                            if isinstance(raw.get("resource"), dict) else None))


def _console_log(raw: dict[str, Any]) -> LogRecord | None:
    name = raw.get("event_name")
    resource = raw.get("resource")
    return LogRecord(otlp_id(raw.get("trace_id"), 16), otlp_id(raw.get("span_id"), 8),
                     _iso_ns(raw.get("timestamp")) or _iso_ns(raw.get("observed_timestamp")),
                     name if isinstance(name, str) else None, _plain_dict(raw.get("attributes")),
                     raw.get("body"),
                     _plain_dict(resource.get("attributes")) if isinstance(resource, dict)
                     else {})


__all__ = ["LogRecord", "Span", "Telemetry", "any_value", "json_values", "key_values", "kind_of",
           "otlp_id", "read_telemetry"]
