"""OpenTelemetry GenAI semantic conventions: one trace is one agent run.

Spans by ``gen_ai.operation.name``: ``invoke_agent`` (the question in its input messages, the
final answer in its output messages, ``gen_ai.agent.name``), ``chat`` / ``text_completion`` /
``generate_content`` (an inference: ``gen_ai.input.messages`` and ``gen_ai.output.messages``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.model``) and
``execute_tool`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``
and ``.result``; a failed call is span status ERROR with ``error.type``).

Messages are in the conventions' parts form (``{"role", "parts": [{"type": "text", "content"},
{"type": "tool_call", "id", "name", "arguments"}, {"type": "tool_call_response", "id",
"response"}]}``), as a JSON string on a span or structured on a
``gen_ai.client.inference.operation.details`` log record (content captured as events: then the
spans hold none and the log record names the span it belongs to). The previous names are read
too: ``gen_ai.system`` for the provider, ``gen_ai.usage.prompt_tokens`` /
``completion_tokens``, and message events (``gen_ai.user.message``, ``gen_ai.assistant.message``,
``gen_ai.tool.message``, ``gen_ai.choice``, with OpenAI-style bodies) as log records or span
events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trajectories.importers.otlp import LogRecord, Span
from trajectories.importers.trace_steps import Call, Said, TraceRun

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_LEGACY_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                  "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


class NoContent(ValueError):
    """The trace holds no message content (captured nowhere, or in a file not given)."""


def is_genai(attributes: dict[str, Any]) -> bool:
    return any(key.startswith("gen_ai.") for key in attributes)


def _operation(span: Span) -> str:
    operation = span.attributes.get("gen_ai.operation.name")
    if isinstance(operation, str):
        return operation
    if span.name.startswith("invoke_agent"):
        return "invoke_agent"
    if "gen_ai.system" in span.attributes or "gen_ai.provider.name" in span.attributes:
        return "chat"
    return ""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- messages


def messages(value: Any) -> list[dict[str, Any]]:
    """Messages in the parts form, from a JSON string or a structured value."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if isinstance(value, dict):
        value = [value]
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def text(message_list: list[dict[str, Any]], role: str | None = None) -> str | None:
    """The text parts of the first message (of ``role``) that has any, joined."""
    for message in message_list:
        if role is not None and message.get("role") != role:
            continue
        pieces = [p["content"] for p in _parts(message)
                  if p.get("type") == "text" and isinstance(p.get("content"), str)]
        if pieces:
            return "".join(pieces)
    return None


def _legacy_message(role: str, body: Any) -> dict[str, Any] | None:
    """A previous-conventions message event's body (OpenAI style) in the parts form."""
    if not isinstance(body, dict):
        return None
    if "message" in body and isinstance(body["message"], dict):  # gen_ai.choice
        body = body["message"]
    parts: list[dict[str, Any]] = []
    content = body.get("content")
    if isinstance(content, str) and content:
        kind = "tool_call_response" if role == "tool" else "text"
        parts.append({"type": kind, "content": content, "response": content,
                      "id": _str(body.get("id"))})
    for call in body.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call["function"] if isinstance(call.get("function"), dict) else {}
            parts.append({"type": "tool_call", "id": _str(call.get("id")),
                          "name": _str(function.get("name")),
                          "arguments": function.get("arguments")})
    return {"role": role, "parts": parts}


@dataclass
class Inference:
    """One model call: what went in, what came out, its usage."""

    start_ns: int
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def take(self, attributes: dict[str, Any]) -> None:
        self.inputs = self.inputs or messages(attributes.get("gen_ai.input.messages"))
        self.outputs = self.outputs or messages(attributes.get("gen_ai.output.messages"))
        self.model = self.model or _str(attributes.get("gen_ai.response.model")) \
            or _str(attributes.get("gen_ai.request.model"))
        if self.input_tokens is None:
            self.input_tokens = _number(attributes.get("gen_ai.usage.input_tokens")) \
                if "gen_ai.usage.input_tokens" in attributes \
                else _number(attributes.get("gen_ai.usage.prompt_tokens"))
        if self.output_tokens is None:
            self.output_tokens = _number(attributes.get("gen_ai.usage.output_tokens")) \
                if "gen_ai.usage.output_tokens" in attributes \
                else _number(attributes.get("gen_ai.usage.completion_tokens"))

    def take_event(self, name: str, attributes: dict[str, Any], body: Any) -> None:
        if name == "gen_ai.choice":
            message = _legacy_message("assistant", body)
            if message is not None:
                self.outputs.append(message)
        elif name in _LEGACY_EVENTS:
            message = _legacy_message(_LEGACY_EVENTS[name], body)
            if message is not None:
                self.inputs.append(message)
        else:
            self.take(attributes)


# --------------------------------------------------------------------------- the run


def _order(spans: list[Span]) -> list[Span]:
    """Spans by start time, a parent before its children when they start together (files
    list children first: a span is exported when it ends)."""
    by_id = {span.span_id: span for span in spans}

    def depth(span: Span) -> int:
        seen, parent = 0, span.parent_id
        while parent in by_id and seen < len(by_id):
            seen, parent = seen + 1, by_id[parent].parent_id
        return seen

    return sorted(spans, key=lambda s: (s.start_ns or 0, depth(s)))


def genai_run(trace_id: str, spans: list[Span], logs: list[LogRecord]) -> TraceRun:
    """The agent run of one trace; raises ``NoContent`` when it holds no content."""
    ordered = _order(spans)
    found = TraceRun(trace_id, "otel-genai")
    agent = next((s for s in ordered if _operation(s) == "invoke_agent"), None)
    inferences: dict[str, Inference] = {}
    tools: list[Span] = []
    for span in ordered:
        operation = _operation(span)
        if operation in INFERENCE_OPERATIONS:
            inference = inferences[span.span_id] = Inference(span.start_ns or 0)
            inference.take(span.attributes)
            for name, attributes in span.events:
                inference.take_event(name, attributes, attributes)
        elif operation == "execute_tool":
            tools.append(span)
    for log in sorted(logs, key=lambda r: r.time_ns or 0):
        key = log.span_id or f"log-{len(inferences)}"
        if key not in inferences:
            if (agent is not None and key == agent.span_id) or any(t.span_id == key for t in tools):
                continue
            inferences[key] = Inference(log.time_ns or 0)
        inferences[key].take_event(log.event_name or "", log.attributes, log.body)
    calls = sorted(inferences.values(), key=lambda i: i.start_ns)
    _fill(found, agent, calls, tools)
    if found.question is None and not any(isinstance(i, Call) and i.arguments is not None
                                          for i in found.items):
        raise NoContent("the trace holds no message content")
    resource = (agent or (ordered[0] if ordered else None))
    if resource is not None:
        found.service = _str(resource.resource.get("service.name"))
    elif logs:
        found.service = _str(logs[0].resource.get("service.name"))
    if ordered:
        first = ordered[0]
        found.start_ns = first.start_ns
        found.duration_ms = (agent or first).duration_ms
    return found


def _fill(found: TraceRun, agent: Span | None, calls: list[Inference],
          tools: list[Span]) -> None:
    tool_by_id = {_str(t.attributes.get("gen_ai.tool.call.id")): t for t in tools}
    tool_by_id.pop(None, None)
    responses: dict[str, Any] = {}
    for inference in calls:
        for message in inference.inputs:
            for part in _parts(message):
                if part.get("type") == "tool_call_response" and _str(part.get("id")):
                    responses.setdefault(part["id"], part.get("response"))
    agent_inputs = messages(agent.attributes.get("gen_ai.input.messages")) if agent else []
    agent_outputs = messages(agent.attributes.get("gen_ai.output.messages")) if agent else []
    found.question = text(agent_inputs, "user") or next(
        (t for t in (text(i.inputs, "user") for i in calls) if t), None)
    found.answer = text(agent_outputs, "assistant") or text(agent_outputs)
    if agent is not None:
        found.agent = _str(agent.attributes.get("gen_ai.agent.name"))
        found.model = _str(agent.attributes.get("gen_ai.response.model")) \
            or _str(agent.attributes.get("gen_ai.request.model"))
    used: set[int] = set()
    for inference in calls:
        found.model = found.model or inference.model
        tokens = {k: v for k, v in (("input", inference.input_tokens),
                                    ("output", inference.output_tokens)) if v is not None}
        for key, value in (("input_tokens", inference.input_tokens),
                           ("output_tokens", inference.output_tokens)):
            if value is not None:
                setattr(found, key, (getattr(found, key) or 0) + value)
        first = True
        for message in inference.outputs:
            for part in _parts(message):
                item = _item(part, tool_by_id, tools, used, responses)
                if item is None:
                    continue
                if first and tokens:
                    item.tokens, first = tokens, False
                found.items.append(item)
    if not any(isinstance(i, Call) for i in found.items):
        # Content in no inference: the tool spans alone (arguments captured on them).
        for index, span in enumerate(tools):
            if index not in used:
                found.items.append(_tool_call(span, None, None, None))
    if found.answer is None and calls:
        found.answer = text(calls[-1].outputs, "assistant")
    if found.answer is not None and found.items and isinstance(found.items[-1], Said) \
            and found.items[-1].text == found.answer:
        found.items[-1].role = "assistant"  # the answer itself: trajectory_of keeps one copy


def _item(part: dict[str, Any], tool_by_id: dict[str | None, Span], tools: list[Span],
          used: set[int], responses: dict[str, Any]) -> Call | Said | None:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("content"), str):
        return Said("assistant", part["content"])
    if kind != "tool_call":
        return None
    call_id = _str(part.get("id"))
    span = tool_by_id.get(call_id) if call_id else None
    if span is None:  # no ids: the calls and the tool spans pair in order
        span = next((t for i, t in enumerate(tools) if i not in used
                     and _str(t.attributes.get("gen_ai.tool.call.id")) is None), None)
    if span is not None:
        used.add(next(i for i, t in enumerate(tools) if t is span))
    return _tool_call(span, call_id, part, responses.get(call_id or ""))


def _tool_call(span: Span | None, call_id: str | None, part: dict[str, Any] | None,
               response: Any) -> Call:
    attributes = span.attributes if span is not None else {}
    arguments = part.get("arguments") if part is not None else None
    if arguments is None:
        arguments = attributes.get("gen_ai.tool.call.arguments")
    name = (_str(part.get("name")) if part is not None else None) \
        or _str(attributes.get("gen_ai.tool.name"))
    result = attributes.get("gen_ai.tool.call.result")
    if result is None:
        result = response
    call = Call(call_id or _str(attributes.get("gen_ai.tool.call.id")), name, arguments, result)
    if span is not None:
        call.duration_ms = span.duration_ms
        # A span that did not fail says nothing either way (status UNSET is the default):
        # then the result text decides (``trace_steps``).
        failed = span.status_error or "error.type" in attributes
        if failed:
            call.error = True
            error_type = _str(attributes.get("error.type"))
            message = span.status_message or ""
            call.error_message = f"{error_type}: {message}" if error_type and message \
                else (message or error_type)
    return call


__all__ = ["INFERENCE_OPERATIONS", "NoContent", "genai_run", "is_genai", "messages", "text"]
