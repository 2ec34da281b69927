"""Langfuse traces: the OpenTelemetry spans the Langfuse SDK writes (through its span exporter),
in either OTLP encoding (``otlp``). One trace is one trajectory.

Every observation says its type in ``langfuse.observation.type`` and keeps its input and output
as JSON strings in ``langfuse.observation.input`` / ``.output``. The ``agent`` observation (else
the root one) holds the question (a decorated function's ``{"args": [...], "kwargs": {...}}``:
its first text argument) and the answer. ``generation`` observations hold the model's turn as a
chat message (``tool_calls`` are the calls, ``content`` the text), the model
(``langfuse.observation.model.name``) and ``langfuse.observation.usage_details``. ``tool``
observations hold a call's arguments and result; a failed one has ``level`` ERROR and its
``status_message``. Tool observations carry no call id: a model's calls and the tool spans after
it pair in order, by name.
"""

from __future__ import annotations

import json
from typing import Any

from trajectories.importers.genai import NoContent
from trajectories.importers.otlp import Span
from trajectories.importers.trace_steps import Call, Said, TraceRun

LANGFUSE_TYPE = "langfuse.observation.type"
_INPUT, _OUTPUT = "langfuse.observation.input", "langfuse.observation.output"


def _kind(span: Span) -> str:
    kind = span.attributes.get(LANGFUSE_TYPE)
    return kind.lower() if isinstance(kind, str) else ""


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(value: Any) -> str | None:
    """An observation's input or output as text: a string, a decorated call's first text
    argument, a chat message's content, or a text field."""
    value = _json(value)
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    args = value.get("args")
    if isinstance(args, list):
        text = next((a for a in args if isinstance(a, str)), None)
        if text is not None:
            return text
    for key in ("content", "question", "input", "query", "output", "answer"):
        if isinstance(value.get(key), str):
            return str(value[key])
    kwargs = value.get("kwargs")
    if isinstance(kwargs, dict):
        return next((v for v in kwargs.values() if isinstance(v, str)), None)
    return None


def _arguments(value: Any) -> Any:
    """A tool observation's input as the call's arguments (positional ones numbered)."""
    value = _json(value)
    if isinstance(value, dict) and ("args" in value or "kwargs" in value):
        named = dict(value["kwargs"]) if isinstance(value.get("kwargs"), dict) else {}
        args: list[Any] = value["args"] if isinstance(value.get("args"), list) else []
        named.update({f"arg{i}": a for i, a in enumerate(args)})
        return named
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def langfuse_run(trace_id: str, spans: list[Span]) -> TraceRun:
    ordered = sorted(spans, key=lambda s: s.start_ns or 0)
    found = TraceRun(trace_id, "langfuse")
    ids = {s.span_id for s in ordered}
    agent = next((s for s in ordered if _kind(s) == "agent"), None) or next(
        (s for s in ordered if s.parent_id not in ids), None)
    generations = [s for s in ordered if _kind(s) == "generation"]
    tools = [s for s in ordered if _kind(s) == "tool"]
    if agent is not None:
        found.question = _text(agent.attributes.get(_INPUT))
        found.answer = _text(agent.attributes.get(_OUTPUT))
        found.agent = agent.name or None
        found.duration_ms = agent.duration_ms
        service = agent.resource.get("service.name")
        found.service = service if isinstance(service, str) else None
    used: set[int] = set()
    for span in generations:
        model = span.attributes.get("langfuse.observation.model.name")
        found.model = found.model or (model if isinstance(model, str) else None)
        usage = _json(span.attributes.get("langfuse.observation.usage_details"))
        usage = usage if isinstance(usage, dict) else {}
        tokens = {k: v for k, v in (
            ("input", _count(usage.get("input", usage.get("prompt_tokens")))),
            ("output", _count(usage.get("output", usage.get("completion_tokens")))))
            if v is not None}
        for key, total in (("input", "input_tokens"), ("output", "output_tokens")):
            if key in tokens:
                setattr(found, total, (getattr(found, total) or 0) + tokens[key])
        if found.question is None:
            found.question = _first_user(span)
        turn = _json(span.attributes.get(_OUTPUT))
        items: list[Call | Said] = []
        if isinstance(turn, dict):
            content = turn.get("content")
            if isinstance(content, str) and content.strip():
                items.append(Said("assistant", content))
            calls = turn.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    items.append(_paired(call, tools, used))
        elif isinstance(turn, str) and turn.strip():
            items.append(Said("assistant", turn))
        if items and tokens:
            items[0].tokens = tokens
        found.items.extend(items)
    if not any(isinstance(i, Call) for i in found.items):
        found.items.extend(_tool(span, None, None, None)
                           for i, span in enumerate(tools) if i not in used)
    if found.question is None and not found.items:
        raise NoContent("the trace holds no observation input or output")
    return found


def _first_user(span: Span) -> str | None:
    value = _json(span.attributes.get(_INPUT))
    messages = value.get("messages") if isinstance(value, dict) else value
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user" \
                and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def _paired(call: dict[str, Any], tools: list[Span], used: set[int]) -> Call:
    function = call["function"]
    name = function.get("name") if isinstance(function.get("name"), str) else None
    index = next((i for i, t in enumerate(tools) if i not in used and t.name in (name, "")),
                 None)
    span = None
    if index is not None:
        used.add(index)
        span = tools[index]
    call_id = call.get("id") if isinstance(call.get("id"), str) else None
    return _tool(span, call_id, name, function.get("arguments"))


def _tool(span: Span | None, call_id: str | None, name: str | None, arguments: Any) -> Call:
    attributes = span.attributes if span is not None else {}
    if arguments is None:
        arguments = _arguments(attributes.get(_INPUT))
    output = _json(attributes.get(_OUTPUT))
    call = Call(call_id, name or (span.name if span is not None else None), arguments,
                output if output is not None else None)
    if span is not None:
        call.duration_ms = span.duration_ms
        level = attributes.get("langfuse.observation.level")
        if level == "ERROR" or span.status_error:
            call.error = True
            message = attributes.get("langfuse.observation.status_message")
            call.error_message = message if isinstance(message, str) else span.status_message
            if call.result is None:
                call.result = call.error_message
    return call


__all__ = ["LANGFUSE_TYPE", "langfuse_run"]
