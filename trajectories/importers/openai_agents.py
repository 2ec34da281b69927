"""OpenAI Agents SDK traces: the SDK's own ``Trace.export()`` and ``Span.export()`` records.

A file holds those records as JSON values (JSONL as a tracing processor writes them, a JSON
list, or the exporter's ``{"data": [...]}`` batches). Records are ``{"object": "trace", "id",
"workflow_name"}`` and ``{"object": "trace.span", "id", "trace_id", "parent_id", "started_at",
"ended_at", "span_data": {"type", ...}, "error"}``; a span is exported when it ends, so
children come before their parents, and spans are put back in order by start time and
parentage. One trace is one trajectory.

Span data read: ``generation`` (``input`` and ``output`` as OpenAI chat messages: the question
is the first user message, ``tool_calls`` are the calls, the last output's text the answer;
``model``, ``usage``), ``function`` (a tool call: ``name``, ``input`` the arguments,
``output`` the result; a failing tool has ``error`` set, its output a generic message and the
exception's text, unless the SDK redacted it, in ``error.data.error``), ``agent`` (the agent's
name). Function spans carry no call id: the model's calls and the function spans pair in
order, by tool name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.otlp import json_values
from trajectories.importers.registry import (
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    register,
    rejected,
)
from trajectories.importers.trace_steps import Call, Said, TraceRun, trajectory_of

_OBJECTS = frozenset({"trace", "trace.span"})


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and value.get("object") in _OBJECTS \
        and isinstance(value.get("id"), str)


def _items(value: Any) -> list[Any]:
    if isinstance(value, dict) and isinstance(value.get("data"), list) \
            and "object" not in value:
        return list(value["data"])
    return list(value) if isinstance(value, list) else [value]


def _detect(sniff: FileSniff) -> bool:
    if '"trace.span"' not in sniff.text and '"object": "trace"' not in sniff.text \
            and '"object":"trace"' not in sniff.text:
        return False
    first = _items(sniff.first_value)
    return bool(first) and _is_record(first[0])


def _time(value: Any) -> float:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _data(span: dict[str, Any]) -> dict[str, Any]:
    data = span.get("span_data")
    return data if isinstance(data, dict) else {}


def _ordered(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {span["id"]: span for span in spans}

    def depth(span: dict[str, Any]) -> int:
        seen, parent = 0, span.get("parent_id")
        while isinstance(parent, str) and parent in by_id and seen < len(by_id):
            seen, parent = seen + 1, by_id[parent].get("parent_id")
        return seen

    return sorted(spans, key=lambda s: (_time(s.get("started_at")), depth(s)))


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        pieces = [p.get("text") for p in content if isinstance(p, dict)
                  and isinstance(p.get("text"), str)]
        return "".join(str(p) for p in pieces) if pieces else None
    return None


def agents_run(trace_id: str, spans: list[dict[str, Any]], workflow: str | None) -> TraceRun:
    ordered = _ordered(spans)
    found = TraceRun(trace_id, "openai-agents")
    generations = [s for s in ordered if _data(s).get("type") == "generation"]
    functions = [s for s in ordered if _data(s).get("type") == "function"]
    agent = next((s for s in ordered if _data(s).get("type") == "agent"), None)
    if agent is not None:
        found.agent = _str(_data(agent).get("name"))
    if workflow:
        found.extra["workflow"] = workflow
    used: set[int] = set()
    for span in generations:
        data = _data(span)
        found.model = found.model or _str(data.get("model"))
        if found.question is None:
            found.question = _first_user(data.get("input"))
        usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
        tokens = {k: usage[f"{k}_tokens"] for k in ("input", "output")
                  if isinstance(usage.get(f"{k}_tokens"), int)
                  and not isinstance(usage.get(f"{k}_tokens"), bool)}
        for key, name in (("input", "input_tokens"), ("output", "output_tokens")):
            if key in tokens:
                setattr(found, name, (getattr(found, name) or 0) + tokens[key])
        first = True
        outputs = data.get("output")
        for message in outputs if isinstance(outputs, list) else []:
            for item in _message_items(message, functions, used):
                if first and tokens:
                    item.tokens, first = tokens, False
                found.items.append(item)
    if not any(isinstance(i, Call) for i in found.items):  # no model content exported
        found.items.extend(_call(span, None, None, None)
                           for index, span in enumerate(functions) if index not in used)
    if found.items and isinstance(found.items[-1], Said):
        found.answer = found.items[-1].text
    if found.question is None and not found.items:
        raise ValueError("span_data: the trace holds no generation or function content")
    if ordered:
        root = ordered[0]
        start, end = _time(root.get("started_at")), _time(root.get("ended_at"))
        if start and end >= start:
            found.duration_ms = (end - start) * 1000
    return found


def _first_user(messages: Any) -> str | None:
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text(message.get("content"))
            if text:
                return text
    return None


def _message_items(message: Any, functions: list[dict[str, Any]],
                   used: set[int]) -> list[Call | Said]:
    if not isinstance(message, dict):
        return []
    items: list[Call | Said] = []
    text = _text(message.get("content"))
    if text and text.strip():
        items.append(Said("assistant", text))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            continue
        function = call["function"]
        name = _str(function.get("name"))
        index = next((i for i, s in enumerate(functions) if i not in used
                      and _data(s).get("name") in (name, None)), None)
        span = None
        if index is not None:
            used.add(index)
            span = functions[index]
        items.append(_call(span, _str(call.get("id")), name, function.get("arguments")))
    return items


def _call(span: dict[str, Any] | None, call_id: str | None, name: str | None,
          arguments: Any) -> Call:
    data = _data(span) if span is not None else {}
    call = Call(call_id, name or _str(data.get("name")),
                arguments if arguments is not None else data.get("input"), data.get("output"))
    if span is None:
        return call
    start, end = _time(span.get("started_at")), _time(span.get("ended_at"))
    if start and end >= start:
        call.duration_ms = (end - start) * 1000
    error = span.get("error")
    if isinstance(error, dict):
        call.error = True
        detail: dict[str, Any] = error["data"] if isinstance(error.get("data"), dict) else {}
        call.error_message = _str(detail.get("error")) or _str(error.get("message"))
    return call


def _read(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    spans: dict[str, list[dict[str, Any]]] = {}
    workflows: dict[str, str | None] = {}
    for location, value in json_values(path):
        if isinstance(value, ImportProblem):
            yield Parsed(location, None, value, "")
            continue
        for item in _items(value):
            if not _is_record(item):
                yield Parsed(location, None, ImportProblem(
                    str(path), "not an OpenAI Agents trace or span export", location), "")
                continue
            if item["object"] == "trace":
                workflows[item["id"]] = _str(item.get("workflow_name"))
                spans.setdefault(item["id"], [])
            elif isinstance(item.get("trace_id"), str):
                spans.setdefault(item["trace_id"], []).append(item)
    for trace_id, members in spans.items():
        location = f"trace {trace_id}"
        try:
            found = agents_run(trace_id, members, workflows.get(trace_id))
            traj = trajectory_of(found, path=path, run=options.run, model=options.model)
        except ValueError as err:
            yield rejected(path, location, err, json.dumps({"trace_id": trace_id}))
            continue
        yield Parsed(location, traj, None, "")


OPENAI_AGENTS = register(ImportFormat(
    "openai-agents", "OpenAI Agents SDK trace exports (Trace.export / Span.export records)",
    detect_file=_detect, read_file=_read, priority=60))
